"""Dense biases built a block of query rows at a time: bit for bit the whole float64 array
rounded once, at every block size (block edges included), without holding that array."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc._bias import positions as core_positions


@contextmanager
def blocks_of(size: int) -> Iterator[None]:
    """Blocks of about ``size`` values (at least one query row each)."""
    with mock.patch.object(core_positions, "BLOCK_VALUES", size):
        yield


DTYPES = [np.float16, np.float32, np.float64]
shapes = st.tuples(st.integers(1, 6), st.integers(0, 11), st.integers(0, 11))


def _exact_alibi(heads: int, q: int, k: int, form: str, offset: int) -> np.ndarray:
    """The float64 product of the exact convention, whole (the formula, written out)."""
    query, key = np.arange(q) + offset, np.arange(k)
    factor = {
        "key": np.broadcast_to(key[None, :], (q, k)),
        "relative": key[None, :] - query[:, None],
        "distance": -np.abs(key[None, :] - query[:, None]),
    }[form]
    return posenc.alibi_slopes(heads)[:, None, None] * factor.astype(np.float64)[None]


@given(
    shape=shapes,
    size=st.integers(1, 200),
    form=st.sampled_from(["distance", "relative", "key"]),
    convention=st.sampled_from(["exact", "mpt"]),
    offset=st.integers(-5, 5),
    dtype=st.sampled_from(DTYPES),
)
def test_alibi_in_blocks_is_the_whole_array_rounded_once(
    shape: tuple[int, int, int], size: int, form: str, convention: str, offset: int, dtype: type
) -> None:
    heads, q, k = shape
    query = np.arange(q) + offset

    def build() -> np.ndarray:
        return posenc.alibi_bias(heads, query, k, form=form, convention=convention, dtype=dtype)

    with blocks_of(size):
        blocked = build()
    with blocks_of(1 << 40):  # one block: the whole array
        whole = build()
    assert blocked.dtype == whole.dtype == dtype
    assert blocked.shape == shape
    assert blocked.tobytes() == whole.tobytes()
    if convention == "exact":
        expected = (_exact_alibi(heads, q, k, form, offset) + 0.0).astype(dtype)
        assert blocked.tobytes() == expected.tobytes()


@given(
    shape=shapes,
    size=st.integers(1, 200),
    bidirectional=st.booleans(),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**16),
)
def test_t5_bias_in_blocks_is_the_table_read_through_the_buckets(
    shape: tuple[int, int, int], size: int, bidirectional: bool, dtype: type, seed: int
) -> None:
    heads, q, k = shape
    table = np.random.default_rng(seed).normal(size=(8, heads)) * 100.0
    with blocks_of(size):
        got = posenc.t5_bias(
            table, q, k, num_buckets=8, max_distance=6, bidirectional=bidirectional, dtype=dtype
        )
    relative = np.arange(k)[None, :] - np.arange(q)[:, None]
    buckets = posenc.t5_buckets(
        relative, num_buckets=8, max_distance=6, bidirectional=bidirectional
    )
    expected = (np.moveaxis(table[buckets], -1, 0) + 0.0).astype(dtype)
    assert got.tobytes() == expected.tobytes()


def test_a_value_beyond_the_dtype_is_named_with_the_peak_of_the_whole_bias() -> None:
    """The first block that overflows raises with the largest magnitude of every block."""
    table = np.zeros((8, 1))
    table[7, 0] = 1e6  # the last bucket: only the farthest keys (the last rows of a causal map)
    table[6, 0] = 7e4  # reached by earlier rows
    with blocks_of(1), pytest.raises(ValueError, match=r"reach 1e\+06 in magnitude"):
        posenc.t5_bias(table, 40, 1, num_buckets=8, max_distance=16, bidirectional=False,
                       dtype=np.float16)  # fmt: skip


def _peak(build: object) -> tuple[int, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = build()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1], result.nbytes
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("method", ["alibi", "t5"])
def test_no_float64_array_of_the_whole_bias_is_held(method: str) -> None:
    """16 heads, q = k = 512, float32: 16 MiB. The whole float64 bias alone would be 32 MiB."""
    heads, length = 16, 512
    table = np.random.default_rng(0).normal(size=(32, heads))

    def build() -> np.ndarray:
        if method == "alibi":
            return posenc.alibi_bias(heads, length, length)
        return posenc.t5_bias(table, length, length)

    peak, result = _peak(build)
    assert result == heads * length * length * 4
    # the result, plus a block of 2**20 values in float64 and its few temporaries
    assert peak <= result + 3 * 8 * core_positions.BLOCK_VALUES, (peak, result)
