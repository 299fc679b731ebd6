"""What a model's code decides about its RoPE and its config does not say.

Configs give frequencies and sizes; the pair layout is the convention of the model's
``apply_rotary_pos_emb`` (or equivalent), recorded here per ``model_type``
(:data:`PAIRS_BY_MODEL`), with DeepSeek's ``rope_interleave`` flag read where the model has
it; every other model pairs channel ``i`` with ``i + rotary_dim/2`` (transformers'
``rotate_half``). Also here: what a model does with the rotation that the layout alone does
not say (notes), the layouts no posenc table describes, and the models whose config gives
the rotated channels as a number.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .._features import PairLayout
from .config import ConfigReading

__all__ = [
    "MODEL_NOTES",
    "PAIRS_BY_MODEL",
    "REFUSED",
    "ROTARY_DIM_MODELS",
    "STANDARD_TABLES",
    "UNSUPPORTED",
    "layer_base_notes",
    "nope_layer_types",
    "pairs_of",
]

_M = "transformers.models."
_HALF_SOURCE = "transformers' rotate_half convention (channel i pairs with i + rotary_dim/2)"

#: model_type -> (pair layout, the function of the model that rotates), for the models whose
#: attention does not pair channel ``i`` with ``i + rotary_dim/2`` (transformers' default).
PAIRS_BY_MODEL: Mapping[str, tuple[PairLayout, str]] = MappingProxyType(
    {
        **{
            t: ("interleaved", f"{_M}{m}.modeling_{m}.apply_rotary_pos_emb")
            for t, m in [
                ("cohere", "cohere"),  # rotate_half pairs 2k, 2k+1
                ("ergo", "ergo"),  # the same rotate_half (transformers 5.25)
                ("cohere2", "cohere2"),
                ("cohere2_moe", "cohere2_moe"),
                ("blt", "blt"),
                ("blt_patcher", "blt"),
                ("blt_local_encoder", "blt"),
                ("blt_local_decoder", "blt"),
                ("blt_global_transformer", "blt"),
                ("glm", "glm"),  # the half table, repeat_interleave'd
                ("glm4", "glm4"),
                ("helium", "helium"),
                ("ernie4_5", "ernie4_5"),
                ("ernie4_5_moe", "ernie4_5_moe"),
                ("moonshine", "moonshine"),
                ("moonshine_streaming", "moonshine_streaming"),
                ("deepseek_v4", "deepseek_v4"),
                ("pe_audio_encoder", "pe_audio"),  # 2x2 rotation blocks (stack_freqs)
                ("pe_video_encoder", "pe_video"),
                ("pe_audio_video_encoder", "pe_audio_video"),
                ("openai_privacy_filter", "openai_privacy_filter"),  # x[..., ::2], x[..., 1::2]
                ("ernie4_5_vl_moe_text", "ernie4_5_vl_moe"),
                ("glm4v_text", "glm4v"),  # rotate_half_llm pairs 2k, 2k+1
                ("glm_ocr_text", "glm_ocr"),
                ("efficientloftr", "efficientloftr"),  # Cohere's rotate_half
                ("gptj", "gptj"),  # rotate_every_two pairs 2k, 2k+1
                ("codegen", "codegen"),
            ]
        },
        **{  # vision towers whose rotate_pairwise pairs 2k, 2k+1
            t: ("interleaved", f"{_M}{m}.modeling_{m}.{f}")
            for t, m, f in [
                ("inkling2_vision", "inkling2", "apply_rotary_pos_emb_vision"),
                ("sam2_video", "sam2_video", "apply_rotary_pos_emb_2d"),
                ("sam3_tracker_video", "sam3_tracker_video", "apply_rotary_pos_emb_2d"),
                ("sam3_vit_model", "sam3", "apply_rotary_pos_emb_2d"),
                ("edgetam_video", "edgetam_video", "apply_rotary_pos_emb_2d_self_attn"),
                ("llama4_vision_model", "llama4", "vision_apply_rotary_emb"),  # complex pairs
            ]
        },
        # each axis's half of the head with its own rotate_half: pairs_per_axis (axes)
        "gemma4_vision": ("half", f"{_M}gemma4.modeling_gemma4.apply_multidimensional_rope"),
        **{
            t: ("interleaved", f"{_M}{m}.modeling_{m}.apply_rotary_emb")  # complex pairs
            for t, m in [("deepseek_v2", "deepseek_v2"), ("llama4_text", "llama4")]
        },
        **{
            t: ("interleaved", f"{_M}{m}.modeling_{m}.apply_rotary_pos_emb_interleave")
            for t, m in [
                ("axk2", "axk2"),
                ("bailing_hybrid", "bailing_hybrid"),
                ("deepseek_v32", "deepseek_v32"),
                ("dots3_note_text", "dots3_note"),
                ("glm_moe_dsa", "glm_moe_dsa"),
                ("hy_v4_vl_text", "hy_v4_vl"),  # transformers 5.24
                ("longcat_flash", "longcat_flash"),
                ("mistral_large4_text", "mistral_large4"),
            ]
        },
    }
)

# Models that choose by their config's ``rope_interleave`` (default True): model_type -> module.
_INTERLEAVE_FLAG = {
    "axk1": "axk1",
    "deepseek_v3": "deepseek_v3",
    "glm4_moe_lite": "glm4_moe_lite",
    "mistral4": "mistral4",
    "youtu": "youtu",
}

# What a model does with the rotation that the layout alone does not say.
MODEL_NOTES = {
    "ergo": "its full_attention layers rotate nothing and multiply q and k by "
    "sqrt(global_attention_scale), a constant scale (qk_scale), not a position",
    "deepseek_v4": "rotates the last rotary_dim channels of each head (the first ones pass)",
    "deepseek_v32": "its indexer rotates its own keys with half pairs",
    "mistral_large4_text": "multiplies the frequencies by exp(alpha), a buffer of the checkpoint",
    "mlcd_vision_model": "MLCDVisionModel prepends the class token's cos/sin, made from a "
    "learned parameter (class_pos_emb), to the patches' tables",
    "gemma4_vision": "rotates each axis's block of channels with its own rotate_half "
    "(apply_multidimensional_rope): the table is [x, x, y, y], pairs (i, i + head_dim/4) "
    "inside each half of the head (pairs_per_axis): apply it half by half",
    "ernie4_5_vl_moe_text": "height and width take turns over the first mrope_section[0] + "
    "mrope_section[1] pairs and time takes the last mrope_section[2] "
    "(Ernie4_5_VLMoeTextRotaryEmbedding): order 'turns_then_last'",
}

#: model_type -> the rotary form of the model that no posenc table and pair layout describe:
#: :func:`posenc.rope_plan` refuses these configs, naming the model type and the form.
REFUSED: Mapping[str, str] = MappingProxyType(
    {
        "nanochat": "rotates by -θ: its rotate_half returns (x2, -x1), so the rotation of its "
        "apply_rotary_pos_emb is the inverse of the one posenc's tables describe with pairs "
        "'half'",
    }
)

#: The forms of :data:`REFUSED` whose cos/sin tables are posenc's: only the rotation the model
#: applies to them differs. A module that returns these tables alone can be replaced, and
#: ``posenc.torch.swap_positions`` replaces it (verified like any other); the plan, which
#: describes the rotation too, is still refused.
STANDARD_TABLES: frozenset[str] = frozenset({"nanochat"})

# Models whose config gives the rotated channels as a number, ``rotary_dim`` (MiniMax-M2's older
# files; GPT-J and CodeGen). Other configs that carry a rotary_dim (MiniMax-M3-VL) rotate the
# whole head in transformers.
ROTARY_DIM_MODELS = frozenset({"gptj", "codegen", "minimax_m2"})


def nope_layer_types(reading: ConfigReading) -> dict[str, str]:
    """Layer types that a model's attention runs without positions although its config gives
    them a rope parameter set: layer type -> why (in words)."""
    model = reading.model_type or ""
    types = set(reading.layer_types or ())
    if model == "kolibri1" and reading.top.get("sliding_window") is not None:
        why = (
            "Kolibri's attention rotates only its sliding_attention layers when sliding_window "
            "is set: the others are global NoPE (no positions)"
        )
        return {t: why for t in types if t != "sliding_attention"}
    if model == "kolibri1_1":
        why = "Kolibri 1.1's indexed_attention layers use no positions (NoPE)"
        return {t: why for t in types if t == "indexed_attention"}
    return {}


#: Models whose attention reads ``layer_rope_theta`` as a flag (0: no RoPE) and rotates every
#: other layer at the global ``rope_theta``: model_type -> the model class that does.
_BASE_AS_FLAG = {
    "muse_spark_text": "MuseSparkTextModel",
    "muse_glimmer_text": "MuseGlimmerTextModel",
}


def layer_base_notes(reading: ConfigReading) -> list[str]:
    """Where a model's code departs from its per-layer bases (``layer_rope_theta``)."""
    model = reading.model_type or ""
    bases = reading.layer_bases
    if model not in _BASE_AS_FLAG or bases is None:
        return []
    flat = reading.params.get("full_attention") or {}
    found = flat.get("rope_theta", reading.top.get("rope_theta"))
    overall = 10000.0 if found is None else float(found)
    own = sorted({b for b in bases if b and b != overall})
    if not own:
        return []
    return [
        f"layer_rope_theta gives bases {own} other than the global rope_theta {overall}: "
        f"the plan follows layer_rope_theta, as the config documents it; transformers' "
        f"{_BASE_AS_FLAG[model]} reads it as a flag (0: no RoPE) and rotates those layers "
        "at the global base"
    ]


def pairs_of(reading: ConfigReading) -> tuple[PairLayout, str]:
    """``(pair layout, the function of the model that decides it)`` for a config."""
    model = reading.model_type or ""
    if model in PAIRS_BY_MODEL:
        return PAIRS_BY_MODEL[model]
    if model in _INTERLEAVE_FLAG:
        flag = reading.top.get("rope_interleave")
        module = _INTERLEAVE_FLAG[model]
        if flag is None or flag:
            return "interleaved", f"{_M}{module}.modeling_{module}.apply_rotary_pos_emb_interleave"
        return "half", f"{_M}{module}.modeling_{module}.apply_rotary_pos_emb"
    return "half", _HALF_SOURCE


# Layers whose tables posenc does not build: the reason is their note in MODEL_NOTES (none
# at present: the forms without a table are refused, REFUSED).
UNSUPPORTED: frozenset[str] = frozenset()
