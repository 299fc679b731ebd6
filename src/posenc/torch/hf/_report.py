"""What :func:`posenc.torch.hf.swap_positions` did: the modules replaced and those left."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Left", "Replaced", "SwapReport"]


@dataclass(frozen=True)
class Replaced:
    """A module that was replaced.

    Attributes:
        name: its qualified name in the model (``"model.rotary_emb"``).
        kind: ``"rotary"`` (RoPE cos/sin or phasors), ``"absolute"`` (a sinusoidal table),
            ``"bias"`` (an attention bias: T5's ``compute_bias``, a relative sinusoid table,
            relative logits) or ``"temperature"`` (an attention layer's position-dependent
            scale, whose kind is the layout: ``"llama4"``, ``"llama4_beta"``, ``"log"``,
            ``"constant"``).
        layout: how the values are laid out: for RoPE ``"half"``, ``"interleaved"``,
            ``"columns"`` (one column per pair), ``"columns_sin_first"`` (the same, returned
            ``(sin, cos)``) or ``"complex"``; for tables the convention
            (``"marian"``, ``"tensor2tensor"``, ``"musicgen"``, ``"marian, cos first"``...).
        detail: the rope type(s) or the positions the table is read at.
        replacement: the class name of the posenc module now in its place (for T5's bias,
            the method now computed by posenc).
    """

    name: str
    kind: str
    layout: str
    detail: str
    replacement: str


@dataclass(frozen=True)
class Left:
    """A positional-looking module that was left in place, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class SwapReport:
    """The result of :func:`posenc.torch.hf.swap_positions`.

    Attributes:
        replaced: the modules replaced, in the order of ``model.named_modules()``.
        left: the positional-looking modules left in place, each with the reason.
        already: the names of posenc modules found in the model (swapped before).

    ``names`` lists the qualified names of the replaced modules. ``str(report)`` is a short
    table; with nothing replaced and nothing left it says that no positional module was found.

    >>> print(SwapReport(replaced=(), left=()))
    SwapReport: no positional module found
    """

    replaced: tuple[Replaced, ...]
    left: tuple[Left, ...]
    already: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """The qualified names of the replaced modules."""
        return [r.name for r in self.replaced]

    def __str__(self) -> str:
        if not self.replaced and not self.left and not self.already:
            return "SwapReport: no positional module found"
        lines = [f"SwapReport: {len(self.replaced)} replaced, {len(self.left)} left"]
        if self.already:
            lines[0] += f", {len(self.already)} already posenc's ({', '.join(self.already)})"
        if self.replaced:
            rows = [(r.name, r.kind, r.layout, r.detail, r.replacement) for r in self.replaced]
            lines += _table(("replaced", "kind", "layout", "detail", "by"), rows)
        if self.left:
            lines += _table(("left", "reason"), [(x.name, x.reason) for x in self.left])
        return "\n".join(lines)

    __repr__ = __str__


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    out = []
    for row in (header, *rows):
        cells = [str(c).ljust(w) for c, w in zip(row, widths, strict=True)]
        out.append("  " + "  ".join(cells).rstrip())
    return out
