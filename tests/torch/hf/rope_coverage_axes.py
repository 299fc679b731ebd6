"""The multi-axis part of the RoPE coverage harness: positions as models make them, and checks.

Multi-axis rotary classes take several coordinates per token. Each is fed what its model
passes it:

- M-RoPE text classes: ``position_ids`` of shape ``(n_axes, b, s)`` from the model's own
  ``get_rope_index`` (text, then an image, then text; the second row continues as a decoding
  step does, 960 positions further), or, for models without one that takes
  ``mm_token_type_ids``, the same layout built here;
- vision classes: ``(N, n_axes)`` patch coordinates from the model's own helper
  (``transformers.vision_utils.get_vision_position_ids`` with the config's merge size, or a
  class's ``precompute_positions``), changed as the model changes them (:data:`ADJUST`);
- classes that build their grid inside ``forward`` from a shape (:data:`GRID_CALLS`): called as
  their model calls them, against the plan's tables over the coordinates of that grid.

The plan's tables (``RopeLayer.cos_sin``) must equal the class's per element within
``(2e-6 + 1e-6·|p|·ω_k)·max(attention_factor, 1)``, ``|p|`` the magnitude of the coordinate
that pair ``k`` turns with, and the model's rotation function with the class's tables must give
the attention scores of ``posenc.apply_rotary`` with the plan's pair layout.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

import posenc
from posenc._rope.xdrope import DOUBLED_SPLIT, doubled_split_axes

#: The image grids (t, h, w) the vision positions are made for, in units of the merge size.
GRIDS = ((1, 4, 6), (2, 2, 3))
#: Positions added to the second batch row of M-RoPE ids (a later decoding step).
LATER = 960
#: The most tokens the rotation check rotates (a strided subset of larger grids).
ROTATED_TOKENS = 512


def short(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= 140 else text[:137] + "..."


def per_pair(table: torch.Tensor | np.ndarray, layout: str, n: int) -> list[np.ndarray]:
    """The ``n`` per-pair columns of a table (each copy, for a table that holds two)."""
    values = np.asarray(table.detach().to(torch.float64) if torch.is_tensor(table) else table)
    width = values.shape[-1]
    if width == n:
        return [values]
    if width != 2 * n:
        raise AssertionError(f"table has {width} channels, the plan {2 * n}")
    if layout == "half":
        return [values[..., :n], values[..., n:]]
    return [values[..., 0::2], values[..., 1::2]]


# -- positions ---------------------------------------------------------------------------------


#: Towers that number their patches with another merge size than their config's (directory).
MERGE = {"paddleocr_vl": 1, "kimi_k25": 1, "step3p7": 1}  # get_vision_position_ids(grid, 1)


def _merge(directory: str, config: Any) -> int:
    merge = MERGE.get(directory, getattr(config, "spatial_merge_size", None))
    return merge if isinstance(merge, int) and merge > 0 else 1


def _rope_index_model(module: Any) -> Any:
    """The model class of ``module`` whose get_rope_index takes mm_token_type_ids, or None."""
    for value in vars(module).values():
        if not isinstance(value, type) or value.__module__ != module.__name__:
            continue
        helper = getattr(value, "get_rope_index", None)
        if helper is not None and "mm_token_type_ids" in inspect.signature(helper).parameters:
            return value
    return None


def _from_rope_index(module: Any, n_axes: int) -> torch.Tensor | None:
    """(n_axes, 2, s) ids from the model's get_rope_index, or None where it has none."""
    model = _rope_index_model(module)
    if model is None or n_axes != 3:
        return None
    stub = type("Stub", (), {n: getattr(model, n) for n in dir(model) if n.startswith("get_")})()
    stub.config = model.config_class()
    merge = stub.config.vision_config.spatial_merge_size
    grid = torch.tensor([[1, 4 * merge, 6 * merge]])
    kinds = torch.zeros(1, 5 + 24 + 35, dtype=torch.int)
    kinds[:, 5 : 5 + 24] = 1  # text, an image of 4 x 6 merged patches, text
    ids = torch.zeros_like(kinds, dtype=torch.long)
    positions, _ = stub.get_rope_index(ids, kinds, image_grid_thw=grid)
    return torch.cat([positions, positions + LATER], dim=1)


def _built_here(n_axes: int) -> torch.Tensor:
    """Text (5 tokens), an image of 4 x 6 tokens, text (35 tokens): Qwen2-VL's layout; with
    more than three axes, the first ones keep the sequence positions (HunYuan-VL's)."""
    rows, cols = torch.meshgrid(torch.arange(4), torch.arange(6), indexing="ij")
    image = torch.stack([torch.zeros(24, dtype=torch.long), rows.flatten(), cols.flatten()])[
        -n_axes:
    ]
    if n_axes > 3:
        image = torch.cat([torch.arange(24).expand(n_axes - 3, -1), image])
    after = torch.arange(35) + 5 + 6
    ids = torch.cat(
        [torch.arange(5).expand(n_axes, -1), image + 5, after.expand(n_axes, -1)], dim=1
    )
    return torch.stack([ids, ids + LATER], dim=1)


