"""The NumPy timestep embedding (``posenc.timestep_embedding``): formula, layouts, shapes, errors.

References: diffusers' ``get_timestep_embedding`` formula re-typed here in float64 NumPy
(``diffusers_formula``, which never calls posenc), exact values from mpmath, and the
tensor2tensor / paper 1-D tables that the two usual shifts reduce to. The real diffusers
function is compared in ``tests/references/test_grid_timestep.py``.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc._timestep import timestep_embedding, timestep_frequencies, timestep_layout
from tests.tolerance import assert_close_ulp


def diffusers_formula(t, dim, *, flip=False, shift=1.0, scale=1.0, max_period=10000.0):
    """get_timestep_embedding's formula in float64: exp(-ln(P)·k/(h - shift)), [sin | cos]."""
    t = np.asarray(t, dtype=np.float64)
    half = dim // 2
    k = np.arange(half, dtype=np.float64)
    omega = np.exp(-math.log(max_period) * k / (half - shift)) if half > 1 else np.ones(half)
    angles = scale * (t[:, None] * omega[None, :])
    emb = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
    if flip:
        emb = np.concatenate([emb[:, half:], emb[:, :half]], axis=-1)
    if dim % 2:
        emb = np.pad(emb, ((0, 0), (0, 1)))
    return emb


def exact_embedding(t, dim, *, flip=False, shift=1.0, scale=1.0, max_period=10000.0):
    """The same with 40-digit mpmath arithmetic (t given as exact binary fractions)."""
    half = dim // 2
    out = np.zeros((len(t), dim))
    with mpmath.workdps(40):
        for row, value in enumerate(t):
            for k in range(half):
                exponent = mpmath.mpf(-k) / (half - mpmath.mpf(shift)) if half > 1 else 0
                angle = mpmath.mpf(scale) * mpmath.mpf(value) * mpmath.power(max_period, exponent)
                s, c = float(mpmath.sin(angle)), float(mpmath.cos(angle))
                out[row, k], out[row, half + k] = (c, s) if flip else (s, c)
    return out


FRACTIONAL = [0.0, 0.25, 0.5, 1.0, 2.5, 10.125, 37.3, 250.75, 999.0, 999.999, -3.5]


@pytest.mark.parametrize("dim", [1, 2, 3, 4, 7, 8, 32, 33, 320, 1280])
@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("shift", [0.0, 1.0, 0.5])
def test_matches_the_diffusers_formula_in_float64(dim, flip, shift) -> None:
    if dim // 2 == 1 and shift == 1.0:
        shift = 0.0  # diffusers' formula is 0/0 there (see test_one_frequency_is_one)
    ours = timestep_embedding(
        FRACTIONAL, dim, flip_sin_to_cos=flip, downscale_freq_shift=shift, dtype=np.float64
    )
    expected = diffusers_formula(FRACTIONAL, dim, flip=flip, shift=shift)
    # float64 angles up to 1000: a few roundings of the largest (4 float64 ulps of it)
    assert_close_ulp(ours, expected, ulps=4, scale=1001)


@pytest.mark.parametrize(
    ("scale", "max_period"), [(1.0, 10000.0), (1000.0, 10000.0), (0.5, 100.0), (-2.0, 7.0)]
)
def test_scale_and_max_period(scale: float, max_period: float) -> None:
    t = np.linspace(0, 1, 11)
    ours = timestep_embedding(t, 64, scale=scale, max_period=max_period, dtype=np.float64)
    expected = diffusers_formula(t, 64, scale=scale, max_period=max_period)
    # float64 angles up to |scale| (4 float64 ulps of the largest + 1)
    assert_close_ulp(ours, expected, ulps=4, scale=abs(scale) + 1)


@pytest.mark.parametrize("dim", [4, 9, 256])
@pytest.mark.parametrize("flip", [False, True])
def test_float32_is_the_exact_value_rounded_once(dim: int, flip: bool) -> None:
    t = [0.0, 0.5, 3.25, 999.0, 999.875, 12345.5]
    ours = timestep_embedding(t, dim, flip_sin_to_cos=flip, downscale_freq_shift=0)
    exact = exact_embedding(t, dim, flip=flip, shift=0.0)
    assert np.max(np.abs(ours.astype(np.float64) - exact)) <= 6e-8
    assert np.array_equal(ours, exact.astype(np.float32))  # half-way ties are measure zero
    half = timestep_embedding(t, dim, downscale_freq_shift=0, flip_sin_to_cos=flip, dtype="f2")
    assert np.array_equal(half, exact.astype(np.float16))


def test_fractional_timesteps_interpolate_smoothly() -> None:
    # sin(t·ω) at t + 1/2 is the exact value, not a rounded or integer timestep.
    emb = timestep_embedding([4.5], 6, downscale_freq_shift=0, dtype=np.float64)[0]
    omega = 10000.0 ** (-np.arange(3) / 3)
    # float64 angles 4.5·ω (ω by two formulas, an ulp or two apart), then sin: 4 ulps of 4.5
    assert_close_ulp(emb[:3], np.sin(4.5 * omega), ulps=4, scale=4.5)
    assert not np.allclose(emb, timestep_embedding([4], 6, downscale_freq_shift=0)[0])


def test_shift_one_is_the_tensor2tensor_table_and_zero_the_paper_frequencies() -> None:
    t = np.arange(50)
    for dim in (4, 5, 64, 65):
        ours = timestep_embedding(t, dim, dtype=np.float64)
        assert np.array_equal(
            ours, posenc.sinusoidal(t, dim, convention="tensor2tensor", dtype=np.float64)
        )
        assert np.array_equal(
            timestep_frequencies(dim), posenc.frequencies(dim, convention="tensor2tensor")
        )
    for dim in (4, 64, 320):
        assert np.array_equal(
            timestep_frequencies(dim, downscale_freq_shift=0), posenc.frequencies(dim)
        )


