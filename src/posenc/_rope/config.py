"""Reading the RoPE settings of a Hugging Face config, whatever its spelling.

One function, :func:`read_config`, turns a ``transformers`` config object (anything with
``to_dict()``, or with attributes) or a plain dict from ``config.json`` into a
:class:`ConfigReading`: the rope parameter sets by label, which label each layer uses, and the
sizes around them. The spellings are those of the config classes of ``transformers`` 5.x and of
the ``config.json`` files written by 4.x:

- rope parameters: ``rope_parameters`` (5.x; flat, or nested by layer type or by another label),
  else ``rope_scaling`` (4.x); ``type`` for ``rope_type``.
- base: ``rope_theta`` inside the parameters, else at the top level, else ``rotary_emb_base``
  (GPT-NeoX); per layer type in 4.x files: ``rope_local_base_freq`` (Gemma 3: sliding layers),
  ``global_rope_theta`` / ``local_rope_theta`` (ModernBERT); else 10000, transformers' default.
- rotated part: ``partial_rotary_factor`` (inside or at the top level), ``rotary_pct``
  (GPT-NeoX), ``rotary_dim`` (GPT-J, CodeGen: a number of channels), ``qk_rope_head_dim``
  (DeepSeek's multi-head latent attention: the rotated part of each query/key head).
- head size: ``head_dim``, else ``hidden_size // num_attention_heads`` (``embed_dim`` and
  ``num_heads`` in vision towers; SAM 2 video's memory attention:
  ``memory_attention_hidden_size // (memory_attention_downsample_rate *
  memory_attention_num_attention_heads)``); per layer,
  ``per_layer_config`` (``{layer index: {"head_dim": ...}}``) and ``global_head_dim`` (Gemma 4's
  full-attention layers).
- layers: ``layer_types``, else derived from ``sliding_window_pattern`` (Gemma 3) or
  ``global_attn_every_n_layers`` (ModernBERT); layers without RoPE from ``no_rope_layers`` (1: the
  layer rotates, 0: it does not; SmolLM3, Llama 4), ``no_rope_layer_interval``, a ``None``
  parameter set (a layer type without RoPE), a layer type that is not attention,
  per-layer bases ``layer_rope_theta`` (GraniteSWA: 0 for a layer without RoPE),
  ``position_embedding_type`` other than ``"rotary"`` / ``"rope"`` (ESM, Granite hybrid), and
  Falcon's ``alibi = true`` (ALiBi instead of RoPE: ``posenc plan`` shows its bias).
- composite models: the language model's ``text_config`` (also inside ``thinker_config``); a
  ``vision_config`` with RoPE settings of its own is named in the notes (its plan is
  ``rope_plan(config.vision_config)``).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import config_values as values
from .vision import VISION_TOWERS, standardize, vision_type

__all__ = ["NOT_ATTENTION", "ConfigReading", "read_config"]

#: Layer types that are not attention layers: they use no positions.
NOT_ATTENTION = frozenset(
    {"linear_attention", "mamba", "mamba2", "conv", "recurrent", "mlp", "moe"}
)

# Keys that say a config has RoPE settings of its own (else its text_config is read).
_ROPE_KEYS = (
    "rope_parameters",
    "rope_scaling",
    "rope_theta",
    "rotary_emb_base",
    "rotary_pct",
    "rotary_dim",
    "partial_rotary_factor",
    "rope_local_base_freq",
    "local_rope_theta",
    "global_rope_theta",
)

# position_embedding_type values that mean RoPE.
_ROTARY = ("rotary", "rope")

#: The label of a flat parameter set (the one every attention layer uses), as transformers
#: names it when it validates one.
FLAT = "full_attention"

#: Models whose layer types read a rope parameter set of another name: model_type -> {layer
#: type: label}. DeepSeek-V4 keys its sets by branch: ``main`` (sliding-window layers) and
#: ``compress`` (the layers with a compressor).
_LAYER_LABELS: dict[str, dict[str, str]] = {
    "deepseek_v4": {
        "sliding_attention": "main",
        "compressed_sparse_attention": "compress",
        "heavily_compressed_attention": "compress",
    }
}


@dataclass
class ConfigReading:
    """What :func:`read_config` found (plain data; ``_rope/plan.py`` interprets it)."""

    where: str
    model_type: str | None
    params: dict[str, dict[str, Any] | None]
    nested: bool
    layer_labels: tuple[str, ...] | None
    layer_types: tuple[str, ...] | None
    head_dims: tuple[int, ...] | None
    head_dim: int
    top: dict[str, Any] = field(default_factory=dict)
    no_rope: frozenset[int] = frozenset()
    layer_bases: tuple[float, ...] | None = None
    rotary: bool = True
    notes: list[str] = field(default_factory=list)


# Attributes read from a config object on top of its to_dict(): some are properties or
# aliases (``attribute_map``) that to_dict() leaves out (JetMoe's and Zamba2's head_dim, ...).
_ATTRIBUTES = (
    "model_type",
    "head_dim",
    "hidden_size",
    "num_attention_heads",
    "num_hidden_layers",
    "layer_types",
    "max_position_embeddings",
    "original_max_position_embeddings",
    "qk_rope_head_dim",
    "rope_interleave",
)


def _get(config: Any, name: str) -> Any:
    if isinstance(config, Mapping):
        return config.get(name)
    try:
        return getattr(config, name, None)
    except Exception:
        return None


# GPT-2-style spellings in config.json (GPT-J, CodeGen); config objects map them themselves.
_ALIASES = {
    "n_embd": "hidden_size",
    "n_head": "num_attention_heads",
    "n_layer": "num_hidden_layers",
}


def _as_dict(config: Any) -> dict[str, Any]:
    if isinstance(config, Mapping):
        d = dict(config)
        for alias, name in _ALIASES.items():
            if d.get(name) is None and d.get(alias) is not None:
                d[name] = d[alias]
        return d
    to_dict = getattr(config, "to_dict", None)
    if callable(to_dict) and isinstance(result := to_dict(), Mapping):
        d = dict(result)
    elif hasattr(config, "__dict__"):
        d = {k: v for k, v in vars(config).items() if not k.startswith("_")}
    else:
        raise TypeError(
            "config must be a transformers config (with to_dict()) or a dict read from "
            f"config.json, got {type(config).__name__}"
        )
    for name in _ATTRIBUTES:
        value = _get(config, name)
        if value is not None and d.get(name) is None:
            d[name] = value
    return d


def _has_rope(config: Any) -> bool:
    return (
        any(_get(config, k) is not None for k in _ROPE_KEYS)
        or _get(config, "model_type") in VISION_TOWERS
    )


def _is_config(value: Any) -> bool:
    return value is not None and not isinstance(value, str | numbers.Number)


def _rotary_tower(vision: Any, parent: Any) -> bool:
    """Whether a ``vision_config`` rotates: rope keys, or a tower whose class implies them."""
    model = vision_type(_get(vision, "model_type"), _get(parent, "model_type"))
    tower = VISION_TOWERS.get(model or "")
    if tower is not None:
        return tower.rotary
    return _has_rope(vision)


def _language_part(config: Any) -> tuple[dict[str, Any], str, list[str]]:
    """The part of a composite config that holds the language model's RoPE settings."""
    if not isinstance(config, Mapping) and not hasattr(config, "__dict__"):
        raise TypeError(
            "config must be a transformers config (with to_dict()) or a dict read from "
            f"config.json, got {type(config).__name__}"
        )
    where = "config"
    towers: list[str] = []
    for _ in range(3):
        if _has_rope(config):
            break
        vision = _get(config, "vision_config")
        if _is_config(vision) and _rotary_tower(vision, config):
            towers.append(f"{where}.vision_config")
        for name in ("text_config", "thinker_config"):
            sub = _get(config, name)
            if sub is not None and not isinstance(sub, str | numbers.Number):
                config, where = sub, f"{where}.{name}"
                break
        else:
            break
    if not _has_rope(config):
        raise ValueError(
            f"{where} has no RoPE settings: none of {', '.join(_ROPE_KEYS)} (nor a text_config "
            "with them); is it a rotary model?"
        )
    d = values.check_all(_as_dict(config), where)
    return d, where, towers


