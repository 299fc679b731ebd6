"""Position ids: where each token sits, for padding, packing, caching and fairseq numbering.

All functions take and return NumPy integer arrays (int64). The last axis is the sequence.

============================  ==================================================================
function                      positions it returns
============================  ==================================================================
``positions_from_mask``       0, 1, 2, ... over the real tokens of a (left or right) padded batch
``positions_from_segments``   restart at 0 whenever the segment id changes (packed documents)
``positions_from_cu_seqlens`` restart at 0 at every boundary of flattened packed sequences
``positions_from_tokens``     fairseq / M2M100: ``padding_idx + 1 + i`` for real tokens, pads at
                              ``padding_idx``
``compressed_positions``      DeepSeek-V4's compressed entries: ``n·ratio``, the first token of
                              each closed window of ``ratio`` tokens
============================  ==================================================================

``offset`` shifts the positions of real tokens, for incremental decoding with a cache: the first
new token of step ``t`` has position ``offset`` = number of real tokens already seen. Every
position returned lies within +-2**53, the limit of the encodings (float64 holds integers
exactly up to it): an ``offset`` (or ``pad_position``, ``padding_idx``) that would take one
beyond raises a ``ValueError`` naming it, so no position ever wraps around int64.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import (
    MAX_EXACT_POSITION,
    _show,
    as_int64,
    as_length,
    check_allocation,
    check_int,
    check_offset,
    check_position_magnitude,
    check_positions,
)

__all__ = [
    "compressed_positions",
    "positions_array",
    "positions_from_cu_seqlens",
    "positions_from_mask",
    "positions_from_segments",
    "positions_from_tokens",
    "table_positions",
]

IntArray = npt.NDArray[np.int64]


def positions_array(positions: Any) -> npt.NDArray[Any]:
    """Checked positions: an int L means 0..L-1; anything else is an array of positions.

    Integer positions (any width, signed or unsigned) come back as int64 (exact), real ones
    as float64; every value must lie within +-2**53 (where float64 holds integers exactly),
    so a length may be at most 2**53 + 1. A bare real number is refused (see
    :func:`posenc._checks.as_length`).

    >>> positions_array(3)
    array([0, 1, 2])
    >>> positions_array([[1.5, -2]]).dtype
    dtype('float64')
    """
    length = as_length("positions", positions)
    if length is not None:
        check_allocation("positions", (length,), 8)
        return np.arange(length, dtype=np.int64)
    array = check_positions("positions", positions)
    if array.size:  # .item(): exact Python ints for integer positions
        check_position_magnitude("positions", array.min().item(), array.max().item())
    return array


def table_positions(
    positions: Any, names: str, width: int, itemsize: int, copies: int = 1
) -> npt.NDArray[Any]:
    """:func:`positions_array` for a table of ``copies`` arrays ``(rows, width)``: a table
    that cannot fit in memory is refused first, before even the positions ``0..L-1`` of a
    length are made (:func:`posenc._checks.check_allocation`, naming ``names``)."""
    length = as_length("positions", positions)
    if length is not None:
        check_allocation(names, (length, width), itemsize, copies)
    array = positions_array(positions)
    check_allocation(names, (array.size, width), itemsize, copies)
    return array


def _as_sequence_array(name: str, value: Any, kinds: str) -> npt.NDArray[Any]:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array, got {_show(value)}") from exc
    if array.size == 0 and array.dtype.kind == "f":  # [] and [[]] come out as float64
        array = array.astype(np.int64)
    if array.dtype.kind not in kinds:
        raise TypeError(f"{name} must be an integer array, got dtype {array.dtype}")
    if array.ndim == 0:
        raise ValueError(f"{name} must have at least one axis (the sequence), got a scalar")
    return array


def positions_from_mask(mask: Any, *, offset: int = 0, pad_position: int = 0) -> IntArray:
    """Positions of the real tokens of a padded batch, counted from ``offset``.

    Args:
        mask: array of shape ``(..., s)``, 1/True for real tokens and 0/False for padding
            (HF ``attention_mask``). Padding may be on the left, the right, or both.
        offset: position of the first real token (tokens already in a KV cache), int >= 0;
            the last position, ``offset + (real tokens in the row) - 1``, must be <= 2**53.
        pad_position: the value written at padding (it is masked anyway), int in [0, 2**53].

    Returns:
        int64 array of the same shape as ``mask``.

    >>> positions_from_mask([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]])
    array([[0, 0, 0, 1, 2],
           [0, 1, 2, 3, 0]])
    >>> positions_from_mask([[0, 1, 1]], offset=4)
    array([[0, 4, 5]])
    """
    array = _as_sequence_array("mask", mask, "biu")
    if array.dtype.kind != "b" and array.size and not np.all((array == 0) | (array == 1)):
        raise ValueError("mask must contain only 0/1 (or False/True) values")
    check_int("offset", offset, minimum=0)
    pad_position = check_int("pad_position", pad_position, minimum=0)
    if pad_position > MAX_EXACT_POSITION:
        raise ValueError(f"pad_position must be an integer in [0, 2**53], got {pad_position}")
    real = array.astype(bool)
    counts = np.cumsum(real, axis=-1, dtype=np.int64)  # at most s: never wraps
    offset = check_offset("offset", offset, _most(counts) - 1)
    return np.where(real, counts - 1 + offset, pad_position).astype(np.int64)


def _most(counts: IntArray) -> int:
    """The largest running count (0 for none): the last column holds each row's total."""
    return int(counts[..., -1].max()) if counts.size else 0


