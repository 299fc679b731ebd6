"""``posenc.multimodal_positions`` against the REAL ``get_rope_index`` of transformers.

``get_rope_index`` and ``get_vision_position_ids`` of ``Qwen2VLModel``, ``Qwen2_5_VLModel``
and ``Qwen3VLModel`` are called as they are, on an object that holds only the model's real
configuration (``Qwen2VLConfig(vision_config=...)``, ...): no weights are built. They get
``input_ids``, ``mm_token_type_ids``, ``image_grid_thw``, ``video_grid_thw`` (and
``second_per_grid_ts``, ``attention_mask``) as the processors return them; posenc gets the same
token types and grids. Positions ``(3, b, s)`` and ``rope_deltas`` ``(b, 1)`` must be equal.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from tests.positions.test_multimodal import random_parts, sequence  # noqa: E402

# model -> (module, config class, model class, vision config)
MODELS = {
    "qwen2_vl": ("qwen2_vl", "Qwen2VLConfig", "Qwen2VLModel", {"spatial_merge_size": 2}),
    "qwen2_5_vl": (
        "qwen2_5_vl",
        "Qwen2_5_VLConfig",
        "Qwen2_5_VLModel",
        {"spatial_merge_size": 2, "tokens_per_second": 2},
    ),
    "qwen3_vl": ("qwen3_vl", "Qwen3VLConfig", "Qwen3VLModel", {"spatial_merge_size": 2}),
}
_CACHE: dict[str, Any] = {}


def rope_index(name: str, vision: dict[str, Any] | None = None) -> Any:
    """transformers' ``get_rope_index`` of model ``name``, bound to an object that holds the
    model's real configuration (or skip when transformers or the model is missing)."""
    module, config_name, model_name, default = MODELS[name]
    key = f"{name}{sorted((vision or {}).items())}"
    if key not in _CACHE:
        try:
            models = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
            configs = importlib.import_module(
                f"transformers.models.{module}.configuration_{module}"
            )
        except Exception as exc:  # missing, or a broken dependency
            pytest.skip(f"transformers ({module}) cannot be imported: {exc}")
        model_class = getattr(models, model_name)
        holder = type(
            "RopeIndex",
            (),
            {
                "get_rope_index": model_class.get_rope_index,
                "get_vision_position_ids": model_class.get_vision_position_ids,
            },
        )()
        holder.config = getattr(configs, config_name)(vision_config={**default, **(vision or {})})
        _CACHE[key] = holder.get_rope_index
    return _CACHE[key]


def batch(rows: list[tuple[list[int], list, list]], left_pad: bool = True):
    """Token types (b, s) padded on the left (or right), the attention mask and the grids of
    the rows in order."""
    length = max(len(r[0]) for r in rows)
    types = np.zeros((len(rows), length), dtype=np.int64)
    mask = np.zeros_like(types)
    for i, (t, _, _) in enumerate(rows):
        where = slice(length - len(t), length) if left_pad else slice(0, len(t))
        types[i, where], mask[i, where] = t, 1
    images = [g for r in rows for g in r[1]]
    videos = [g for r in rows for g in r[2]]
    return types, mask, images, videos


def theirs(name, types, mask=None, images=(), videos=(), seconds=None, vision=None):
    """transformers' (positions (b, s, 3), deltas (b,)) for these inputs."""
    kwargs: dict[str, Any] = {
        "image_grid_thw": torch.tensor(images) if len(images) else None,
        "video_grid_thw": torch.tensor(videos) if len(videos) else None,
        "attention_mask": None if mask is None else torch.from_numpy(mask),
    }
    if seconds is not None:
        kwargs["second_per_grid_ts"] = torch.tensor(seconds, dtype=torch.float32)
    tokens = torch.from_numpy(types)
    position_ids, deltas = rope_index(name, vision)(tokens, tokens.int(), **kwargs)
    return position_ids.permute(1, 2, 0).numpy(), deltas[:, 0].numpy()


def ours(name, types, mask=None, images=(), videos=(), seconds=None, vision=None):
    vision = {**MODELS[name][3], **(vision or {})}
    out = posenc.multimodal_positions(
        types,
        image_grids=list(images) or None,
        video_grids=list(videos) or None,
        spatial_merge=vision["spatial_merge_size"],
        attention_mask=mask,
        tokens_per_second=vision.get("tokens_per_second") if name == "qwen2_5_vl" else None,
        seconds_per_grid=seconds,
        split_frames=name == "qwen3_vl",
    )
    return out.positions, out.deltas


