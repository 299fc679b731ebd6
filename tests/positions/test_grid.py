"""``posenc.grid_positions`` checks the size of its result before allocating, and its peak
memory is about its result (NumPy reports its buffers to ``tracemalloc``)."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import posenc


def test_a_grid_larger_than_memory_is_refused_before_allocating() -> None:
    with pytest.raises(ValueError, match=r"shape asks? for a result of shape \(1099511627776, 2\)"):
        posenc.grid_positions((2**20, 2**20))


def test_the_refusal_is_also_a_memory_error() -> None:
    with pytest.raises(MemoryError):
        posenc.grid_positions((2**30, 2**30, 4))


def _reference(shape: tuple[int, ...], blocks: tuple[int, ...], start: int) -> np.ndarray:
    """Row-major cells, numbered block by block: the formula in plain Python."""
    cells = []
    outer = [range(n // b) for n, b in zip(shape, blocks, strict=True)]
    inner = [range(b) for b in blocks]
    for o in np.ndindex(*[len(r) for r in outer]):
        for i in np.ndindex(*[len(r) for r in inner]):
            cells.append([q * b + r + start for q, r, b in zip(o, i, blocks, strict=True)])
    return np.array(cells, dtype=np.int64).reshape(-1, len(shape))


@pytest.mark.parametrize(
    ("shape", "merge", "blocks"),
    [((2, 3), 1, (1, 1)), ((2, 4, 6), 2, (1, 2, 2)), ((4, 6), (2, 3), (2, 3)), ((0, 4), 2, (2, 2))],
)
def test_values_are_the_formula(shape: tuple[int, ...], merge: object, blocks: tuple) -> None:
    got = posenc.grid_positions(shape, merge=merge, start=5)
    np.testing.assert_array_equal(got, _reference(shape, blocks, 5))
    assert got.dtype == np.int64
    assert got.flags.c_contiguous


@pytest.mark.parametrize("merge", [1, 2])
def test_peak_memory_is_about_the_result(merge: int) -> None:
    shape = (4, 128, 256)
    result_bytes = math.prod(shape) * len(shape) * 8  # 3 MiB
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = posenc.grid_positions(shape, merge=merge)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.nbytes == result_bytes
    assert peak < 1.25 * result_bytes, peak / result_bytes
