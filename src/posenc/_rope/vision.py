"""Vision towers: the RoPE their config classes imply where a ``config.json`` says nothing.

transformers marks the config classes of 2-D (3-D) vision towers ``default_rope_type =
"axial"``: whatever the file says, their rotary class builds the axial layout, with the class's
``default_theta`` where the file gives no ``rope_theta``. Their ``config.json`` blocks often
carry no rope key at all, and the ``vision_config`` block of a composite config often no
``model_type`` either. This module holds those rules, one table for all of them:

- :data:`VISION_TOWERS`: model_type -> :class:`VisionTower` (the base the class defaults to,
  whether the tower rotates at all). The layout of each tower's pairs (which coordinate first,
  which pairs per axis) is in ``axes`` (:data:`~posenc._rope.axes.AXES_BY_MODEL`; the default
  is ``compute_axial_rope_parameters``: ``head_dim / 4`` pairs per axis, the height pairs first).
- :data:`VISION_OF`: the model_type of a composite config -> the model_type of its
  ``vision_config``, for blocks that carry none (or carry the composite's own).
- :data:`VISION_ALIASES`: the ``attribute_map`` of these classes (``depth`` for the number of
  layers, ``num_heads`` for the heads), applied to a dict read from ``config.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

__all__ = [
    "VISION_ALIASES",
    "VISION_OF",
    "VISION_TOWERS",
    "VisionTower",
    "standardize",
    "vision_type",
]

_M = "transformers.models."


class VisionTower(NamedTuple):
    """What a vision config class decides about its RoPE without the file saying it.

    Attributes:
        theta: ``default_theta`` of the config class: the base when the file gives none.
        rotary: False for a tower that rotates nothing (its class is marked axial, its model
            adds position embeddings instead).
        note: why it does not rotate.
    """

    theta: float = 10000.0
    rotary: bool = True
    note: str = ""


_AXIAL = VisionTower()

#: model_type -> :class:`VisionTower`, for every config class of transformers 5.x whose
#: ``default_rope_type`` is ``"axial"``.
VISION_TOWERS: Mapping[str, VisionTower] = MappingProxyType(
    {
        **dict.fromkeys(
            [
                # Qwen-VL family and towers copied from it: head_dim / 4 pairs per axis, the
                # height pairs first (compute_axial_rope_parameters), rotate_half pairs
                "qwen2_vl_vision",  # head_dim = embed_dim // num_heads
                "qwen2_5_vl_vision",
                "qwen2_5_omni_vision_encoder",
                "qwen3_vl_vision",
                "qwen3_vl_moe_vision",
                "qwen3_omni_moe_vision_encoder",
                "qwen3_5_vision",
                "qwen3_5_moe_vision",
                "qwen4_exp_vision",
                "glm4v_vision",
                "glm4v_moe_vision",
                "glm5_next_vision",
                "glm_ocr_vision",
                "cohere_compass_vision",
                "dots3_note_vision_encoder",
                "ernie4_5_vl_moe_vision",
                "exaone4_5_vision",
                "mlcd_vision_model",
                "paddleocr_vl_vision",
                "video_llama_3_vision",
                # the same schedule in another layout (axes.AXES_BY_MODEL)
                "kimi_k25_vision",  # width and height pairs in turns, width first
                "step3p5_vision",  # the width pairs first
                "inkling2_vision",  # the width pairs first, pairs (2k, 2k + 1)
                "muse_glimmer_vision",  # coordinates passed (w, h)
                "muse_spark_vision",
                "minimax_m3_vl_vision",  # three axes (t, h, w)
                "pixtral",  # one schedule over the head, dealt to rows and columns
                "sam3_vit_model",  # (w, h), pairs (2k, 2k + 1)
                # SAM 2 video family: the memory attention's RoPE, (w, h), pairs (2k, 2k + 1)
                "sam2_video",
                "sam3_tracker_video",
                "edgetam_video",
            ],
            _AXIAL,
        ),
        "lfm3_vl_vision": VisionTower(theta=1_000_000.0),
        "gemma4_vision": VisionTower(theta=100.0),  # its pair layout has no table (models)
        "glm_image_vision": VisionTower(
            rotary=False,
            note=f"{_M}glm_image.modeling_glm_image.GlmImageVisionModel has no rotary "
            "embedding: it adds learned position embeddings, interpolated to the patch grid "
            "(GlmImageVisionEmbeddings)",
        ),
    }
)

#: model_type of a composite config -> model_type of its ``vision_config``.
VISION_OF: Mapping[str, str] = MappingProxyType(
    {
        "cohere_compass": "cohere_compass_vision",
        "dots3_note": "dots3_note_vision_encoder",
        "ernie4_5_vl_moe": "ernie4_5_vl_moe_vision",
        "exaone4_5": "exaone4_5_vision",
        "gemma4": "gemma4_vision",
        "glm4v": "glm4v_vision",
        "glm4v_moe": "glm4v_moe_vision",
        "glm5_next": "glm5_next_vision",
        "glm_image": "glm_image_vision",
        "glm_ocr": "glm_ocr_vision",
        "inkling2": "inkling2_vision",
        "kimi_k25": "kimi_k25_vision",
        "lfm3_vl": "lfm3_vl_vision",
        "minimax_m3_vl": "minimax_m3_vl_vision",
        "muse_glimmer": "muse_glimmer_vision",
        "muse_spark": "muse_spark_vision",
        "paddleocr_vl": "paddleocr_vl_vision",
        "qwen2_5_omni": "qwen2_5_omni_vision_encoder",  # through thinker_config
        "qwen2_5_omni_thinker": "qwen2_5_omni_vision_encoder",
        "qwen2_5_vl": "qwen2_5_vl_vision",
        "qwen2_vl": "qwen2_vl_vision",
        "qwen3_5": "qwen3_5_vision",
        "qwen3_5_moe": "qwen3_5_moe_vision",
        "qwen3_omni_moe": "qwen3_omni_moe_vision_encoder",  # through thinker_config
        "qwen3_omni_moe_thinker": "qwen3_omni_moe_vision_encoder",
        "qwen3_vl": "qwen3_vl_vision",
        "qwen3_vl_moe": "qwen3_vl_moe_vision",
        "qwen4_exp": "qwen4_exp_vision",
        "step3p7": "step3p5_vision",
        "video_llama_3": "video_llama_3_vision",
    }
)

#: The attribute_map of the vision config classes: a file's key -> the name posenc reads.
VISION_ALIASES: Mapping[str, str] = MappingProxyType(
    {"depth": "num_hidden_layers", "num_heads": "num_attention_heads"}
)


def vision_type(block_type: Any, parent_type: Any) -> str | None:
    """The model_type of a ``vision_config`` block: its own, else (none, or the composite's
    own name) the one :data:`VISION_OF` gives for the composite's model_type."""
    if isinstance(block_type, str) and block_type and block_type not in VISION_OF:
        return block_type
    for name in (block_type, parent_type):
        if isinstance(name, str) and name in VISION_OF:
            return VISION_OF[name]
    return block_type if isinstance(block_type, str) else None