def _vision_part(config: Any) -> tuple[dict[str, Any], str, list[str]]:
    """The ``vision_config`` of a composite config (also inside ``thinker_config``), with the
    model_type its block leaves out inferred from the composite's (:data:`VISION_OF`)."""
    if not isinstance(config, Mapping) and not hasattr(config, "__dict__"):
        raise TypeError(
            "config must be a transformers config (with to_dict()) or a dict read from "
            f"config.json, got {type(config).__name__}"
        )
    where, parent = "config", _get(config, "model_type")
    if not _is_config(_get(config, "vision_config")) and _is_config(_get(config, "thinker_config")):
        config, where = _get(config, "thinker_config"), "config.thinker_config"
        parent = _get(config, "model_type") or parent
    vision = _get(config, "vision_config")
    if not _is_config(vision):
        raise ValueError(
            f"{where} has no vision_config (a dict of the vision tower's settings), got "
            f"{vision!r}: vision=True reads the vision tower of a composite config"
        )
    d = _as_dict(vision)
    where += ".vision_config"
    notes = []
    model = vision_type(d.get("model_type"), parent)
    if model != d.get("model_type"):
        given = d.get("model_type")
        said = "no model_type" if given is None else f"model_type {given!r}"
        notes.append(f"{where} gives {said}: read as {model!r}, the vision tower of {parent!r}")
        d["model_type"] = model
    if not _has_rope(d):  # before its values are read: they may mean something else here
        raise ValueError(
            f"{where} has no RoPE settings: none of {', '.join(_ROPE_KEYS)}, and its "
            f"model_type {model!r} is no vision tower whose class rotates; is it a rotary "
            "tower?"
        )
    values.check_all(d, where)
    return d, where, notes


