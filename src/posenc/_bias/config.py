"""Reading the attention bias of a Hugging Face config: which bias each layer adds.

:func:`bias_plan` turns a ``transformers`` config object (anything with ``to_dict()``) or a
dict read from ``config.json`` into a :class:`BiasPlan`, one :class:`BiasLayer` per layer of
each stack, or None for a config without an attention bias. The models and the keys read:

- ALiBi: BLOOM (``model_type`` ``"bloom"``: heads ``n_head`` / ``num_attention_heads``,
  layers ``n_layer`` / ``num_hidden_layers``; slopes of BLOOM's float32 rule), MPT (``"mpt"``:
  ``n_heads``, ``n_layers``, ``attn_config.alibi_bias_max``; MPT's float32 rule) and Falcon
  with ``alibi = true`` (``num_attention_heads``, ``num_hidden_layers``; BLOOM's slopes in
  bfloat16). All causal decoders.
- T5 buckets: any config with ``relative_attention_num_buckets`` (T5, mT5, UMT5, LongT5,
  Switch Transformers): ``num_heads``, ``relative_attention_max_distance`` (default 128),
  ``num_layers`` encoder layers (bidirectional buckets) and ``num_decoder_layers`` (default
  ``num_layers``) decoder layers (causal buckets). UMT5 learns a table per layer; the others
  learn one per stack, in its first layer.
- DeBERTa-v2 log buckets (``model_type`` ``"deberta-v2"`` with ``relative_attention =
  true``): ``num_attention_heads``, ``num_hidden_layers``, ``position_buckets`` (the bucket
  count; ``<= 0``: no log buckets) and ``max_relative_positions`` (``< 1``: the
  ``max_position_embeddings``, as transformers does). Bidirectional.

Every value is checked where it is read (``_rope/config_values``): a wrong type is a
``TypeError`` and a value out of range a ``ValueError``, each naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy.typing as npt

from .._checks import MAX_EXACT_POSITION
from .._rope import config_values as values
from .alibi import alibi_slopes

__all__ = ["BiasLayer", "BiasPlan", "bias_plan"]

Direction = Literal["bidirectional", "causal"]

# GPT-2-style spellings that config.json files (and BLOOM's to_dict()) write.
_ALIASES = {"n_head": "num_attention_heads", "n_layer": "num_hidden_layers"}


@dataclass(frozen=True)
class BiasLayer:
    """The attention bias of one layer, as its config decides it.

    Attributes:
        stack: ``"decoder"`` or ``"encoder"`` (encoder-decoder models have both).
        kind: ``"alibi"``, ``"t5_buckets"`` or ``"deberta_buckets"``.
        heads: attention heads (one slope or one table row per head).
        direction: ``"bidirectional"`` or ``"causal"`` (T5's causal buckets give every key
            after the query bucket 0).
        slope_rule: ALiBi: the :func:`posenc.alibi_slopes` convention that gives the model's
            slopes (``"bloom"``, ``"mpt"``, ``"falcon"``); None otherwise.
        max_bias: ALiBi: the slope rule's ``max_bias`` (MPT's ``alibi_bias_max``).
        form: ALiBi: the :func:`posenc.alibi_bias` form the model builds (``"key"``,
            ``"relative"``).
        num_buckets: buckets of T5 (both directions together) or DeBERTa (``position_buckets``);
            None where the model buckets nothing.
        max_distance: T5's ``relative_attention_max_distance``; DeBERTa's
            ``max_relative_positions`` (after transformers' default).
        shared_table: T5 buckets: the layer uses the table of the first layer of its stack.
        notes: what else the config or the model does with the bias, in words.
    """

    stack: str
    kind: str
    heads: int
    direction: Direction
    slope_rule: str | None = None
    max_bias: float | None = None
    form: str | None = None
    num_buckets: int | None = None
    max_distance: int | None = None
    shared_table: bool = False
    notes: tuple[str, ...] = ()

    def slopes(self) -> npt.NDArray[Any]:
        """ALiBi layers: the ``(heads,)`` slopes of the model's rule (:func:`alibi_slopes`)."""
        if self.kind != "alibi" or self.slope_rule is None:
            raise ValueError(f"a {self.kind} layer has no slopes (only alibi layers do)")
        rule: Any = self.slope_rule
        return alibi_slopes(self.heads, max_bias=self.max_bias or 8.0, convention=rule)


@dataclass(frozen=True)
class BiasPlan:
    """The attention bias of every layer of a model, from :func:`bias_plan`.

    Attributes:
        model_type: the config's ``model_type``.
        source: the keys the bias was read from.
        layers: ``(stack, index in the stack, BiasLayer)``, encoder layers first.
        notes: what the config says beyond the layers, in words.
    """

    model_type: str | None
    source: str
    layers: tuple[tuple[str, int, BiasLayer], ...]
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.layers)


