"""The audit's result: one :class:`LayerFinding` per group of layers, in an :class:`AuditReport`
that prints as text and converts to JSON data (``as_dict``, with ``schema_version``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["exact", "float32_angles", "wrong", "no_positions"]

#: The version of :meth:`AuditReport.as_dict`'s layout: it changes when a field is renamed,
#: removed or changes meaning, not when one is added. Fields added within version 1: a
#: finding's ``axes`` (per-axis verdicts of multi-axis layers) and a difference's
#: ``coordinates``.
SCHEMA_VERSION = 1

#: The statuses that pass (exit code 0).
PASSING = ("exact", "float32_angles", "no_positions")


@dataclass(frozen=True)
class Difference:
    """Where a subject first leaves the allowed error: the smallest position (then channel).

    ``position`` is the row's first coordinate; ``coordinates`` all of them, one per axis of a
    multi-axis layer (``()`` for 1-D layers), so that an image row ``(temporal 1, height 7,
    width 14)`` is not mistaken for text position 1.
    """

    position: int
    channel: int
    table: str
    subject: float
    expected: float
    coordinates: tuple[int, ...] = ()

    @property
    def error(self) -> float:
        return abs(self.subject - self.expected)

    def as_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "channel": self.channel,
            "table": self.table,
            "subject": self.subject,
            "expected": self.expected,
            "error": self.error,
            "coordinates": list(self.coordinates),
        }

    def where(self, axes: tuple[str, ...] = ()) -> str:
        """``"position 1,024"``, or ``"position 1 (temporal 1, height 7, width 14)"``."""
        text = f"position {self.position:,}"
        if len(self.coordinates) > 1:
            names = axes if len(axes) == len(self.coordinates) else ()
            parts = [
                f"{names[a]} {c:,}" if names else f"{c:,}" for a, c in enumerate(self.coordinates)
            ]
            text += f" ({', '.join(parts)})"
        return text


@dataclass(frozen=True)
class AxisFinding:
    """The verdict on the pairs of one axis of a multi-axis layer (M-RoPE's temporal, height
    and width sections; 2-D RoPE's rows and columns): the channels those pairs occupy, judged
    as the layer is (``exact``, ``float32_angles`` or ``wrong``).

    Attributes:
        axis: the axis's name, as the plan calls it (:attr:`posenc.RopeLayer.axes`).
        pairs: how many rotary pairs turn with it.
        status: ``"exact"``, ``"float32_angles"`` or ``"wrong"``.
        max_error: the largest error in its channels at the positions probed.
        first_difference: where its channels first leave the recipe's bound (wrong axes).
    """

    axis: str
    pairs: int
    status: Status
    max_error: float
    first_difference: Difference | None = None

    @property
    def passed(self) -> bool:
        return self.status in PASSING

    def as_dict(self) -> dict[str, Any]:
        return {
            "axis": self.axis,
            "pairs": self.pairs,
            "status": self.status,
            "passed": self.passed,
            "max_error": self.max_error,
            "first_difference": None
            if self.first_difference is None
            else self.first_difference.as_dict(),
        }


@dataclass(frozen=True)
class LayerFinding:
    """The verdict on the layers ``layers`` (indices into the plan's layers; ``()`` when the
    plan lists kinds only) of type ``layer_type``.

    Attributes:
        status: ``"exact"`` (within one unit in the last place of the subject's dtype of the
            exact value), ``"float32_angles"`` (within :attr:`bound` of float32 angles' error
            model, :attr:`recipe` names it), ``"wrong"``, or ``"no_positions"`` (the layer does
            not rotate, and neither does the subject).
        recipe: the named recipe whose error the subject is within (``"float32 angles"``).
        bound: that recipe's largest expected error up to the model's full context.
        max_error: the largest error against the exact table at the positions probed.
        first_difference: where the subject first leaves the recipe's bound (wrong layers).
        error_at_context, error_at_1m: the error at the model's last position and at position
            2**20 - 1; None where the subject has no row there.
        cause: what differs, in words ("" when nothing does).
        positions: how many positions were compared, and the largest.
        notes: what else the reading found.
        axes: multi-axis layers: one :class:`AxisFinding` per axis, in the order of the plan's
            axes; ``()`` for 1-D layers and where the tables could not be split by axis.
    """

    layers: tuple[int, ...]
    layer_type: str
    status: Status
    recipe: str | None
    bound: float | None
    max_error: float | None
    first_difference: Difference | None
    error_at_context: float | None
    error_at_1m: float | None
    cause: str
    positions: tuple[int, int]
    notes: tuple[str, ...] = ()
    axes: tuple[AxisFinding, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status in PASSING

    def as_dict(self) -> dict[str, Any]:
        return {
            "layers": list(self.layers),
            "layer_type": self.layer_type,
            "status": self.status,
            "passed": self.passed,
            "recipe": self.recipe,
            "bound": self.bound,
            "max_error": self.max_error,
            "first_difference": None
            if self.first_difference is None
            else self.first_difference.as_dict(),
            "error_at_context": self.error_at_context,
            "error_at_1m": self.error_at_1m,
            "cause": self.cause,
            "positions_compared": self.positions[0],
            "largest_position": self.positions[1],
            "notes": list(self.notes),
            "axes": [a.as_dict() for a in self.axes],
        }


@dataclass(frozen=True)
class AuditReport:
    """The audit of a subject against a config's plan.

    Attributes:
        reference: where the plan came from (a file, ``"dict"``, a config class).
        model_type: the config's ``model_type``.
        subject: what was audited, in words.
        subject_kind: ``"arrays"``, ``"cos_sin_cache"``, ``"inv_freq"``, ``"callable"``,
            ``"rotation"`` or ``"gguf"``.
        context: the model's full context (``max_position_embeddings``), if the config says.
        findings: one per group of layers with the same verdict.
        notes: what the reading of the subject found worth saying.
    """

    reference: str
    model_type: str | None
    subject: str
    subject_kind: str
    context: int | None
    findings: tuple[LayerFinding, ...]
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True when every layer is exact, within float32 angles' error, or without positions."""
        return all(f.passed for f in self.findings)

    @property
    def exit_code(self) -> int:
        """0 when :attr:`passed`, else 1 (``posenc audit``'s status)."""
        return 0 if self.passed else 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "reference": self.reference,
            "model_type": self.model_type,
            "subject": self.subject,
            "subject_kind": self.subject_kind,
            "context": self.context,
            "passed": self.passed,
            "findings": [f.as_dict() for f in self.findings],
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        return render(self)


def _layers(layers: tuple[int, ...]) -> str:
    """``(0, 1, 2, 5)`` -> ``"layers 0-2,5"``."""
    if not layers:
        return "every layer"
    runs: list[str] = []
    start = prev = layers[0]
    for i in (*layers[1:], None):
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ("layer " if len(layers) == 1 else "layers ") + ",".join(runs)


def _error(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def verdict(finding: LayerFinding | AxisFinding) -> str:
    """The finding's verdict in one phrase."""
    if isinstance(finding, AxisFinding):
        words = {"exact": "exact", "float32_angles": "within float32 angles", "wrong": "WRONG"}
        return words.get(finding.status, finding.status)
    if finding.status == "exact":
        return "exact"
    if finding.status == "no_positions":
        return "no positions (as the config says)"
    if finding.status == "float32_angles":
        return f"within {finding.recipe}: expected <= {_error(finding.bound)} at this length"
    return "WRONG"


def _difference(diff: Difference, axes: tuple[str, ...]) -> str:
    return (
        f"{diff.where(axes)}, channel {diff.channel} ({diff.table}): {diff.subject:.7g} where "
        f"exact is {diff.expected:.7g} (off by {diff.error:.2g})"
    )


def render(report: AuditReport) -> str:
    """The report as text: a header, then per group of layers its verdict, errors and cause."""
    lines = [
        f"audit of {report.subject} ({report.subject_kind}) against {report.reference}"
        + (f" ({report.model_type})" if report.model_type else ""),
    ]
    if report.context:
        lines.append(f"full context: {report.context:,} positions")
    for finding in report.findings:
        lines.append(f"{_layers(finding.layers)} ({finding.layer_type}): {verdict(finding)}")
        if finding.max_error is not None:
            lines.append(
                f"  max error {_error(finding.max_error)} over {finding.positions[0]} positions "
                f"up to {finding.positions[1]:,}; at full context "
                f"{_error(finding.error_at_context)}, at 1M {_error(finding.error_at_1m)}"
            )
        if finding.cause:
            lines.append(f"  cause: {finding.cause}")
        diff = finding.first_difference
        names = tuple(a.axis for a in finding.axes)
        if diff is not None:
            lines.append(f"  first differs at {_difference(diff, names)}")
        for axis in finding.axes:
            line = (
                f"  axis {axis.axis} ({axis.pairs} pairs): {verdict(axis)}, max error "
                f"{_error(axis.max_error)}"
            )
            if axis.first_difference is not None:
                line += f"; first differs at {_difference(axis.first_difference, names)}"
            lines.append(line)
        lines.extend(f"  note: {note}" for note in finding.notes)
    lines.extend(f"note: {note}" for note in report.notes)
    lines.append("PASS" if report.passed else "FAIL")
    return "\n".join(lines)