def assert_same(name, *args, **kwargs):
    mine, expected = ours(name, *args, **kwargs), theirs(name, *args, **kwargs)
    np.testing.assert_array_equal(mine[0], expected[0])
    np.testing.assert_array_equal(mine[1], expected[1])


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_ordinary_batches_equal_transformers(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    split = name == "qwen3_vl"
    rows = [sequence(random_parts(rng), split_frames=split) for _ in range(2)]
    rows = [(r[0], r[1], r[2]) for r in rows]
    length = {len(r[0]) for r in rows}
    if len(length) > 1:  # one length for an unpadded batch: pad with text at the end
        longest = max(length)
        rows = [(r[0] + [0] * (longest - len(r[0])), r[1], r[2]) for r in rows]
    types, _, images, videos = batch(rows)
    assert_same(name, types, None, images, videos)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_left_padding_equals_transformers_given_the_mask(name: str) -> None:
    rng = np.random.default_rng(100)
    split = name == "qwen3_vl"
    rows = [sequence(random_parts(rng, n=n), split_frames=split) for n in (3, 5, 1)]
    types, mask, images, videos = batch(rows, left_pad=True)
    assert mask.min() == 0  # some padding
    assert_same(name, types, mask, images, videos)
    types, mask, images, videos = batch(rows, left_pad=False)
    assert_same(name, types, mask, images, videos)


@pytest.mark.parametrize("tokens_per_second", [2, 4, 25])
def test_qwen2_5_vl_seconds_per_grid_equal_transformers(tokens_per_second: int) -> None:
    """Temporal ids ``trunc(j · tokens_per_second · seconds)`` as transformers computes them
    (float32), for the seconds per grid of common frame rates (2 frames per grid)."""
    fps = [0.5, 1, 2, 3, 4, 7, 23.976, 24, 25, 29.97, 30, 60]
    seconds = [2 / f for f in fps]
    parts = [("text", 2)]
    for _ in fps:
        parts += [("video", (12, 4, 4)), ("text", 1)]
    types, _, videos = sequence(parts)
    vision = {"tokens_per_second": tokens_per_second}
    assert_same("qwen2_5_vl", np.array([types]), None, (), videos, seconds, vision)


def test_qwen2_5_vl_float32_intervals_are_needed() -> None:
    """With 25 tokens per second and 2/3 s per grid, grid 3 is at 50: transformers' float32
    product; the float64 product 3 · (25 · 2/3) = 49.99999... would truncate to 49."""
    types, _, videos = sequence([("video", (4, 2, 2))])
    vision = {"tokens_per_second": 25}
    got = ours("qwen2_5_vl", np.array([types]), None, (), videos, [2 / 3], vision)[0]
    assert got[0, :, 0].tolist() == [0, 16, 33, 50]
    assert int(3 * (25 * (2 / 3))) == 49
    assert_same("qwen2_5_vl", np.array([types]), None, (), videos, [2 / 3], vision)


def test_qwen2_5_vl_images_are_not_scaled_and_seconds_default_to_one() -> None:
    types, images, videos = sequence(
        [("text", 1), ("image", (1, 4, 6)), ("text", 2), ("video", (3, 2, 4)), ("text", 1)]
    )
    assert_same("qwen2_5_vl", np.array([types]), None, images, videos)


def test_packed_documents_are_each_document_as_transformers_numbers_it() -> None:
    rng = np.random.default_rng(7)
    docs = [sequence(random_parts(rng, n=5)) for _ in range(3)]
    types = [t for d in docs for t in d[0]]
    segments = [i for i, d in enumerate(docs) for _ in d[0]]
    packed = posenc.multimodal_positions(
        types,
        image_grids=[g for d in docs for g in d[1]] or None,
        video_grids=[g for d in docs for g in d[2]] or None,
        spatial_merge=2,
        segment_ids=segments,
    )
    expected = [theirs("qwen2_vl", np.array([t]), None, i, v)[0][0] for t, i, v in docs]
    np.testing.assert_array_equal(packed.positions, np.concatenate(expected))


def test_torch_wrapper_equals_the_core_and_keeps_the_device() -> None:
    rng = np.random.default_rng(3)
    types, mask, images, videos = batch([sequence(random_parts(rng, n=5)) for _ in range(2)])
    kwargs = {"spatial_merge": 2, "tokens_per_second": 2, "seconds_per_grid": [0.5] * len(videos)}
    core = posenc.multimodal_positions(
        types, image_grids=images or None, video_grids=videos or None, attention_mask=mask, **kwargs
    )
    positions, deltas = pt.multimodal_positions(
        torch.from_numpy(types),
        image_grids=torch.tensor(images) if images else None,
        video_grids=torch.tensor(videos) if videos else None,
        attention_mask=torch.from_numpy(mask).bool(),
        **{**kwargs, "seconds_per_grid": torch.tensor(kwargs["seconds_per_grid"])},
    )
    assert positions.dtype == deltas.dtype == torch.int64
    assert torch.equal(positions, torch.from_numpy(core.positions))
    assert torch.equal(deltas, torch.from_numpy(core.deltas))
    meta = pt.multimodal_positions(
        types.tolist(),
        image_grids=images or None,
        video_grids=videos or None,
        attention_mask=mask,
        **kwargs,
    )
    assert meta[0].device.type == "cpu"


def test_ids_drive_the_qwen2_vl_text_rotary_as_transformers() -> None:
    """End to end: the ids of a padded multimodal batch, through posenc's M-RoPE tables, give
    transformers' tables from its own ids (within its float32 angle error)."""
    from tests.references.hf.test_multi_axis import THETA, excess, qwen_text_rotary, tolerance

    rotary, head_dim, section = qwen_text_rotary("qwen2_vl-small")
    rng = np.random.default_rng(11)
    types, mask, images, videos = batch([sequence(random_parts(rng, n=5)) for _ in range(2)])
    hf_ids, _ = theirs("qwen2_vl", types, mask, images, videos)
    tables = rotary(torch.zeros(1), torch.from_numpy(np.moveaxis(hf_ids, -1, 0)).contiguous())
    ids, _ = pt.multimodal_positions(
        torch.from_numpy(types),
        image_grids=images or None,
        video_grids=videos or None,
        spatial_merge=2,
        attention_mask=torch.from_numpy(mask),
    )
    mine = pt.multi_axis_cos_sin(ids, head_dim, sections=section, base=THETA)
    allowed = tolerance(ids.numpy(), head_dim, sections=section, base=THETA)
    for a, b in zip(mine, tables, strict=True):
        assert excess(a, b, allowed) <= 0
