"""The angle-addition table build of the NumPy core (integer positions, float32/float16).

References: the direct float64 build (``dtype=np.float64`` keeps it: sin/cos of the float64
angle ``p·ω``), rounded once by NumPy, and mpmath at large positions (``tests.exact``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc._angle_addition import NUMPY_OPS
from posenc._angles import ANGLE_BLOCK
from posenc._features import FeatureSlices, feature_slices, write_pairs
from posenc._sinusoidal import fill_table
from tests.exact import exact_paper_table

CONVENTIONS = sorted(posenc.CONVENTIONS)


def direct(positions: np.ndarray, d_model: int, **kwargs: object) -> np.ndarray:
    """The direct float64 table: float64 output never takes the angle-addition build."""
    return posenc.sinusoidal(positions, d_model, dtype=np.float64, **kwargs)


def check_single_rounding(fast: np.ndarray, exact: np.ndarray, positions: np.ndarray) -> None:
    """``fast`` is a float64 value within ``delta`` of ``exact`` (the direct float64 table)
    rounded once: within half a ulp (of ``fast``'s dtype) plus ``delta``, elementwise.

    ``delta`` bounds the float64 difference of the two builds: the angle is rounded as
    ``hi·ω + lo·ω`` instead of ``p·ω`` (about 3.3e-16·|p| for ω <= 1) plus a few ulps of
    sin/cos and of the product.
    """
    assert fast.shape == exact.shape
    if not fast.size:
        return
    delta = 4e-16 * np.abs(positions.astype(np.float64)) + 1e-15
    half_ulp = np.spacing(np.abs(exact).astype(fast.dtype)).astype(np.float64) / 2
    error = np.abs(fast.astype(np.float64) - exact)
    assert np.all(error <= half_ulp + delta.reshape(*delta.shape, 1))
    if np.abs(positions).max() <= 10**4:  # and the same bits, but for rare near-ties
        assert (fast != exact.astype(fast.dtype)).mean() <= 1e-3


def check_against_direct(positions: np.ndarray, d_model: int, **kwargs: object) -> None:
    fast = posenc.sinusoidal(positions, d_model, **kwargs)
    assert fast.dtype == np.float32
    check_single_rounding(fast, direct(positions, d_model, **kwargs), positions)
    if fast.size and np.abs(positions).max() <= 10**5:  # the float32 accuracy of the issue
        assert np.abs(fast - direct(positions, d_model, **kwargs)).max() <= 3e-8


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("d_model", [1, 2, 3, 7, 8, 63, 64, 65, 1024])
@pytest.mark.parametrize(
    ("start", "length"),
    [(0, 129), (0, 3000), (5, 200), (64, 128), (-300, 700), (123_457, 1000), (10**7 - 500, 500)],
)
def test_consecutive_tables_equal_the_direct_build_rounded_once(
    convention: str, d_model: int, start: int, length: int
) -> None:
    positions = np.arange(start, start + length)
    check_against_direct(positions, d_model, convention=convention)


def test_the_8192_by_1024_table_is_the_direct_one_rounded_once() -> None:
    fast = posenc.sinusoidal(8192, 1024)
    exact = direct(np.arange(8192), 1024)
    assert np.abs(fast - exact).max() <= 3e-8
    assert (fast != exact.astype(np.float32)).mean() < 1e-5


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("d_model", [5, 16, 33])
def test_arbitrary_integer_positions(convention: str, d_model: int) -> None:
    rng = np.random.default_rng(3)
    cases = [
        rng.integers(-(10**6), 10**6, size=500),  # distinct hi: computed per chunk
        np.tile(np.arange(40, 90), 12),  # repeated rows (a batch): tabulated hi
        rng.permutation(np.arange(1000, 1300)),  # consecutive values out of order
        np.array([0, 63, 64, 65, 127, 128, -1, -64, -65, 2**40 + 3]),
        np.array([2**53, -(2**53), 2**53 - 1]),  # the extremes: no overflow in hi and lo
    ]
    for positions in cases:
        check_against_direct(positions, d_model, convention=convention)


def test_a_position_has_one_value_whatever_table_holds_it() -> None:
    """hi/lo depend on the position only: the table 0..L-1, a slice of a longer table, a
    shuffled or a single position give the same float32 bits (same float64 arithmetic)."""
    table = posenc.sinusoidal(5000, 48)
    assert np.array_equal(posenc.sinusoidal(np.arange(1000, 3000), 48), table[1000:3000])
    order = np.random.default_rng(0).permutation(5000)
    assert np.array_equal(posenc.sinusoidal(order, 48), table[order])
    for p in (0, 63, 64, 4097, 4999):
        assert np.array_equal(posenc.sinusoidal([p], 48)[0], table[p])


def test_positions_below_the_block_are_exactly_the_direct_values() -> None:
    """hi = 0 there: the product with cos(0) - i sin(0) = 1 is exact."""
    for convention in CONVENTIONS:
        fast = posenc.sinusoidal(ANGLE_BLOCK, 30, convention=convention)
        exact = direct(np.arange(ANGLE_BLOCK), 30, convention=convention)
        assert np.array_equal(fast, exact.astype(np.float32))


def test_large_positions_against_mpmath() -> None:
    positions = np.array([999_937, 4_194_303, 4_194_304, 9_999_999, 123_456_789])
    fast = posenc.sinusoidal(positions, 64)
    exact = exact_paper_table(positions, 64)
    error = np.abs(fast - exact).max(axis=1)
    assert np.all(error <= 2.0**-25 + 2.5e-16 * positions)
    assert np.all(error[:4] <= 1e-7)  # the guarantee below 10^7
    # and a consecutive run crossing a block boundary far out
    run = np.arange(9_999_870, 10_000_000)
    assert np.abs(posenc.sinusoidal(run, 16) - exact_paper_table(run, 16)).max() <= 3.3e-8


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_float16_is_the_direct_table_rounded_once(convention: str) -> None:
    positions = np.arange(-100, 4000)
    fast = posenc.sinusoidal(positions, 40, convention=convention, dtype=np.float16)
    exact = direct(positions, 40, convention=convention)
    assert fast.dtype == np.float16
    check_single_rounding(fast, exact, positions)
    once = exact.astype(np.float16)  # one rounding (NumPy rounds float64 to float16 directly)
    assert (fast != once).sum() <= 2


def test_float64_output_and_real_positions_keep_the_direct_build() -> None:
    positions = np.arange(3000)
    omega = posenc.frequencies(64)
    table = posenc.sinusoidal(positions, 64, dtype=np.float64)
    assert np.array_equal(table[:, 0::2], np.sin(np.multiply.outer(positions, omega)))
    real = posenc.sinusoidal(positions + 0.5, 64)
    angles = np.multiply.outer(positions + 0.5, omega)
    assert np.array_equal(real[:, 1::2], np.cos(angles).astype(np.float32))


def test_zero_columns_empty_tables_and_tiny_widths() -> None:
    t2t = posenc.sinusoidal(300, 7, convention="tensor2tensor")
    assert np.all(t2t[:, 6] == 0)
    assert posenc.sinusoidal(0, 8).shape == (0, 8)
    assert posenc.sinusoidal(np.zeros((0, 3), dtype=int), 8).shape == (0, 3, 8)
    one = posenc.sinusoidal(500, 1)  # paper d = 1: the sin column only
    assert np.array_equal(one[:, 0], np.sin(np.arange(500.0)).astype(np.float32))
    assert np.all(posenc.sinusoidal(500, 1, convention="tensor2tensor") == 0)  # no frequency


def test_fill_table_writes_into_a_float16_memory_map(tmp_path) -> None:
    """``fill_table`` writes into a float16 memory map, block by block."""
    out = np.lib.format.open_memmap(tmp_path / "t.npy", mode="w+", dtype=np.float16, shape=(700, 6))
    layout = feature_slices(6)
    omega = posenc.frequencies(6)
    fill_table(out[:300], np.arange(300), omega, layout)
    fill_table(out[300:], np.arange(300, 700), omega, layout)
    out.flush()
    assert np.array_equal(np.load(tmp_path / "t.npy"), posenc.sinusoidal(700, 6, dtype=np.float16))


def test_write_pairs_follows_any_layout() -> None:
    """A layout that is neither interleaved nor [sin | cos] (e.g. [cos | sin | 0])."""
    layout = FeatureSlices(slice(2, 4), slice(0, 2), slice(4, 5), 2, 2)
    pairs = np.arange(12.0).reshape(3, 2, 2)  # (m, n, [sin, cos])
    out = np.full((3, 5), -1.0)
    write_pairs(out, pairs, layout, NUMPY_OPS.store)
    assert np.array_equal(out[:, 2:4], pairs[..., 0])
    assert np.array_equal(out[:, 0:2], pairs[..., 1])
    assert np.all(out[:, 4] == -1)  # zero columns are the caller's


@given(
    start=st.integers(-(10**9), 10**9),
    length=st.integers(0, 300),
    d_model=st.integers(1, 40),
    convention=st.sampled_from(CONVENTIONS),
)
def test_random_runs(start: int, length: int, d_model: int, convention: str) -> None:
    check_against_direct(np.arange(start, start + length), d_model, convention=convention)