def text_positions(module: Any, n_axes: int) -> torch.Tensor:
    """M-RoPE ids ``(n_axes, 2, s)`` for a text class of ``module``."""
    try:
        made = _from_rope_index(module, n_axes)
    except Exception:
        made = None
    return made if made is not None else _built_here(n_axes)


def _precomputed(module: Any, config: Any) -> torch.Tensor | None:
    for value in vars(module).values():
        helper = getattr(value, "precompute_positions", None)
        if isinstance(value, type) and value.__module__ == module.__name__ and helper:
            extra = len(inspect.signature(helper).parameters) - 1
            return helper(config, *([0] * extra))
    return None


#: How a model changes the ids of get_vision_position_ids before its rotary class (directory).
ADJUST: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    # MuseGlimmerVisionModel.forward: position_ids.flip(-1) + 1
    "muse_glimmer": lambda p: p.flip(-1) + 1,
    "muse_spark": lambda p: p.flip(-1) + 1,
    # Inkling2VisionModel.forward: patches at (row + 1, col + 1), class tokens at (0, 0)
    "inkling2": lambda p: torch.cat([p.new_zeros(1, 2), p + 1]),
}


def vision_positions(directory: str, module: Any, config: Any, n_axes: int) -> torch.Tensor:
    """Patch coordinates ``(N, n_axes)`` as the model of ``directory`` passes them."""
    precomputed = _precomputed(module, config)
    if precomputed is not None:
        return precomputed
    from transformers.vision_utils import get_vision_position_ids

    merge = _merge(directory, config)
    grid = torch.tensor([[t, h * merge, w * merge] for t, h, w in GRIDS])
    ids = get_vision_position_ids(grid, merge, include_temporal=n_axes == 3)
    return ADJUST.get(directory, lambda p: p)(ids)


def _llama4_vision(rotary: Any, config: Any) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """Llama 4's vision tower: patches (row + 1, col + 1) in row-major order, class token last."""
    side = config.image_size // config.patch_size
    positions = np.concatenate([posenc.grid_positions((side, side), start=1), [[0, 0]]])
    freqs = rotary(torch.zeros(1))[:, 0]  # (N + 1, 1, pairs): one table for every head
    return positions, freqs.real, freqs.imag


def _eomt_dinov3(rotary: Any, config: Any) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """EoMT-DINOv3: patch centres in [-1, 1], turned by 2π·c·ω (the model in eval mode)."""
    shape = (5, 7)
    centres = (posenc.grid_positions(shape) + 0.5) / np.array(shape) * 2.0 - 1.0
    pixels = torch.zeros(1, 3, shape[0] * config.patch_size, shape[1] * config.patch_size)
    cos, sin = rotary.eval()(pixels)
    return 2 * math.pi * centres, cos, sin


def _efficientloftr(rotary: Any, config: Any) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """EfficientLoFTR: the coarse features' grid after the query aggregation, 1-based, and the
    tables flattened over it as the model flattens them."""
    kernel, stride = config.q_aggregation_kernel_size, config.q_aggregation_stride
    shape = (5, 7)
    features = torch.zeros(1, config.hidden_size, *((n - 1) * stride + kernel for n in shape))
    cos, sin = rotary(features)
    tokens = math.prod(shape)
    flat = (t.reshape(1, tokens, t.shape[-1]) for t in (cos, sin))
    return posenc.grid_positions(shape, start=1), *flat


#: Rotary classes whose forward builds its own grid: class name -> (rotary, config) ->
#: (the coordinates the class uses (N, n_axes), cos, sin).
def _gemma4_vision(rotary: Any, config: Any) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """Gemma 4's vision tower: ``(batch, patches, 2)`` ids, each patch's (column, row) as its
    image processor makes them (``meshgrid(..., indexing="xy")``)."""
    rows, columns = 5, 7
    grid = torch.meshgrid(torch.arange(columns), torch.arange(rows), indexing="xy")
    ids = torch.stack(grid, dim=-1).reshape(-1, 2)
    cos, sin = rotary(torch.zeros(1), ids[None])
    return ids.numpy(), cos, sin


GRID_CALLS: dict[str, Callable[[Any, Any], tuple[np.ndarray, torch.Tensor, torch.Tensor]]] = {
    "Llama4VisionRotaryEmbedding": _llama4_vision,
    "EomtDinov3RotaryEmbedding": _eomt_dinov3,
    "EfficientLoFTRRotaryEmbedding": _efficientloftr,
    "Gemma4VisionRotaryEmbedding": _gemma4_vision,
}