def _head_dim(d: dict[str, Any], where: str) -> int:
    if d.get("head_dim") is not None:
        return int(d["head_dim"])
    memory = d.get("memory_attention_hidden_size")
    if memory is not None:  # SAM 2 video: the memory attention's RoPE (axial)
        rate = d.get("memory_attention_downsample_rate", 1)
        heads = d.get("memory_attention_num_attention_heads")
        return int(memory) // (  # the three keys may be absent: checked here, by name
            values.integer(where, "memory_attention_downsample_rate", rate)
            * values.integer(where, "memory_attention_num_attention_heads", heads)
        )
    # vision towers: embed_dim first (Qwen2-VL's tower, whose hidden_size is the merger's)
    name = "embed_dim" if d.get("embed_dim") is not None else "hidden_size"
    hidden = d.get(name)
    heads_name = "num_attention_heads" if d.get("num_attention_heads") is not None else "num_heads"
    heads = d.get(heads_name)
    if hidden is None or heads is None:
        raise ValueError(
            f"{where} must give head_dim, or hidden_size and num_attention_heads, got "
            f"head_dim={d.get('head_dim')!r}, hidden_size={hidden!r}, "
            f"num_attention_heads={heads!r}"
        )
    return int(hidden) // int(heads)


def _layer_count(d: dict[str, Any], where: str) -> int | None:
    """``num_hidden_layers``: None when the config does not say, else an int in range."""
    count: int | None = d.get("num_hidden_layers")  # checked by check_all
    return count


def _layer_types(d: dict[str, Any], where: str) -> tuple[str, ...] | None:
    layers = _layer_count(d, where)
    types = d.get("layer_types")
    if types is not None:
        return values.strings(where, "layer_types", types, layers)
    if layers is None:
        return None
    if d.get("rope_local_base_freq") is not None:  # Gemma 3 (4.x): every 6th layer global
        n = d.get("sliding_window_pattern") or 6  # checked by check_all
        return tuple("sliding_attention" if (i + 1) % n else FLAT for i in range(layers))
    if d.get("local_rope_theta") is not None:  # ModernBERT (4.x): every 3rd layer global
        n = d.get("global_attn_every_n_layers") or 3
        return tuple("sliding_attention" if i % n else FLAT for i in range(layers))
    ratios = d.get("compress_ratios")  # DeepSeek-V4's config.json; checked by check_all
    if ratios is not None and d.get("model_type") == "deepseek_v4":  # then the MTP layers: cut
        if len(ratios) < layers:
            raise ValueError(
                f"{where}.compress_ratios has {len(ratios)} entries, fewer than "
                f"num_hidden_layers = {layers}"
            )
        return tuple(values.COMPRESS_RATIO_BLOCKS[r] for r in ratios[:layers])
    return None


def _layer_bases(d: dict[str, Any], where: str, count: int | None) -> tuple[float, ...] | None:
    """``layer_rope_theta`` (GraniteSWA): one base per layer, 0 for no RoPE; None if absent."""
    bases = d.get("layer_rope_theta")
    return None if bases is None else values.layer_bases(where, "layer_rope_theta", bases, count)


