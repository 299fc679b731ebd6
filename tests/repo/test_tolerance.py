"""The tolerance helper (tests/tolerance.py): its bound is ulps · eps(dtype) · scale."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.tolerance import (
    assert_close_float32_recipe,
    assert_close_ulp,
    bound,
    eps,
    ulps_apart,
)


def test_eps_is_one_ulp_at_one():
    assert eps(np.float32) == float(np.finfo(np.float32).eps)
    assert eps(np.float64) == float(np.finfo(np.float64).eps)
    assert eps(np.zeros(2, np.float16)) == float(np.finfo(np.float16).eps)
    with pytest.raises(TypeError, match="floating dtype"):
        eps(np.int64)


def test_bound_scales_with_the_largest_magnitude_or_the_scale_given():
    expected = np.array([0.5, -4.0, np.nan, 1.0])
    assert bound(expected, np.float32, 3) == 3 * 2.0**-23 * 4.0
    assert bound(expected, np.float32, 3, scale=100.0) == 3 * 2.0**-23 * 100.0
    assert bound(np.zeros(3), np.float32, 8) == 0.0  # zeros must be equal


@given(ulps=st.integers(1, 64), magnitude=st.floats(1e-3, 1e3), sign=st.sampled_from([-1, 1]))
def test_passes_at_the_bound_and_fails_just_past_it(ulps, magnitude, sign):
    expected = np.array([magnitude, magnitude / 3, 0.0])
    step = bound(expected, np.float32, ulps)
    at = expected.copy()
    at[2] += sign * step
    assert_close_ulp(at, expected, ulps=ulps, dtype=np.float32)
    past = expected.copy()
    past[2] += sign * step * 1.01
    with pytest.raises(AssertionError, match=rf"allowed {ulps} ulps"):
        assert_close_ulp(past, expected, ulps=ulps, dtype=np.float32, what="row")
    assert ulps_apart(past, expected, np.float32) == pytest.approx(ulps * 1.01)


def test_the_coarser_dtype_counts_and_shapes_and_nans_must_agree():
    truth = np.array([1.0, 2.0])
    one_float32_ulp = np.array([1.0, 2.0 + 2 * 2.0**-23], dtype=np.float64)
    assert_close_ulp(one_float32_ulp.astype(np.float32), truth, ulps=1)  # float32 ulps
    with pytest.raises(AssertionError):
        assert_close_ulp(one_float32_ulp, truth, ulps=1)  # float64 ulps: far apart
    with pytest.raises(AssertionError, match="shape"):
        assert_close_ulp(truth[:1], truth, ulps=1)
    with pytest.raises(AssertionError, match="NaN"):
        assert_close_ulp(np.array([np.nan, 2.0]), truth, ulps=1)
    with pytest.raises(AssertionError, match="infinities"):
        assert_close_ulp(np.array([np.inf, 1.0]), np.array([-np.inf, 1.0]), ulps=1)
    with pytest.raises(ValueError, match="ulps must be >= 0, got -1"):
        assert_close_ulp(truth, truth, ulps=-1)


def test_torch_tensors_in_any_dtype():
    torch = pytest.importorskip("torch")
    expected = torch.tensor([1.0, -3.0], dtype=torch.float64)
    actual = expected.to(torch.bfloat16)  # rounded once: within half a bfloat16 ulp of 3
    assert ulps_apart(actual, expected) <= 0.5
    assert_close_ulp(actual, expected, ulps=1)
    with pytest.raises(AssertionError, match="bfloat16"):
        assert_close_ulp(actual + 0.1, expected, ulps=1)


def test_a_scale_per_element_is_a_relative_bound():
    frequencies = np.array([1.0, 1e-2, 1e-4])
    nudged = frequencies * (1 + 2.9 * 2.0**-23)
    assert_close_ulp(nudged, frequencies, ulps=3, dtype=np.float32, scale=frequencies)
    assert ulps_apart(nudged, frequencies, np.float32, scale=frequencies) == pytest.approx(2.9)
    smallest_off = frequencies.copy()
    smallest_off[2] *= 1 + 5 * 2.0**-23  # far below an ulp of 1.0, but 5 of its own
    with pytest.raises(AssertionError, match=r"at \(2,\)"):
        assert_close_ulp(smallest_off, frequencies, ulps=3, dtype=np.float32, scale=frequencies)


def test_the_float32_recipe_bound_counts_ulps_of_the_angle():
    table = np.array([0.5, -1.0])
    off = table + np.array([0.0, 2 * 2.0**-23 * 101])  # 2 ulps at the scale 100 + 1
    assert_close_float32_recipe(off, table, max_angle=100)
    with pytest.raises(AssertionError):
        assert_close_float32_recipe(off, table, max_angle=90)
    assert_close_float32_recipe(2 * off, 2 * table, max_angle=100, magnitude=2)
    with pytest.raises(AssertionError):
        assert_close_float32_recipe(3 * off, 2 * table, max_angle=100, magnitude=2, terms=2)
