"""Multi-axis RoPE against the REAL implementations it reproduces.

- transformers: the M-RoPE text rotary classes of Qwen2-VL, Qwen2.5-VL (sectioned
  ``mrope_section``), Qwen3-VL (interleaved) and Qwen3.5 (interleaved, partial rotation), fed
  ``position_ids`` of shape ``(3, b, s)``; the vision towers' 2-D rotary classes of Qwen2-VL,
  Qwen2.5-VL and Qwen3-VL with the ``(h, w)`` ids the towers build
  (``transformers.vision_utils.get_vision_position_ids``), and Pixtral's;
- diffusers: ``FluxPosEmbed``, ``get_2d_rotary_pos_embed``, ``get_3d_rotary_pos_embed``
  (CogVideoX), ``WanRotaryPosEmbed``, ``HunyuanVideoRotaryPosEmbed`` and
  ``LTXVideoRotaryPosEmbed``;
- timm: ``RotaryEmbeddingCat``, ``RotaryEmbeddingDinoV3``, ``RotaryEmbeddingMRope`` and
  ``RotaryEmbeddingMixed`` (its learned frequencies read from the module).

Every reference is called on CPU, and posenc's table must equal it within the reference's own
float32 rounding: ``2e-6 + 1e-6·max|θ|`` (the largest angle of the table; the references
compute angles in float32, whose error grows with the angle). Each comparison has a negative
control: a wrong section split, axis order, schedule or pair layout, rejected by the same
comparison. Each library is optional: a test whose library is missing is skipped with a reason.
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
from posenc import grid_positions, multi_axis_cos_sin, multi_axis_frequencies  # noqa: E402
from tests.references.test_grid_timestep import timm_sincos  # noqa: E402
from tests.tolerance import RECIPE_ULPS, assert_close_float32_recipe, bound, eps  # noqa: E402


def _import(module: str, what: str) -> Any:
    """Import ``module`` or skip: missing, or failing to import (a broken dependency)."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or e.g. RuntimeError from a mismatched build
        pytest.skip(f"{what} cannot be imported ({type(exc).__name__}: {exc})")


def as64(tensor: Any) -> np.ndarray:
    return np.asarray(torch.as_tensor(tensor).detach().to(torch.float64))


def largest_angles(positions: Any, head_dim: int, **kwargs: Any) -> np.ndarray:
    """Per channel of the tables, ``|θ| <= Σ_a |p[a]|·|F[a, k]|`` (float64)."""
    matrix = kwargs.get("frequencies")
    if matrix is None:
        keys = ("sections", "order", "schedule", "base", "scaling")
        chosen = {key: kwargs[key] for key in keys if kwargs.get(key) is not None}
        matrix = multi_axis_frequencies(**chosen).frequencies
    pos = np.abs(np.asarray(positions, dtype=np.float64))
    theta = pos @ np.abs(np.asarray(matrix, dtype=np.float64))
    if kwargs.get("pairs", "half") == "half":
        theta = np.concatenate([theta, theta], axis=-1)
    else:
        theta = np.repeat(theta, 2, axis=-1)
    return theta


def tolerance(
    positions: Any, head_dim: int, *, ulps: float = RECIPE_ULPS, **kwargs: Any
) -> np.ndarray:
    """Per channel, the bound of a reference that rounds its angles in float32: ``ulps``
    float32 ulps at the scale ``|θ| + 1`` (``RECIPE_ULPS``, tests/tolerance.py: an ulp of the
    angle, then sin/cos and the table's rounding; more where a call site says why)."""
    scale = largest_angles(positions, head_dim, **kwargs) + 1
    return bound(None, "float32", ulps, scale=scale)


def assert_rotation_within_recipe(ours: Any, theirs: Any, x: Any, angles: np.ndarray) -> None:
    """A rotation ``x·cos + rotate(x)·sin`` with the reference's float32 tables: two products
    of tables within :func:`tolerance` (at the largest angle) and ``max|x|``."""
    magnitude = float(np.abs(np.asarray(x, dtype=np.float64)).max())
    mine = np.asarray(ours.detach() if hasattr(ours, "detach") else ours, dtype=np.float64)
    assert_close_float32_recipe(
        mine, as64(theirs), max_angle=float(angles.max()), magnitude=magnitude, terms=2
    )


