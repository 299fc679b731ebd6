"""The NumPy bias core against the libraries it names: transformers' MPT ALiBi, x-transformers'
``AlibiPositionalBias`` with ``total_heads``, torchscale's xPos. Each is skipped with a reason
when the library is not installed (a failure under CI); the PyTorch front-end's references
are in tests/torch/."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import posenc
from tests.references import require
from tests.tolerance import assert_close_ulp

HEADS = range(1, 129)


def _torch() -> Any:
    return require("torch", "the reference libraries run on torch, which is not installed")


# -- MPT ---------------------------------------------------------------------------------------


def _mpt() -> Any:
    _torch()
    require("transformers")
    return require("transformers.models.mpt.modeling_mpt")


@functools.cache
def _power_of_two(x: float) -> float:
    """``2^x`` to 40 digits (rounded to float32 by the caller, correctly)."""
    mp = require("mpmath").mp
    mp.dps = 40
    return float(mp.power(2, mp.mpf(x)))


def _mpt_slopes_correctly_rounded(heads: int, max_bias: float) -> np.ndarray:
    """``build_mpt_alibi_tensor``'s float32 steps with ``2^x`` correctly rounded (mpmath)
    where transformers calls ``torch.pow``."""
    torch = _torch()
    n2 = 1 << (heads - 1).bit_length()
    base = torch.arange(1, n2 + 1, dtype=torch.int64).float() * (max_bias / n2)
    power = torch.tensor([_power_of_two(float(x)) for x in base], dtype=torch.float32)
    slopes = 1.0 / power
    if n2 != heads:
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:heads]
    return np.asarray(slopes.numpy())


@pytest.mark.parametrize("max_bias", [0.5, 1.0, 2.0, 8.0, 12.0, 16.0])
def test_mpt_alibi_against_build_mpt_alibi_tensor_for_1_to_128_heads(max_bias: float) -> None:
    """Bit for bit for alibi_bias_max 8 and 16 (BIAS_CONVENTIONS); for any other value, bit
    for bit wherever torch.pow rounds 2^x correctly (SLEEF's vector pow and libm's powf each
    miss by one ulp at some x, and which one runs depends on the CPU and the head count), and
    elsewhere two float32 ulps of a slope at most (one ulp of a power just above 1 is two of
    its reciprocal just below 1)."""
    mpt = _mpt()
    length = 6
    for heads in HEADS:
        want = mpt.build_mpt_alibi_tensor(heads, length, max_bias).numpy()
        got = posenc.alibi_bias(
            heads, [length - 1], length, form="relative", max_bias=max_bias, convention="mpt"
        )
        assert got.shape == want.shape == (heads, 1, length)
        theirs = -want[:, 0, -2]  # distance 1: the slope itself
        ours = posenc.alibi_slopes(heads, max_bias=max_bias, convention="mpt")
        np.testing.assert_array_equal(ours, -got[:, 0, -2])
        np.testing.assert_array_equal(ours, _mpt_slopes_correctly_rounded(heads, max_bias))
        if max_bias in (8.0, 16.0) or np.array_equal(ours, theirs):
            np.testing.assert_array_equal(got, want, err_msg=f"{heads} heads")
        else:
            apart = np.abs(ours.view(np.int32) - theirs.view(np.int32))
            assert 1 <= int(apart.max()) <= 2, heads


def test_bias_conventions_state_where_mpt_is_bit_for_bit() -> None:
    text = posenc.BIAS_CONVENTIONS["alibi_mpt"]
    assert "bit for bit for alibi_bias_max 8 or 16 with 1 to 128 heads" in text
    assert "two float32 ulps" in text


# -- x-transformers: ALiBi on the first heads of a larger attention ------------------------------


@pytest.mark.parametrize(("heads", "total_heads"), [(1, 1), (2, 8), (4, 6), (3, 4), (6, 12)])
def test_alibi_with_total_heads_equals_x_transformers_alibi_positional_bias(
    heads: int, total_heads: int
) -> None:
    _torch()
    require("x_transformers")
    x_transformers = require("x_transformers.x_transformers")
    module = x_transformers.AlibiPositionalBias(heads, total_heads)
    queries, keys = 3, 7
    want = module(queries, keys).numpy()  # (total_heads, i, j): queries at the end of the keys
    got = posenc.alibi_bias(heads, np.arange(keys - queries, keys), keys, total_heads=total_heads)
    assert got.shape == want.shape == (total_heads, queries, keys)
    # x-transformers rounds each slope to float32, then the product: two roundings to ours one
    assert_close_ulp(got, want, ulps=2, scale=np.abs(got.astype(np.float64)))
    assert not got[heads:].any()  # no bias on the other heads
    assert not want[heads:].any()
    slopes = posenc.alibi_slopes(heads, total_heads=total_heads)
    np.testing.assert_array_equal(slopes[:heads], posenc.alibi_slopes(heads))
    np.testing.assert_array_equal(slopes[heads:], 0.0)


# -- torchscale: xPos --------------------------------------------------------------------------


def _torchscale_positions(length: int, offset: int) -> np.ndarray:
    """The positions torchscale's XPOS scales the last ``length`` of ``length + offset``
    tokens at, as posenc.xpos_scales documents them: ``p + (-(L + offset) // 2)``, which is
    ``p - ceil((L + offset) / 2)`` (not ``p - (L + offset) // 2`` at odd ``L + offset``)."""
    return np.arange(length + offset)[-length:] - (length + offset + 1) // 2


@pytest.mark.parametrize(("length", "offset"), [(5, 0), (4, 3), (6, 1), (4, 0), (3, 2)])
@pytest.mark.parametrize("downscale", [False, True])
def test_xpos_scales_at_the_positions_torchscale_uses(
    length: int, offset: int, downscale: bool
) -> None:
    torch = _torch()
    require("torchscale")
    xpos = require("torchscale.component.xpos_relative_position")
    head_dim = 8
    x = torch.randn(2, length, head_dim, generator=torch.Generator().manual_seed(0))
    want = xpos.XPOS(head_dim)(x, offset=offset, downscale=downscale).numpy()
    scales = posenc.xpos_scales(_torchscale_positions(length, offset), head_dim)
    if downscale:
        scales = 1.0 / scales
    # torchscale's rotation: sinusoids of rows offset .. offset + length - 1 over head_dim / 2
    # frequencies 10000^(-i / (head_dim / 2)), each channel pair sharing one
    rows = np.arange(offset, offset + length, dtype=np.float64)[:, None]
    angle = rows * 10000.0 ** (-np.arange(head_dim // 2) / (head_dim // 2))
    sin, cos = np.repeat(np.sin(angle), 2, -1), np.repeat(np.cos(angle), 2, -1)
    x64 = x.double().numpy()
    rotated = np.stack([-x64[..., 1::2], x64[..., ::2]], -1).reshape(x64.shape)
    got = x64 * cos * scales + rotated * sin * scales
    # torchscale: float32 powers, sinusoids and products (a few float32 roundings of |x|)
    assert_close_ulp(want, got, ulps=16, scale=float(np.abs(x64).max()))
