"""Tests of the functional ``posenc.torch.sinusoidal`` against the NumPy core.

The reference is ``posenc.sinusoidal`` (float32 bitwise, float64 within one ulp: torch's and
NumPy's float64 sin/cos may differ in the last bit). The module built on it is tested in
``test_sinusoidal.py``.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
from posenc.torch import sinusoidal  # noqa: E402

CONVENTIONS = ("paper", "tensor2tensor", "marian")


# -- functional sinusoidal vs the NumPy core --------------------------------------------------


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize(
    "positions",
    [
        13,
        [[3, 1, 4], [1, 5, 9]],
        np.arange(24).reshape(2, 3, 4) * 997,
        [0.5, -2.75, 1234.125],
        [-5, -1, 0, 70000],
        2.5,
    ],
    ids=["int", "2d", "3d", "float", "negative", "scalar"],
)
@pytest.mark.parametrize("d_model", [5, 8])
def test_functional_sinusoidal_equals_core(convention, positions, d_model):
    kwargs = {"convention": convention, "base": 1000.0}
    tensor_pos = positions if isinstance(positions, int) else torch.as_tensor(positions)
    ref32 = posenc.sinusoidal(positions, d_model, **kwargs)
    out32 = sinusoidal(tensor_pos, d_model, dtype=torch.float32, **kwargs)
    assert out32.dtype == torch.float32
    assert torch.equal(out32, torch.from_numpy(ref32))
    assert torch.equal(sinusoidal(tensor_pos, d_model, **kwargs), out32)  # default dtype
    if not isinstance(positions, int):  # lists and arrays are accepted as they are
        assert torch.equal(sinusoidal(positions, d_model, **kwargs), out32)
    ref64 = posenc.sinusoidal(positions, d_model, dtype=np.float64, **kwargs)
    out64 = sinusoidal(tensor_pos, d_model, dtype=torch.float64, **kwargs).numpy()
    assert out64.shape == ref64.shape
    # torch's and NumPy's float64 sin/cos may differ in the last bit
    assert np.all(np.abs(out64 - ref64) <= np.spacing(np.abs(ref64)))


def test_functional_sinusoidal_default_dtype_and_device():
    out = sinusoidal(4, 6)
    assert out.dtype == torch.get_default_dtype()
    assert out.device.type == "cpu"
    assert sinusoidal(4, 6, device="cpu").device.type == "cpu"
    assert sinusoidal(torch.arange(3), 6, device="meta").device.type == "meta"


# -- errors ------------------------------------------------------------------------------------

ERRORS = [
    pytest.param(
        lambda: sinusoidal(3, 8, dtype=torch.int32),
        TypeError,
        "dtype must be one of torch.float16, torch.bfloat16, torch.float32, torch.float64, "
        "got torch.int32",
        id="sinusoidal-dtype",
    ),
    pytest.param(
        lambda: sinusoidal(3, 0),
        ValueError,
        "d_model must be an integer >= 1, got 0",
        id="sinusoidal-d_model",
    ),
    pytest.param(
        lambda: sinusoidal(-1, 4),
        ValueError,
        "positions must be an integer >= 0, got -1",
        id="sinusoidal-length",
    ),
    pytest.param(
        lambda: sinusoidal([1.0, math.nan], 4),
        ValueError,
        "positions must be finite",
        id="sinusoidal-nan",
    ),
    pytest.param(
        lambda: sinusoidal(torch.tensor([True]), 4),
        TypeError,
        "positions must hold integers or real numbers, got dtype torch.bool",
        id="sinusoidal-bool",
    ),
    pytest.param(
        lambda: sinusoidal(3, 4, base=0),
        ValueError,
        "base must be a positive finite number, got 0.0",
        id="sinusoidal-base",
    ),
    pytest.param(
        lambda: sinusoidal(3, 4, convention="bert"),
        ValueError,
        "convention must be one of",
        id="sinusoidal-convention",
    ),
]


@pytest.mark.parametrize(("call", "exc", "message"), ERRORS)
def test_errors(call, exc, message):
    with pytest.raises(exc, match=re.escape(message)):
        call()


# -- positions beyond float64 exactness ---------------------------------------------------------


@pytest.mark.parametrize("value", [2**60, -(2**63), 2**53 + 1, -(2**53) - 1])
def test_positions_beyond_float64_exactness_are_rejected(value):
    """Like the NumPy core: float64 holds integer positions exactly only up to 2**53.

    -2**63 matters because abs() of the int64 minimum overflows to a negative number;
    2**53 + 1 because it rounds to 2**53 in float64, so the check must compare integers.
    """
    with pytest.raises(ValueError, match=r"positions must lie within \+-2\*\*53"):
        sinusoidal(torch.tensor([value]), 4)
    with pytest.raises(ValueError, match=r"positions must lie within \+-2\*\*53"):
        posenc.sinusoidal(np.array([value], dtype=np.int64), 4)


def test_positions_at_float64_exactness_limit_are_accepted():
    for value in (2**53, -(2**53)):
        expected = posenc.sinusoidal(np.array([value], dtype=np.int64), 4, dtype=np.float64)
        got = sinusoidal(torch.tensor([value]), 4, dtype=torch.float64)
        np.testing.assert_array_equal(got.numpy(), expected)