# -- comparisons -------------------------------------------------------------------------------


def compare_tables(
    layer: Any, positions: np.ndarray, cos: torch.Tensor, sin: torch.Tensor, layout: str
) -> str | None:
    """None when the class's tables equal the plan's for ``positions`` (``(..., n_axes)``)."""
    matrix, attention = layer.axis_frequencies(int(np.max(positions)) + 1)
    try:
        ours_cos, ours_sin = layer.cos_sin(positions, dtype=np.float64)
    except ValueError as exc:
        return short(exc)
    # |p| of the coordinate each pair turns with, times that pair's frequency
    reach = np.abs(positions).astype(np.float64)[..., :, None] * np.abs(matrix)
    tolerance = (2e-6 + 1e-6 * reach.max(axis=-2)) * max(float(attention.max()), 1.0)
    return compare_copies(layer, (cos, sin), (ours_cos, ours_sin), tolerance, layout)


def doubled_split(
    layer: Any, positions: np.ndarray, cos: torch.Tensor, sin: torch.Tensor
) -> str | None:
    """Where the class's tables differ from a sectioned M-RoPE plan's: the reason when they are
    the doubled table ``[θ, θ]`` split by ``2·sections`` (transformers' HunYuan-VL: the two
    channels of a pair turn with different axes), else None."""
    if layer.order != "sectioned" or layer.schedule != "shared" or layer.pairs != "half":
        return None
    omega, attention = layer.frequencies_at(int(np.max(positions)) + 1)
    chosen = np.asarray(positions, dtype=np.float64)[..., doubled_split_axes(layer.sections)]
    theta = chosen * np.concatenate([omega, omega])
    reach = np.abs(positions).max(axis=-1, keepdims=True) * omega.max()
    tolerance = (2e-6 + 1e-6 * reach) * max(attention, 1.0)
    for theirs, ours in ((cos, np.cos(theta)), (sin, np.sin(theta))):
        table = theirs.double().numpy().reshape(ours.shape)
        if not (np.abs(table - attention * ours) <= tolerance).all():
            return None
    return DOUBLED_SPLIT


def compare_copies(
    layer: Any,
    theirs: tuple[torch.Tensor, torch.Tensor],
    ours: tuple[np.ndarray, np.ndarray],
    tolerance: np.ndarray,
    layout: str,
) -> str | None:
    """None when every copy of every pair of the class's cos/sin (laid out ``layout``) equals
    the plan's (laid out for ``layer.pairs``) within ``tolerance`` (``(..., pairs)``). A
    ``pairs_per_axis`` layer (Gemma 4's vision tower) is compared block by block."""
    if getattr(layer, "pairs_per_axis", False):
        for start, stop in axis_blocks(layer):
            block = _Block(layer.pairs, 2 * (stop - start))
            problem = compare_copies(
                block,
                (theirs[0][..., 2 * start : 2 * stop], theirs[1][..., 2 * start : 2 * stop]),
                (ours[0][..., 2 * start : 2 * stop], ours[1][..., 2 * start : 2 * stop]),
                tolerance[..., start:stop],
                layout,
            )
            if problem is not None:
                return f"the block of pairs {start}..{stop - 1}: {problem}"
        return None
    n = layer.rotary_dim // 2
    for name, table, expected_table in zip(("cos", "sin"), theirs, ours, strict=True):
        lead = expected_table.shape[:-1]
        if table.numel() != math.prod(lead) * table.shape[-1]:
            return f"{name} has shape {tuple(table.shape)}, the plan's {expected_table.shape}"
        try:
            copies = per_pair(table.reshape(*lead, table.shape[-1]), layout, n)
        except AssertionError as exc:
            return str(exc)
        expected = per_pair(expected_table, layer.pairs, n)[0]
        for copy in copies:
            if not (np.abs(copy - expected) <= tolerance).all():
                worst = float(np.nanmax(np.abs(copy - expected)))
                return f"{name} differs by {worst:.3g} (tolerance {float(tolerance.max()):.3g})"
    return None


class _Block(NamedTuple):
    """One axis's block of a ``pairs_per_axis`` layer, as :func:`compare_copies` reads it."""

    pairs: str
    rotary_dim: int


def axis_blocks(layer: Any) -> list[tuple[int, int]]:
    """The pair slots ``(start, stop)`` of each axis's block of a ``pairs_per_axis`` layer."""
    blocks, start = [], 0
    for axis in layer.slot_order:
        blocks.append((start, start + layer.sections[axis]))
        start += layer.sections[axis]
    return blocks


