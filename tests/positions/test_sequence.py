"""Position ids from masks, packed segments, cu_seqlens and fairseq-style token ids."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc


def test_mask_left_and_right_padding() -> None:
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    expected = [[0, 0, 0, 1, 2], [0, 1, 2, 0, 0], [0, 1, 2, 3, 4]]
    out = posenc.positions_from_mask(mask)
    assert out.dtype == np.int64
    assert out.tolist() == expected
    assert posenc.positions_from_mask(mask.astype(bool)).tolist() == expected


def test_mask_offset_and_pad_position() -> None:
    mask = [[0, 1, 1]]
    assert posenc.positions_from_mask(mask, offset=7).tolist() == [[0, 7, 8]]
    assert posenc.positions_from_mask(mask, pad_position=1).tolist() == [[1, 0, 1]]


def test_mask_incremental_equals_full() -> None:
    """Decoding step by step with offset = real tokens so far equals the full computation."""
    mask = np.array([0, 0, 1, 1, 1, 1])
    full = posenc.positions_from_mask(mask)
    seen = int(mask[:3].sum())
    assert posenc.positions_from_mask(mask[3:], offset=seen).tolist() == full[3:].tolist()


@pytest.mark.parametrize(
    ("mask", "error", "match"),
    [
        ([[0, 2, 1]], ValueError, "mask must contain only 0/1"),
        ([[0.5, 1.0]], TypeError, "mask must be an integer array, got dtype float64"),
        (3, ValueError, "mask must have at least one axis"),
    ],
)
def test_mask_errors(mask: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        posenc.positions_from_mask(mask)


def test_mask_offset_error() -> None:
    with pytest.raises(ValueError, match="offset must be an integer >= 0, got -1"):
        posenc.positions_from_mask([[1, 1]], offset=-1)


def test_segments_restart_per_document() -> None:
    seg = [[0, 0, 0, 1, 1, 2], [5, 5, 5, 5, 5, 5]]
    assert posenc.positions_from_segments(seg).tolist() == [[0, 1, 2, 0, 1, 0], list(range(6))]
    assert posenc.positions_from_segments([[]]).shape == (1, 0)


@given(st.lists(st.integers(0, 6), min_size=1, max_size=8))
def test_segments_and_cu_seqlens_agree(lengths: list[int]) -> None:
    cu = np.concatenate([[0], np.cumsum(lengths)])
    doc = np.repeat(np.arange(len(lengths)), lengths)
    from_cu = posenc.positions_from_cu_seqlens(cu)
    assert from_cu.shape == (sum(lengths),)
    assert from_cu.tolist() == [i for n in lengths for i in range(n)]
    if doc.size:
        assert np.array_equal(posenc.positions_from_segments(doc), from_cu)


@pytest.mark.parametrize(
    ("cu", "match"),
    [
        ([1, 3], "must start at 0, got 1"),
        ([0, 4, 2], "non-decreasing"),
        ([], "empty"),
        ([[0, 1]], "must be 1-D"),
    ],
)
def test_cu_seqlens_errors(cu: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        posenc.positions_from_cu_seqlens(np.asarray(cu, dtype=np.int64))


def test_tokens_fairseq_numbering() -> None:
    tokens = [[1, 1, 7, 8, 9], [5, 6, 7, 8, 1]]
    assert posenc.positions_from_tokens(tokens, padding_idx=1).tolist() == [
        [1, 1, 2, 3, 4],
        [2, 3, 4, 5, 1],
    ]
    assert posenc.positions_from_tokens([[4, 5]], padding_idx=0, offset=3).tolist() == [[4, 5]]


def test_tokens_errors() -> None:
    with pytest.raises(TypeError, match="tokens must be an integer array"):
        posenc.positions_from_tokens([[1.0, 2.0]], padding_idx=1)
    with pytest.raises(ValueError, match="padding_idx must be an integer >= 0, got -1"):
        posenc.positions_from_tokens([[1, 2]], padding_idx=-1)
    with pytest.raises(TypeError, match="padding_idx must be an integer"):
        posenc.positions_from_tokens([[1, 2]], padding_idx=None)  # type: ignore[arg-type]
