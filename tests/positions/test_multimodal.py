"""Tests of ``posenc.multimodal_positions`` in NumPy: the ``(t, h, w)`` ids of multimodal batches.

The comparison with the real ``get_rope_index`` of transformers (Qwen2-VL, Qwen2.5-VL,
Qwen3-VL) is in ``tests/references/hf/test_multimodal_positions.py``. Here: the rule on
small cases written out by hand, and the properties beyond one sequence: left padding (the
ids of the unpadded sequence at the real tokens), packed sequences (each document alone,
concatenated) and shards (the same slice of the whole).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc import MultimodalPositions, multimodal_positions

TEXT, IMAGE, VIDEO = 0, 1, 2


def sequence(parts: list[tuple[str, Any]], merge: int = 2, *, split_frames: bool = False):
    """Token types and grids of a sequence given as parts: ``("text", n)``,
    ``("image", (t, h, w))`` or ``("video", (t, h, w))``. With ``split_frames`` (Qwen3-VL),
    a video is its frames, each after two timestamp (text) tokens."""
    types: list[int] = []
    grids: dict[str, list[tuple[int, int, int]]] = {"image": [], "video": []}
    for kind, value in parts:
        if kind == "text":
            types += [TEXT] * value
            continue
        t, h, w = value
        grids[kind].append(value)
        per_frame = (h // merge) * (w // merge)
        code = IMAGE if kind == "image" else VIDEO
        if kind == "video" and split_frames:
            for _ in range(t):
                types += [TEXT, TEXT] + [code] * per_frame
        else:
            types += [code] * (t * per_frame)
    return types, grids["image"], grids["video"]


def random_parts(rng: np.random.Generator, merge: int = 2, n: int | None = None) -> list:
    """A random multimodal sequence: text between images and videos (never two vision parts
    in a row, as the vision start/end tokens of Qwen-VL prompts keep them apart)."""
    parts: list[tuple[str, Any]] = []
    for i in range(int(rng.integers(1, 6)) if n is None else n):
        if i % 2 == 0:
            parts.append(("text", int(rng.integers(1, 6))))
        else:
            kind = "image" if rng.random() < 0.5 else "video"
            t = 1 if kind == "image" else int(rng.integers(1, 5))
            h, w = (merge * int(rng.integers(1, 5)) for _ in range(2))
            parts.append((kind, (t, h, w)))
    return parts


def ids_of(parts, merge=2, **kwargs) -> MultimodalPositions:
    types, images, videos = sequence(parts, merge, split_frames=kwargs.get("split_frames", False))
    return multimodal_positions(
        types, image_grids=images or None, video_grids=videos or None, spatial_merge=merge, **kwargs
    )


# -- the rule, by hand ----------------------------------------------------------------------------


def test_text_image_text_by_hand():
    out = ids_of([("text", 2), ("image", (1, 4, 6)), ("text", 2)])
    assert out.positions.tolist() == [
        [0, 0, 0],
        [1, 1, 1],
        *[[2, 2 + y, 2 + x] for y in range(2) for x in range(3)],  # the 2 x 3 merged grid
        [5, 5, 5],  # 2 + max(2, 3)
        [6, 6, 6],
    ]
    assert out.deltas.tolist() == 7 - 10  # largest 6, + 1, minus 10 tokens


def test_video_frames_and_temporal_scaling_by_hand():
    plain = ids_of([("text", 1), ("video", (3, 2, 4))])
    assert plain.positions[1:, 0].tolist() == [1, 1, 2, 2, 3, 3]  # t = 1 + j
    assert plain.positions[1:, 2].tolist() == [1, 2] * 3
    # Qwen2.5-VL: j · tokens_per_second · seconds, truncated: 0, 1.5 -> 1, 3.0 -> 3
    scaled = ids_of(
        [("text", 1), ("video", (3, 2, 4))], tokens_per_second=2, seconds_per_grid=[0.75]
    )
    assert scaled.positions[1:, 0].tolist() == [1, 1, 2, 2, 4, 4]
    assert scaled.deltas.tolist() == 5 - 7  # largest t = 4
    # text after a video starts max(h, w) / m later, whatever its temporal extent
    after = ids_of([("video", (4, 2, 2)), ("text", 1)], tokens_per_second=4)
    assert after.positions[:, 0].tolist() == [0, 4, 8, 12, 1]
    assert after.deltas.tolist() == 13 - 5


def test_split_frames_by_hand():
    """Qwen3-VL: each frame its own grid, after its timestamp tokens."""
    out = ids_of([("video", (2, 2, 4))], split_frames=True)
    # timestamps 0, 1; frame 0 (1 x 2 merged) at 2; advance max(1, 2): timestamps 4, 5; ...
    assert out.positions[:, 0].tolist() == [0, 1, 2, 2, 4, 5, 6, 6]
    assert out.positions[:, 2].tolist() == [0, 1, 2, 3, 4, 5, 6, 7]


def test_text_only_is_1d_and_deltas_zero():
    out = multimodal_positions(np.zeros((2, 5), dtype=np.int64))
    assert np.array_equal(out.positions, np.broadcast_to(np.arange(5)[:, None], (2, 5, 3)))
    assert out.deltas.tolist() == [0, 0]


# -- padding, packing, shards ---------------------------------------------------------------------


@given(st.integers(0, 2**32 - 1), st.integers(0, 6), st.booleans())
def test_padding_gives_the_unpadded_ids_at_real_tokens(seed, pad, left):
    rng = np.random.default_rng(seed)
    types, images, videos = sequence(random_parts(rng))
    kwargs = {"image_grids": images or None, "video_grids": videos or None, "spatial_merge": 2}
    alone = multimodal_positions(types, **kwargs)
    padded = [TEXT] * pad + types if left else types + [TEXT] * pad
    mask = [0] * pad + [1] * len(types) if left else [1] * len(types) + [0] * pad
    out = multimodal_positions([padded], attention_mask=[mask], **kwargs)
    real = np.flatnonzero(mask)
    assert np.array_equal(out.positions[0, real], alone.positions)
    assert not out.positions[0, np.flatnonzero(np.logical_not(mask))].any()  # (0, 0, 0)
    assert out.deltas.tolist() == [int(alone.deltas)]


@given(st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_packed_documents_are_each_alone_concatenated(seed, n_docs):
    rng = np.random.default_rng(seed)
    docs = [sequence(random_parts(rng)) for _ in range(n_docs)]
    types = [t for doc in docs for t in doc[0]]
    segments = [i for i, doc in enumerate(docs) for _ in doc[0]]
    images = [g for doc in docs for g in doc[1]] or None
    videos = [g for doc in docs for g in doc[2]] or None
    packed = multimodal_positions(
        types, image_grids=images, video_grids=videos, spatial_merge=2, segment_ids=segments
    )
    alone = [
        multimodal_positions(t, image_grids=i or None, video_grids=v or None, spatial_merge=2)
        for t, i, v in docs
    ]
    assert np.array_equal(packed.positions, np.concatenate([a.positions for a in alone]))
    assert packed.deltas.tolist() == int(alone[-1].deltas)  # the last document's


@given(st.integers(0, 2**32 - 1), st.data())
def test_a_shard_is_the_same_slice_of_the_whole(seed, data):
    rng = np.random.default_rng(seed)
    rows = [sequence(random_parts(rng, n=5)) for _ in range(2)]
    length = max(len(r[0]) for r in rows) + 2
    types = np.zeros((2, length), dtype=np.int64)
    mask = np.zeros((2, length), dtype=np.int64)
    for i, (t, _, _) in enumerate(rows):  # left padding
        types[i, length - len(t) :], mask[i, length - len(t) :] = t, 1
    kwargs = {
        "image_grids": [g for r in rows for g in r[1]] or None,
        "video_grids": [g for r in rows for g in r[2]] or None,
        "spatial_merge": 2,
        "attention_mask": mask,
        "tokens_per_second": 2,
    }
    whole = multimodal_positions(types, **kwargs)
    start = data.draw(st.integers(0, length))
    stop = data.draw(st.integers(start, length))
    shard = multimodal_positions(types, shard=(start, stop), **kwargs)
    assert np.array_equal(shard.positions, whole.positions[:, start:stop])
    assert np.array_equal(shard.deltas, whole.deltas)
    by_slice = multimodal_positions(types, shard=slice(start, stop), **kwargs)
    assert np.array_equal(by_slice.positions, shard.positions)


def test_shards_cut_through_a_grid():
    parts = [("text", 3), ("video", (2, 4, 6)), ("text", 2)]
    whole = ids_of(parts).positions
    for cut in range(0, whole.shape[0] + 1):
        first = ids_of(parts, shard=(0, cut)).positions
        second = ids_of(parts, shard=(cut, whole.shape[0])).positions
        assert np.array_equal(np.concatenate([first, second]), whole)


def test_shapes_any_leading_axes_and_dtypes():
    types, images, _ = sequence([("text", 2), ("image", (1, 2, 2)), ("text", 1)])
    out = multimodal_positions([[types]] * 3, image_grids=images * 3, spatial_merge=2)
    assert out.positions.shape == (3, 1, 4, 3)
    assert out.deltas.shape == (3, 1)
    assert out.positions.dtype == out.deltas.dtype == np.int64
    assert multimodal_positions(np.zeros((2, 0), dtype=np.int64)).positions.shape == (2, 0, 3)
    empty = multimodal_positions([[0, 0]], attention_mask=[[0, 0]])
    assert empty.positions.tolist() == [[[0, 0, 0], [0, 0, 0]]]
    assert empty.deltas.tolist() == [0]


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("types", "kwargs", "error", "message"),
    [
        ([0, 3], {}, ValueError, "token_types must hold 0 (text), 1 (image) or 2 (video), got 3"),
        (5, {}, ValueError, "token_types must have at least one axis"),
        ([0.5], {}, TypeError, "token_types must be an integer array"),
        ([0, 1, 1], {}, ValueError, "more images than image_grids gives (0)"),
        (
            [0, 1],
            {"image_grids": [[1, 2, 2]], "spatial_merge": 2, "video_grids": [[1, 2, 2]]},
            ValueError,
            "video_grids gives 1 grids but the token_types hold 0 videos",
        ),
        (
            [1, 1, 1],
            {"image_grids": [[1, 2, 4], [1, 4, 4]], "spatial_merge": 2},
            ValueError,
            "token_types row 0: a run of 3 image tokens (real tokens 0..2) does not match its "
            "image_grids: image_grids[1] is 1 x 2 x 2 = 4 merged tokens",
        ),
        (
            [1, 1, 1],
            {"image_grids": [[1, 2, 4]], "spatial_merge": 2},
            ValueError,
            "more images than image_grids gives (1)",
        ),
        (
            [1],
            {"image_grids": [[1, 2, 4]], "spatial_merge": 2},
            ValueError,
            "a run of 1 image tokens",
        ),
        (
            [1],
            {"image_grids": [[1, 3, 4]], "spatial_merge": 2},
            ValueError,
            "image_grids[0] must be (t, h, w) >= 1 with h and w multiples of spatial_merge = 2",
        ),
        ([1], {"image_grids": [1, 1, 1]}, ValueError, "image_grids must have shape (n, 3)"),
        ([0], {"spatial_merge": 0}, ValueError, "spatial_merge must be an integer >= 1"),
        ([0], {"attention_mask": [2]}, ValueError, "attention_mask must contain only 0/1"),
        ([0], {"attention_mask": [1, 1]}, ValueError, "attention_mask must have the shape"),
        ([0], {"segment_ids": [[0]]}, ValueError, "segment_ids must have the shape"),
        ([0], {"seconds_per_grid": [1.0]}, TypeError, "seconds_per_grid needs tokens_per_second"),
        ([0], {"tokens_per_second": 0}, ValueError, "tokens_per_second must be a positive"),
        (
            [0],
            {"tokens_per_second": 2, "seconds_per_grid": [1.0]},
            ValueError,
            "seconds_per_grid must give one value per video (0), got 1",
        ),
        (
            [0],
            {"split_frames": True, "tokens_per_second": 2},
            TypeError,
            "do not apply with split_frames=True",
        ),
        ([0], {"split_frames": 1}, TypeError, "split_frames must be True or False"),
        ([0, 0], {"shard": (1, 3)}, ValueError, "shard must lie within the sequence of 2"),
        ([0, 0], {"shard": (2, 1)}, ValueError, "shard stop must be an integer >= 2"),
        ([0, 0], {"shard": slice(0, 2, 2)}, ValueError, "shard must be a contiguous slice"),
    ],
)
def test_errors_name_the_argument(types, kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        multimodal_positions(types, **kwargs)


@pytest.mark.parametrize("kind", ["image", "video"])
def test_a_run_that_is_not_whole_grids_names_the_arguments(kind):
    types = [0] + [1 if kind == "image" else 2] * 3 + [0]
    with pytest.raises(ValueError, match=rf"token_types .* {kind}_grids"):
        multimodal_positions(types, **{f"{kind}_grids": [[1, 2, 1], [1, 2, 1]]})


def test_boolean_token_types_are_refused() -> None:
    """True is not a token type (0 text, 1 image, 2 video); a boolean mask given by mistake is
    refused by name instead of read as image tokens."""
    with pytest.raises(TypeError, match="token_types"):
        multimodal_positions(np.array([[False, True, True, False]]))