def _as_dict(config: Any) -> dict[str, Any]:
    if isinstance(config, Mapping):
        d = dict(config)
    elif callable(getattr(config, "to_dict", None)) and isinstance(
        result := config.to_dict(), Mapping
    ):
        d = dict(result)
    else:
        raise TypeError(
            "config must be a transformers config (with to_dict()) or a dict read from "
            f"config.json, got {type(config).__name__}"
        )
    for alias, name in _ALIASES.items():
        if d.get(name) is None and d.get(alias) is not None:
            d[name] = d[alias]
    return d


def _count(d: Mapping[str, Any], where: str, name: str, default: Any = None) -> int:
    found = d.get(name, default)
    if found is None:
        raise ValueError(f"{where} must give {name} (an integer >= 1), got nothing")
    return values.integer(where, name, found, 1, values.MAX_LAYERS)


def _layers(
    stack: str, count: int, layer: BiasLayer, first: BiasLayer | None = None
) -> list[tuple[str, int, BiasLayer]]:
    """``count`` layers of ``stack``: ``first`` (when given) for layer 0, ``layer`` after."""
    return [(stack, i, first if (first is not None and i == 0) else layer) for i in range(count)]


def _alibi(d: Mapping[str, Any], where: str, model: str) -> BiasPlan:
    notes: tuple[str, ...] = ()
    if model == "mpt":
        heads = _count(d, where, "n_heads")
        count = _count(d, where, "n_layers")
        attn = d.get("attn_config") or {}
        if not isinstance(attn, Mapping):
            raise TypeError(f"{where}.attn_config must be an object (a dict), got {attn!r}")
        bias_max = values.base(
            f"{where}.attn_config", "alibi_bias_max", attn.get("alibi_bias_max", 8)
        )
        if attn.get("alibi") is not None and not values.boolean(
            f"{where}.attn_config", "alibi", attn["alibi"]
        ):
            notes = ("attn_config.alibi is false, but transformers' MPT adds ALiBi regardless",)
        layer = BiasLayer("decoder", "alibi", heads, "causal", "mpt", bias_max, "relative")
        source = f"{where} (n_heads, attn_config.alibi_bias_max)"
    else:
        heads = _count(d, where, "num_attention_heads")
        count = _count(d, where, "num_hidden_layers")
        rule = "bloom" if model == "bloom" else "falcon"
        layer = BiasLayer("decoder", "alibi", heads, "causal", rule, 8.0, "key")
        names = "n_head" if model == "bloom" else "alibi, num_attention_heads"
        source = f"{where} ({names})"
        if model == "falcon":
            notes = (f"{where}.alibi = true: Falcon adds ALiBi to the scores and does not rotate",)
    return BiasPlan(model, source, tuple(_layers("decoder", count, layer)), notes)


