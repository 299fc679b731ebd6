"""Why a layer is wrong: hypotheses tested against the subject's numbers.

Each hypothesis is the plan changed in one way (another base, the scaling missing or applied
twice, YaRN's truncation flipped, Llama 3's factors inverted, LongRoPE's factor sets swapped or
one of them used at every length, another layer type's RoPE, the frequencies over ``head_dim``,
the pairs laid out the other way, sin read from cos or negated, M-RoPE sections ignored or one
axis's pairs turned by another axis's coordinate, the attention factor missing) or rounded in
one way (bfloat16 or float16 tables, bfloat16 positions, frequencies or angles).
:func:`explain` returns the words of the first that reproduces the subject within float32
angles' error (or the rounding it names).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from .._rope.multi_axis import AxisOrder, AxisSchedule
from .._rope.plan import RopeLayer, RopePlan
from .._rope.scaling import RopeScaling, rope_frequencies
from ..analysis._rounding import _round_bfloat16
from ._errors import Group, Tables, allowed, errors
from ._forms import Form, describe_number, layer_form, one_axis_form

__all__ = ["PAIR_WORDS", "explain", "fits", "width_cause"]

_F64 = npt.NDArray[np.float64]

PAIR_WORDS = {"half": "halves", "interleaved": "interleaved"}


#: A hypothesis: its words, the tables it predicts for a group (None: does not apply), and
#: optionally the dtype whose rounding it expects.
_Hypothesis = tuple[Any, ...]


def fits(
    hypothesis: Callable[[Group, Form], tuple[Tables, Form] | None],
    groups: list[Group],
    forms: list[Form],
    dtype: str | None = None,
) -> bool:
    for group, form in zip(groups, forms, strict=True):
        try:
            predicted = hypothesis(group, form)
        except (ValueError, TypeError, ArithmeticError):  # the plan changed that way is invalid
            return False
        if predicted is None:
            return False
        tables, hform = predicted
        if tables[0].shape != group.subject.cos.shape:
            return False
        _, bound = allowed(hform, group, tables, dtype)
        if not (errors(group, tables) <= bound).all():  # NaN (an overflowed angle) too
            return False
    return True


def explain(layer: RopeLayer, groups: list[Group], forms: list[Form], plan: RopePlan) -> str:
    for words, hypothesis, *dtype in _hypotheses(layer, groups, plan):
        if fits(hypothesis, groups, forms, *dtype):
            return str(words)
    return _unexplained(layer, groups, forms)


def _at_layer(variant: RopeLayer) -> Callable[[Group, Form], tuple[Tables, Form] | None]:
    def predict(group: Group, form: Form) -> tuple[Tables, Form] | None:
        try:
            hform = replace(layer_form(variant, group.seq_len), pairs=form.pairs)
        except ValueError:
            return None
        return hform.tables(group.positions), hform

    return predict


def _with_omega(
    change: Callable[[Form, Group], tuple[Any, Any] | None],
) -> Callable[[Group, Form], tuple[Tables, Form] | None]:
    def predict(group: Group, form: Form) -> tuple[Tables, Form] | None:
        changed = change(form, group)
        if changed is None:
            return None
        omega, attention = changed
        hform = replace(
            form,
            frequencies=np.asarray(omega, dtype=np.float64).reshape(form.frequencies.shape),
            attention=np.broadcast_to(np.asarray(attention, float), (form.n_pairs,)).copy(),
        )
        return hform.tables(group.positions), hform

    return predict


def _tables_of(
    change: Callable[[Tables, Form, Group], Tables],
) -> Callable[[Group, Form], tuple[Tables, Form] | None]:
    def predict(group: Group, form: Form) -> tuple[Tables, Form]:
        return change(form.tables(group.positions), form, group), form

    return predict


def _scaling_words(spec: RopeScaling) -> str:
    shown = [f"{k} {describe_number(v)}" for k, v in spec.params.items() if k == "factor"]
    return f"{spec.rope_type}" + (f" {shown[0]}" if shown else "")


def _strip_theta(spec: RopeScaling | None, **changes: Any) -> RopeScaling | None:
    if spec is None:
        return None
    params = {k: v for k, v in spec.params.items() if k != "rope_theta"}
    return RopeScaling(spec.rope_type, **{**params, **changes})


def _hypotheses(layer: RopeLayer, groups: list[Group], plan: RopePlan) -> Iterator[_Hypothesis]:
    yield from _layout_hypotheses(layer, groups)
    if layer.scaling is not None:
        yield from _scaling_hypotheses(layer, layer.scaling)
    yield from _shape_hypotheses(layer, groups, plan)
    yield from _precision_hypotheses()


def _layout_hypotheses(layer: RopeLayer, groups: list[Group]) -> Iterator[_Hypothesis]:
    shown = groups[0].subject.pairs
    if shown is None:
        other = "interleaved" if layer.pairs == "half" else "half"
        yield (
            f"pairs {PAIR_WORDS[other]} where the model pairs {PAIR_WORDS[layer.pairs]}: "
            f"{layer.pairs_source}",
            lambda g, f: ((t := replace(f, pairs=other)).tables(g.positions), t),
        )
    yield (
        "sin read from cos: the sin table holds the cosines",
        _tables_of(lambda t, f, g: (t[0], t[0])),
    )
    yield (
        "rotation by -θ: the sin table has the opposite sign (the rotation turns the other way)",
        _tables_of(lambda t, f, g: (t[0], -t[1])),
    )


def _scaling_hypotheses(layer: RopeLayer, spec: RopeScaling) -> Iterator[_Hypothesis]:
    name = spec.rope_type
    if name == "llama3":
        missing = (
            "llama3 factors missing (no rope_freqs): plain RoPE where the config has "
            + _scaling_words(spec)
        )
    else:
        missing = f"no {name} where the config has {_scaling_words(spec)}"
    yield missing, _at_layer(replace(layer, scaling=None, attention_factor=1.0))
    if layer.attention_factor != 1.0:
        yield (
            f"the attention factor {layer.attention_factor:.6g} of {name} missing (cos and "
            "sin not multiplied by it)",
            _with_omega(lambda f, g: (f.frequencies, 1.0)),
        )
    if name == "llama3":
        yield (
            "llama3 factors inverted: the frequencies multiplied by the factors "
            "(rope_freqs) instead of divided",
            _with_omega(lambda f, g: (_plain(layer, f) ** 2 / f.frequencies, f.attention)),
        )
    if name == "longrope":
        swapped = _strip_theta(
            spec,
            short_factor=spec.params["long_factor"],
            long_factor=spec.params["short_factor"],
        )
        yield (
            "longrope long and short factors swapped",
            _at_layer(replace(layer, scaling=swapped)),
        )
        original = spec.original_length
        for which, other in (("long", "short"), ("short", "long")):
            same = _strip_theta(spec, **{f"{other}_factor": spec.params[f"{which}_factor"]})
            yield (
                f"longrope's {which} factors at every length, where the config uses the "
                f"short ones up to original_max_position_embeddings ({original}) and the "
                "long ones beyond",
                _at_layer(replace(layer, scaling=same)),
            )
    if name == "yarn":
        truncate = bool(spec.params.get("truncate", True))
        flipped = _strip_theta(spec, truncate=not truncate)
        yield (
            f"YaRN truncate lost: the config says truncate={truncate}, the subject "
            f"{'does not round' if truncate else 'rounds'} the ramp's ends to whole pairs "
            f"(truncate={not truncate})",
            _at_layer(replace(layer, scaling=flipped)),
        )
    yield f"{name} applied twice", _with_omega(lambda f, g: _twice(layer, f, g, False))
    yield (
        f"{name} applied twice (frequencies and attention factor)",
        _with_omega(lambda f, g: _twice(layer, f, g, True)),
    )


def _shape_hypotheses(
    layer: RopeLayer, groups: list[Group], plan: RopePlan
) -> Iterator[_Hypothesis]:
    spec = layer.scaling
    if layer.rotary_dim < layer.head_dim and not layer.multi_axis:
        words = (
            f"frequencies over head_dim {layer.head_dim} channels where the rotary width is "
            f"{layer.rotary_dim}"
        )
        yield words, _with_omega(lambda f, g: _over_head_dim(layer, f, g))
    for name, kind in plan.kinds.items():
        if name != layer.layer_type and kind.uses_positions and not kind.unsupported:
            yield (
                f"the RoPE of {name!r} layers (base {describe_number(kind.base or 0)}) on a "
                f"{layer.layer_type!r} layer (base {describe_number(layer.base or 0)})",
                _at_layer(replace(kind, pairs=layer.pairs)),
            )
    fitted = _fit_base(layer, groups)
    if fitted is not None:
        said = describe_number(layer.base or 0)
        words = f"base {describe_number(fitted)} where the config says {said}"
        local = [n for n, k in plan.kinds.items() if k.uses_positions and k.base == fitted]
        if local:
            words += f": the base of {local[0]!r} layers on {layer.layer_type!r} layers"
        yield (
            words,
            _with_omega(lambda f, g: (f.frequencies * _rebased(layer, fitted), f.attention)),
        )
        yield words, _at_layer(replace(layer, base=fitted, scaling=_strip_theta(spec)))
        if spec is not None:
            yield (
                words + f", and no {spec.rope_type}",
                _at_layer(replace(layer, base=fitted, scaling=None, attention_factor=1.0)),
            )
    if layer.multi_axis:
        sections = list(layer.sections)
        yield (
            f"sections {sections} ignored: every pair turns with the {layer.axes[0]} coordinate",
            _with_omega_1d(layer),
        )
        if layer.schedule in ("dealt", "per_axis"):
            other: AxisSchedule = "per_axis" if layer.schedule == "dealt" else "dealt"
            yield (
                f"{SCHEDULE_WORDS[other]} where the model has {SCHEDULE_WORDS[layer.schedule]}",
                _at_layer(replace(layer, schedule=other)),
            )
        if len(layer.axes) == 2 and layer.schedule != "shared":
            slots = layer.slot_order or (0, 1)
            flipped_slots = tuple(reversed(slots))
            yield (
                f"the {layer.axes[flipped_slots[0]]} pairs first where the model lays the "
                f"{layer.axes[slots[0]]} pairs first (the two axes swapped)",
                _at_layer(replace(layer, slot_order=flipped_slots)),
            )
        if layer.schedule != "shared":  # for M-RoPE, "sections ignored" is that hypothesis
            yield (
                f"{len(layer.axes)}-D RoPE collapsed to 1-D: one schedule over the "
                f"{layer.rotary_dim} rotated channels turned by one position, where the config "
                f"gives each pair its {' or '.join(layer.axes)} coordinate",
                _one_position(layer),
            )
        if layer.order in ("sectioned", "interleaved"):
            flipped: AxisOrder = "sectioned" if layer.order == "interleaved" else "interleaved"
            layout = {"sectioned": "in one block per axis", "interleaved": "interleaved"}
            yield (
                f"sections {sections} {layout[flipped]} where the model lays them "
                f"{layout[layer.order]} (mrope_interleaved)",
                _at_layer(
                    replace(layer, order=flipped, interleaved_sections=flipped == "interleaved")
                ),
            )
        for mine, read in itertools.permutations(range(len(layer.axes)), 2):
            yield (
                f"the {layer.axes[mine]} pairs turn with the {layer.axes[read]} coordinate "
                "(one axis's position ids read for another's)",
                _with_omega(_moved(mine, read)),
            )


def _moved(mine: int, other: int) -> Callable[[Form, Group], tuple[Any, Any]]:
    """The frequency matrix with axis ``mine``'s pairs turned by coordinate ``other``."""

    def change(form: Form, group: Group) -> tuple[Any, Any]:
        moved = form.frequencies.copy()
        moved[other] += moved[mine]
        moved[mine] = 0.0
        return moved, form.attention

    return change