def positions_from_segments(segment_ids: Any) -> IntArray:
    """Positions that restart at 0 wherever the segment id changes along the last axis.

    Use for packed sequences: several documents concatenated in one row, each numbered from 0.

    Args:
        segment_ids: integer array ``(..., s)``; a run of equal ids is one document.

    Returns:
        int64 array of the same shape.

    >>> positions_from_segments([[0, 0, 0, 1, 1, 2]])
    array([[0, 1, 2, 0, 1, 0]])
    """
    seg = _as_sequence_array("segment_ids", segment_ids, "iu")
    length = seg.shape[-1]
    index = np.broadcast_to(np.arange(length, dtype=np.int64), seg.shape)
    starts = np.ones(seg.shape, dtype=bool)
    starts[..., 1:] = seg[..., 1:] != seg[..., :-1]
    start_index = np.maximum.accumulate(np.where(starts, index, 0), axis=-1)
    return (index - start_index).astype(np.int64)


def positions_from_cu_seqlens(cu_seqlens: Any) -> IntArray:
    """Positions of flattened packed sequences given cumulative lengths (flash-attn varlen).

    Args:
        cu_seqlens: 1-D integer array ``[0, l_0, l_0 + l_1, ...]``, starting at 0 and
            non-decreasing (empty sequences allowed).

    Returns:
        int64 array of shape ``(cu_seqlens[-1],)``.

    >>> positions_from_cu_seqlens([0, 3, 5, 9])
    array([0, 1, 2, 0, 1, 0, 1, 2, 3])
    """
    cu = as_int64("cu_seqlens", _as_sequence_array("cu_seqlens", cu_seqlens, "iu"))
    if cu.ndim != 1:
        raise ValueError(f"cu_seqlens must be 1-D, got shape {cu.shape}")
    if cu.size == 0:
        raise ValueError("cu_seqlens must start with 0, got an empty array")
    if cu[0] != 0:
        raise ValueError(f"cu_seqlens must start at 0, got {int(cu[0])}")
    lengths = np.diff(cu)
    if np.any(lengths < 0):
        raise ValueError(f"cu_seqlens must be non-decreasing, got {cu.tolist()[:16]}")
    total = int(cu[-1])
    check_allocation("cu_seqlens", (total,), 8, 2)  # the positions and the repeated starts
    return np.arange(total, dtype=np.int64) - np.repeat(cu[:-1], lengths)