def _no_rope_layers(d: dict[str, Any], where: str, count: int | None) -> frozenset[int]:
    flags: Any = d.get("no_rope_layers")
    interval = d.get("no_rope_layer_interval")  # checked by check_all
    if flags is None and interval is not None and count is not None:
        flags = [int((i + 1) % interval != 0) for i in range(count)]
    if flags is None:
        return frozenset()
    checked = values.integers(
        where, "no_rope_layers", flags, minimum=0, maximum=1, length=count, per="0/1 flag"
    )
    return frozenset(i for i, uses in enumerate(checked) if not uses)


def _parameter_sets(
    d: dict[str, Any], where: str, layer_types: tuple[str, ...] | None
) -> tuple[dict[str, dict[str, Any] | None], bool, str]:
    """The rope parameter sets by label, whether they were nested, and where they came from."""
    name = "rope_parameters" if d.get("rope_parameters") is not None else "rope_scaling"
    raw = d.get(name) or {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}.{name} must be a dict of rope parameters, got {raw!r}")
    if d.get("model_type") == "deepseek_v4" and not any(
        isinstance(v, Mapping) for v in raw.values()
    ):
        return _deepseek_v4_sets(d, where, name, dict(raw))
    if any(isinstance(v, Mapping) for v in raw.values()):
        return values.parameter_sets(where, name, raw), True, f"{where}.{name}"
    flat = dict(raw)
    local = d.get("rope_local_base_freq")  # Gemma 3 (4.x): sliding layers, no scaling
    if local is not None and layer_types is not None:
        full = {**flat, "rope_theta": flat.get("rope_theta", d.get("rope_theta"))}
        sliding = {"rope_type": "default", "rope_theta": local}
        return {FLAT: full, "sliding_attention": sliding}, True, f"{where}.rope_local_base_freq"
    if d.get("local_rope_theta") is not None and layer_types is not None:  # ModernBERT (4.x)
        full = {**flat, "rope_theta": d.get("global_rope_theta", 160000.0)}
        sliding = {**flat, "rope_theta": d["local_rope_theta"]}
        return {FLAT: full, "sliding_attention": sliding}, True, f"{where}.local_rope_theta"
    if d.get(name) is None:  # no parameter set: the top-level keys say it all
        given = [k for k in _ROPE_KEYS if d.get(k) is not None]
        return {FLAT: flat}, False, f"{where} ({', '.join(given) or 'no rope keys'})"
    return {FLAT: flat}, False, f"{where}.{name}"


def _deepseek_v4_sets(
    d: dict[str, Any], where: str, name: str, flat: dict[str, Any]
) -> tuple[dict[str, dict[str, Any] | None], bool, str]:
    """DeepSeek-V4's two parameter sets from its config.json's flat spelling, as its config
    class builds them: ``main`` (sliding-window layers) plain RoPE at ``rope_theta``; ``compress``
    (compressed layers) the flat parameters (YaRN in V4-Flash) at ``compress_rope_theta``
    (160,000 when absent, the class default), a YaRN without the attention factor that
    transformers would derive (V4 does not scale cos and sin). Both rotate the last
    ``qk_rope_head_dim`` channels of each ``head_dim`` head (``partial_rotary_factor``; 64 of 512
    when neither is given)."""
    partial = d.get("partial_rotary_factor")
    latent, head = d.get("qk_rope_head_dim"), d.get("head_dim")
    if partial is None and latent is not None and head is not None:
        partial = latent / head  # the class's legacy reading: the rope slice of each head
    shared = {"partial_rotary_factor": 64 / 512 if partial is None else partial}
    main = {"rope_type": "default", "rope_theta": d.get("rope_theta", 10000.0), **shared}
    compress = {**flat, "rope_theta": d.get("compress_rope_theta", 160000.0), **shared}
    kind = compress.get("rope_type", compress.get("type", "default"))
    if kind == "yarn":
        compress.setdefault("attention_factor", 1.0)
    source = f"{where}.{name} and compress_rope_theta (DeepSeek-V4: main and compress)"
    return {"main": main, "compress": compress}, True, source