def standardize(d: dict[str, Any], where: str) -> list[str]:
    """Give the dict of a vision tower's config (model_type in :data:`VISION_TOWERS`) the
    rope parameters its config class would: rope type ``axial`` (for none or ``default``), the
    class's base where the file gives none. Returns notes on what was taken from the class."""
    model = d["model_type"]
    tower = VISION_TOWERS[model]
    for alias, name in VISION_ALIASES.items():
        if d.get(name) is None and d.get(alias) is not None:
            d[name] = d[alias]
    if not tower.rotary:
        return []
    raw = d.get("rope_parameters")
    if raw is None:
        raw = d.get("rope_scaling")
    if raw is not None and not isinstance(raw, Mapping):
        return []  # the reader refuses it, naming the key
    params = dict(raw or {})
    if any(isinstance(v, Mapping) or v is None for v in params.values()):
        return []  # nested by layer type: read as the file gives it
    notes = []
    if params.get("rope_type", params.get("type")) in (None, "default"):
        params.pop("type", None)
        params["rope_type"] = "axial"
    if params.get("rope_theta") is None:
        theta = d.get("rope_theta")
        if theta is None:
            theta = tower.theta
            notes.append(f"{where}: rope_theta not given: {theta:g}, the default of {model}")
        params["rope_theta"] = theta
    d.pop("rope_scaling", None)
    d["rope_parameters"] = params
    return notes