def test_flip_swaps_the_halves_and_odd_dim_appends_a_zero_column() -> None:
    t = [0.0, 1.5, 7.0]
    plain = timestep_embedding(t, 11)
    flipped = timestep_embedding(t, 11, flip_sin_to_cos=True)
    assert np.array_equal(flipped[:, :5], plain[:, 5:10])
    assert np.array_equal(flipped[:, 5:10], plain[:, :5])
    assert np.all(plain[:, 10] == 0)
    assert np.all(flipped[:, 10] == 0)
    assert np.array_equal(timestep_embedding(t, 1), np.zeros((3, 1), dtype=np.float32))


def test_one_frequency_is_one() -> None:
    # dim 2 or 3 has h = 1; diffusers divides 0 by h - shift = 0 there (NaN); ω_0 = 1 for any
    # shift is the limit and what every other shift gives.
    assert timestep_frequencies(2).tolist() == [1.0]
    assert timestep_frequencies(3, downscale_freq_shift=0.25).tolist() == [1.0]
    emb = timestep_embedding([2.0], 3, dtype=np.float64)[0]
    assert emb.tolist() == [math.sin(2.0), math.cos(2.0), 0.0]


@pytest.mark.parametrize(
    ("timesteps", "shape"),
    [(5, (8,)), (2.5, (8,)), ([1, 2, 3], (3, 8)), ([[1.0], [2.0]], (2, 1, 8)), ([], (0, 8))],
)
def test_any_shape_of_timesteps(timesteps, shape) -> None:
    out = timestep_embedding(timesteps, 8)
    assert out.shape == shape
    flat = np.asarray(timesteps, dtype=np.float64).reshape(-1)
    assert np.array_equal(out.reshape(-1, 8), timestep_embedding(flat, 8))


def test_an_int_is_one_timestep_not_a_length() -> None:
    assert np.array_equal(timestep_embedding(5, 8), timestep_embedding([5], 8)[0])


def test_integer_dtypes_and_dtype_argument() -> None:
    t = np.array([0, 10, 999], dtype=np.uint16)
    assert np.array_equal(timestep_embedding(t, 16), timestep_embedding(t.astype(float), 16))
    for dtype in (np.float16, np.float32, np.float64):
        assert timestep_embedding(t, 16, dtype=dtype).dtype == dtype


@given(
    t=st.floats(-1e4, 1e4, allow_nan=False),
    dim=st.integers(1, 40),
    shift=st.sampled_from([0.0, 1.0, -0.5]),
    flip=st.booleans(),
    scale=st.floats(-10, 10),
)
def test_formula_per_element(t, dim, shift, flip, scale) -> None:
    row = timestep_embedding(
        t,
        dim,
        flip_sin_to_cos=flip,
        downscale_freq_shift=shift,
        scale=scale,
        dtype=np.float64,
    )
    half = dim // 2
    for j in range(dim):
        if j >= 2 * half:
            assert row[j] == 0.0
            continue
        k = j % half
        omega = 10000.0 ** (-k / (half - shift)) if half > 1 else 1.0
        first = math.cos if flip else math.sin
        second = math.sin if flip else math.cos
        expected = (first if j < half else second)(scale * t * omega)
        assert abs(row[j] - expected) <= 1e-9


def test_layout_helper() -> None:
    layout = timestep_layout(6)
    assert (layout.sin, layout.cos, layout.zero) == (slice(0, 3), slice(3, 6), slice(6, 6))


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (([1.0], 0), {}, ValueError, r"dim must be an integer >= 1, got 0"),
        (([1.0], 4.0), {}, TypeError, r"dim must be an integer >= 1, got 4\.0"),
        (([1.0], 8), {"max_period": 0}, ValueError, r"max_period must be a positive finite"),
        (([1.0], 8), {"flip_sin_to_cos": 1}, TypeError, r"flip_sin_to_cos must be True or"),
        (
            ([1.0], 8),
            {"downscale_freq_shift": 4},
            ValueError,
            r"downscale_freq_shift must differ from dim // 2 = 4 .*got 4\.0",
        ),
        (
            ([1.0], 8),
            {"downscale_freq_shift": float("inf")},
            ValueError,
            r"downscale_freq_shift must be a finite real number, got inf",
        ),
        (
            ([1.0], 64),
            {"downscale_freq_shift": 32.0000001},
            ValueError,
            r"makes the frequencies overflow",
        ),
        (([1.0], 8), {"scale": "2"}, TypeError, r"scale must be a finite real number, got '2'"),
        (([1.0], 8), {"scale": float("nan")}, ValueError, r"scale must be a finite real number"),
        (([1e10], 8), {"scale": 1e300}, ValueError, r"scale \* timesteps \* frequency overflows"),
        (([1.0], 8), {"dtype": np.int32}, TypeError, r"dtype must be one of float16"),
        (([float("nan")], 8), {}, ValueError, r"timesteps must be finite, got nan"),
        (([True], 8), {}, TypeError, r"timesteps must contain integers or real numbers"),
        ((["1"], 8), {}, TypeError, r"timesteps must contain integers or real numbers"),
        (([2.0**60], 8), {}, ValueError, r"timesteps must lie within \+-2\*\*53"),
    ],
)
def test_bad_arguments_name_the_argument(args, kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        timestep_embedding(*args, **kwargs)
