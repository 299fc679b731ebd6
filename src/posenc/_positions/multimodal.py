"""Multimodal position ids: the ``(t, h, w)`` coordinates Qwen-VL models give every token.

A multimodal sequence of Qwen2-VL, Qwen2.5-VL or Qwen3-VL is text interleaved with runs of
image and video tokens; M-RoPE (:func:`posenc.multi_axis_cos_sin`) then needs one ``(t, h, w)``
triple per token. The rule, as ``get_rope_index`` of transformers 5.23 computes it:

- a **text** token at running position ``p`` gets ``(p, p, p)``, and ``p`` advances by one;
- an **image or video** of patch grid ``(T, H, W)`` (``image_grid_thw`` / ``video_grid_thw``),
  merged ``m × m`` by the vision tower (``spatial_merge_size``), is ``T·(H/m)·(W/m)`` tokens
  in row-major ``(t, h, w)`` order; token ``(j, y, x)`` gets ``(p + τ_j, p + y, p + x)``, and
  ``p`` then advances by ``max(H, W) / m``;
- ``τ_j = j`` (Qwen2-VL; images), or for the videos of Qwen2.5-VL ``τ_j = trunc(j · i)``
  with the interval ``i = tokens_per_second · seconds_per_grid`` (``second_per_grid_ts``),
  computed in float32 as transformers computes it from the float32 ``second_per_grid_ts``
  its processors return;
- Qwen3-VL puts a timestamp before every frame: each video of ``T`` frames is ``T`` grids
  ``(1, H, W)``, one per run of video tokens (``split_frames=True``);
- padding (``attention_mask`` 0) is skipped and gets ``(0, 0, 0)``.

``deltas`` is what transformers returns as ``rope_deltas``: the largest id + 1 minus the
number of tokens. Decoding after the prompt continues as text at ``cache length + delta``
on every axis.

Beyond transformers' one-sequence rule, the same ids for packed sequences (``segment_ids``:
each document numbered alone, grids taken in order) and for a shard of the sequence
(``shard=(start, stop)``: the ids of those tokens only, equal to that slice of the whole).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._checks import _show, check_bool, check_int, check_real, check_sequence

__all__ = ["MultimodalPositions", "multimodal_positions"]

IntArray = npt.NDArray[np.int64]

TEXT, IMAGE, VIDEO = 0, 1, 2
_KIND = {IMAGE: "image", VIDEO: "video"}


class MultimodalPositions(NamedTuple):
    """The ``(t, h, w)`` ids of a multimodal batch and its rope deltas.

    Attributes:
        positions: int64 ``(..., s, 3)``: one ``(t, h, w)`` per token (``(0, 0, 0)`` at
            padding); Hugging Face's ``position_ids`` ``(3, b, s)`` are
            ``np.moveaxis(positions, -1, 0)``.
        deltas: int64 ``(...)``: per row, the largest id + 1 minus the number of tokens, of
            its last document (transformers' ``rope_deltas`` ``(b, 1)`` is
            ``deltas[:, None]``).
    """

    positions: IntArray
    deltas: IntArray


class _Grid(NamedTuple):
    """One image or video as the language model sees it: ``t × h × w`` merged tokens."""

    t: int
    h: int
    w: int
    interval: np.float32 | None  # the temporal step (videos of Qwen2.5-VL); None: 1

    @property
    def tokens(self) -> int:
        return self.t * self.h * self.w

    @property
    def largest(self) -> int:
        """The largest offset of its ids from the running position."""
        return max(int(self._times(np.array([self.t - 1]))[0]), self.h - 1, self.w - 1)

    def _times(self, j: IntArray) -> IntArray:
        if self.interval is None:
            return j
        return (j.astype(np.float32) * self.interval).astype(np.int64)  # float32, truncated

    def ids(self, start: int, stop: int) -> IntArray:
        """The offsets ``(stop - start, 3)`` of its tokens ``start .. stop-1``."""
        k = np.arange(start, stop, dtype=np.int64)
        plane = self.h * self.w
        return np.stack([self._times(k // plane), (k % plane) // self.w, k % self.w], axis=-1)


def _int_array(
    name: str, value: Any, *, ndim: int | None = None, booleans: bool = False
) -> IntArray:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an integer array, got {_show(value)}") from exc
    if array.size == 0 and array.dtype.kind == "f":  # [] comes out as float64
        array = array.astype(np.int64)
    if array.dtype.kind not in ("biu" if booleans else "iu"):
        raise TypeError(f"{name} must be an integer array, got dtype {array.dtype}")
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {array.shape}")
    return array.astype(np.int64)


def _check_grids(name: str, grids: Any, merge: int) -> list[tuple[int, int, int]]:
    if grids is None:
        return []
    array = _int_array(name, grids)
    if array.ndim != 2 or array.shape[1] != 3:
        raise ValueError(f"{name} must have shape (n, 3): one (t, h, w) per row, got {array.shape}")
    for i, (t, h, w) in enumerate(array.tolist()):
        if min(t, h, w) < 1 or h % merge or w % merge:
            raise ValueError(
                f"{name}[{i}] must be (t, h, w) >= 1 with h and w multiples of spatial_merge = "
                f"{merge}, got {(t, h, w)}"
            )
    return [(t, h, w) for t, h, w in array.tolist()]


def _same_shape(name: str, value: Any, shape: tuple[int, ...], kinds: str) -> IntArray | None:
    if value is None:
        return None
    array = _int_array(name, value, booleans=kinds == "01")  # a mask may be boolean
    if array.shape != shape:
        raise ValueError(f"{name} must have the shape of token_types {shape}, got {array.shape}")
    if kinds == "01" and not np.all((array == 0) | (array == 1)):
        raise ValueError(f"{name} must contain only 0/1 (or False/True) values")
    return array


def _video_intervals(
    n_videos: int, tokens_per_second: Any, seconds_per_grid: Any
) -> list[np.float32 | None]:
    """The temporal step of each video: float32 ``tokens_per_second · seconds``, or None."""
    if tokens_per_second is None:
        if seconds_per_grid is not None:
            raise TypeError("seconds_per_grid needs tokens_per_second (Qwen2.5-VL's config)")
        return [None] * n_videos
    rate = check_real("tokens_per_second", tokens_per_second)
    if rate <= 0:
        raise ValueError(f"tokens_per_second must be a positive number, got {rate!r}")
    if seconds_per_grid is None:
        seconds = [1.0] * n_videos  # transformers' default
    else:
        seconds = check_sequence("seconds_per_grid", seconds_per_grid, "one number per video")
        if len(seconds) != n_videos:
            raise ValueError(
                f"seconds_per_grid must give one value per video ({n_videos}), got {len(seconds)}"
            )
        seconds = [check_real(f"seconds_per_grid[{i}]", s) for i, s in enumerate(seconds)]
        if min(seconds, default=0.0) < 0:
            raise ValueError(f"seconds_per_grid must be >= 0, got {seconds}")
    return [np.float32(rate) * np.float32(s) for s in seconds]


def _check_shard(shard: Any, length: int) -> tuple[int, int]:
    if shard is None:
        return 0, length
    if isinstance(shard, slice):
        if shard.step not in (None, 1):
            raise ValueError(f"shard must be a contiguous slice, got step {shard.step}")
        shard = shard.indices(length)[:2]
    items = check_sequence("shard", shard, "(start, stop) or a slice of the sequence")
    if len(items) != 2:
        raise ValueError(f"shard must be (start, stop), got {tuple(items)!r}")
    start = check_int("shard start", items[0], minimum=0)
    stop = check_int("shard stop", items[1], minimum=start)
    if stop > length:
        raise ValueError(
            f"shard must lie within the sequence of {length} tokens, got {start, stop}"
        )
    return start, stop


class _Piece(NamedTuple):
    """Real tokens ``start .. stop-1`` of a row: text, or one image or video."""

    start: int
    stop: int
    position: int  # the running position at its first token
    grid: _Grid | None  # None: text

    def ids(self, lo: int, hi: int) -> IntArray:
        """The ids ``(hi - lo, 3)`` of its tokens ``lo .. hi-1`` (counted from its start)."""
        if self.grid is None:
            return np.repeat((self.position + np.arange(lo, hi, dtype=np.int64))[:, None], 3, 1)
        return self.grid.ids(lo, hi) + self.position


class _Queue:
    """The images and videos, taken in order by the runs of their tokens (rows in order)."""

    def __init__(self, grids: dict[int, list[_Grid]]) -> None:
        self.grids = grids
        self.taken = {IMAGE: 0, VIDEO: 0}

    def take(self, kind: int) -> _Grid:
        i = self.taken[kind]
        if i >= len(self.grids[kind]):
            raise ValueError(
                f"token_types hold more {_KIND[kind]}s than {_KIND[kind]}_grids gives "
                f"({len(self.grids[kind])}): every run of {_KIND[kind]} tokens needs its grid"
            )
        self.taken[kind] = i + 1
        return self.grids[kind][i]

    def check_all_taken(self) -> None:
        for kind, grids in self.grids.items():
            if self.taken[kind] != len(grids):
                raise ValueError(
                    f"{_KIND[kind]}_grids gives {len(grids)} grids but the token_types hold "
                    f"{self.taken[kind]} {_KIND[kind]}s"
                )


def _layout(
    types: IntArray, segments: IntArray | None, queue: _Queue, row: int
) -> tuple[list[_Piece], int]:
    """The pieces of one row's real tokens, and its delta (of its last document)."""
    n = types.shape[0]
    if n == 0:
        return [], 0
    new_doc = np.zeros(n, dtype=bool)
    new_doc[:1] = True
    if segments is not None:
        new_doc[1:] = segments[1:] != segments[:-1]
    change = new_doc.copy()
    change[1:] |= types[1:] != types[:-1]
    starts = np.flatnonzero(change).tolist()
    pieces: list[_Piece] = []
    position, largest, first = 0, -1, 0
    for a, b in zip(starts, [*starts[1:], n], strict=True):
        if new_doc[a]:
            position, largest, first = 0, -1, a
        kind = int(types[a])
        if kind == TEXT:
            pieces.append(_Piece(a, b, position, None))
            largest = max(largest, position + b - a - 1)
            position += b - a
            continue
        k = a
        while k < b:
            grid = queue.take(kind)
            if grid.tokens > b - k:
                raise ValueError(
                    f"token_types row {row}: a run of {b - a} {_KIND[kind]} tokens (real tokens "
                    f"{a}..{b - 1}) does not match its {_KIND[kind]}_grids: "
                    f"{_KIND[kind]}_grids[{queue.taken[kind] - 1}] is "
                    f"{grid.t} x {grid.h} x {grid.w} = {grid.tokens} merged tokens"
                )
            pieces.append(_Piece(k, k + grid.tokens, position, grid))
            largest = max(largest, position + grid.largest)
            position += max(grid.h, grid.w)
            k += grid.tokens
    return pieces, largest + 1 - (n - first)


