"""The comparison: a subject's tables against the plan's exact ones, per layer.

For each layer the subject's cos/sin at the probe positions are held against the plan's, in
float64. A layer is ``exact`` when every element is within one unit in the last place of the
subject's dtype of the exact value, ``float32_angles`` when it is within the error model of
float32 angles (``_forms.float32_bound``), else ``wrong``. A wrong layer is then explained by
testing hypotheses against the subject's numbers: each is the plan changed in one way (another
base, the scaling missing or applied twice, YaRN's truncation flipped, the frequencies of
another layer type, the pairs laid out the other way, ...) or rounded in one way (bfloat16
tables, positions or frequencies); the first that fits the subject within float32 angles'
error names the cause.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from .._rope.plan import RopeLayer, RopePlan
from .._rope.scaling import RopeScaling, rope_frequencies
from ..analysis._rounding import _round_bfloat16
from ._forms import (
    ONE_MILLION,
    Form,
    describe_number,
    exact_tolerance,
    float32_bound,
    float32_bound_at,
    layer_form,
    lengths,
    one_axis_form,
    probe_positions,
)
from ._report import Difference, LayerFinding, Status
from ._subjects import Subject, SubjectTables

_F64 = npt.NDArray[np.float64]
_Tables = tuple[_F64, _F64]

_PAIR_WORDS = {"half": "halves", "interleaved": "interleaved"}
#: Dtypes coarser than float32: tables in them are worse than float32 angles.
_COARSE = ("bfloat16", "float16")


@dataclass(frozen=True)
class _Group:
    """Rows compared together: their positions ``(P, n_axes)``, the subject's tables there, and
    the sequence length the plan's frequencies are taken at."""

    positions: _F64
    subject: SubjectTables
    seq_len: int | None


# --------------------------------------------------------------------------- targets


def targets(
    plan: RopePlan, subject: Subject, layer_type: str | None
) -> list[tuple[int | None, RopeLayer, tuple[int, ...]]]:
    """``(index, layer, layer indices)`` to compare: every layer for a subject that tells
    layers apart, else the one rotating kind (``layer_type`` chooses among several)."""
    indices = {
        k: tuple(i for i, each in enumerate(plan.layers) if each.layer_type == k)
        for k in plan.kinds
    }
    if subject.per_layer:
        if layer_type is not None:
            plan.layer(layer_type)
        chosen: list[tuple[int | None, RopeLayer, tuple[int, ...]]] = [
            (i, layer, (i,))
            for i, layer in enumerate(plan.layers)
            if layer_type is None or layer.layer_type == layer_type
        ]
        if chosen:
            return chosen
        kinds = plan.kinds.items()
        return [(None, k, indices[n]) for n, k in kinds if layer_type in (None, n)]
    if layer_type is None:
        rotating = [n for n, k in plan.kinds.items() if k.uses_positions]
        if len(rotating) > 1:
            raise ValueError(
                f"the config has {len(rotating)} kinds of rotating layers and "
                f"{subject.description} is one table: pass layer_type (--layer-type) one of "
                f"{sorted(rotating)}"
            )
        if not rotating:
            raise ValueError("the config gives no layer positions: there is nothing to audit")
        layer_type = rotating[0]
    layer = plan.layer(layer_type)
    return [(None, layer, indices[layer_type])]


# --------------------------------------------------------------------------- one layer


def compare_layer(
    layer: RopeLayer,
    index: int | None,
    layers: tuple[int, ...],
    subject: Subject,
    plan: RopePlan,
    context: int | None,
    positions: npt.NDArray[np.int64] | None,
) -> LayerFinding:
    """The finding for one layer (or one kind of layer)."""
    if layer.uses_positions and layer.unsupported:
        raise ValueError(f"layer type {layer.layer_type!r}: {layer.unsupported}")
    n_axes = max(len(layer.axes), 1)
    original, dependent = lengths(layer, context) if layer.uses_positions else (None, False)
    probes = probe_positions(context, original) if positions is None else positions
    if not layer.uses_positions:
        return _no_positions(layer, index, layers, subject, probes, n_axes)
    groups = list(_groups(layer, index, subject, probes, n_axes, original, dependent))
    if any(g.subject is None for g in groups):
        return _finding(layer, layers, "wrong", cause="the subject does not rotate this layer, "
                        "the config does", notes=())  # fmt: skip
    return _judge(layer, layers, groups, plan, context, subject)


