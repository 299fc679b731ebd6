"""Content-dependent relative terms in the NumPy core: DeBERTa's relative index maps and the
relative shift of the Conformer/Transformer-XL ``(q + v)·R`` term (which table row each
query/key pair reads). The framework comparisons are in
tests/references/hf/test_relative_terms.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc


def test_deberta_relative_positions_are_query_minus_key() -> None:
    got = posenc.deberta_relative_positions(3, 4)
    np.testing.assert_array_equal(got, [[0, -1, -2, -3], [1, 0, -1, -2], [2, 1, 0, -1]])
    assert got.dtype == np.int64
    shifted = posenc.deberta_relative_positions([5, 6], [0, 9])
    np.testing.assert_array_equal(shifted, [[5, -4], [6, -3]])


@pytest.mark.parametrize("convention", ["exact", "transformers"])
def test_deberta_relative_positions_with_buckets_are_the_log_buckets(convention: str) -> None:
    rel = -posenc.relative_positions(40, 50)
    want = posenc.deberta_buckets(rel, bucket_size=8, max_position=32, convention=convention)  # type: ignore[arg-type]
    got = posenc.deberta_relative_positions(
        40,
        50,
        bucket_size=8,
        max_position=32,
        convention=convention,  # type: ignore[arg-type]
    )
    np.testing.assert_array_equal(got, want)
    assert got.max() > 4
    assert got.min() < -4


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"bucket_size": 0, "max_position": 32}, ValueError, "bucket_size"),
        ({"bucket_size": -1, "max_position": 32}, ValueError, "bucket_size"),
        ({"bucket_size": 2.5, "max_position": 32}, TypeError, "bucket_size"),
        ({"bucket_size": 8}, ValueError, "max_position"),
        ({"max_position": 32}, ValueError, "max_position"),
        ({"bucket_size": 8, "max_position": 4}, ValueError, "max_position"),
        ({"bucket_size": 8, "max_position": 32, "convention": "x"}, ValueError, "convention"),
    ],
)
def test_deberta_relative_positions_refuse_bad_settings_by_name(
    kwargs: dict, error: type, named: str
) -> None:
    with pytest.raises(error, match=named):
        posenc.deberta_relative_positions(4, 4, **kwargs)


def test_disentangled_index_clamps_to_the_span() -> None:
    rel = posenc.deberta_relative_positions(6, 6)
    got = posenc.disentangled_index(rel, 2)
    np.testing.assert_array_equal(got, np.clip(rel + 2, 0, 3))
    assert got.dtype == np.int64
    assert got.min() == 0
    assert got.max() == 3


@pytest.mark.parametrize(
    ("rel", "span", "error", "named"),
    [
        (np.zeros((2, 2)), 2, TypeError, "relative_positions"),
        (np.zeros((2, 2), dtype=bool), 2, TypeError, "relative_positions"),
        (np.zeros((2, 2), dtype=np.int64), 0, ValueError, "att_span"),
        (np.zeros((2, 2), dtype=np.int64), 1.5, TypeError, "att_span"),
        (np.zeros((2, 2), dtype=np.int64), True, TypeError, "att_span"),
    ],
)
def test_disentangled_index_refuses_bad_input_by_name(
    rel: np.ndarray, span: object, error: type, named: str
) -> None:
    with pytest.raises(error, match=named):
        posenc.disentangled_index(rel, span)  # type: ignore[arg-type]


@given(q=st.integers(1, 9), k=st.integers(1, 9), extra=st.integers(0, 5))
def test_relative_shift_index_reads_row_q_minus_1_minus_i_plus_j(
    q: int, k: int, extra: int
) -> None:
    rows = q + k - 1 + extra
    got = posenc.relative_shift_index(q, k, rows=rows)
    i, j = np.ogrid[:q, :k]
    np.testing.assert_array_equal(got, np.broadcast_to(q - 1 - i + j, (q, k)))
    assert got.dtype == np.int64


def test_relative_shift_index_on_the_conformer_table_reads_query_minus_key() -> None:
    length, d = 6, 8
    table = posenc.relative_sinusoid_table(length, d, dtype=np.float64)
    rows = posenc.relative_shift_index(length, length, rows=2 * length - 1)
    i, j = np.ogrid[:length, :length]
    want = posenc.sinusoidal((i - j).reshape(-1), d, dtype=np.float64)
    np.testing.assert_array_equal(table[rows].reshape(-1, d), want)


def test_relative_shift_index_defaults_to_self_attention_and_q_plus_k_minus_1_rows() -> None:
    np.testing.assert_array_equal(posenc.relative_shift_index(3), [[2, 3, 4], [1, 2, 3], [0, 1, 2]])
    assert posenc.relative_shift_index(2, 5).shape == (2, 5)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "named"),
    [
        ((3, 3), {"rows": 4}, ValueError, "rows"),
        ((0,), {}, ValueError, "query_length"),
        ((3, 0), {}, ValueError, "key_length"),
        ((3.0,), {}, TypeError, "query_length"),
        ((3, 3), {"rows": 2.5}, TypeError, "rows"),
    ],
)
def test_relative_shift_index_refuses_bad_input_by_name(
    args: tuple, kwargs: dict, error: type, named: str
) -> None:
    with pytest.raises(error, match=named):
        posenc.relative_shift_index(*args, **kwargs)


def test_disentangled_index_of_one_relative_position_is_a_0d_array() -> None:
    got = posenc.disentangled_index(-1, 2)
    assert isinstance(got, np.ndarray)
    assert got.shape == ()
    assert got.dtype == np.int64
    assert int(got) == 1


# -- relative keys: the clipped relative-distance index ----------------------------------------


def _index_by_hand(
    queries: list[int], keys: list[int], left: int, right: int, sign: str, folded: bool,
    offset: int | None,
) -> list[list[int]]:  # fmt: skip
    rows = []
    for i in queries:
        row = []
        for j in keys:
            delta = j - i if sign == "key - query" else i - j
            clipped = min(max(delta, -left), right)
            row.append(abs(clipped) if folded else clipped + (left if offset is None else offset))
        rows.append(row)
    return rows


@given(
    queries=st.lists(st.integers(-(2**53), 2**53), min_size=1, max_size=6),
    keys=st.lists(st.integers(-(2**53), 2**53), min_size=1, max_size=6),
    left=st.integers(0, 2**53),
    right=st.integers(0, 2**53),
    sign=st.sampled_from(["key - query", "query - key"]),
    folded=st.booleans(),
    extra=st.one_of(st.none(), st.integers(0, 2**20)),
)
def test_relative_key_index_is_the_clipped_distance_by_hand(
    queries: list[int], keys: list[int], left: int, right: int, sign: str, folded: bool,
    extra: int | None,
) -> None:  # fmt: skip
    offset = None if folded or extra is None else min(left + extra, 2**53)
    got = posenc.relative_key_index(
        queries,
        keys,
        left=left,
        right=right,
        sign=sign,
        folded=folded,
        offset=offset,  # type: ignore[arg-type]
    )
    assert got.dtype == np.int64
    assert got.tolist() == _index_by_hand(queries, keys, left, right, sign, folded, offset)


def test_relative_key_index_of_lengths_counts_from_zero() -> None:
    np.testing.assert_array_equal(
        posenc.relative_key_index(3, 2, left=1, right=0), [[1, 1], [0, 1], [0, 0]]
    )
    assert posenc.relative_key_index(0, 4, left=1, right=1).shape == (0, 4)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"left": -1, "right": 1}, ValueError, "left must be an integer >= 0, got -1"),
        ({"left": 1, "right": 1.0}, TypeError, "right must be an integer >= 0"),
        ({"left": 2**53 + 1, "right": 1}, ValueError, "left must be at most 2\\*\\*53"),
        ({"left": 1, "right": 1, "sign": "i - j"}, ValueError, "sign must be one of"),
        ({"left": 1, "right": 1, "folded": 1}, TypeError, "folded must be True or False"),
        ({"left": 3, "right": 1, "offset": 2}, ValueError, "offset must be an integer >= 3"),
        ({"left": 1, "right": 1, "folded": True, "offset": 1}, ValueError, "offset applies"),
    ],
)
def test_relative_key_index_refuses_bad_settings_by_name(
    kwargs: dict[str, object], error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        posenc.relative_key_index(2, 2, **kwargs)  # type: ignore[arg-type]


def test_relative_key_index_refuses_positions_by_name() -> None:
    with pytest.raises(ValueError, match="query_positions"):
        posenc.relative_key_index([2**60], 2, left=1, right=1)
    with pytest.raises(TypeError, match="key_positions"):
        posenc.relative_key_index(2, [0.5], left=1, right=1)