def rotation_bound(x: Any, angles: np.ndarray) -> float:
    """The bound of :func:`assert_rotation_within_recipe` as one number (for negative controls)."""
    magnitude = float(np.abs(np.asarray(x, dtype=np.float64)).max())
    return 2 * RECIPE_ULPS * eps("float32") * (float(angles.max()) + 1) * magnitude


def excess(ours: Any, theirs: Any, allowed: np.ndarray | float) -> float:
    """The largest ``|ours - theirs| - allowed``: <= 0 when every channel is within its bound
    (:func:`tolerance`, :func:`rotation_bound`)."""
    ours, theirs = np.asarray(ours, dtype=np.float64), as64(theirs)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    return float(np.max(np.abs(ours - theirs) - allowed))


def assert_reproduces(
    theirs, positions, head_dim: int, wrong: dict, *, ulps: float = RECIPE_ULPS, **kwargs: Any
) -> None:
    """posenc's (cos, sin) for ``kwargs`` equal ``theirs`` within :func:`tolerance` (``ulps``
    of the angles); with the changes in ``wrong`` (other arguments, or other ``positions``)
    they do not."""
    allowed = tolerance(positions, head_dim, ulps=ulps, **kwargs)
    ours = multi_axis_cos_sin(positions, head_dim, **kwargs)
    for mine, ref in zip(ours, theirs, strict=True):
        assert excess(mine, ref, allowed) <= 0, (excess(mine, ref, allowed), allowed.max())
    changed = dict(kwargs, **wrong)
    bad_positions = changed.pop("positions", positions)
    bad = multi_axis_cos_sin(bad_positions, head_dim, **changed)
    worst = max(excess(b, ref, allowed) for b, ref in zip(bad, theirs, strict=True))
    assert worst > 0, f"the negative control {wrong} passes the comparison"


def random_ids(shape: tuple[int, ...], high: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, high, size=shape)


# ---------------------------------------------------------------------------------------------
# transformers: M-RoPE of the Qwen-VL family (text)
# ---------------------------------------------------------------------------------------------

# name → (module, config class, rotary class, head_dim, mrope_section)
QWEN_TEXT = {
    "qwen2_vl": ("qwen2_vl", "Qwen2VLTextConfig", "Qwen2VLRotaryEmbedding", 128, [16, 24, 24]),
    "qwen2_vl-small": ("qwen2_vl", "Qwen2VLTextConfig", "Qwen2VLRotaryEmbedding", 32, [4, 6, 6]),
    "qwen2_5_vl": (
        "qwen2_5_vl",
        "Qwen2_5_VLTextConfig",
        "Qwen2_5_VLRotaryEmbedding",
        128,
        [16, 24, 24],
    ),
    "qwen3_vl": ("qwen3_vl", "Qwen3VLTextConfig", "Qwen3VLTextRotaryEmbedding", 128, [24, 20, 20]),
    "qwen3_vl-small": (
        "qwen3_vl",
        "Qwen3VLTextConfig",
        "Qwen3VLTextRotaryEmbedding",
        32,
        [6, 5, 5],
    ),
}
THETA = 1000000.0


def transformers_model(module: str) -> tuple[Any, Any]:
    """``transformers.models.<module>``'s modeling and configuration modules, or skip."""
    return (
        _import(f"transformers.models.{module}.modeling_{module}", f"transformers ({module})"),
        _import(f"transformers.models.{module}.configuration_{module}", f"transformers ({module})"),
    )


def qwen_text_rotary(name: str) -> tuple[Any, int, list[int]]:
    module, config_name, class_name, head_dim, section = QWEN_TEXT[name]
    models, configs = transformers_model(module)
    rope = {"rope_type": "default", "rope_theta": THETA, "mrope_section": section}
    if module == "qwen3_vl":
        rope["mrope_interleaved"] = True
    config = getattr(configs, config_name)(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=head_dim,
        intermediate_size=32,
        num_hidden_layers=1,
        vocab_size=16,
        rope_parameters=rope,
    )
    return getattr(models, class_name)(config), head_dim, section


