"""Tests of ``posenc.torch.cast_exact``: float64 tables rounded once to float16/bfloat16.

The reference is ``round_once`` (``tests/torch/conftest.py``), a rounding helper written from
the bit patterns (never ``cast_exact`` or ``Tensor.to``), itself checked here against known
values and NumPy's direct float64 -> float16 conversion.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posenc.torch import cast_exact  # noqa: E402
from tests.torch.conftest import core, round_once, same_bits  # noqa: E402

HALF_DTYPES = (torch.float16, torch.bfloat16)


def test_round_once_helper_on_known_values():
    bf16 = torch.bfloat16
    cases = [
        (1 + 2**-8, 1.0),  # tie: even mantissa wins (down)
        (1 + 3 * 2**-8, 1 + 2**-6),  # tie: even mantissa wins (up)
        (1 + 2**-8 + 2**-30, 1 + 2**-7),  # just above the tie
        (-(1 + 2**-8 + 2**-30), -(1 + 2**-7)),
        (1 + 2**-8 - 2**-30, 1.0),
        (0.0, 0.0),
    ]
    source = torch.tensor([c[0] for c in cases], dtype=torch.float64)
    result = round_once(source, bf16).to(torch.float64).tolist()
    assert result == [c[1] for c in cases]


def test_round_once_helper_matches_numpy_float16():
    # NumPy converts float64 -> float16 directly (one rounding): an independent check.
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.uniform(-1, 1, 20000),
            rng.uniform(-1e-5, 1e-5, 2000),  # float16 subnormals
            1 + (2 * np.arange(64) + 1) * 2.0**-11,  # exact ties
            1 + (2 * np.arange(64) + 1) * 2.0**-11 + 2.0**-40,  # just above ties
        ]
    )
    expected = torch.from_numpy(values.astype(np.float16))
    assert same_bits(round_once(torch.from_numpy(values), torch.float16), expected)


def test_tensor_to_rounds_twice_and_cast_exact_does_not():
    x = torch.tensor([1 + 2**-8 + 2**-30], dtype=torch.float64)
    assert x.to(torch.bfloat16).item() == 1.0  # double rounding: wrong
    assert cast_exact(x, torch.bfloat16).item() == 1 + 2**-7
    assert same_bits(cast_exact(x, torch.bfloat16), round_once(x, torch.bfloat16))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_cast_exact_matches_single_rounding_on_random_values(dtype):
    rng = np.random.default_rng(1)
    random = rng.uniform(-2, 2, 50000) * 2.0 ** rng.integers(-20, 8, 50000)
    # midpoints between neighbours, exactly and 2**-30 (relative) either side of them
    half_ulp = 2.0 ** -(11 if dtype == torch.float16 else 8)
    mid = 1 + (2 * rng.integers(0, 100, 3000) + 1) * half_ulp
    nudge = rng.integers(-1, 2, 3000) * 2.0**-30
    scale = rng.choice([-1.0, 1.0], 3000) * 2.0 ** rng.integers(-12, 12, 3000)
    values = torch.from_numpy(np.concatenate([random, (mid + nudge) * scale]))
    assert same_bits(cast_exact(values, dtype), round_once(values, dtype))
    assert not same_bits(values.to(dtype), round_once(values, dtype))  # the test has teeth


def test_cast_exact_float32_float64_and_errors():
    table = core(10, 6, dtype=np.float64)
    assert torch.equal(cast_exact(table, torch.float64), table)
    assert torch.equal(cast_exact(table, torch.float32), core(10, 6))
    with pytest.raises(TypeError, match=re.escape("table must be float64, got torch.float32")):
        cast_exact(table.float(), torch.float16)
    with pytest.raises(TypeError, match=r"dtype must be one of torch\.float16, .*torch\.int8"):
        cast_exact(table, torch.int8)
