"""Accuracy of the NumPy core against the exact value (mpmath), at long positions.

DESIGN guarantee: float32 tables within 1e-7 of the exact value for every position below
10^7; float16 within one ulp of float16 (the exact value rounded once).
"""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from tests.exact import exact_paper_table

# A spread of positions up to 10^7 - 1, including the ends and powers of ten.
POSITIONS = np.unique(
    np.concatenate(
        [
            np.arange(0, 8),
            [9_999, 10_000, 65_519, 65_520, 99_999, 999_999, 1_000_000, 9_999_999],
            np.random.default_rng(0).integers(0, 10_000_000, size=24),
        ]
    )
)


@pytest.mark.parametrize("d_model", [8, 64, 255])
def test_float32_within_1e7_of_exact_below_ten_million(d_model: int) -> None:
    exact = exact_paper_table(POSITIONS, d_model)
    table = posenc.sinusoidal(POSITIONS, d_model, dtype=np.float32)
    assert table.dtype == np.float32
    err = np.abs(table.astype(np.float64) - exact)
    assert err.max() <= 1e-7, (
        f"max error {err.max():.3g} at {np.unravel_index(err.argmax(), err.shape)}"
    )


def test_float64_is_far_more_accurate_than_float32() -> None:
    exact = exact_paper_table(POSITIONS, 16)
    err = np.abs(posenc.sinusoidal(POSITIONS, 16, dtype=np.float64) - exact).max()
    assert err <= 5e-9  # angle error ~ p * 2e-16 at p = 1e7


def test_float16_is_exact_value_rounded_once() -> None:
    exact = exact_paper_table(POSITIONS, 32)
    table = posenc.sinusoidal(POSITIONS, 32, dtype=np.float16)
    assert table.dtype == np.float16
    assert np.all(np.isfinite(table))  # no inf/NaN at positions >= 65520, unlike fp16 recipes
    # The nearest float16 to the exact value: both neighbours of the result are no closer.
    up = np.nextafter(table, np.float16(np.inf)).astype(np.float64)
    down = np.nextafter(table, np.float16(-np.inf)).astype(np.float64)
    err = np.abs(table.astype(np.float64) - exact)
    assert np.all(err <= np.abs(up - exact))
    assert np.all(err <= np.abs(down - exact))


def test_the_float32_recipe_is_not_accurate_at_long_positions() -> None:
    """The PyTorch tutorial recipe (angles in float32) drifts; this is what posenc fixes."""
    positions = np.array([5_000, 9_999, 99_999], dtype=np.float32)
    d_model = 64
    div = np.exp(
        np.arange(0, d_model, 2, dtype=np.float32) * np.float32(-np.log(10000.0) / d_model)
    )
    recipe = np.zeros((3, d_model), dtype=np.float32)
    recipe[:, 0::2] = np.sin(positions[:, None] * div)
    recipe[:, 1::2] = np.cos(positions[:, None] * div)
    exact = exact_paper_table(positions.astype(np.int64), d_model)
    assert np.abs(recipe - exact).max() > 1e-4
    assert np.abs(posenc.sinusoidal(positions.astype(np.int64), d_model) - exact).max() <= 1e-7