def _multi_axis_rows(probes: npt.NDArray[np.int64], n_axes: int) -> _F64:
    """Text rows (every coordinate ``p``) and, for multi-axis layers, image-like rows whose
    coordinates differ (``p``, ``p // 3``, ``p % 17``, ...)."""
    text = np.repeat(probes.astype(np.float64)[:, None], n_axes, axis=1)
    if n_axes == 1:
        return text
    image = np.stack(
        [probes // (1 + 2 * a) + (a * 7) % 17 if a else probes for a in range(n_axes)], axis=1
    ).astype(np.float64)
    return np.concatenate([text, image[(probes > 0) & (probes < 5000)]])


def _groups(
    layer: RopeLayer,
    index: int | None,
    subject: Subject,
    probes: npt.NDArray[np.int64],
    n_axes: int,
    original: int | None,
    dependent: bool,
) -> Iterator[_Group]:
    sets = [probes]
    if dependent and original is not None and not subject.fixed_positions:
        short = probes[probes < original]
        sets = [s for s in (short, probes) if s.size]
    for chosen in sets:
        rows = _multi_axis_rows(chosen, n_axes)
        tables = subject.tables(index, layer, rows)
        if tables is None:
            yield _Group(rows, None, None)  # type: ignore[arg-type]
            continue
        pos = tables.positions
        if pos.shape[1] < n_axes:
            pos = np.repeat(pos[:, :1], n_axes, axis=1)
        if pos.shape[0] == 0:
            raise ValueError(
                f"{subject.description} has no row at the positions probed (0 .. "
                f"{int(chosen.max()):,})"
            )
        seq_len = int(pos.max()) + 1 if dependent else None
        tables = replace(tables, positions=pos)
        if pos.shape[0] > MAX_ROWS:  # a long dump: the probes and evenly spaced rows
            tables = _some_rows(tables, chosen)
        yield _Group(tables.positions, tables, seq_len)


#: The most rows of a subject compared (a dump of a million positions is sampled).
MAX_ROWS = 4096


def _some_rows(tables: SubjectTables, probes: npt.NDArray[np.int64]) -> SubjectTables:
    """At most :data:`MAX_ROWS` rows: those at the probe positions, then evenly spaced others
    (the first and the last included)."""
    rows = tables.positions.shape[0]
    at_probes = np.flatnonzero(np.isin(tables.positions[:, 0], probes))[: MAX_ROWS // 2]
    spaced = np.linspace(0, rows - 1, MAX_ROWS - at_probes.size).round().astype(np.int64)
    keep = np.unique(np.concatenate([at_probes, spaced]))
    return replace(
        tables, positions=tables.positions[keep], cos=tables.cos[keep], sin=tables.sin[keep]
    )


def _no_positions(
    layer: RopeLayer,
    index: int | None,
    layers: tuple[int, ...],
    subject: Subject,
    probes: npt.NDArray[np.int64],
    n_axes: int,
) -> LayerFinding:
    rows = _multi_axis_rows(probes, n_axes)
    tables = subject.tables(index, layer, rows) if subject.per_layer else None
    if tables is None:
        return _finding(layer, layers, "no_positions", cause="", notes=())
    moved = np.abs(tables.cos - 1.0).max(initial=0.0) + np.abs(tables.sin).max(initial=0.0)
    if moved <= 1e-6:
        return _finding(layer, layers, "no_positions", cause="", notes=("the subject's tables "
                        "are the identity (cos 1, sin 0)",))  # fmt: skip
    why = "; ".join(layer.notes) or "it does not rotate"
    return _finding(
        layer,
        layers,
        "wrong",
        cause=f"the subject rotates this layer, but the config gives it no positions ({why})",
        notes=(),
    )


def _finding(
    layer: RopeLayer, layers: tuple[int, ...], status: Status, *, cause: str, notes: Any
) -> LayerFinding:
    return LayerFinding(
        layers, layer.layer_type, status, None, None, None, None, None, None, cause, (0, 0),
        tuple(notes),
    )  # fmt: skip


# --------------------------------------------------------------------------- errors


def _stack(cos: _F64, sin: _F64) -> _F64:
    return np.concatenate([cos, sin], axis=1)


def _errors(group: _Group, tables: _Tables) -> _F64:
    err: _F64 = np.abs(_stack(group.subject.cos, group.subject.sin) - _stack(*tables))
    return err


def _allowed(
    form: Form, group: _Group, expected: _Tables, dtype: str | None = None
) -> tuple[_F64, _F64]:
    """``(exact tolerance, float32 bound + tolerance)`` per element ``(P, 2·width)``. A subject
    in a dtype coarser than float32 is held to float32's rounding: its own rounding is an error
    (unless ``dtype`` names the rounding a hypothesis expects)."""
    theta = form.spread(np.abs(form.angles(group.positions)))
    theta2 = _stack(theta, theta)
    if dtype is None:
        dtype = group.subject.dtype
        dtype = "float32" if dtype in _COARSE else dtype
    tol = exact_tolerance(_stack(*expected), theta2, dtype)
    bound = float32_bound(form, group.positions)
    return tol, _stack(bound, bound) + tol


def _judge(
    layer: RopeLayer,
    layers: tuple[int, ...],
    groups: list[_Group],
    plan: RopePlan,
    context: int | None,
    subject: Subject,
) -> LayerFinding:
    notes = tuple(dict.fromkeys(n for g in groups for n in g.subject.notes))
    shown = groups[0].subject.pairs
    pairs = shown or layer.pairs
    forms = [replace(layer_form(layer, g.seq_len), pairs=pairs) for g in groups]
    widths = {g.subject.cos.shape[1] for g in groups}
    largest = int(max(g.positions[:, 0].max() for g in groups))
    count = len({int(p) for g in groups for p in g.positions[:, 0]})
    if widths != {forms[0].width}:
        cause = _width_cause(layer, groups, plan)
        return replace(
            _finding(layer, layers, "wrong", cause=cause, notes=notes), positions=(count, largest)
        )
    status: Status = "exact"
    worst, first = 0.0, None
    at_context: float | None = None
    at_1m: float | None = None
    for form, group in zip(forms, groups, strict=True):
        expected = form.tables(group.positions)
        err = _errors(group, expected)
        tol, bound = _allowed(form, group, expected)
        if (err > tol).any() and status == "exact":
            status = "float32_angles"
        if (err > bound).any():
            status = "wrong"
            diff = _first(group, err, bound, expected)
            if first is None or (diff.position, diff.channel) < (first.position, first.channel):
                first = diff
        worst = max(worst, float(err.max()))
        rows = group.positions[:, 0]
        if context is not None and (rows == context - 1).any():
            at_context = max(at_context or 0.0, float(err[rows == context - 1].max()))
        if (rows == ONE_MILLION).any():
            at_1m = max(at_1m or 0.0, float(err[rows == ONE_MILLION].max()))
    causes = []
    if shown is not None and shown != layer.pairs:
        causes.append(
            f"pairs {_PAIR_WORDS[shown]} where the model pairs {_PAIR_WORDS[layer.pairs]}: "
            f"{layer.pairs_source}"
        )
        status = "wrong"
    if first is not None:
        causes.append(_explain(layer, groups, forms, plan))
    n_axes = groups[0].positions.shape[1]
    reach = min(largest, context - 1) if context else largest
    bound_value = float32_bound_at(forms[-1], reach, n_axes)
    if status == "exact" and not getattr(subject, "exact_possible", True):
        status = "float32_angles"  # exact parameters, evaluated in float32 by the stack
        notes += (
            "the frequencies the subject's parameters give are exact; the stack computes the "
            "angles in float32",
        )
    recipe = None
    if status == "float32_angles":
        recipe = subject.recipe
    return LayerFinding(
        layers=layers,
        layer_type=layer.layer_type,
        status=status,
        recipe=recipe,
        bound=bound_value,
        max_error=worst,
        first_difference=first,
        error_at_context=at_context,
        error_at_1m=at_1m,
        cause="; ".join(causes),
        positions=(count, largest),
        notes=notes,
    )


def _first(group: _Group, err: _F64, bound: _F64, expected: _Tables) -> Difference:
    over = err > bound
    rows = np.flatnonzero(over.any(axis=1))
    order = rows[np.argsort(group.positions[rows, 0], kind="stable")]
    row = int(order[0])
    col = int(np.flatnonzero(over[row])[0])
    width = group.subject.cos.shape[1]
    table = "cos" if col < width else "sin"
    channel = col % width
    subject = (group.subject.cos if table == "cos" else group.subject.sin)[row, channel]
    exact = expected[0 if table == "cos" else 1][row, channel]
    return Difference(int(group.positions[row, 0]), channel, table, float(subject), float(exact))


# --------------------------------------------------------------------------- hypotheses

#: A hypothesis: its words, the tables it predicts for a group (None: does not apply), and
#: optionally the dtype whose rounding it expects.
_Hypothesis = tuple[Any, ...]


def _fits(
    hypothesis: Callable[[_Group, Form], tuple[_Tables, Form] | None],
    groups: list[_Group],
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
        _, bound = _allowed(hform, group, tables, dtype)
        if (_errors(group, tables) > bound).any():
            return False
    return True


def _explain(layer: RopeLayer, groups: list[_Group], forms: list[Form], plan: RopePlan) -> str:
    for words, hypothesis, *dtype in _hypotheses(layer, groups, plan):
        if _fits(hypothesis, groups, forms, *dtype):
            return str(words)
    return _unexplained(layer, groups, forms)


def _at_layer(variant: RopeLayer) -> Callable[[_Group, Form], tuple[_Tables, Form] | None]:
    def predict(group: _Group, form: Form) -> tuple[_Tables, Form] | None:
        try:
            hform = replace(layer_form(variant, group.seq_len), pairs=form.pairs)
        except ValueError:
            return None
        return hform.tables(group.positions), hform

    return predict


def _with_omega(
    change: Callable[[Form, _Group], tuple[Any, Any] | None],
) -> Callable[[_Group, Form], tuple[_Tables, Form] | None]:
    def predict(group: _Group, form: Form) -> tuple[_Tables, Form] | None:
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
    change: Callable[[_Tables, Form, _Group], _Tables],
) -> Callable[[_Group, Form], tuple[_Tables, Form] | None]:
    def predict(group: _Group, form: Form) -> tuple[_Tables, Form]:
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


def _hypotheses(layer: RopeLayer, groups: list[_Group], plan: RopePlan) -> Iterator[_Hypothesis]:
    spec = layer.scaling
    shown = groups[0].subject.pairs
    if shown is None:
        other = "interleaved" if layer.pairs == "half" else "half"
        yield (
            f"pairs {_PAIR_WORDS[other]} where the model pairs {_PAIR_WORDS[layer.pairs]}: "
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
    if spec is not None:
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
    yield from _precision_hypotheses()


def _with_omega_1d(layer: RopeLayer) -> Callable[[_Group, Form], tuple[_Tables, Form] | None]:
    def predict(group: _Group, form: Form) -> tuple[_Tables, Form]:
        omega, attention = layer.frequencies_at(group.seq_len)
        flat = one_axis_form(omega, attention, form.pairs)
        return flat.tables(group.positions[:, :1]), form

    return predict


def _rebased(layer: RopeLayer, base: float) -> _F64:
    """Per pair, the plain schedule of ``base`` over the config's: the same scaling factors
    (a GGUF's ``rope_freqs``, LongRoPE's) applied to another base's frequencies."""
    k = np.arange(layer.rotary_dim // 2, dtype=np.float64)
    exponent = -2.0 * k / layer.rotary_dim
    ratio: _F64 = np.power(base, exponent) / np.power(layer.base or 1.0, exponent)
    return ratio


def _plain(layer: RopeLayer, form: Form) -> _F64:
    omega, _ = rope_frequencies(layer.rotary_dim, base=layer.base)
    return omega


def _twice(layer: RopeLayer, form: Form, group: _Group, attention: bool) -> tuple[Any, Any] | None:
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


def _over_head_dim(layer: RopeLayer, form: Form, group: _Group) -> tuple[Any, Any] | None:
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


def _fit_base(layer: RopeLayer, groups: list[_Group]) -> float | None:
    """The base whose schedule gives the ratio of the subject's angles of two neighbouring
    pairs: pairs 0 and 1 at position 1, else the two slowest pairs at the smallest position
    (whose angles are still below 1 there). Any factor that divides both (linear, YaRN's and
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
    ratio = None
    if group.positions[row, 0] == 1.0 and 0.0 < angles[1] < angles[0]:
        ratio = angles[1] / angles[0]
    elif 0.0 < angles[-1] < angles[-2] < 1.0:
        ratio = angles[-1] / angles[-2]
    if ratio is None:
        return None
    base = float(ratio ** (-layer.rotary_dim / 2.0))
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

    def positions_bf16(group: _Group, form: Form) -> tuple[_Tables, Form]:
        return form.tables(_round_bfloat16(group.positions)), form

    yield "positions rounded to bfloat16 (e.g. 15962 becomes 15936)", positions_bf16
    yield (
        "frequencies rounded to bfloat16 (an inv_freq buffer cast to bfloat16)",
        _with_omega(lambda f, g: (_round_bfloat16(f.frequencies), f.attention)),
    )

    def angles_bf16(group: _Group, form: Form) -> tuple[_Tables, Form]:
        theta = _round_bfloat16(form.angles(group.positions))
        return (
            form.spread(np.cos(theta) * form.attention),
            form.spread(np.sin(theta) * form.attention),
        ), form

    yield "angles rounded to bfloat16", angles_bf16


def _width_cause(layer: RopeLayer, groups: list[_Group], plan: RopePlan) -> str:
    width = groups[0].subject.cos.shape[1]
    if width == layer.head_dim and layer.rotary_dim < layer.head_dim:
        wide = replace(layer, rotary_dim=layer.head_dim)
        forms = [
            replace(layer_form(wide, g.seq_len), pairs=g.subject.pairs or layer.pairs)
            for g in groups
        ]
        if _fits(_at_layer(wide), groups, forms):
            return (
                f"frequencies over head_dim {layer.head_dim} channels where the rotary width "
                f"is {layer.rotary_dim}: the tables rotate every channel"
            )
    return (
        f"the subject's tables are {width} channels wide where the config rotates "
        f"{layer.rotary_dim} (head_dim {layer.head_dim})"
    )


def _unexplained(layer: RopeLayer, groups: list[_Group], forms: list[Form]) -> str:
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