@pytest.mark.parametrize("name", sorted(QWEN_TEXT))
def test_qwen_vl_text_mrope(name: str) -> None:
    rotary, head_dim, section = qwen_text_rotary(name)
    ids = random_ids((3, 2, 9), 3000)  # (t, h, w) per token, as get_rope_index returns them
    theirs = rotary(torch.zeros(1), torch.from_numpy(ids))
    positions = np.moveaxis(ids, 0, -1)  # (b, s, 3)
    if name.startswith("qwen3"):  # interleaved: T, H, W, T, H, W, ...
        wrong = {"order": "sectioned"}
        kwargs = {"sections": section, "order": "interleaved", "base": THETA}
    else:
        wrong = {"sections": [*section[1:], section[0]]}  # a wrong split
        kwargs = {"sections": section, "base": THETA}
    assert_reproduces(theirs, positions, head_dim, wrong, **kwargs)


def test_qwen_vl_text_tokens_equal_1d_rope() -> None:
    """Text tokens carry the same position on all three axes: Hugging Face then gives the 1-D
    RoPE table, and so does posenc."""
    rotary, head_dim, section = qwen_text_rotary("qwen2_vl")
    ids = np.ascontiguousarray(np.broadcast_to(np.arange(40), (3, 1, 40)))
    theirs = rotary(torch.zeros(1), torch.from_numpy(ids))
    positions = np.moveaxis(ids, 0, -1)
    one_d = posenc.rotary_cos_sin(np.arange(40)[None, :], head_dim, base=THETA)
    wrong = {"positions": positions * np.array([1, 2, 1])}  # h no longer equal to t
    assert_reproduces(theirs, positions, head_dim, wrong, sections=section, base=THETA)
    ours = multi_axis_cos_sin(positions, head_dim, sections=section, base=THETA)
    for mine, flat in zip(ours, one_d, strict=True):
        np.testing.assert_array_equal(mine, flat)


def test_qwen_vl_apply_rotary_matches_hf() -> None:
    """posenc.apply_rotary with M-RoPE tables rotates q as Hugging Face's apply_rotary_pos_emb."""
    models, _ = transformers_model("qwen2_vl")
    rotary, head_dim, section = qwen_text_rotary("qwen2_vl-small")
    ids = random_ids((3, 1, 6), 200, seed=1)
    cos, sin = rotary(torch.zeros(1), torch.from_numpy(ids))
    q = torch.randn(1, 2, 6, head_dim, generator=torch.Generator().manual_seed(0))
    theirs, _ = models.apply_rotary_pos_emb(q, q, cos, sin)
    positions = np.moveaxis(ids, 0, -1)
    tables = multi_axis_cos_sin(positions, head_dim, sections=section, base=THETA)
    ours = posenc.apply_rotary(q.numpy(), *(t[:, None] for t in tables))  # (b, 1, s, d)
    assert_rotation_within_recipe(
        ours, theirs, q, largest_angles(positions, head_dim, sections=section, base=THETA)
    )


def test_qwen3_5_partial_interleaved_mrope() -> None:
    """Qwen3.5: interleaved M-RoPE over the first quarter of a 256-channel head."""
    models, configs = transformers_model("qwen3_5")
    rope = {
        "rope_type": "default",
        "rope_theta": 1e7,
        "mrope_section": [11, 11, 10],
        "mrope_interleaved": True,
        "partial_rotary_factor": 0.25,
    }
    config = configs.Qwen3_5TextConfig(
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=256,
        num_hidden_layers=1,
        vocab_size=16,
        rope_parameters=rope,
    )
    ids = random_ids((3, 1, 7), 2000, seed=2)
    theirs = models.Qwen3_5TextRotaryEmbedding(config)(torch.zeros(1), torch.from_numpy(ids))
    assert theirs[0].shape == (1, 7, 64)
    kwargs = {"sections": [11, 11, 10], "order": "interleaved", "base": 1e7}
    partial = {"scaling": {"partial_rotary_factor": 0.25}}
    wrong = {"order": "sectioned"}
    assert_reproduces(theirs, np.moveaxis(ids, 0, -1), 256, wrong, **kwargs, **partial)


