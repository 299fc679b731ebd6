"""The reference helpers several torch test files import (the fixtures they share are in
tests/conftest.py; the sweeps' terminal summaries in tests/summaries.py).

Helpers: ``core`` (the NumPy core's sinusoidal table as a tensor), ``round_once`` (float64
rounded once to float16/bfloat16, written from the bit patterns, never ``cast_exact`` or
``Tensor.to``), ``same_bits`` and ``assert_same``. torch is imported only if installed: the
test files that call the helpers skip without it.
"""

from __future__ import annotations

import numpy as np

import posenc
from tests.tolerance import assert_close_ulp

try:
    import torch
except ImportError:  # the test files that use the helpers below skip without torch
    torch = None


def core(positions, d_model, *, dtype=np.float32, **kwargs) -> torch.Tensor:
    """The NumPy core's table as a tensor."""
    return torch.from_numpy(posenc.sinusoidal(positions, d_model, dtype=dtype, **kwargs))


def round_once(table: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Round float64 ``table`` to float16/bfloat16 once, to nearest with ties to even.

    ``Tensor.to`` rounds via float32 and may be one ulp off, but it is never further than one
    ulp from the correct result, so the correct result is among the three bit patterns around
    it. Pick the one closest to the float64 value (distances are exact in float64) and, on a
    tie, the one with an even bit pattern. Works on magnitudes, then restores the sign.
    """
    assert table.dtype == torch.float64
    magnitude = table.abs()
    bits = magnitude.to(dtype).view(torch.int16).to(torch.int32)
    candidates = torch.stack([(bits - 1).clamp(min=0), bits, bits + 1], dim=-1)
    values = candidates.to(torch.int16).view(dtype).to(torch.float64)
    distance = (values - magnitude.unsqueeze(-1)).abs()
    closest = distance == distance.min(dim=-1, keepdim=True).values
    score = 2 * closest.to(torch.int32) + (closest & (candidates % 2 == 0)).to(torch.int32)
    chosen = candidates.gather(-1, score.argmax(dim=-1, keepdim=True)).squeeze(-1)
    chosen = torch.where(torch.signbit(table), chosen | 0x8000, chosen)
    return chosen.to(torch.int16).view(dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality of two float16/bfloat16 tensors (same dtype and shape)."""
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    return torch.equal(a.view(torch.int16), b.view(torch.int16))


def assert_same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Bitwise equal, except float64, where NumPy's and torch's sin/cos may differ by an ulp."""
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if actual.dtype == torch.float64:
        assert_close_ulp(actual, expected, ulps=2)  # each sin/cos within an ulp of exact
    else:
        assert torch.equal(actual, expected)
