"""The float32 engine for traced positions: within one float32 ulp of the exact value (floor
2**-25) for random integer positions up to 2**20 and real ones up to 2**24, without 64-bit
mode; 16-bit results rounded once; the static rounding of bfloat16 rounds once."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.jax.helpers import import_jax, same_bits, ulp_errors

jax, jnp = import_jax()

import ml_dtypes  # noqa: E402

import posenc  # noqa: E402
from posenc.jax._exact import round_once_numpy, traced_phasors, x64_enabled  # noqa: E402

OMEGA, _ = posenc.rope_frequencies(128, base=500000.0)  # Llama 3's 64 frequencies
_F32 = np.dtype(np.float32)
BATCH = 64


@jax.jit
def _tables(positions):
    return traced_phasors(positions[..., None], OMEGA[None], 1.0, _F32)


@pytest.mark.slow
@settings(max_examples=20)
@given(st.lists(st.integers(0, 2**20), min_size=BATCH, max_size=BATCH))
def test_random_positions_to_2_20_within_one_ulp(positions: list[int]) -> None:
    assert not x64_enabled()
    pos = np.array(positions, dtype=np.int32)
    cos, sin = _tables(pos)  # one compiled graph for every example (a fixed shape)
    theta = pos.astype(np.float64)[:, None] * OMEGA
    assert ulp_errors(cos, np.cos(theta)).max() <= 1.0
    assert ulp_errors(sin, np.sin(theta)).max() <= 1.0


def test_int32_positions_to_2_24_and_beyond() -> None:
    pos = np.array([2**24 - 1, 2**24, -(2**24) + 3, 2**23 + 12345], dtype=np.int32)
    cos, sin = _tables(pos)
    theta = pos.astype(np.float64)[:, None] * OMEGA
    assert ulp_errors(cos, np.cos(theta)).max() <= 1.0
    assert ulp_errors(sin, np.sin(theta)).max() <= 1.0
    # beyond, every int32 is encoded: the float64 angles (the tables' and the reference's)
    # round by up to |p|·2**-53 each, the bound that adds to the ulp
    far = np.array([2**30 + 12345, 2**31 - 1, -(2**31) + 1, 2**28], dtype=np.int32)
    theta = far.astype(np.float64)[:, None] * OMEGA
    slack = 2.0**-24 + 2 * np.abs(theta) * 2.0**-53
    for got, want in zip(_tables(far), (np.cos(theta), np.sin(theta)), strict=True):
        assert (np.abs(np.asarray(got, np.float64) - want) <= slack).all()


_REAL = jax.jit(lambda p: traced_phasors(p[..., None], OMEGA[None], 1.0, _F32))


@pytest.mark.slow
@settings(max_examples=20)
@given(
    st.lists(
        st.floats(-(2.0**24), 2.0**24, width=32, allow_nan=False),
        min_size=BATCH,
        max_size=BATCH,
    )
)
def test_random_real_positions_to_2_24_within_one_ulp(positions: list[float]) -> None:
    pos = np.array(positions, dtype=np.float32)
    cos, sin = _REAL(pos)
    theta = pos.astype(np.float64)[:, None] * OMEGA
    assert ulp_errors(cos, np.cos(theta)).max() <= 1.0
    assert ulp_errors(sin, np.sin(theta)).max() <= 1.0


def test_the_float32_recipe_is_far_off_where_the_engine_is_not() -> None:
    # the bound is not vacuous: the angle p·ω formed in float32 misses it by orders of magnitude
    pos = np.arange(2**20 - 64, 2**20, dtype=np.int32)
    theta = pos.astype(np.float64)[:, None] * OMEGA
    recipe = np.cos(pos.astype(np.float32)[:, None] * OMEGA.astype(np.float32))
    assert ulp_errors(recipe, np.cos(theta)).max() > 1000
    assert ulp_errors(_tables(pos)[0], np.cos(theta)).max() <= 1.0


def test_static_bfloat16_rounds_once_where_float32_would_round_twice() -> None:
    # just above a bfloat16 tie: via float32 it lands on the tie and rounds to even (down)
    value = np.array([1 + 2.0**-8 + 2.0**-40, -(1 + 2.0**-8 + 2.0**-40)])
    got = round_once_numpy(value, np.dtype(ml_dtypes.bfloat16))
    assert float(got[0]) == 1 + 2.0**-7
    assert float(got[1]) == -(1 + 2.0**-7)
    assert float(value[0].astype(np.float32).astype(ml_dtypes.bfloat16)) == 1.0  # double rounding
    assert same_bits(
        round_once_numpy(np.array([0.5, -0.25]), np.dtype(ml_dtypes.bfloat16)),
        np.array([0.5, -0.25]).astype(ml_dtypes.bfloat16),
    )
