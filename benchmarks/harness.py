"""Timing harness shared by the benchmark scripts: medians of repeats, ratios to memory speed.

Every timing is the median of ``repeats`` runs after ``warmup`` untimed runs (min and max are
kept too). Ratios are taken against hardware references measured in the same run on a tensor
of the same shape and dtype: ``x.clone()`` (allocate + copy) and ``buf.copy_(x)`` into a
preallocated buffer (copy only). On a shared machine absolute times drift; ratios measured side
by side do not drift as much, so they are what targets are stated in.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median, min and max over the timed repeats."""

    median: float
    min: float
    max: float
    repeats: int


def measure(fn: Callable[[], Any], *, repeats: int = 7, warmup: int = 2) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` timed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return Timing(statistics.median(times), min(times), max(times), repeats)


@dataclass
class Row:
    """One line of a results table: a name, its timing and its ratios to the references."""

    group: str
    name: str
    timing: Timing
    ratios: dict[str, float]
    note: str = ""


class Table:
    """Collects rows and prints them as an aligned (markdown-compatible) table.

    ``references`` are the ratio columns always shown; a row may bring others (``refs`` keys
    such as ``"tutorial recipe"``), which get a column after them in order of first appearance.
    ``note(text)`` keeps free-form paragraphs (e.g. a section's own sub-table) for
    :meth:`render_notes`.
    """

    def __init__(self, references: tuple[str, ...] = ("clone", "copy_")) -> None:
        self.references = references
        self.rows: list[Row] = []
        self.notes: list[str] = []

    def add(
        self,
        group: str,
        name: str,
        timing: Timing,
        refs: dict[str, Timing] | None = None,
        note: str = "",
    ) -> Row:
        ratios = {k: timing.median / t.median for k, t in (refs or {}).items()}
        row = Row(group, name, timing, ratios, note)
        self.rows.append(row)
        return row

    def note(self, text: str) -> None:
        """Keep a paragraph of text (markdown) to print after the table."""
        self.notes.append(text)

    def columns(self) -> list[str]:
        """The ratio columns: ``references``, then any other reference a row was given."""
        names = list(self.references)
        for row in self.rows:
            names += [k for k in row.ratios if k not in names]
        return names

    def render(self) -> str:
        references = self.columns()
        head = ["group", "what", "median ms", "min ms", "max ms"]
        head += [f"x {r}" for r in references] + ["note"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in self.rows:
            cells = [
                r.group,
                r.name,
                f"{1e3 * r.timing.median:.2f}",
                f"{1e3 * r.timing.min:.2f}",
                f"{1e3 * r.timing.max:.2f}",
            ]
            cells += [f"{r.ratios[k]:.2f}" if k in r.ratios else "" for k in references]
            cells.append(r.note)
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def render_notes(self) -> str:
        return "\n\n".join(self.notes)


def cpu_model() -> str:
    """The CPU model name (from /proc/cpuinfo on Linux, else platform.processor())."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def environment(extra: dict[str, str] | None = None) -> str:
    """A header: CPU, core count, Python, NumPy/torch versions and thread count."""
    import numpy as np

    parts = [
        f"CPU: {cpu_model()} ({os.cpu_count()} logical cores)",
        f"Python {platform.python_version()}, NumPy {np.__version__}",
    ]
    try:
        import torch

        parts.append(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads")
    except ImportError:
        parts.append("torch not installed")
    for key, value in (extra or {}).items():
        parts.append(f"{key} {value}")
    return "\n".join(parts)


def run_alone(run: Callable[..., None], doc: str | None) -> None:
    """``python -m benchmarks.NAME [--quick]``: one section with its environment header."""
    import argparse

    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, few repeats")
    args = parser.parse_args()
    print(environment())
    table = Table()
    run(table, quick=args.quick)
    if table.rows:
        print(table.render())
    notes = table.render_notes()
    if notes:
        print()
        print(notes)