def _truncate_notes(params: dict[str, dict[str, Any] | None], where: str) -> list[str]:
    """Where transformers reads YaRN's ``truncate`` elsewhere than a nested set says."""
    notes = []
    for label, raw in params.items():
        if raw is not None and raw.get("truncate") is False and label != FLAT:
            notes.append(
                f"{where}[{label!r}] sets truncate=False: transformers reads truncate from the "
                f"top level of the rope parameters (absent there, so True) and truncates YaRN's "
                f"correction range in the {label!r} layers; the plan follows the set's own "
                "truncate=False"
            )
    return notes


def _head_dims(
    d: dict[str, Any], where: str, head_dim: int, layer_types: tuple[str, ...] | None, count: int
) -> tuple[int, ...]:
    per_layer = d.get("per_layer_config") or {}
    if not isinstance(per_layer, Mapping):
        per_layer = {}  # a live view of a config object: its to_dict() form is read instead
    overrides: dict[int, Any] = {}
    for key, value in per_layer.items():  # keys: layer indices, as ints or strings ("05")
        if isinstance(value, Mapping) and str(key).isdigit():
            overrides[int(key)] = value
    global_head_dim = d.get("global_head_dim")
    dims = []
    for i in range(count):
        dim = head_dim
        if global_head_dim is not None and layer_types is not None and layer_types[i] == FLAT:
            dim = int(global_head_dim)
        if overrides.get(i, {}).get("head_dim") is not None:
            dim = values.integer(where, f"per_layer_config[{i}].head_dim", overrides[i]["head_dim"])
        dims.append(dim)
    return tuple(dims)


def read_config(config: Any, vision: bool = False) -> ConfigReading:
    """Read the RoPE settings of ``config`` (see the module docstring for the spellings); with
    ``vision``, of its ``vision_config``."""
    towers: list[str] = []
    if vision:
        d, where, found = _vision_part(config)
    else:
        d, where, towers = _language_part(config)
        found = []
    tower = VISION_TOWERS.get(str(d.get("model_type")))
    if tower is not None:
        found += standardize(d, where)
    head_dim = _head_dim(d, where)
    layer_types = _layer_types(d, where)
    count = len(layer_types) if layer_types is not None else _layer_count(d, where)
    if count is not None and count < 1:
        count = None
    params, nested, source = _parameter_sets(d, where, layer_types)
    labels: tuple[str, ...] | None = None
    if count is not None:
        if not nested:
            labels = tuple(layer_types or (FLAT,) * count)
        elif layer_types is not None:  # LFM3's conv layers name no set; DeepSeek-V4 relabels
            relabel = _LAYER_LABELS.get(str(d.get("model_type")), {})
            name = "rope_parameters" if d.get("rope_parameters") is not None else "rope_scaling"
            labels = values.layer_labels(where, name, layer_types, params, relabel, NOT_ATTENTION)
    reading = ConfigReading(
        where=source,
        model_type=d.get("model_type"),
        params=params,
        nested=nested,
        layer_labels=labels,
        layer_types=layer_types,
        head_dims=None if count is None else _head_dims(d, where, head_dim, layer_types, count),
        head_dim=head_dim,
        top=d,
        no_rope=_no_rope_layers(d, where, count),
        layer_bases=_layer_bases(d, where, count),
    )
    if tower is not None and not tower.rotary:
        reading.rotary = False
        reading.notes.append(tower.note)
    alibi = d.get("alibi")
    falcon = d.get("model_type") == "falcon" and alibi is not None
    if falcon and values.boolean(where, "alibi", alibi):  # ALiBi replaces the rotation
        reading.rotary = False
        reading.notes.append(
            f"{where}.alibi = true: Falcon adds ALiBi to the scores and does not rotate"
        )
    kind = d.get("position_embedding_type", "rotary")  # null: no position embedding (Granite)
    if kind is not None:
        values.text(where, "position_embedding_type", kind)
    if kind not in _ROTARY:
        reading.rotary = False
        reading.notes.append(
            f"{where}.position_embedding_type = {kind!r}: the attention "
            "does not rotate (RoPE is 'rotary' or 'rope')"
        )
    reading.notes += found
    if nested:
        reading.notes += _truncate_notes(params, source)
    reading.notes += [
        f"{name} has RoPE settings of its own: its plan is posenc.rope_plan({name}), or "
        "posenc.rope_plan(config, vision=True)"
        for name in towers
    ]
    return reading