def apply_plan(layer: Any, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """posenc's rotation of ``x`` with the plan's tables (block by block for a
    ``pairs_per_axis`` layer)."""
    if not getattr(layer, "pairs_per_axis", False):
        return posenc.apply_rotary(x, cos, sin, pairs=layer.pairs)
    parts = [
        posenc.apply_rotary(
            x[..., 2 * a : 2 * b],
            cos[..., 2 * a : 2 * b],
            sin[..., 2 * a : 2 * b],
            pairs=layer.pairs,
        )
        for a, b in axis_blocks(layer)
    ]
    return np.concatenate(parts, axis=-1)


def _layouts(table_shape: tuple[int, ...], width: int) -> list[tuple[tuple[int, ...], int]]:
    """Query layouts to try: (shape, the axis of its single head)."""
    lead = table_shape[:-1]
    heads_first = ((*lead[:-1], 1, lead[-1], width), len(lead) - 1)  # (b, heads, s, d)
    heads_after = ((*lead, 1, width), len(lead))  # (s, heads, d): vision towers' unsqueeze(-2)
    batch = ((1, *lead, 1, width), len(lead) + 1)  # (b, s, heads, d): Llama 4's vision tower
    # a wrong guess broadcasts to (s, s, d): try the likely layout of the table's rank first
    return (
        [heads_after, heads_first, batch] if len(lead) == 1 else [heads_first, heads_after, batch]
    )


def _rotate(
    fn: Any, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, n_axes: int
) -> Any:
    fn = plain_function(fn)
    names = list(inspect.signature(fn).parameters)
    if names[:3] == ["query", "key", "freqs_ci"]:
        return fn(q, k, torch.complex(cos, sin))
    if names[:4] == ["x", "cos", "sin", "position_ids"]:  # one tensor, split per axis
        ids = torch.zeros(*cos.shape[:-1], n_axes)  # only its last size is read
        return fn(q, cos, sin, ids), fn(k, cos, sin, ids)
    return fn(q, k, cos, sin)


def compare_rotation(
    layer: Any, fn: Any, cos: torch.Tensor, sin: torch.Tensor, positions: np.ndarray
) -> str | None:
    """None when ``fn`` with the class's tables gives the scores of posenc's rotation."""
    width = 2 * (layer.rotary_dim // 2)
    tokens = math.prod(positions.shape[:-1])
    if tokens > ROTATED_TOKENS:  # every k-th token: the scores grow as tokens²
        keep = np.linspace(0, tokens - 1, ROTATED_TOKENS).round().astype(np.int64)
        ones = (1,) * (cos.dim() - 2)  # a table's leading 1s stay: they say its layout
        cos, sin = (t.reshape(tokens, -1)[keep].reshape(*ones, len(keep), -1) for t in (cos, sin))
        positions, tokens = positions.reshape(tokens, -1)[keep], ROTATED_TOKENS
    rng = np.random.default_rng(0)
    q_np, k_np = rng.standard_normal((2, tokens, width), dtype=np.float32)
    ours_cos, ours_sin = layer.cos_sin(positions.reshape(tokens, -1), dtype=np.float64)
    ours = [apply_plan(layer, t.astype(np.float64), ours_cos, ours_sin) for t in (q_np, k_np)]
    failure = "no query layout fits it"
    for shape, head in _layouts(tuple(cos.shape), width):
        if math.prod(shape) != tokens * width:
            continue
        q, k = (torch.from_numpy(t).reshape(shape) for t in (q_np, k_np))
        try:
            rotated = _rotate(fn, q, k, cos, sin, len(layer.axes))
        except Exception as exc:
            failure = short(exc)
            continue
        if any(tuple(t.shape) != shape for t in rotated):
            continue
        a, c = (t.squeeze(head).reshape(tokens, width).double().numpy() for t in rotated)
        worst = float(np.abs(a @ c.T - ours[0] @ ours[1].T).max())
        if not worst <= 1e-3 * math.sqrt(width):
            return f"pairs {layer.pairs!r}: q·k differs from {fn.__qualname__}'s by {worst:.3g}"
        return None
    return f"rotation {getattr(fn, '__qualname__', fn)} failed: {failure}"


def rotation_function(layer: Any, module: Any, vision: bool) -> Any:
    """The model's function that rotates with this layer's tables (its ``forward`` where
    transformers wraps the function in a module, as 5.25 does for functions a kernel from the
    Hub may replace: the module's signature is ``(*args, **kwargs)``)."""
    source = layer.pairs_source
    if source.startswith("transformers."):
        owner, _, name = source.rpartition(".")
        found = getattr(importlib.import_module(owner), name)
    elif vision and hasattr(module, "apply_rotary_pos_emb_vision"):
        found = module.apply_rotary_pos_emb_vision
    else:
        found = getattr(module, "apply_rotary_pos_emb", None)
    return plain_function(found)


def plain_function(found: Any) -> Any:
    """``found``, or its ``forward`` where transformers wrapped the function in a module."""
    return found.forward if isinstance(found, torch.nn.Module) else found