def positions_from_tokens(tokens: Any, padding_idx: int, *, offset: int = 0) -> IntArray:
    """fairseq / M2M100 numbering: real tokens get ``padding_idx + 1 + offset + i``.

    Padding tokens (equal to ``padding_idx``) get ``padding_idx``, whose row fairseq zeroes.
    This is fairseq ``utils.make_positions`` and transformers
    ``M2M100...create_position_ids_from_input_ids`` (``offset`` = ``past_key_values_length``).

    Args:
        tokens: integer token ids ``(..., s)``.
        padding_idx: the padding token id, int >= 0.
        offset: tokens already processed (incremental decoding), int >= 0. The last position,
            ``padding_idx + offset + (real tokens in the row)``, must be <= 2**53.

    Returns:
        int64 array of the same shape as ``tokens``.

    >>> positions_from_tokens([[1, 1, 7, 8, 9], [5, 6, 7, 8, 1]], padding_idx=1)
    array([[1, 1, 2, 3, 4],
           [2, 3, 4, 5, 1]])
    """
    tok = _as_sequence_array("tokens", tokens, "iu")
    padding_idx = check_int("padding_idx", padding_idx, minimum=0)
    check_int("offset", offset, minimum=0)
    real = tok != padding_idx
    counts = np.cumsum(real, axis=-1, dtype=np.int64)  # at most s: never wraps
    most = _most(counts)
    padding_idx = check_offset("padding_idx", padding_idx, most)
    offset = check_offset("offset", offset, padding_idx + most)
    result: IntArray = ((counts + offset) * real + padding_idx).astype(np.int64)
    return result


def compressed_positions(tokens: int, ratio: int, *, emitted: int = 0) -> IntArray:
    """Positions of the entries a compressor emits (DeepSeek-V4's compressed attention).

    A compressor closes a window every ``ratio`` tokens (tokens ``n·ratio .. n·ratio + ratio −
    1``) and emits one entry for it, rotated at ``n·ratio``: its last token's position plus one,
    less the ratio (``write_pos + 1 − ratio``). transformers' DeepSeek-V4 compressors rotate
    their entries at these positions (``positions * compress_rate + first_window_position``).

    Args:
        tokens: the tokens seen so far (the cache's and the new ones), an int >= 0.
        ratio: tokens per window (``compress_rates``: 4, or 128), an int >= 1.
        emitted: entries emitted before (a cache's count); the windows from ``emitted`` on are
            returned. An int in ``[0, tokens // ratio]``.

    Returns:
        int64 ``(tokens // ratio − emitted,)``: ``n·ratio`` for each window closed since.

    >>> compressed_positions(10, 4)
    array([0, 4])
    >>> compressed_positions(17, 4, emitted=2)
    array([ 8, 12])
    """
    done, closed, every = compressed_windows(tokens, ratio, emitted)
    positions: IntArray = np.arange(done, closed, dtype=np.int64) * every
    return positions


def compressed_windows(tokens: Any, ratio: Any, emitted: Any) -> tuple[int, int, int]:
    """The settings of :func:`compressed_positions`, checked: ``(emitted, closed, ratio)``,
    the windows ``emitted .. closed - 1`` whose positions are ``n·ratio`` (their count known
    to fit in memory). Checks of Python values only: the front-ends build the positions."""
    count = check_int("tokens", tokens, minimum=0)
    every = check_int("ratio", ratio, minimum=1)
    check_position_magnitude("tokens", 0, count)
    check_position_magnitude("ratio", 1, every)  # a window longer than any sequence
    closed = count // every
    done = check_int("emitted", emitted, minimum=0)
    if done > closed:
        raise ValueError(
            f"emitted must be at most the windows closed by tokens={count} at ratio={every} "
            f"({closed}), got {done}"
        )
    check_allocation("tokens and ratio", (closed - done,), 8)
    return done, closed, every