#: The words for a vision tower's schedules (``RopeLayer.schedule``).
SCHEDULE_WORDS = {
    "dealt": "one schedule over the head dealt to the axes in turns (Pixtral's)",
    "per_axis": "each axis its own schedule over half the head (compute_axial_rope_parameters)",
}


def _one_position(layer: RopeLayer) -> Callable[[Group, Form], tuple[Tables, Form] | None]:
    """The plain 1-D schedule over the rotary width, turned by the first coordinate."""

    def predict(group: Group, form: Form) -> tuple[Tables, Form]:
        omega, _ = rope_frequencies(layer.rotary_dim, base=layer.base)
        matrix = np.zeros_like(form.frequencies)
        matrix[0] = omega
        flat = replace(form, frequencies=matrix)
        return flat.tables(group.positions), flat

    return predict


def _with_omega_1d(layer: RopeLayer) -> Callable[[Group, Form], tuple[Tables, Form] | None]:
    def predict(group: Group, form: Form) -> tuple[Tables, Form]:
        omega, attention = layer.frequencies_at(group.seq_len)
        flat = one_axis_form(omega, attention, form.pairs)
        return flat.tables(group.positions[:, :1]), form

    return predict


def _exponents(layer: RopeLayer) -> _F64:
    """Per pair, the power of the base in the plain schedule: ``-2k/rotary_dim``, or for a
    multi-axis layer the one its frequency matrix gives (``-4k/head_dim`` on each axis of a
    vision tower's)."""
    if not layer.multi_axis:
        return -2.0 * np.arange(layer.rotary_dim // 2, dtype=np.float64) / layer.rotary_dim
    base = layer.base or 0.0
    plain = replace(layer, scaling=None)
    omega = np.abs(np.asarray(plain.axis_frequencies().frequencies)).sum(axis=0)
    if base <= 1.0 or (omega <= 0.0).any():
        return np.zeros(0)
    exponents: _F64 = np.log(omega) / math.log(base)
    return exponents


def _rebased(layer: RopeLayer, base: float) -> _F64:
    """Per pair, the plain schedule of ``base`` over the config's: the same scaling factors
    (a GGUF's ``rope_freqs``, LongRoPE's) applied to another base's frequencies."""
    exponent = _exponents(layer)
    ratio: _F64 = np.power(base, exponent) / np.power(layer.base or 1.0, exponent)
    return ratio


def _plain(layer: RopeLayer, form: Form) -> _F64:
    omega, _ = rope_frequencies(layer.rotary_dim, base=layer.base)
    return omega


def _twice(layer: RopeLayer, form: Form, group: Group, attention: bool) -> tuple[Any, Any] | None:
    spec = layer.scaling
    if spec is None or layer.multi_axis:
        return None
    from .._rope.records import RopeInput

    once = form.frequencies[0]
    base = float(layer.base or 0.0)
    twice, att = spec.record.transform(
        RopeInput(once, layer.rotary_dim, base, spec.params, group.seq_len)
    )
    return twice, form.attention * (att if attention else 1.0)


def _over_head_dim(layer: RopeLayer, form: Form, group: Group) -> tuple[Any, Any] | None:
    try:
        omega, att = rope_frequencies(
            layer.head_dim,
            base=layer.base,
            scaling=_strip_theta(layer.scaling),
            seq_len=group.seq_len,
        )
    except ValueError:
        return None
    return omega[: form.n_pairs], att


def _fit_base(layer: RopeLayer, groups: list[Group]) -> float | None:
    """The base whose schedule gives the ratio of the subject's angles of two neighbouring
    pairs: pairs 0 and 1 at position 1, else the two slowest pairs at the smallest position
    (whose angles are still below 1 there), through the powers of the base the plan's schedule
    gives those pairs (:func:`_exponents`). Any factor that divides both (linear, YaRN's and
    Llama 3's ends of the schedule) cancels."""
    group = groups[0]
    text = (group.positions == group.positions[:, :1]).all(axis=1)
    rows = np.flatnonzero(text & (group.positions[:, 0] > 0))
    n = group.subject.cos.shape[1] // 2
    if rows.size == 0 or n < 2:
        return None
    row = int(rows[np.argmin(group.positions[rows, 0])])
    form = Form(np.zeros((1, n)), np.ones(n), group.subject.pairs or layer.pairs)
    first, _ = _pair_slices(form)
    angles = np.arctan2(group.subject.sin[row, first], group.subject.cos[row, first])
    if group.positions[row, 0] == 1.0 and 0.0 < angles[1] < angles[0]:
        slow, fast = 1, 0
    elif 0.0 < angles[-1] < angles[-2] < 1.0:
        slow, fast = n - 1, n - 2
    else:
        return None
    exponents = _exponents(layer)
    step = exponents[slow] - exponents[fast] if exponents.size == n else 0.0
    if step >= 0.0:
        return None
    base = float((angles[slow] / angles[fast]) ** (1.0 / step))
    if not math.isfinite(base) or base <= 1.0:
        return None
    rounded = float(f"{base:.3g}")
    fitted = rounded if abs(rounded / base - 1.0) < 2e-3 else float(f"{base:.6g}")
    if layer.base and abs(fitted / layer.base - 1.0) < 1e-6:
        return None
    return fitted


def _pair_slices(form: Form) -> tuple[slice, slice]:
    from .._features import pair_slices

    return pair_slices(form.pairs, form.n_pairs)


def _precision_hypotheses() -> Iterator[_Hypothesis]:
    yield (
        "the table rounded to bfloat16 (worse than float32 angles)",
        _tables_of(lambda t, f, g: (_round_bfloat16(t[0]), _round_bfloat16(t[1]))),
        "bfloat16",
    )
    yield (
        "the table rounded to float16 (worse than float32 angles)",
        _tables_of(
            lambda t, f, g: (
                t[0].astype(np.float16).astype(np.float64),
                t[1].astype(np.float16).astype(np.float64),
            )
        ),
        "float16",
    )

    def positions_bf16(group: Group, form: Form) -> tuple[Tables, Form]:
        return form.tables(_round_bfloat16(group.positions)), form

    yield "positions rounded to bfloat16 (e.g. 15962 becomes 15936)", positions_bf16
    yield (
        "frequencies rounded to bfloat16 (an inv_freq buffer cast to bfloat16)",
        _with_omega(lambda f, g: (_round_bfloat16(f.frequencies), f.attention)),
    )

    def angles_bf16(group: Group, form: Form) -> tuple[Tables, Form]:
        theta = _round_bfloat16(form.angles(group.positions))
        return (
            form.spread(np.cos(theta) * form.attention),
            form.spread(np.sin(theta) * form.attention),
        ), form

    yield "angles rounded to bfloat16", angles_bf16

    def angles_fp16(group: Group, form: Form) -> tuple[Tables, Form]:
        with np.errstate(over="ignore", invalid="ignore"):  # past 65504: inf, as in float16
            theta = form.angles(group.positions).astype(np.float16).astype(np.float64)
            return (
                form.spread(np.cos(theta) * form.attention),
                form.spread(np.sin(theta) * form.attention),
            ), form

    yield "angles in float16", angles_fp16


def width_cause(layer: RopeLayer, groups: list[Group], plan: RopePlan) -> str:
    width = groups[0].subject.cos.shape[1]
    if width == layer.head_dim and layer.rotary_dim < layer.head_dim:
        wide = replace(layer, rotary_dim=layer.head_dim)
        forms = [
            replace(layer_form(wide, g.seq_len), pairs=g.subject.pairs or layer.pairs)
            for g in groups
        ]
        if fits(_at_layer(wide), groups, forms):
            return (
                f"frequencies over head_dim {layer.head_dim} channels where the rotary width "
                f"is {layer.rotary_dim}: the tables rotate every channel"
            )
    return (
        f"the subject's tables are {width} channels wide where the config rotates "
        f"{layer.rotary_dim} (head_dim {layer.head_dim})"
    )


def _unexplained(layer: RopeLayer, groups: list[Group], forms: list[Form]) -> str:
    group, form = groups[0], forms[0]
    rows = np.flatnonzero((group.positions == 1.0).all(axis=1))
    if rows.size:
        cos = group.subject.cos[rows[0]]
        sin = group.subject.sin[rows[0]]
        size = np.hypot(cos, sin)
        attention = float(np.median(size))
        if abs(attention - float(form.attention.max())) > 1e-3:
            return (
                f"attention factor {attention:.6g} where the config gives "
                f"{float(form.attention.max()):.6g}"
            )
    return "no known cause fits: the frequencies differ from the plan's in a way not recognised"