def _t5(d: Mapping[str, Any], where: str, model: str | None) -> BiasPlan:
    buckets = values.integer(
        where, "relative_attention_num_buckets", d["relative_attention_num_buckets"], 2
    )
    distance = values.integer(
        where,
        "relative_attention_max_distance",
        d.get("relative_attention_max_distance", 128),
        1,
        MAX_EXACT_POSITION,
    )
    heads = _count(d, where, "num_heads")
    encoder = _count(d, where, "num_layers")
    decoder = values.integer(
        where, "num_decoder_layers", d.get("num_decoder_layers", encoder), 0, values.MAX_LAYERS
    )
    per_layer = model == "umt5"
    notes: list[str] = []
    encoder_notes: tuple[str, ...] = ()
    if model == "longt5":
        kind = values.text(
            where, "encoder_attention_type", d.get("encoder_attention_type", "local")
        )
        radius = values.integer(where, "local_radius", d.get("local_radius", 127), 0)
        encoder_notes = (
            f"encoder_attention_type {kind!r}: the encoder's buckets cover its local blocks "
            f"(local_radius {radius})",
        )
    stacks: list[tuple[str, int, BiasLayer]] = []
    directions: tuple[tuple[str, int, Direction, tuple[str, ...]], ...] = (
        ("encoder", encoder, "bidirectional", encoder_notes),
        ("decoder", decoder, "causal", ()),
    )
    for stack, count, direction, extra in directions:
        own = BiasLayer(stack, "t5_buckets", heads, direction, num_buckets=buckets,
                        max_distance=distance, notes=extra)  # fmt: skip
        shared = replace(own, shared_table=not per_layer)
        stacks += _layers(stack, count, shared, own)
    notes.append(
        "UMT5 learns a bucket table in every layer"
        if per_layer
        else "the first layer of each stack learns the bucket table; the others reuse it"
    )
    source = f"{where} (relative_attention_num_buckets, relative_attention_max_distance)"
    return BiasPlan(model, source, tuple(stacks), tuple(notes))


def _deberta(d: Mapping[str, Any], where: str, model: str) -> BiasPlan:
    heads = _count(d, where, "num_attention_heads")
    count = _count(d, where, "num_hidden_layers")
    buckets = values.integer(
        where, "position_buckets", d.get("position_buckets", -1), -1, MAX_EXACT_POSITION
    )
    distance = values.integer(
        where,
        "max_relative_positions",
        d.get("max_relative_positions", -1),
        -1,
        MAX_EXACT_POSITION,
    )
    notes: tuple[str, ...] = ()
    if distance < 1:
        distance = _count(d, where, "max_position_embeddings", 512)
        notes = ("max_relative_positions < 1: max_position_embeddings, as transformers does",)
    if buckets > 0 and distance - 1 <= buckets // 2:
        raise ValueError(
            f"{where}.max_relative_positions ({distance}) must exceed position_buckets // 2 + 1 "
            f"= {buckets // 2 + 1}: the log buckets would be empty"
        )
    if buckets <= 0:
        notes += ("position_buckets <= 0: relative positions clipped, no log buckets",)
    layer = BiasLayer(
        "encoder",
        "deberta_buckets",
        heads,
        "bidirectional",
        num_buckets=buckets if buckets > 0 else None,
        max_distance=distance,
        notes=notes,
    )
    source = f"{where} (relative_attention, position_buckets, max_relative_positions)"
    return BiasPlan(model, source, tuple(_layers("encoder", count, layer)))


def bias_plan(config: Any) -> BiasPlan | None:
    """The attention bias of every layer of ``config`` (see the module docstring for the
    models and keys), or None when the config adds none (RoPE models, absolute positions,
    DeBERTa without ``relative_attention``)."""
    d = _as_dict(config)
    where = "config"
    model = d.get("model_type")
    if model is not None:
        model = values.text(where, "model_type", model)
    if model in ("bloom", "mpt"):
        return _alibi(d, where, model)
    if model == "falcon" and d.get("alibi") is not None:
        if values.boolean(where, "alibi", d["alibi"]):
            return _alibi(d, where, model)
        return None
    if d.get("relative_attention_num_buckets") is not None:
        return _t5(d, where, model)
    relative = d.get("relative_attention")
    if (
        model == "deberta-v2"
        and relative is not None
        and values.boolean(where, "relative_attention", relative)
    ):
        return _deberta(d, where, model)
    return None
