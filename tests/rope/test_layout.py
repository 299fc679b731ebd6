"""The pair layout of RoPE tables given to ``posenc.apply_rotary``.

Tables laid out for one ``pairs`` and applied with the other rotate by the wrong angles (or do
not rotate at all: vector norms change), so a mismatch raises. Tables with one column per pair
carry no layout and are rotated as their ``pairs`` say.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc import apply_rotary, rope_frequencies, rotary_cos_sin
from tests.tolerance import assert_close_ulp

PAIRS = ("half", "interleaved")
OTHER = {"half": "interleaved", "interleaved": "half"}


def rng_array(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def per_pair_tables(positions, dim):
    """cos/sin of p·ω_k, one column per pair (no layout), with math.cos one value at a time."""
    omega = rope_frequencies(dim)[0]
    cos = np.array([[math.cos(p * w) for w in omega] for p in positions])
    sin = np.array([[math.sin(p * w) for w in omega] for p in positions])
    return cos, sin


@pytest.mark.parametrize("built", PAIRS)
@pytest.mark.parametrize(("head_dim", "rotary_dim"), [(8, 8), (12, 4), (64, 64)])
def test_tables_of_the_other_layout_are_refused(built, head_dim, rotary_dim):
    stated = OTHER[built]
    x = rng_array(2, 5, head_dim, seed=1)
    cos, sin = rotary_cos_sin(5, head_dim, rotary_dim=rotary_dim, pairs=built)
    message = f"pairs='{stated}' does not match cos/sin: they are laid out for pairs='{built}'"
    with pytest.raises(ValueError, match=message):
        apply_rotary(x, cos, sin, pairs=stated)


def test_tables_of_no_layout_are_refused():
    x = rng_array(3, 8, seed=2)
    cos, sin = rotary_cos_sin(3, 8)
    sin = sin.copy()
    sin[2, 1] += 0.5  # the columns of pair 1 now differ in both layouts
    for pairs in PAIRS:
        with pytest.raises(ValueError, match=f"pairs='{pairs}' does not match cos/sin: "):
            apply_rotary(x, cos, sin, pairs=pairs)


def test_a_mismatch_in_one_row_of_broadcast_tables_is_found():
    positions = np.array([[0, 1, 2], [0, 0, 0]])
    cos, sin = rotary_cos_sin(positions, 8, pairs="interleaved")  # (b, s, r)
    x = rng_array(2, 4, 3, 8, seed=3)
    with pytest.raises(ValueError, match="laid out for pairs='interleaved'"):
        apply_rotary(x, cos[:, None], sin[:, None], pairs="half")
    # rows at position 0 hold the same value in every column: both layouts, identity
    zero = rotary_cos_sin(positions[1:], 8, pairs="interleaved")
    out = apply_rotary(x[1:], zero[0][:, None], zero[1][:, None], pairs="half")
    np.testing.assert_array_equal(out, x[1:])


def test_nan_tables_are_not_called_a_layout_mismatch():
    cos, sin = rotary_cos_sin(3, 8)
    cos = cos.copy()
    cos[1] = np.nan
    out = apply_rotary(rng_array(3, 8, seed=4), cos, sin)
    assert np.isnan(out[1]).all()
    assert np.isfinite(out[[0, 2]]).all()


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize(("head_dim", "rotary_dim"), [(8, 8), (12, 4)])
def test_one_column_per_pair_rotates_like_the_laid_out_tables(pairs, head_dim, rotary_dim):
    positions = [0, 1, 5, 300]
    x = rng_array(2, len(positions), head_dim, seed=5)
    cos, sin = rotary_cos_sin(positions, head_dim, rotary_dim=rotary_dim, pairs=pairs, dtype=float)
    per_cos, per_sin = per_pair_tables(positions, rotary_dim)
    assert per_cos.shape == (len(positions), rotary_dim // 2)
    out = apply_rotary(x, per_cos, per_sin, pairs=pairs, rotary_dim=rotary_dim)
    # the same float64 values laid out two ways: the same products and sums, 1 ulp at most
    assert_close_ulp(out, apply_rotary(x, cos, sin, pairs=pairs), ulps=1)
    assert out.dtype == x.dtype


def test_rotary_dim_says_which_form_the_tables_have():
    x = rng_array(2, 8, seed=6)
    cos, sin = rotary_cos_sin(2, 8, rotary_dim=4)  # full tables of 4 channels
    np.testing.assert_array_equal(
        apply_rotary(x, cos, sin, rotary_dim=4), apply_rotary(x, cos, sin)
    )
    # the same 4 columns read as one column per pair: 8 rotated channels
    per_pair = apply_rotary(x, cos, sin, rotary_dim=8)
    assert not np.array_equal(per_pair[:, 4:], x[:, 4:])
    with pytest.raises(ValueError, match=r"rotary_dim = 6 must be cos.shape\[-1\] = 4"):
        apply_rotary(x, cos, sin, rotary_dim=6)
    with pytest.raises(ValueError, match=r"rotary_dim = 16 .* <= x.shape\[-1\] = 8"):
        apply_rotary(x, *per_pair_tables([0, 1], 16), rotary_dim=16)


@given(
    st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=6),
    st.sampled_from(PAIRS),
    st.sampled_from([2, 4, 10, 32]),
)
def test_valid_tables_always_pass_and_keep_norms(positions, pairs, dim):
    x = rng_array(len(positions), dim, seed=len(positions))
    cos, sin = rotary_cos_sin(positions, dim, pairs=pairs, dtype=np.float64)
    out = apply_rotary(x, cos, sin, pairs=pairs)
    # float64: cos² + sin² = 1 within 2 ulps, each rotated channel 3 roundings, the norm a
    # sum of dim squares: dim + 4 ulps of the largest norm
    norms = np.linalg.norm(x, axis=-1)
    assert_close_ulp(np.linalg.norm(out, axis=-1), norms, ulps=dim + 4)
