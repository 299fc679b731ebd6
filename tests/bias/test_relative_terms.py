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
