"""Rope plans: what a model's config says about the RoPE of each of its layers.

:func:`rope_plan` reads any Hugging Face config (see ``config`` for the
spellings) and returns a :class:`RopePlan`: one :class:`RopeLayer` per layer, each holding the
float64 frequencies, the attention factor, the pair layout (and where it comes from), the rotated
dimension, the axes and sections of multi-axis layers (``axes``), the rope type,
and whether the layer rotates at all. Every layer builds its tables with
:meth:`RopeLayer.cos_sin`: :func:`posenc.rotary_cos_sin` for 1-D layers,
:func:`posenc.multi_axis_cos_sin` with the layer's frequency matrix for multi-axis ones.

The pair layout is not in configs: it is the convention of the model's ``apply_rotary_pos_emb``
(or equivalent), recorded per ``model_type`` in ``models`` (:data:`PAIRS_BY_MODEL`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from .._features import PairLayout
from . import config_values, xdrope
from .axes import (
    AXES_BY_MODEL,
    AxisLayout,
    ModelAxes,
    axial_layout,
    block_tables,
    layout_frequencies,
    mrope_layout,
    text_layout,
)
from .config import FLAT, NOT_ATTENTION, ConfigReading, read_config
from .models import (
    MODEL_NOTES,
    PAIRS_BY_MODEL,
    REFUSED,
    ROTARY_DIM_MODELS,
    STANDARD_TABLES,
    UNSUPPORTED,
    layer_base_notes,
    nope_layer_types,
    pairs_of,
)
from .multi_axis import (
    AxisOrder,
    AxisSchedule,
    MultiAxisFrequencies,
    multi_axis_cos_sin,
    multi_axis_positions,
)
from .records import INERT_KEYS
from .rotary import default_seq_len, resolve_rotary_dim, rotary_cos_sin
from .scaling import RopeScaling, rope_frequencies, rope_scaling
from .temperature import AttentionTemperature, read_temperature

__all__ = ["PAIRS_BY_MODEL", "RopeLayer", "RopePlan", "rope_plan", "table_plan"]

_F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RopeLayer:
    """The RoPE of one layer (or one kind of layer), as its config decides it.

    Attributes:
        layer_type: the config's label for it (``"full_attention"``, ``"sliding_attention"``,
            ...; ``"full_attention"`` when the config has one parameter set for all layers).
        uses_positions: False for a layer that does not rotate (no-RoPE layers, layer types
            that are not attention); every other attribute then describes nothing.
        rope_type: the ``rope_type`` (``"default"``, ``"yarn"``, ..., ``"axial"`` for 2-D
            vision layers), None without positions.
        base: ``rope_theta``.
        scaling: the validated :class:`posenc.RopeScaling` (None for plain RoPE); accepted
            inert keys are in :attr:`inert`, not here.
        head_dim: channels per head that the table covers (the rotated part of a DeepSeek
            latent-attention head, ``qk_rope_head_dim``).
        rotary_dim: rotated channels (``head_dim`` for ``proportional``, whose unrotated pairs
            have zero frequencies).
        frequencies: float64 ``(rotary_dim/2,)``: ω_k at the original length (length-dependent
            types: see :meth:`frequencies_at`).
        attention_factor: the number the table is multiplied by (YaRN, LongRoPE; else 1).
        pairs: ``"half"`` or ``"interleaved"``: how the model's attention pairs channels.
        pairs_source: the function of the model that decides :attr:`pairs`.
        axes: the coordinates of a multi-axis layer, in the order the model passes them
            (``("temporal", "height", "width")``, ``("height", "width")``); ``()`` for 1-D RoPE.
        sections: pairs per axis (``mrope_section``), in the order of :attr:`axes`; ``()``
            for 1-D RoPE.
        interleaved_sections: the axes take turns pair by pair (``mrope_interleaved``) instead
            of one contiguous block each (``order == "interleaved"``).
        schedule: multi-axis layers: ``"shared"`` (one RoPE schedule over all pairs, M-RoPE),
            ``"dealt"`` (Pixtral) or ``"per_axis"`` (each axis its own schedule, vision
            towers); None for 1-D RoPE. See :func:`posenc.multi_axis_frequencies`.
        slot_order: multi-axis layers: the axes (indices into :attr:`axes`) in the order they
            take pair slots (``(1, 0)``: the width pairs first).
        order: multi-axis layers: which pair slots belong to which axis, the ``order`` of
            :func:`posenc.multi_axis_frequencies`: ``"sectioned"``, ``"interleaved"`` or
            ``"turns_then_last"`` (ERNIE 4.5 VL: height and width in turns, then time); None
            for 1-D RoPE.
        pairs_per_axis: multi-axis layers: each axis's pairs sit in a block of channels of
            their own, laid out for :attr:`pairs` inside it, the blocks in slot order (Gemma
            4's vision tower: ``[x, x, y, y]``, pairs ``(i, i + head_dim/4)`` inside each
            half); apply the tables block by block (docs/rope-plans.md).
        unsupported: why posenc builds no tables for this layer (a pair layout or an axis
            layout that no table describes); ``""`` when it does.
        inert: ``(key, value)`` pairs the config gives that leave the tables unchanged.
        notes: what else the config or the model does with positions, in words.
        temperature: the position-dependent (or constant) scale the layer's attention puts on
            its queries (or q and k), :class:`~posenc._rope.temperature.AttentionTemperature`
            (Llama 4's layers without RoPE, Ministral 3 and Mistral 4, Inkling, Ergo); None for
            none. Its ``at(positions)`` gives the scale in float64.

    For multi-axis layers, :attr:`frequencies` holds the frequency of each pair (whatever axis
    it turns with) and :meth:`axis_frequencies` the matrix ``(n_axes, n_pairs)``.
    """

    layer_type: str
    uses_positions: bool
    rope_type: str | None
    base: float | None
    scaling: RopeScaling | None
    head_dim: int
    rotary_dim: int
    attention_factor: float
    pairs: PairLayout
    pairs_source: str
    axes: tuple[str, ...] = ()
    sections: tuple[int, ...] = ()
    interleaved_sections: bool = False
    schedule: AxisSchedule | None = None
    slot_order: tuple[int, ...] = ()
    order: AxisOrder | None = None
    pairs_per_axis: bool = False
    unsupported: str = ""
    inert: tuple[tuple[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    temperature: AttentionTemperature | None = None
    frequencies: _F64 = field(default_factory=lambda: np.zeros(0), compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.order is not None and self.interleaved_sections != (self.order == "interleaved"):
            raise ValueError(
                f"interleaved_sections={self.interleaved_sections} contradicts "
                f"order={self.order!r}: interleaved_sections is True exactly for 'interleaved'"
            )

    @property
    def multi_axis(self) -> bool:
        """True when tokens have several position coordinates (M-RoPE, 2-D vision RoPE)."""
        return len(self.axes) > 1

    @property
    def _layout(self) -> AxisLayout:
        return AxisLayout(
            axes=self.axes,
            sections=self.sections,
            order=self.order or ("interleaved" if self.interleaved_sections else "sectioned"),
            schedule=self.schedule or "shared",
            slot_order=self.slot_order or tuple(range(len(self.axes))),
            source="",
            pairs_per_axis=self.pairs_per_axis,
        )

    def axis_frequencies(self, seq_len: int | None = None) -> MultiAxisFrequencies:
        """The frequency matrix of a multi-axis layer: :class:`posenc.MultiAxisFrequencies`,
        ``frequencies`` float64 ``(len(axes), rotary_dim/2)`` with rows in the order of
        :attr:`axes`, and ``attention`` ``(rotary_dim/2,)``. ``seq_len`` as in
        :meth:`frequencies_at`."""
        self._check("axis_frequencies")
        if not self.multi_axis:
            raise ValueError(
                f"layer type {self.layer_type!r} has one position axis: use frequencies_at "
                "(axis_frequencies describes multi-axis layers)"
            )
        return layout_frequencies(self._layout, self.base or 0.0, self.scaling, seq_len)

    def frequencies_at(self, seq_len: int | None) -> tuple[_F64, float]:
        """``(omega, attention_factor)`` for a sequence of ``seq_len`` positions (``dynamic``
        and ``longrope`` depend on it; other types return :attr:`frequencies`). For a
        multi-axis layer, ``omega`` holds the frequency of each pair."""
        self._check("frequencies_at")
        if self.multi_axis:
            matrix, attention = self.axis_frequencies(seq_len)
            return np.abs(matrix).max(axis=0), float(attention.max())
        dim = self.rotary_dim
        return rope_frequencies(dim, base=self.base or 0.0, scaling=self.scaling, seq_len=seq_len)

    def cos_sin(
        self, positions: Any, *, dtype: Any = np.float32, seq_len: int | None = None
    ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """The layer's cos/sin tables, laid out for :attr:`pairs`, ``(*S, rotary_dim)`` each.

        1-D layers: :func:`posenc.rotary_cos_sin` with this layer's settings, for positions of
        shape ``S``. Multi-axis layers: :func:`posenc.multi_axis_cos_sin` with the matrix of
        :meth:`axis_frequencies`, for positions of shape ``(*S, len(axes))``, one coordinate
        per axis in the order of :attr:`axes` (Hugging Face's M-RoPE ``position_ids``
        ``(3, b, s)``: pass ``np.moveaxis(position_ids, 0, -1)``). ``seq_len`` (``dynamic``,
        ``longrope``) defaults to the largest position + 1, as Hugging Face does.
        """
        self._check("cos_sin")
        if self.multi_axis:
            if seq_len is None and self.scaling is not None and self.scaling.depends_on_length:
                checked = multi_axis_positions(positions, len(self.axes))
                seq_len = default_seq_len(float(checked.max()) if checked.size else None)
            frequencies = self.axis_frequencies(seq_len)
            if self.pairs_per_axis:
                blocks = [self.sections[a] for a in self.slot_order]
                return block_tables(positions, frequencies, blocks, self.pairs, dtype)
            return multi_axis_cos_sin(
                positions,
                self.head_dim,
                frequencies=frequencies,
                rotary_dim=self.rotary_dim,
                pairs=self.pairs,
                dtype=dtype,
            )
        return rotary_cos_sin(
            positions,
            self.head_dim,
            base=self.base or 0.0,
            scaling=self.scaling,
            rotary_dim=None if self._keeps_head_dim else self.rotary_dim,
            pairs=self.pairs,
            dtype=dtype,
            seq_len=seq_len,
        )

    @property
    def _keeps_head_dim(self) -> bool:
        return self.scaling is not None and self.scaling.record.keeps_head_dim

    def _check(self, what: str) -> None:
        if not self.uses_positions:
            raise ValueError(
                f"layer type {self.layer_type!r} does not rotate (uses_positions is False): "
                f"it has no {what.replace('_', ' ')}"
            )
        if self.unsupported:
            raise ValueError(
                f"layer type {self.layer_type!r}: posenc builds no {what.replace('_', ' ')} "
                f"for it: {self.unsupported}"
            )

    def __repr__(self) -> str:
        temperature = (
            [f"temperature={self.temperature.kind!r}"] if self.temperature is not None else []
        )
        if not self.uses_positions:
            bare = [repr(self.layer_type), "uses_positions=False", *temperature]
            return f"RopeLayer({', '.join(bare)})"
        parts = [
            repr(self.layer_type),
            f"rope_type={self.rope_type!r}",
            f"base={self.base!r}",
            f"head_dim={self.head_dim}",
            f"rotary_dim={self.rotary_dim}",
            f"pairs={self.pairs!r}",
        ]
        if self.attention_factor != 1.0:
            parts.append(f"attention_factor={self.attention_factor!r}")
        if self.axes:
            parts.append(f"axes={self.axes!r}, sections={self.sections!r}")
            if self.interleaved_sections:
                parts.append("interleaved_sections=True")
            if self.schedule != "shared":
                parts.append(f"schedule={self.schedule!r}")
            if self.slot_order != tuple(range(len(self.axes))):
                parts.append(f"slot_order={self.slot_order!r}")
            if self.order == "turns_then_last":
                parts.append(f"order={self.order!r}")
            if self.pairs_per_axis:
                parts.append("pairs_per_axis=True")
        if self.unsupported:
            parts.append("unsupported=...")
        if self.inert:
            parts.append(f"inert={dict(self.inert)!r}")
        return f"RopeLayer({', '.join([*parts, *temperature])})"


def _no_rope(label: str, head_dim: int, pairs: tuple[PairLayout, str], why: str) -> RopeLayer:
    return RopeLayer(
        layer_type=label,
        uses_positions=False,
        rope_type=None,
        base=None,
        scaling=None,
        head_dim=head_dim,
        rotary_dim=0,
        attention_factor=1.0,
        pairs=pairs[0],
        pairs_source=pairs[1],
        notes=(why,),
    )


@dataclass(frozen=True, eq=False)
class RopePlan:
    """The RoPE of every layer of a model, from :func:`rope_plan`.

    Attributes:
        model_type: the config's ``model_type`` (of the language model for composite configs).
        source: where the rope parameters were read (``"config.text_config.rope_parameters"``).
        layers: one :class:`RopeLayer` per layer, in order; empty when the config does not say
            which parameter set each layer uses (DeepSeek-V4 keys them by branch, ``main`` and
            ``compress``: see :attr:`kinds`).
        kinds: label -> :class:`RopeLayer`, one per rope parameter set (per layer type).
        notes: what the config says beyond the tables, in words.
    """

    model_type: str | None
    source: str
    layers: tuple[RopeLayer, ...]
    kinds: Mapping[str, RopeLayer]
    notes: tuple[str, ...] = ()

    def layer(self, layer_type: str | None = None) -> RopeLayer:
        """The :class:`RopeLayer` of the layers of type ``layer_type``; with None, the one that
        every rotating layer shares (a ValueError names the types when they differ)."""
        rotating = {k: v for k, v in self.kinds.items() if v.uses_positions}
        if layer_type is None:
            first = next(iter(rotating.values()), None)
            if first is not None and all(
                replace(v, layer_type=first.layer_type) == first for v in rotating.values()
            ):
                return first
            if first is None:
                why = "; ".join(dict.fromkeys(n for v in self.kinds.values() for n in v.notes))
                raise ValueError(
                    f"no layer of the config rotates ({why or 'no RoPE'}): there is no RoPE "
                    f"layer to return (layer types: {sorted(self.kinds)})"
                )
            raise ValueError(
                f"the config has {len(rotating)} kinds of rotating layers: pass layer_type= one "
                f"of {sorted(rotating)} (all layer types: {sorted(self.kinds)})"
            )
        if layer_type not in self.kinds:
            raise ValueError(
                f"layer_type must be one of {sorted(self.kinds)} (the config's), got {layer_type!r}"
            )
        return self.kinds[layer_type]

    def __iter__(self) -> Iterator[RopeLayer]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, index: int) -> RopeLayer:
        return self.layers[index]

    def __repr__(self) -> str:
        counts = {k: 0 for k in self.kinds}
        for layer in self.layers:
            counts[layer.layer_type] = counts.get(layer.layer_type, 0) + 1
        kinds = "; ".join(f"{k} x{counts.get(k, 0)}: {v!r}" for k, v in self.kinds.items())
        return f"RopePlan({self.model_type!r}, {len(self.layers)} layers; {kinds})"


def _base(reading: ConfigReading, params: dict[str, Any]) -> tuple[float, tuple[str, ...]]:
    theta = params.pop("rope_theta", None)
    if theta is not None:
        theta = config_values.base("", "rope_theta", theta)
    for name in ("rope_theta", "rotary_emb_base"):
        if theta is None:
            theta = reading.top.get(name)
    if theta is None:
        return 10000.0, ("rope_theta not given: 10000, transformers' default",)
    return theta, ()


def _rotary_dims(
    reading: ConfigReading, head_dim: int, spec: RopeScaling | None, partial: Any
) -> tuple[int, int]:
    """``(head_dim, rotary_dim)`` of a layer whose full head has ``head_dim`` channels."""
    if spec is not None and spec.record.keeps_head_dim:
        return head_dim, head_dim
    latent = reading.top.get("qk_rope_head_dim")
    if partial is None and latent is not None:  # DeepSeek latent attention: q_pe / k_pe only
        return int(latent), resolve_rotary_dim(int(latent))
    absolute = reading.top.get("rotary_dim")
    if absolute is not None and partial is None and reading.model_type in ROTARY_DIM_MODELS:
        return head_dim, resolve_rotary_dim(head_dim, absolute)
    if partial is None:
        return head_dim, resolve_rotary_dim(head_dim)
    return head_dim, resolve_rotary_dim(head_dim, None, RopeScaling(partial_rotary_factor=partial))


def _original_length(reading: ConfigReading, rope_type: str, params: dict[str, Any]) -> None:
    length = reading.top.get("max_position_embeddings")
    if length is not None:
        params.setdefault("max_position_embeddings", length)
    if rope_type in ("llama3", "yarn", "longrope"):  # as transformers' standardize_rope_params
        top = reading.top.get("original_max_position_embeddings")
        if top is not None:  # Phi-3 keeps it at the top level, and it wins there
            params["original_max_position_embeddings"] = top
        elif length is not None:
            params.setdefault("original_max_position_embeddings", length)


def _rope_type(params: dict[str, Any], where: str) -> str:
    rope_type, old = params.pop("rope_type", None), params.pop("type", None)
    if rope_type is not None and old is not None and rope_type != old:
        raise ValueError(
            f"{where}: 'rope_type' = {rope_type!r} and 'type' = {old!r} disagree; give one of them"
        )
    return str(rope_type or old or "default")


def _kind(
    reading: ConfigReading, label: str, raw: dict[str, Any], head_dim: int, where: str
) -> RopeLayer:
    params = dict(raw)
    rope_type = _rope_type(params, where)
    try:
        mrope = mrope_layout(reading.model_type, params, reading.top, rope_type)
        base, notes = _base(reading, params)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{where}: {exc}") from None
    rope_type = {"mrope": "default", "xdrope": "dynamic"}.get(rope_type, rope_type)
    partial = params.pop("partial_rotary_factor", None)
    for name in ("partial_rotary_factor", "rotary_pct"):
        partial = reading.top.get(name) if partial is None else partial
    try:
        inert = tuple(
            (k, INERT_KEYS[k][0](k, params.pop(k))) for k in list(params) if k in INERT_KEYS
        )
        notes += tuple(f"{k}: {INERT_KEYS[k][1]}" for k, _ in inert)
        spec, head_dim, rotary_dim, layout, more = _shape(
            reading, rope_type, params, partial, head_dim, mrope
        )
        if layout is None:
            omega, attention = rope_frequencies(rotary_dim, base=base, scaling=spec)
        else:
            matrix, factors = layout_frequencies(layout, base, spec)
            omega, attention = np.abs(matrix).max(axis=0), float(factors.max())
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{where}: {exc}") from None
    _read_only(omega)  # shared by every layer of the kind
    pairs = pairs_of(reading)
    model = reading.model_type or ""
    model_note = MODEL_NOTES.get(model)
    return RopeLayer(
        layer_type=label,
        uses_positions=True,
        rope_type=spec.rope_type if spec is not None else rope_type,
        base=float(base),
        scaling=spec,
        head_dim=head_dim,
        rotary_dim=rotary_dim,
        attention_factor=float(attention),
        pairs=pairs[0],
        pairs_source=pairs[1],
        axes=() if layout is None else layout.axes,
        sections=() if layout is None else layout.sections,
        interleaved_sections=layout is not None and layout.order == "interleaved",
        schedule=None if layout is None else layout.schedule,
        slot_order=() if layout is None else layout.slot_order,
        order=None if layout is None else layout.order,
        pairs_per_axis=layout is not None and layout.pairs_per_axis,
        unsupported=model_note if model in UNSUPPORTED and model_note else "",
        inert=inert,
        notes=notes + more + ((model_note,) if model_note else ()),
        frequencies=omega,
    )


def _shape(
    reading: ConfigReading,
    rope_type: str,
    params: dict[str, Any],
    partial: Any,
    head_dim: int,
    mrope: tuple[tuple[int, ...] | None, bool, str] | None,
) -> tuple[RopeScaling | None, int, int, AxisLayout | None, tuple[str, ...]]:
    """``(scaling, head_dim, rotary_dim, axis layout or None, notes)`` of a rotating layer."""
    model = reading.model_type or ""
    if rope_type == "axial" or model in AXES_BY_MODEL:  # 2-D (3-D) vision RoPE
        if params:
            raise ValueError(
                f"rope_type {rope_type!r} of a 2-D vision layer takes rope_theta only, got "
                f"{', '.join(sorted(params))}"
            )
        if AXES_BY_MODEL.get(model, ModelAxes()).whole_hidden:  # before the heads split
            hidden = reading.top.get("hidden_size")
            if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < 4:
                raise ValueError(
                    f"{model} rotates its whole hidden state: the config must give "
                    f"hidden_size, an integer >= 4, got {hidden!r}"
                )
            head_dim = hidden
        layout, note = axial_layout(model, head_dim)
        notes = (f"axes: {layout.source}",) + ((note,) if note else ())
        if rope_type != "axial":
            notes += (f"the config says rope_type {rope_type!r}; the rotary class is 2-D",)
        return None, head_dim, 2 * sum(layout.sections), layout, notes
    spec = None
    if rope_type != "default" or params:  # plain RoPE needs no scaling (nor the length)
        _original_length(reading, rope_type, params)
        spec = rope_scaling({"rope_type": rope_type, **params})
        if spec is not None and spec.record.keeps_head_dim and partial is not None:
            spec = RopeScaling(spec.rope_type, **spec.params, partial_rotary_factor=partial)
    head_dim, rotary_dim = _rotary_dims(reading, head_dim, spec, partial)
    if mrope is None:
        return spec, head_dim, rotary_dim, None, ()
    layout, note = text_layout(*mrope, rotary_dim // 2, reading.model_type)
    if 2 * sum(layout.sections) != rotary_dim:
        raise ValueError(
            f"{mrope[2]} = {list(layout.sections)} gives {sum(layout.sections)} rotary pairs, "
            f"but {rotary_dim} channels rotate (head_dim {head_dim}): they must give "
            f"{rotary_dim // 2}"
        )
    if model == "hunyuan_vl_text":  # where transformers departs from HunYuan-VL's own code
        split = xdrope.doubled_split_note(layout.sections, layout.axes)
        note = "; ".join(x for x in (note, split) if x)
    return (
        spec,
        head_dim,
        rotary_dim,
        layout,
        (f"axes: {layout.source}",) + ((note,) if note else ()),
    )


def _read_only(array: _F64) -> _F64:
    array.setflags(write=False)
    return array


def _label_head_dims(reading: ConfigReading) -> dict[str, int]:
    dims: dict[str, int] = {}
    if reading.layer_labels is not None and reading.head_dims is not None:
        for label, dim in zip(reading.layer_labels, reading.head_dims, strict=True):
            dims.setdefault(label, dim)
    return dims


def _kinds(reading: ConfigReading, pairs: tuple[PairLayout, str]) -> dict[str, RopeLayer]:
    dims = _label_head_dims(reading)
    if reading.nested:
        labelled = list(reading.params.items())
    else:
        names = dict.fromkeys(reading.layer_labels or (FLAT,))
        labelled = [(name, reading.params[FLAT]) for name in names]
    kinds = {}
    nope = nope_layer_types(reading)
    for label, raw in labelled:
        dim = dims.get(label, reading.head_dim)
        where = f"{reading.where}[{label!r}]" if reading.nested else reading.where
        if not reading.rotary:
            kinds[label] = _no_rope(label, dim, pairs, reading.notes[0])
        elif label in nope:
            kinds[label] = _no_rope(label, dim, pairs, nope[label])
        elif raw is None:
            kinds[label] = _no_rope(label, dim, pairs, f"{where} is None: no RoPE")
        elif label in NOT_ATTENTION:
            kinds[label] = _no_rope(label, dim, pairs, f"{label!r} layers are not attention")
        else:
            kinds[label] = _kind(reading, label, raw, dim, where)
    for label in dict.fromkeys(reading.layer_labels or ()):  # types without a parameter set
        if label not in kinds and label in NOT_ATTENTION:
            why = f"{label!r} layers are not attention"
            kinds[label] = _no_rope(label, dims.get(label, reading.head_dim), pairs, why)
    return kinds


def _layers(
    reading: ConfigReading, kinds: dict[str, RopeLayer], pairs: tuple[PairLayout, str]
) -> tuple[RopeLayer, ...]:
    if reading.layer_labels is None or reading.head_dims is None:
        return ()
    dims = _label_head_dims(reading)
    layers = []
    bases = reading.layer_bases
    for i, (label, dim) in enumerate(zip(reading.layer_labels, reading.head_dims, strict=True)):
        kind = kinds[label]
        base = None if bases is None or not kind.uses_positions else bases[i]
        if i in reading.no_rope and kind.uses_positions:
            kind = _no_rope(label, dim, pairs, f"no_rope_layers[{i}] is 0: no RoPE in this layer")
        elif base == 0.0:
            kind = _no_rope(label, dim, pairs, f"layer_rope_theta[{i}] is 0: no RoPE in this layer")
        elif kind.uses_positions and (dim != dims[label] or (base and base != kind.base)):
            raw = reading.params[
                label if reading.nested else FLAT
            ]  # a head size or base of its own
            assert raw is not None
            own = raw if not base else {**raw, "rope_theta": base}
            kind = _kind(reading, label, own, dim, f"{reading.where}[layer {i}]")
        layers.append(kind)
    return tuple(layers)


def rope_plan(config: Any, *, vision: bool = False) -> RopePlan:
    """The RoPE of every layer of a model, read from its Hugging Face config.

    Args:
        config: a ``transformers`` config object (``LlamaConfig``, ``Gemma3TextConfig``, a
            composite config such as ``Qwen2VLConfig``, whose ``text_config`` is read), or a
            dict loaded from a ``config.json`` (4.x ``rope_scaling`` + ``rope_theta`` or 5.x
            ``rope_parameters``, flat or nested by layer type). A vision tower's config
            (``Qwen2VLVisionConfig``, ``{"model_type": "qwen2_vl_vision", ...}``) needs no
            rope key: its rotary class's axial layout and default base apply.
        vision: read the composite config's ``vision_config`` (inside ``thinker_config`` for
            the Omni models) instead of its language model; a block without ``model_type`` (as
            ``config.json`` files write it) is read as the vision tower of the composite's
            model_type (``qwen2_vl`` -> ``qwen2_vl_vision``, docs/rope-plans.md lists them).

    Returns:
        a :class:`RopePlan`: ``plan.layers`` (one :class:`RopeLayer` per layer),
        ``plan.kinds`` (one per layer type) and ``plan.layer(layer_type)``.

    Raises:
        ValueError: naming the key, for a rope parameter that posenc does not know (keys that
            leave the tables unchanged, such as ``llama_4_scaling_beta``, are accepted and
            reported in ``RopeLayer.inert``), a missing size, or a config without RoPE settings;
            naming the model type, for a rotary form that no posenc table describes
            (NanoChat's rotation by -θ).

    >>> config = {"model_type": "gemma3_text", "head_dim": 8, "num_hidden_layers": 3,
    ...           "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
    ...           "rope_parameters": {
    ...               "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    ...               "full_attention": {"rope_type": "linear", "factor": 8.0,
    ...                                  "rope_theta": 1000000.0}}}
    >>> plan = rope_plan(config)
    >>> [layer.rope_type for layer in plan]
    ['default', 'default', 'linear']
    >>> plan.layer("sliding_attention").frequencies
    array([1.   , 0.1  , 0.01 , 0.001])
    >>> plan.layer("full_attention").scaling
    RopeScaling(rope_type='linear', factor=8.0)
    >>> cos, sin = plan.layer("sliding_attention").cos_sin(2)
    >>> cos.shape
    (2, 8)
    """
    reading = read_config(config, vision=config_values.boolean("", "vision", vision))
    _refuse(reading)
    return _plan(reading)


def table_plan(config: Any, *, vision: bool = False) -> RopePlan:
    """:func:`rope_plan` for a caller that uses the cos/sin tables alone (a module returning
    them, replaced and verified by ``posenc.torch.swap_positions``): also a model whose tables
    are posenc's while the rotation it applies to them is a form that :func:`rope_plan`
    refuses (:data:`~posenc._rope.models.STANDARD_TABLES`: NanoChat, which rotates by -θ).
    Its layers' ``pairs`` then describe the tables, not the model's rotation."""
    reading = read_config(config, vision=config_values.boolean("", "vision", vision))
    if reading.model_type not in STANDARD_TABLES:
        _refuse(reading)
    return _plan(reading)


def _refuse(reading: ConfigReading) -> None:
    """A ``ValueError`` naming the model type for a rotary form no posenc plan describes."""
    refused = REFUSED.get(reading.model_type or "")
    if refused is not None:
        raise ValueError(
            f"model_type {reading.model_type!r} (at {reading.where}) "
            f"{refused}: no posenc table and pair layout describe it, "
            "so rope_plan gives no plan for it"
        )


def _with_temperature(reading: ConfigReading, layer: RopeLayer, index: int | None) -> RopeLayer:
    found = read_temperature(reading, layer.layer_type, index, layer.uses_positions)
    return layer if found is None else replace(layer, temperature=found)


def _plan(reading: ConfigReading) -> RopePlan:
    pairs = pairs_of(reading)
    kinds = _kinds(reading, pairs)
    layers = _layers(reading, kinds, pairs)
    return RopePlan(
        model_type=reading.model_type,
        source=reading.where,
        layers=tuple(_with_temperature(reading, layer, i) for i, layer in enumerate(layers)),
        kinds=MappingProxyType(
            {label: _with_temperature(reading, kind, None) for label, kind in kinds.items()}
        ),
        notes=(*reading.notes, *layer_base_notes(reading)),
    )