def _fill(out: IntArray, pieces: list[_Piece], real: IntArray, start: int, stop: int) -> None:
    """Write the ids of the real tokens within ``start .. stop-1`` into ``out`` (that slice)."""
    lo, hi = np.searchsorted(real, [start, stop]).tolist()
    for piece in pieces:
        a, b = max(piece.start, lo), min(piece.stop, hi)
        if a < b:
            out[real[a:b] - start] = piece.ids(a - piece.start, b - piece.start)


def _queue(
    images: list[tuple[int, int, int]],
    videos: list[tuple[int, int, int]],
    merge: int,
    intervals: list[np.float32 | None],
    split: bool,
) -> _Queue:
    if split:  # one grid per frame, as the timestamps between frames split the runs
        videos = [(1, h, w) for t, h, w in videos for _ in range(t)]
        intervals = [None] * len(videos)
    made = {IMAGE: [_Grid(t, h // merge, w // merge, None) for t, h, w in images]}
    made[VIDEO] = [
        _Grid(t, h // merge, w // merge, i) for (t, h, w), i in zip(videos, intervals, strict=True)
    ]
    for i, grid in enumerate(made[VIDEO]):
        if grid.interval is not None and not (grid.t - 1) * float(grid.interval) < 2**53:
            raise ValueError(
                f"video {i}: tokens_per_second x seconds_per_grid = {grid.interval} over "
                f"{grid.t} grids gives temporal ids beyond 2**53"
            )
    return _Queue(made)


def multimodal_positions(
    token_types: Any,
    *,
    image_grids: Any = None,
    video_grids: Any = None,
    spatial_merge: int = 1,
    attention_mask: Any = None,
    tokens_per_second: float | None = None,
    seconds_per_grid: Any = None,
    split_frames: bool = False,
    segment_ids: Any = None,
    shard: Any = None,
) -> MultimodalPositions:
    """The ``(t, h, w)`` position ids of a multimodal batch, as Qwen-VL models compute them.

    The rule is in the module docstring: text advances by one on every axis, an image or a
    video is laid out over its merged grid from the running position, which then advances by
    ``max(H, W) / spatial_merge``. Reproduces ``get_rope_index`` of transformers 5.23's
    Qwen2-VL, Qwen2.5-VL and Qwen3-VL models.

    Args:
        token_types: integer array ``(..., s)``: 0 text, 1 image, 2 video for each token
            (transformers' ``mm_token_type_ids``; from ``input_ids``:
            ``(ids == image_token_id) + 2 * (ids == video_token_id)``). A run of image
            (video) tokens is one or more whole grids of ``image_grids`` (``video_grids``).
        image_grids, video_grids: ``(n, 3)`` integer ``(T, H, W)`` patch grids, in the order
            of the tokens (rows in order): ``image_grid_thw``, ``video_grid_thw``.
        spatial_merge: the vision tower's ``spatial_merge_size`` ``m`` (2 for Qwen-VL): a
            grid is ``T·(H/m)·(W/m)`` tokens; ``H`` and ``W`` must be multiples of it.
        attention_mask: ``(..., s)`` 0/1, or None: padding (0) is skipped and gets
            ``(0, 0, 0)``, left or right.
        tokens_per_second: Qwen2.5-VL's ``vision_config.tokens_per_second``: video grid ``j``
            gets temporal id ``trunc(j · tokens_per_second · seconds)``, in float32 as
            transformers computes it. None (Qwen2-VL, Qwen3-VL): ``j``.
        seconds_per_grid: seconds per temporal grid of each video (``second_per_grid_ts``);
            default 1.0 each, as transformers. Needs ``tokens_per_second``.
        split_frames: Qwen3-VL: every video frame is its own grid ``(1, H, W)`` (timestamp
            tokens separate the frames' runs).
        segment_ids: ``(..., s)`` integers, or None: packed sequences, a document wherever
            the id changes (as :func:`posenc.positions_from_segments`); each is numbered
            alone, from 0.
        shard: ``(start, stop)`` or a ``slice``: return the ids of tokens ``start .. stop-1``
            of the sequence only (sequence parallelism), equal to that slice of the whole.

    Returns:
        :class:`MultimodalPositions`: ``positions`` int64 ``(..., stop - start, 3)`` and
        ``deltas`` int64 ``(...)`` (transformers' ``rope_deltas`` without its last axis).

    Raises:
        ValueError: a run of image or video tokens that is not whole grids, more runs than
            grids or grids left over, values other than 0/1/2, shapes that disagree.

    >>> types = [0, 0, 1, 1, 1, 1, 0]          # two text tokens, a 2 x 2 image, one text token
    >>> ids, deltas = multimodal_positions(types, image_grids=[[1, 4, 4]], spatial_merge=2)
    >>> ids.T
    array([[0, 1, 2, 2, 2, 2, 4],
           [0, 1, 2, 2, 3, 3, 4],
           [0, 1, 2, 3, 2, 3, 4]])
    >>> int(deltas)                            # the next token is at 7 + (-2) = 5
    -2
    """
    types = _int_array("token_types", token_types)
    if types.ndim == 0:
        raise ValueError("token_types must have at least one axis (the sequence), got a scalar")
    if types.size and not np.all((types >= TEXT) & (types <= VIDEO)):
        bad = types[(types < TEXT) | (types > VIDEO)][0]
        raise ValueError(f"token_types must hold 0 (text), 1 (image) or 2 (video), got {bad}")
    merge = check_int("spatial_merge", spatial_merge, minimum=1)
    split = check_bool("split_frames", split_frames)
    images = _check_grids("image_grids", image_grids, merge)
    videos = _check_grids("video_grids", video_grids, merge)
    if split and (tokens_per_second is not None or seconds_per_grid is not None):
        raise TypeError(
            "tokens_per_second and seconds_per_grid do not apply with split_frames=True "
            "(every frame is its own grid, t = 1)"
        )
    intervals = _video_intervals(len(videos), tokens_per_second, seconds_per_grid)
    mask = _same_shape("attention_mask", attention_mask, types.shape, "01")
    segments = _same_shape("segment_ids", segment_ids, types.shape, "int")
    length = types.shape[-1]
    start, stop = _check_shard(shard, length)
    queue = _queue(images, videos, merge, intervals, split)
    lead = types.shape[:-1]
    count = int(np.prod(lead))
    rows = types.reshape(count, length)
    out = np.zeros((count, stop - start, 3), dtype=np.int64)
    deltas = np.zeros(count, dtype=np.int64)
    for r in range(count):
        real = np.arange(length) if mask is None else np.flatnonzero(mask.reshape(count, -1)[r])
        segs = None if segments is None else segments.reshape(count, -1)[r, real]
        pieces, deltas[r] = _layout(rows[r, real], segs, queue, r)
        _fill(out[r], pieces, real, start, stop)
    queue.check_all_taken()
    return MultimodalPositions(out.reshape(*lead, stop - start, 3), deltas.reshape(lead))
