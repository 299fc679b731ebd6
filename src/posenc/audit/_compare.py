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

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from .._features import pair_slices
from .._rope.plan import RopeLayer, RopePlan
from ._errors import Group, Tables, allowed, errors
from ._forms import (
    ONE_MILLION,
    Form,
    float32_bound_at,
    layer_form,
    lengths,
    probe_positions,
)
from ._hypotheses import PAIR_WORDS, explain, width_cause
from ._report import AxisFinding, Difference, LayerFinding, Status
from ._subjects import Subject, SubjectTables

_F64 = npt.NDArray[np.float64]


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
) -> Iterator[Group]:
    sets = [probes]
    if dependent and original is not None and not subject.fixed_positions:
        short = probes[probes < original]
        sets = [s for s in (short, probes) if s.size]
    for chosen in sets:
        rows = _multi_axis_rows(chosen, n_axes)
        tables = subject.tables(index, layer, rows)
        if tables is None:
            yield Group(rows, None, None)  # type: ignore[arg-type]
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
        yield Group(tables.positions, tables, seq_len)


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


def _judge(
    layer: RopeLayer,
    layers: tuple[int, ...],
    groups: list[Group],
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
        cause = width_cause(layer, groups, plan)
        return replace(
            _finding(layer, layers, "wrong", cause=cause, notes=notes), positions=(count, largest)
        )
    status: Status = "exact"
    worst, first = 0.0, None
    at_context: float | None = None
    at_1m: float | None = None
    columns = _axis_columns(layer, forms[0])
    per_axis: list[_AxisTally] = [_AxisTally() for _ in columns]
    for form, group in zip(forms, groups, strict=True):
        expected = form.tables(group.positions)
        err = errors(group, expected)
        tol, bound = allowed(form, group, expected)
        if (err > tol).any() and status == "exact":
            status = "float32_angles"
        if (err > bound).any():
            status = "wrong"
            diff = _first(group, err, bound, expected)
            if first is None or (diff.position, diff.channel) < (first.position, first.channel):
                first = diff
        worst = max(worst, float(err.max()))
        for tally, mask in zip(per_axis, columns, strict=True):
            tally.add(group, err, tol, bound, expected, mask)
        rows = group.positions[:, 0]
        if context is not None and (rows == context - 1).any():
            at_context = max(at_context or 0.0, float(err[rows == context - 1].max()))
        if (rows == ONE_MILLION).any():
            at_1m = max(at_1m or 0.0, float(err[rows == ONE_MILLION].max()))
    causes = []
    if shown is not None and shown != layer.pairs:
        causes.append(
            f"pairs {PAIR_WORDS[shown]} where the model pairs {PAIR_WORDS[layer.pairs]}: "
            f"{layer.pairs_source}"
        )
        status = "wrong"
    if first is not None:
        causes.append(explain(layer, groups, forms, plan))
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
    axes = tuple(
        tally.finding(name, int(mask.sum()) // 4, shown is not None and shown != layer.pairs)
        for name, tally, mask in zip(layer.axes, per_axis, columns, strict=True)
    )
    if not getattr(subject, "exact_possible", True):
        axes = tuple(
            replace(a, status="float32_angles") if a.status == "exact" else a for a in axes
        )
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
        axes=axes,
    )


def _first(
    group: Group,
    err: _F64,
    bound: _F64,
    expected: Tables,
    columns: npt.NDArray[np.bool_] | None = None,
) -> Difference:
    """The first element over ``bound`` (in ``columns`` of ``cos | sin`` when given): the
    smallest first coordinate, then the smallest channel."""
    over = err > bound
    if columns is not None:
        over &= columns[None, :]
    rows = np.flatnonzero(over.any(axis=1))
    order = rows[np.argsort(group.positions[rows, 0], kind="stable")]
    row = int(order[0])
    col = int(np.flatnonzero(over[row])[0])
    width = group.subject.cos.shape[1]
    table = "cos" if col < width else "sin"
    channel = col % width
    subject = (group.subject.cos if table == "cos" else group.subject.sin)[row, channel]
    exact = expected[0 if table == "cos" else 1][row, channel]
    coordinates = group.positions[row]
    return Difference(
        int(coordinates[0]),
        channel,
        table,
        float(subject),
        float(exact),
        tuple(int(c) for c in coordinates) if coordinates.size > 1 else (),
    )


# --------------------------------------------------------------------------- per axis


def _axis_columns(layer: RopeLayer, form: Form) -> list[npt.NDArray[np.bool_]]:
    """Per axis of a multi-axis layer, the columns of ``cos | sin`` (``2·width``) that its
    pairs occupy: pair ``k`` belongs to the axis whose row of the frequency matrix turns it.
    ``[]`` for 1-D layers."""
    if not layer.multi_axis or form.frequencies.shape[0] != len(layer.axes):
        return []
    owner = np.argmax(np.abs(form.frequencies), axis=0)  # (n_pairs,)
    first, second = pair_slices(form.pairs, form.n_pairs)
    channel_axis = np.empty(form.width, dtype=np.int64)
    channel_axis[first] = owner
    channel_axis[second] = owner
    both = np.concatenate([channel_axis, channel_axis])
    return [both == a for a in range(len(layer.axes))]


@dataclass
class _AxisTally:
    """One axis's verdict, gathered over the groups of a layer."""

    status: Status = "exact"
    worst: float = 0.0
    first: Difference | None = None

    def add(
        self,
        group: Group,
        err: _F64,
        tol: _F64,
        bound: _F64,
        expected: Tables,
        mask: npt.NDArray[np.bool_],
    ) -> None:
        mine = err[:, mask]
        if mine.size == 0:
            return
        self.worst = max(self.worst, float(mine.max()))
        if (mine > tol[:, mask]).any() and self.status == "exact":
            self.status = "float32_angles"
        if (mine > bound[:, mask]).any():
            self.status = "wrong"
            diff = _first(group, err, bound, expected, mask)
            if self.first is None or (diff.position, diff.channel) < (
                self.first.position,
                self.first.channel,
            ):
                self.first = diff

    def finding(self, axis: str, pairs: int, pairs_wrong: bool) -> AxisFinding:
        # a wrong pair layout makes every axis wrong, whatever its channels' errors say
        status: Status = "wrong" if pairs_wrong else self.status
        return AxisFinding(axis, pairs, status, self.worst, self.first)