# ---------------------------------------------------------------------------------------------
# transformers: 2-D vision rotary (Qwen-VL vision towers, Pixtral)
# ---------------------------------------------------------------------------------------------

# module → (vision config class, rotary class, the width the config divides into heads)
QWEN_VISION = {
    "qwen2_vl": ("Qwen2VLVisionConfig", "Qwen2VLVisionRotaryEmbedding", "embed_dim"),
    "qwen2_5_vl": ("Qwen2_5_VLVisionConfig", "Qwen2_5_VLVisionRotaryEmbedding", "hidden_size"),
    "qwen3_vl": ("Qwen3VLVisionConfig", "Qwen3VLVisionRotaryEmbedding", "hidden_size"),
}


@pytest.mark.parametrize("module", sorted(QWEN_VISION))
def test_qwen_vl_vision_rotary(module: str) -> None:
    config_name, class_name, width = QWEN_VISION[module]
    models, configs = transformers_model(module)
    vision = _import("transformers.vision_utils", "transformers.vision_utils")
    head_dim = 40
    config = getattr(configs, config_name)(**{width: 2 * head_dim, "num_heads": 2})
    grid_thw = torch.tensor([[2, 4, 6], [1, 6, 2]])
    ids = vision.get_vision_position_ids(grid_thw, 2)  # (tokens, 2): (h, w), 2 x 2 blocks
    ours_ids = np.concatenate([grid_positions(tuple(g), merge=2) for g in grid_thw.tolist()])
    np.testing.assert_array_equal(ours_ids[:, 1:], ids.numpy())

    theirs = getattr(models, class_name)(config)(torch.zeros(1), ids)
    kwargs = {"sections": (head_dim // 4, head_dim // 4), "schedule": "per_axis"}
    assert_reproduces(theirs, ours_ids[:, 1:], head_dim, {"schedule": "shared"}, **kwargs)


def test_grid_positions_block_order_is_needed() -> None:
    """Row-major ids are not the towers' ids: the block order of ``merge`` matters."""
    vision = _import("transformers.vision_utils", "transformers.vision_utils")
    ids = vision.get_vision_position_ids(torch.tensor([[1, 4, 4]]), 2).numpy()
    assert not np.array_equal(grid_positions((4, 4)), ids)
    np.testing.assert_array_equal(grid_positions((4, 4), merge=2), ids)


def test_pixtral_rotary() -> None:
    models, configs = transformers_model("pixtral")
    head_dim = 32
    config = configs.PixtralVisionConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        rope_parameters={"rope_type": "axial", "rope_theta": 10000.0},
    )
    positions = grid_positions((5, 7))  # the (h, w) patch ids Pixtral builds, row-major
    rotary = models.PixtralVisionRotaryEmbedding(config)
    theirs = rotary(torch.zeros(1), torch.from_numpy(positions))
    kwargs = {"sections": (head_dim // 4, head_dim // 4), "schedule": "dealt"}
    assert_reproduces(theirs, positions, head_dim, {"schedule": "per_axis"}, **kwargs)


# ---------------------------------------------------------------------------------------------
# diffusers: per-axis RoPE of image and video transformers (interleaved pairs)
# ---------------------------------------------------------------------------------------------


def diffusers_module(name: str) -> Any:
    return _import(f"diffusers.models.{name}", f"diffusers ({name})")


def test_flux_pos_embed() -> None:
    flux = diffusers_module("transformers.transformer_flux")
    axes_dim = [16, 56, 56]
    ids = np.concatenate(  # text tokens at (0, 0, 0), then the image's (0, h, w) grid
        [np.zeros((4, 3), dtype=np.int64), grid_positions((1, 6, 5))], axis=0
    )
    ids[:, 0] = random_ids((ids.shape[0],), 50)  # exercise the first axis too
    theirs = flux.FluxPosEmbed(theta=10000, axes_dim=axes_dim)(torch.from_numpy(ids))
    kwargs = {"sections": [d // 2 for d in axes_dim], "schedule": "per_axis"}
    assert_reproduces(theirs, ids, 128, {"pairs": "half"}, pairs="interleaved", **kwargs)


def test_flux_apply_rotary_matches_diffusers() -> None:
    """posenc.apply_rotary(pairs="interleaved") rotates as diffusers' apply_rotary_emb."""
    flux = diffusers_module("transformers.transformer_flux")
    embeddings = diffusers_module("embeddings")
    ids = grid_positions((1, 4, 4))
    theirs_tables = flux.FluxPosEmbed(theta=10000, axes_dim=[8, 12, 12])(torch.from_numpy(ids))
    x = torch.randn(1, 2, 16, 32, generator=torch.Generator().manual_seed(0))  # (b, heads, s, d)
    theirs = embeddings.apply_rotary_emb(x, theirs_tables)
    kwargs = {"sections": [4, 6, 6], "schedule": "per_axis", "pairs": "interleaved"}
    ours = posenc.apply_rotary(
        x.numpy(), *multi_axis_cos_sin(ids, 32, **kwargs), pairs="interleaved"
    )
    assert_rotation_within_recipe(ours, theirs, x, largest_angles(ids, 32, **kwargs))


@pytest.mark.parametrize(
    ("crops", "grid"),
    [(((0, 0), (6, 8)), (6, 8)), (((0, 0), (4, 4)), (8, 6)), (((1, 2), (9, 7)), (4, 5))],
)
def test_get_2d_rotary_pos_embed(crops, grid) -> None:
    embeddings = diffusers_module("embeddings")
    dim = 32
    theirs = embeddings.get_2d_rotary_pos_embed(dim, crops, grid, use_real=True)
    # the coordinates diffusers spaces over the crop: linspace(start, stop·(n-1)/n, n) per axis
    axes = [
        np.linspace(start, stop * (n - 1) / n, n)
        for start, stop, n in zip(crops[0], crops[1], grid, strict=True)
    ]
    hw = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
    wh = hw[:, ::-1]  # the first half of the channels turns with w, the second with h
    kwargs = {"sections": (dim // 4, dim // 4), "schedule": "per_axis", "pairs": "interleaved"}
    assert_reproduces(theirs, wh, dim, {"positions": hw}, **kwargs)  # wrong: (h, w) order


@pytest.mark.parametrize(("dim", "grid", "frames"), [(64, (6, 4), 3), (128, (5, 7), 4)])
def test_get_3d_rotary_pos_embed_cogvideox(dim: int, grid, frames: int) -> None:
    embeddings = diffusers_module("embeddings")
    theirs = embeddings.get_3d_rotary_pos_embed(dim, ((0, 0), grid), grid, frames, theta=10000)
    positions = grid_positions((frames, *grid))
    sections = (dim // 8, dim // 16 * 3, dim // 16 * 3)  # channels d/4, 3d/8, 3d/8
    kwargs = {"sections": sections, "schedule": "per_axis", "pairs": "interleaved"}
    assert_reproduces(theirs, positions, dim, {"schedule": "shared"}, **kwargs)


def test_wan_rotary_pos_embed() -> None:
    wan = diffusers_module("transformers.transformer_wan")
    head_dim, patch = 64, (1, 2, 2)
    rope = wan.WanRotaryPosEmbed(head_dim, patch, max_seq_len=1024)
    frames, height, width = 3, 8, 10
    theirs = rope(torch.zeros(1, 4, frames, height, width))
    theirs = tuple(t.reshape(t.shape[1], t.shape[3]) for t in theirs)  # (1, s, 1, d) → (s, d)
    positions = grid_positions((frames // patch[0], height // patch[1], width // patch[2]))
    hw = 2 * (head_dim // 6)  # Wan's channels: h = w = 2·(d // 6), t the rest
    sections = ((head_dim - 2 * hw) // 2, hw // 2, hw // 2)
    kwargs = {"sections": sections, "schedule": "per_axis", "pairs": "interleaved"}
    wrong = {"positions": positions[:, [0, 2, 1]]}  # h and w swapped
    assert_reproduces(theirs, positions, head_dim, wrong, **kwargs)


def test_hunyuan_video_rotary_pos_embed() -> None:
    hunyuan = diffusers_module("transformers.transformer_hunyuan_video")
    rope_dim = [16, 56, 56]
    rope = hunyuan.HunyuanVideoRotaryPosEmbed(2, 1, rope_dim, theta=256.0)
    frames, height, width = 3, 10, 8
    theirs = rope(torch.zeros(1, 4, frames, height, width))
    positions = grid_positions((frames, height // 2, width // 2))
    kwargs = {"sections": [d // 2 for d in rope_dim], "base": 256.0, "pairs": "interleaved"}
    wrong = {"schedule": "shared"}
    assert_reproduces(theirs, positions, 128, wrong, schedule="per_axis", **kwargs)


def ltx_frequencies(dim: int, theta: float) -> np.ndarray:
    """LTX-Video's frequency matrix: ``m = dim // 6`` frequencies ``θ^(j/(m-1))·π/2``, each
    turning with t, h and w in turn (T, H, W, T, H, W, ...), after ``(dim % 6) / 2`` pairs left
    unrotated (zero columns)."""
    m, pad = dim // 6, (dim % 6) // 2
    omega = theta ** np.linspace(0.0, 1.0, m) * (math.pi / 2)
    matrix = np.zeros((3, pad + 3 * m))
    for axis in range(3):
        matrix[axis, pad + axis :: 3] = omega
    return matrix


@pytest.mark.parametrize(("dim", "scale"), [(64, None), (2048, (0.25, 32.0, 32.0))])
def test_ltx_video_rotary_pos_embed(dim: int, scale) -> None:
    ltx = diffusers_module("transformers.transformer_ltx")
    rope = ltx.LTXVideoRotaryPosEmbed(dim, base_num_frames=20, base_height=2048, base_width=2048)
    frames, height, width = 3, 4, 5
    theirs = tuple(t[0] for t in rope(torch.zeros(1, 1, dim), frames, height, width, scale))
    cells = grid_positions((frames, height, width)).astype(np.float64)
    if scale is not None:  # LTX's coordinates: cell · scale / base length, in [0, 1]
        cells = cells * np.array(scale) / np.array([20.0, 2048.0, 2048.0])
    positions = 2.0 * cells - 1.0  # ... mapped to [-1, 1]
    kwargs = {"frequencies": ltx_frequencies(dim, 10000.0), "pairs": "interleaved"}
    # LTX rounds ω = θ^(j/(m-1)) in float32: the exponent's half-ulp rounding is ln(θ)/2
    # ulps of ω (4.6 for θ = 1e4), so of the angle, one more for the power and the π/2
    ulps = RECIPE_ULPS + math.log(10000.0) / 2 + 1
    assert_reproduces(theirs, positions, dim, {"pairs": "half"}, ulps=ulps, **kwargs)


# ---------------------------------------------------------------------------------------------
# timm: axial RoPE of vision transformers ([sin | cos] concatenated, pairs per rotate_half)
# ---------------------------------------------------------------------------------------------


def sin_cos(embed: Any) -> tuple[Any, Any]:
    """timm's concatenated ``[sin | cos]`` embedding as ``(cos, sin)``."""
    sin, cos = embed.chunk(2, -1)
    return cos, sin


@pytest.mark.parametrize("rotate_half", [False, True])
@pytest.mark.parametrize("temperature", [10000.0, 100.0])
def test_timm_rotary_embedding_cat(rotate_half: bool, temperature: float) -> None:
    timm = timm_sincos()
    dim, shape = 32, (5, 7)
    rope = timm.RotaryEmbeddingCat(
        dim, temperature=temperature, in_pixels=False, rotate_half=rotate_half
    )
    theirs = sin_cos(rope.get_embed(list(shape)))
    positions = grid_positions(shape)
    kwargs = {"sections": (dim // 4, dim // 4), "schedule": "per_axis", "base": temperature}
    pairs = "half" if rotate_half else "interleaved"
    assert_reproduces(
        theirs, positions, dim, {"positions": positions[:, ::-1]}, pairs=pairs, **kwargs
    )


@pytest.mark.parametrize("linear_bands", [False, True])
def test_timm_rotary_embedding_cat_pixel_bands(linear_bands: bool) -> None:
    """timm's default pixel bands (log- or linearly spaced up to ``π·max_res/2``, read from the
    module) over coordinates in [-1, 1]: a frequency matrix with the same bands on each axis."""
    timm = timm_sincos()
    dim, shape, max_res = 32, (4, 6), 224
    rope = timm.RotaryEmbeddingCat(dim, max_res=max_res, linear_bands=linear_bands)
    theirs = sin_cos(rope.get_embed(list(shape)))
    axes = [np.linspace(-1.0, 1.0, n) for n in shape]
    positions = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
    bands = as64(rope.bands)
    matrix = np.zeros((2, dim // 2))
    matrix[0, : dim // 4], matrix[1, dim // 4 :] = bands, bands
    kwargs = {"frequencies": matrix, "pairs": "interleaved"}
    assert_reproduces(theirs, positions, dim, {"pairs": "half"}, **kwargs)


@pytest.mark.parametrize("rotate_half", [True, False])
def test_timm_rotary_embedding_dinov3(rotate_half: bool) -> None:
    """DINOv3: periods ``T^(2j/(d/2))`` (ω = 2π/period) over patch centres mapped to [-1, 1]."""
    timm = timm_sincos()
    dim, shape, temperature = 32, (4, 6), 100.0
    rope = timm.RotaryEmbeddingDinoV3(dim, temperature=temperature, rotate_half=rotate_half)
    theirs = sin_cos(rope.get_embed(list(shape)))
    centres = (grid_positions(shape) + 0.5) / np.array(shape)
    positions = 2.0 * centres - 1.0
    per_axis = multi_axis_frequencies((dim // 4, dim // 4), schedule="per_axis", base=temperature)
    kwargs = {"frequencies": 2 * math.pi * per_axis.frequencies}
    pairs = "half" if rotate_half else "interleaved"
    wrong = {"positions": positions[:, ::-1]}
    assert_reproduces(theirs, positions, dim, wrong, pairs=pairs, **kwargs)


def test_timm_rotary_embedding_mrope() -> None:
    """timm's interleaved M-RoPE for images: (t = 0, h, w) ids, Qwen3-VL's slot rule. Its
    ``mrope_section`` (8, 12, 12) over 32 pairs is clamped to what the interleaving can give:
    11, 11 and 10 pairs, which posenc takes as ``sections``."""
    timm = timm_sincos()
    dim, shape = 64, (5, 6)
    rope = timm.RotaryEmbeddingMRope(dim, mrope_section=(8, 12, 12), temperature=10000.0)
    theirs = sin_cos(rope.get_embed(list(shape)))
    positions = np.concatenate([np.zeros((30, 1), dtype=np.int64), grid_positions(shape)], 1)
    kwargs = {"sections": (11, 11, 10), "order": "interleaved"}
    assert_reproduces(theirs, positions, dim, {"order": "sectioned"}, **kwargs)


def test_timm_rotary_embedding_mixed() -> None:
    """RoPE-Mixed: each pair turns with a learned combination of x and y; posenc takes the
    module's frequencies (per block and head) as the matrix."""
    timm = timm_sincos()
    torch.manual_seed(0)  # the module draws a random rotation per block and head
    dim, depth, heads, shape = 64, 2, 2, (4, 5)
    rope = timm.RotaryEmbeddingMixed(dim, depth=depth, num_heads=heads)
    embed = rope.get_embed(list(shape))  # (depth, heads, h*w, 2*head_dim)
    xy = grid_positions(shape)[:, ::-1]  # grid_indexing="xy": x = column, y = row
    learned = as64(rope.freqs)  # (2, depth, heads, head_dim // 2)
    for block in range(depth):
        for head in range(heads):
            theirs = sin_cos(embed[block, head])
            kwargs = {"frequencies": learned[:, block, head], "pairs": "interleaved"}
            wrong = {"positions": xy[:, ::-1]}
            assert_reproduces(theirs, xy, dim // heads, wrong, **kwargs)
