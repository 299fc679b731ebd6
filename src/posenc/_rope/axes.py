"""The position axes of a rope plan's layer: how its rotary pairs split between coordinates.

Multi-axis layers come in two families, and a config says which:

- **M-RoPE** (multimodal language models): every token has ``(t, h, w)`` coordinates, and the
  config gives the pairs of each axis (``mrope_section``, 4.x ``xdrope_section``) and whether
  the axes take turns pair by pair (``mrope_interleaved``). All pairs share one RoPE schedule
  over the rotated channels (``schedule="shared"``). Where a config leaves them out, the
  model's own default applies (:data:`MROPE_DEFAULTS`).
- **2-D vision RoPE** (rope type ``axial``): a patch has coordinates ``(h, w)``, each axis takes
  ``head_dim / 4`` pairs with its own schedule over ``head_dim / 2`` channels
  (``compute_axial_rope_parameters``), the height pairs first.

What a config cannot say is the order in which a model lays out its axes' pairs, which
coordinate it passes first, or that a rotary class builds a 2-D grid although its config names
the rope type ``default``: that is the model's code, recorded here per ``model_type``
(:data:`AXES_BY_MODEL`), with the function that decides it.

A layout becomes a frequency matrix through :func:`posenc.multi_axis_frequencies`, in the
order the axes take pair slots, with its rows then put in the order of the coordinates.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._features import PairLayout
from . import xdrope
from .config_values import boolean, integers
from .multi_axis import (
    AxisOrder,
    AxisSchedule,
    MultiAxisFrequencies,
    multi_axis_cos_sin,
    multi_axis_frequencies,
)
from .scaling import RopeScaling

__all__ = [
    "AXES_BY_MODEL",
    "MROPE_DEFAULTS",
    "MROPE_ORDERS",
    "AxisLayout",
    "ModelAxes",
    "axial_layout",
    "block_tables",
    "layout_frequencies",
    "mrope_layout",
    "text_layout",
]

_M = "transformers.models."
_AXES = {2: ("height", "width"), 3: ("temporal", "height", "width")}
_WH = ("width", "height")


class AxisLayout(NamedTuple):
    """How the pairs of a multi-axis layer split between its coordinates.

    Attributes:
        axes: the coordinates, in the order the model passes them.
        sections: the pairs of each axis, in the same order.
        order: ``"sectioned"`` or ``"interleaved"`` (see :func:`posenc.multi_axis_frequencies`).
        schedule: ``"shared"``, ``"dealt"`` or ``"per_axis"``.
        slot_order: the axes (indices into ``axes``) in the order they take pair slots.
        source: where the layout comes from (a config key, or the model's function).
        pairs_per_axis: each axis's pairs rotate inside a block of channels of their own
            (Gemma 4's vision tower), instead of one layout over all rotated channels.
    """

    axes: tuple[str, ...]
    sections: tuple[int, ...]
    order: AxisOrder
    schedule: AxisSchedule
    slot_order: tuple[int, ...]
    source: str
    pairs_per_axis: bool = False


class ModelAxes(NamedTuple):
    """A model's 2-D (or 3-D) rotary layout, where the config does not give it."""

    axes: tuple[str, ...] = ("height", "width")
    order: AxisOrder = "sectioned"
    schedule: AxisSchedule = "per_axis"
    slot_order: tuple[int, ...] = ()  # default: the order of ``axes``
    source: str = ""
    note: str = ""
    whole_hidden: bool = False  # it rotates the hidden state before the heads split
    pairs_per_axis: bool = False  # each axis rotates its own block with its own pair layout


def _vision(module: str, owner: str, **kwargs: Any) -> ModelAxes:
    return ModelAxes(source=f"{_M}{module}.modeling_{module}.{owner}", **kwargs)


#: model_type -> the layout of its 2-D rotary class, for the models that lay out their axes
#: otherwise than ``(h, w)`` coordinates with the height pairs first, or whose config names
#: another rope type. ``axes`` is the order in which the model passes the coordinates.
AXES_BY_MODEL: Mapping[str, ModelAxes] = MappingProxyType(
    {
        # inv_freq over the whole head, even frequencies to rows, odd ones to columns
        "pixtral": _vision("pixtral", "PixtralVisionRotaryEmbedding", schedule="dealt"),
        # [w0, h0, w1, h1, ...]: the axes take turns, width first
        "kimi_k25_vision": _vision(
            "kimi_k25", "Kimi_K25VisionRotaryEmbedding", order="interleaved", slot_order=(1, 0)
        ),
        # the width pairs first
        "step3p5_vision": _vision("step3p7", "Step3p7VisionRotaryEmbedding", slot_order=(1, 0)),
        "inkling2_vision": _vision("inkling2", "Inkling2VisionRotaryEmbedding", slot_order=(1, 0)),
        "llama4_vision_model": _vision(
            "llama4",
            "Llama4VisionRotaryEmbedding",
            slot_order=(1, 0),
            note="its rotary class builds the patch grid itself: (row + 1, column + 1) per "
            "patch, and the class token last with angle 0",
        ),
        # [x, x, y, y]: each axis's half of the head rotated with its own rotate_half; the
        # image processor gives each patch (x, y) = (column, row)
        "gemma4_vision": _vision(
            "gemma4", "apply_multidimensional_rope", axes=_WH, pairs_per_axis=True
        ),
        # (t, h, w) patch coordinates, 2 * ((head_dim // 3) // 2) channels each
        "minimax_m3_vl_vision": _vision(
            "minimax_m3_vl", "MiniMaxM3VLVisionRotaryEmbedding", axes=_AXES[3]
        ),
        # the vision towers pass (w + 1, h + 1)
        "muse_glimmer_vision": _vision("muse_glimmer", "MuseGlimmerVisionModel", axes=_WH),
        "muse_spark_vision": _vision("muse_spark", "MuseSparkVisionModel", axes=_WH),
        # SAM passes (w, h) (precompute_positions)
        "sam2_video": _vision("sam2_video", "Sam2VideoMemoryAttention", axes=_WH),
        "sam3_tracker_video": _vision(
            "sam3_tracker_video", "Sam3TrackerVideoMemoryAttention", axes=_WH
        ),
        "edgetam_video": _vision("edgetam_video", "EdgeTamVideoMemoryAttention", axes=_WH),
        "sam3_vit_model": _vision("sam3", "Sam3ViTLayer", axes=_WH),
        # (row + 1, col + 1) taking turns over the hidden state, before the heads split
        "efficientloftr": _vision(
            "efficientloftr",
            "EfficientLoFTRRotaryEmbedding",
            order="interleaved",
            whole_hidden=True,
            note="its rotary class builds the grid of (row + 1, column + 1) itself and "
            "rotates hidden_size channels before the heads split",
        ),
        "eomt_dinov3": _vision(
            "eomt_dinov3",
            "EomtDinov3RotaryEmbedding",
            note="its rotary class turns by 2π·c·ω for patch centres c in [-1, 1] "
            "(get_patches_center_coordinates): the positions are 2π·c",
        ),
    }
)

#: Text models whose rotary module always takes one position per axis (M-RoPE), with the
#: sections and layout it uses when the config gives no ``mrope_section``:
#: model_type -> (sections, interleaved). None for the sections: two axes that take turns
#: pair by pair over the whole rotated part (NeoMME's rows and columns).
MROPE_DEFAULTS: Mapping[str, tuple[tuple[int, ...] | None, bool]] = MappingProxyType(
    {
        **dict.fromkeys(
            [
                "qwen2_vl_text",
                "qwen2_5_vl_text",
                "qwen2_5_omni_text",
                "qwen2_5_omni_talker",
                "paddleocr_vl_text",
            ],
            ((16, 24, 24), False),
        ),
        **dict.fromkeys(
            [
                "qwen3_vl_text",
                "qwen3_vl_moe_text",
                "qwen3_omni_moe_text",
                "cosmos3_edge_text",
                "cohere_compass_text",
                "hy_v4_vl_text",  # transformers 5.24: recomposition_frequencies
            ],
            ((24, 20, 20), True),
        ),
        **dict.fromkeys(
            ["qwen3_5_text", "qwen3_5_moe_text", "qwen4_exp_text"], ((11, 11, 10), True)
        ),
        **dict.fromkeys(
            ["glm4v_text", "glm_ocr_text", "glm4v_moe_text", "glm_image_text"],
            ((8, 12, 12), False),
        ),
        # its own layout (height and width in turns, then time): MROPE_ORDERS
        "ernie4_5_vl_moe_text": ((22, 22, 20), False),
        "neomme": (None, True),
    }
)

#: M-RoPE text models whose code lays out the axes otherwise than ``mrope_interleaved`` says:
#: model_type -> (order, slot_order, the function that decides it). ``mrope_section`` lists
#: the sections in slot order.
MROPE_ORDERS: Mapping[str, tuple[AxisOrder, tuple[int, ...], str]] = MappingProxyType(
    {
        # Ernie4_5_VLMoeTextRotaryEmbedding: h and w in turns over the first
        # mrope_section[0] + mrope_section[1] pairs, then t; the (t, h, w) ids in that order
        "ernie4_5_vl_moe_text": (
            "turns_then_last",
            (1, 2, 0),
            f"{_M}ernie4_5_vl_moe.modeling_ernie4_5_vl_moe.Ernie4_5_VLMoeTextRotaryEmbedding",
        ),
    }
)


def mrope_layout(
    model_type: str | None, params: dict[str, Any], top: Mapping[str, Any], rope_type: str
) -> tuple[tuple[int, ...] | None, bool, str] | None:
    """``(sections, interleaved, source)`` of an M-RoPE layer (sections None: two axes taking
    turns over the whole rotated part), or None for a 1-D layer. Pops the keys it reads."""
    where = "mrope_section"
    section = params.pop("mrope_section", None)
    legacy = params.pop("xdrope_section", None)  # HunYuan VL's older name
    if section is None and legacy is not None:
        section, where = legacy, "xdrope_section"
    if section is None and top.get("mrope_section") is not None:
        section = top["mrope_section"]
    interleaved = params.pop("mrope_interleaved", None)
    if interleaved is None:
        interleaved = top.get("mrope_interleaved")
    elif not isinstance(interleaved, bool):
        boolean("", "mrope_interleaved", interleaved)
    default = MROPE_DEFAULTS.get(model_type or "")
    if default is not None and interleaved is None:  # the model's own layout
        interleaved = default[1]
    if section is None and default is not None:
        section, where = default[0], f"the default of {model_type}"
        if section is None:
            return None, True, where
    if section is None and rope_type == "mrope":
        raise ValueError(
            "rope_type 'mrope' needs 'mrope_section' (the rotary pairs of each axis, e.g. "
            "[16, 24, 24]), got none"
        )
    if section is None:
        return None
    return integers("", where, section), bool(interleaved), where


def text_layout(
    sections: tuple[int, ...] | None,
    interleaved: bool,
    source: str,
    n_pairs: int,
    model_type: str | None = None,
) -> tuple[AxisLayout, str]:
    """The :class:`AxisLayout` of an M-RoPE text layer with ``n_pairs`` rotated pairs, and a
    note when the first section is not the one the config gives.

    Interleaved M-RoPE (Qwen3-VL's ``recomposition_frequencies``) places the pairs of axes 1, 2,
    ... and gives the first axis every other pair: ``sections[0]`` is not read. A model of
    :data:`MROPE_ORDERS` has its own layout.
    """
    if model_type is not None and model_type in MROPE_ORDERS and sections is not None:
        return _model_text_layout(model_type, sections, source), ""
    note = ""
    if sections is None:  # two axes taking turns over every pair
        sections = (n_pairs - n_pairs // 2, n_pairs // 2)
    elif interleaved and len(sections) > 1 and sum(sections) != n_pairs:
        first = n_pairs - sum(sections[1:])
        note = (
            f"{source}[0] = {sections[0]} is not read: with interleaved sections the first "
            f"axis takes the {first} pairs the others leave (of {n_pairs})"
        )
        sections = (first, *sections[1:])
    if model_type == "hunyuan_vl_text":  # XD-RoPE: sequence, width, height, image index
        names = xdrope.axis_names(len(sections), source)
    else:
        names = _AXES.get(len(sections), tuple(f"axis{i}" for i in range(len(sections))))
    layout = AxisLayout(
        axes=names,
        sections=sections,
        order="interleaved" if interleaved else "sectioned",
        schedule="shared",
        slot_order=tuple(range(len(sections))),
        source=source,
    )
    return layout, note


def _model_text_layout(model_type: str, sections: tuple[int, ...], source: str) -> AxisLayout:
    """The layout of a model of :data:`MROPE_ORDERS`; ``sections`` in its slot order."""
    order, slots, owner = MROPE_ORDERS[model_type]
    if len(sections) != len(slots):
        raise ValueError(
            f"{source} must give {len(slots)} sections for {model_type} (its axes "
            f"{[_AXES[len(slots)][a] for a in slots]}), got {list(sections)}"
        )
    if order == "turns_then_last" and len(set(sections[:-1])) > 1:  # the model stacks them
        raise ValueError(
            f"{model_type} gives the axes of {source}[0] and {source}[1] one pair in turn: "
            f"{source}[0] and {source}[1] must be equal, got {sections[0]} and {sections[1]}"
        )
    in_axes = [0] * len(slots)
    for slot, axis in enumerate(slots):
        in_axes[axis] = sections[slot]
    return AxisLayout(
        axes=_AXES[len(slots)],
        sections=tuple(in_axes),
        order=order,
        schedule="shared",
        slot_order=slots,
        source=f"{source} ({owner})",
    )


def axial_layout(model_type: str | None, head_dim: int) -> tuple[AxisLayout, str]:
    """The layout of a 2-D vision layer of ``head_dim`` channels (``hidden_size`` for a model
    that rotates before the heads split), and the model's note."""
    model = AXES_BY_MODEL.get(model_type or "", ModelAxes())
    n = len(model.axes)
    per_axis = (head_dim // n) // 2  # transformers: spatial_dim = 2 * ((head_dim // n) // 2)
    source = model.source or f"{_M}<model>.compute_axial_rope_parameters (the height pairs first)"
    layout = AxisLayout(
        axes=model.axes,
        sections=(per_axis,) * n,
        order=model.order,
        schedule=model.schedule,
        slot_order=model.slot_order or tuple(range(n)),
        source=source,
        pairs_per_axis=model.pairs_per_axis,
    )
    return layout, model.note


def layout_frequencies(
    layout: AxisLayout, base: float, scaling: RopeScaling | None, seq_len: int | None = None
) -> MultiAxisFrequencies:
    """The frequency matrix ``(n_axes, n_pairs)`` of a layout, rows in the order of its axes."""
    slots = layout.slot_order
    made = multi_axis_frequencies(
        [layout.sections[a] for a in slots],
        order=layout.order,
        schedule=layout.schedule,
        base=base,
        scaling=scaling,
        seq_len=seq_len,
    )
    matrix = np.empty_like(made.frequencies)
    matrix[list(slots)] = made.frequencies
    matrix.setflags(write=False)
    return MultiAxisFrequencies(matrix, made.attention)


def block_tables(
    positions: Any,
    frequencies: MultiAxisFrequencies,
    blocks: list[int],
    pairs: PairLayout,
    dtype: Any,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The cos/sin of a layout whose axes rotate blocks of their own (``pairs_per_axis``):
    ``blocks`` gives the pairs of each block, in slot order, each laid out for ``pairs``
    inside its ``2·blocks[i]`` channels; ``(*S, 2·sum(blocks))`` each."""
    matrix, attention = frequencies
    tables, start = [], 0
    for size in blocks:
        part = MultiAxisFrequencies(
            matrix[:, start : start + size], attention[start : start + size]
        )
        tables.append(
            multi_axis_cos_sin(positions, 2 * size, frequencies=part, pairs=pairs, dtype=dtype)
        )
        start += size
    cos, sin = (np.concatenate(parts, axis=-1) for parts in zip(*tables, strict=True))
    return cos, sin
