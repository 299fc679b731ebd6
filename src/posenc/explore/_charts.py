"""Figure descriptions for the page: axes with their ticks, curves, heatmaps (JSON-ready).

The page has the charting library (Apache ECharts) draw what these describe, and computes
nothing itself: a log axis arrives as ``log10`` of
the values with its tick labels, a heatmap as one byte per cell (its value quantised between
``low`` and ``high``) with the colour map's anchors. Every float is a Python ``float`` (NaN
and infinities become None, which the page leaves out).
"""

from __future__ import annotations

import base64
import itertools
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _figure_data as fd

#: Colour map of the heatmaps: the diverging map of ``posenc demo``'s and ``posenc.plot``'s
#: tables (matplotlib's ``RdBu_r``: blue for -1, white for 0, red for 1), 17 anchors from low
#: to high; the charting library's colour scale interpolates linearly between neighbours.
COLOURS = (
    "#053061", "#175290", "#2a71b2", "#3f8ec0", "#6bacd1", "#9bc9e0", "#c2ddec", "#e0ecf3",
    "#f7f6f6", "#fbe5d8", "#fbccb4", "#f5aa89", "#e48066", "#d05548", "#ba2832", "#930e26",
    "#67001f",
)  # fmt: skip
#: Colours of the curves (Okabe & Ito's palette, distinguishable with colour blindness).
SERIES_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")


def plain(values: Iterable[Any]) -> list[float | None]:
    """Finite floats of ``values``; None for NaN or infinities."""
    return [float(v) if math.isfinite(float(v)) else None for v in values]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values (1, 2 or 5 times a power of ten apart) in the range.

    >>> nice_ticks(0, 10)
    [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    """
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [float(low)] if math.isfinite(low) else []
    raw = (high - low) / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9)
    last = math.floor(high / step + 1e-9)
    digits = max(12, 2 - math.floor(math.log10(step)))
    return [round(i * step, digits) for i in range(first, last + 1)]


def _label(value: float) -> str:
    return f"{value:.6g}"


def axis(label: str, low: float, high: float, *, log: bool = False) -> dict[str, Any]:
    """A linear axis over ``[low, high]``, or a log10 one (``low``, ``high`` the values)."""
    low, high = float(low), float(high)
    if log:
        low, high = math.log10(low), math.log10(high)
        ticks = [float(t) for t in range(math.ceil(low - 1e-9), math.floor(high + 1e-9) + 1)]
        if len(ticks) < 2:
            ticks = nice_ticks(low, high, 3)
        labels = [_label(10.0**t) for t in ticks]
    else:
        ticks = nice_ticks(low, high)
        labels = [_label(t) for t in ticks]
    if high <= low:  # a single value: widen the range a little
        low, high = low - 0.5, high + 0.5
    return {
        "label": label,
        "low": low,
        "high": high,
        "ticks": list(zip(ticks, labels, strict=True)),
        **({"log": True} if log else {}),
    }


#: The most points a curve carries: longer ones are sampled by :func:`extremes`.
MAX_POINTS = 2000


def extremes(y: npt.NDArray[Any], count: int = MAX_POINTS) -> npt.NDArray[np.int64]:
    """Indices of at most ``count`` points of ``y`` that keep its shape: ``y`` cut into
    ``count // 2`` consecutive stretches, the lowest and the highest point of each (min-max
    sampling: every peak and trough of the curve is drawn). A stretch of NaN keeps one NaN
    (a gap stays a gap).

    >>> extremes(np.array([0.0, 5.0, 1.0, 2.0, -3.0, 0.0]), 4).tolist()
    [0, 1, 3, 4]
    """
    n = y.size
    if n <= count:
        return np.arange(n, dtype=np.int64)
    edges = np.linspace(0, n, count // 2 + 1).astype(np.int64)
    kept: list[int] = []
    for start, stop in itertools.pairwise(edges.tolist()):
        part = y[start:stop]
        finite = np.isfinite(part)
        if not finite.any():
            kept.append(int(start))
            continue
        masked = np.where(finite, part, np.nan)
        kept += [int(start + np.nanargmin(masked)), int(start + np.nanargmax(masked))]
    return np.unique(np.asarray(kept, dtype=np.int64))


def series(
    name: str, x: Any, y: Any, *, mode: str = "line", colour: int | None = None
) -> dict[str, Any]:
    """One curve (``mode="line"``), set of points (``"points"``) or bars (``"bars"``); more
    than :data:`MAX_POINTS` points are sampled by :func:`extremes` (``total`` then says how
    many there were)."""
    index = colour or 0
    xs = np.ravel(np.asarray(x, dtype=np.float64))
    ys = np.ravel(np.asarray(y, dtype=np.float64))
    xs, ys = np.broadcast_arrays(xs, ys)
    drawn: dict[str, Any] = {}
    if ys.size > MAX_POINTS:
        keep = extremes(ys)
        drawn["total"] = int(ys.size)
        xs, ys = xs[keep], ys[keep]
    return {
        "name": name,
        "x": plain(xs),
        "y": plain(ys),
        "mode": mode,
        "colour": SERIES_COLOURS[index % len(SERIES_COLOURS)],
        **drawn,
    }


def lines(
    x_axis: dict[str, Any], y_axis: dict[str, Any], curves: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """A chart of curves over two axes; ``drawn`` says how many points of a sampled curve
    are drawn ("" when every point is)."""
    sampled = [s for s in curves if "total" in s]
    drawn = ""
    if sampled:
        shown, total = max((len(s["x"]), s["total"]) for s in sampled)
        drawn = (
            f"{shown:,} of {total:,} points drawn (the lowest and highest point of each "
            "stretch of the curve kept, so no peak is lost)"
        )
    for s in curves:  # the values a log axis stands for, for the page's readout
        for name, axis_ in (("xv", x_axis), ("yv", y_axis)):
            if axis_.get("log"):
                s[name] = [None if v is None else _power(v) for v in s[name[0]]]
    return {"kind": "lines", "x": x_axis, "y": y_axis, "series": list(curves), "drawn": drawn}


def _power(exponent: float) -> float | None:
    value = 10.0**exponent
    return value if math.isfinite(value) else None


def bounds(*arrays: Any, pad: float = 0.0) -> tuple[float, float]:
    """The finite minimum and maximum over ``arrays`` (0, 1 when there is nothing finite)."""
    values = np.concatenate([np.ravel(np.asarray(a, dtype=np.float64)) for a in arrays])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    span = (high - low) or max(abs(high), 1.0)
    return low - pad * span, high + pad * span


#: A curve whose values differ by less than this fraction of their size is constant up to
#: rounding: :func:`fitted` draws it on a span of :data:`FLAT_SPAN` of its size.
FLAT = 1e-6
#: The span of the axis of a quantity constant up to rounding, as a fraction of its size (1 %).
FLAT_SPAN = 0.02


def fitted(label: str, *arrays: Any, pad: float = 0.05) -> dict[str, Any]:
    """A linear axis over the finite values of ``arrays``, honest about constant quantities.

    Values that differ by less than :data:`FLAT` of their size (a quantity constant up to
    rounding) get an axis of :data:`FLAT_SPAN` (2 %, ±1 %) of their size around their middle,
    so that they are drawn flat, a ``note`` saying in words how large the rounding is, and a
    ``zoom`` axis over the exact variation (its ticks labelled as offsets from the middle).

    >>> axis_ = fitted("score", [-5.0, -5.0 + 1e-15])
    >>> axis_["low"] < -5.04 and axis_["high"] > -4.96, "rounding" in axis_["note"]
    (True, True)
    """
    low, high = bounds(*arrays)
    size = max(abs(low), abs(high))
    if not (size > 0 and high - low < FLAT * size):
        return axis(label, *bounds(*arrays, pad=pad))
    middle = (low + high) / 2
    shown = axis(label, middle - FLAT_SPAN / 2 * size, middle + FLAT_SPAN / 2 * size)
    spread = high - low
    if spread == 0:
        shown["note"] = (
            f"constant: every value drawn is {middle:.6g} exactly (no rounding to show); "
            "the axis spans 2 % of it"
        )
        return shown
    shown["note"] = (
        f"constant up to rounding: the values differ by at most {spread:.2g}, "
        f"{spread / size:.1g} of their size, the rounding of float64 arithmetic; drawn flat on "
        "an axis spanning 2 % of the value. Zoom to the rounding to see the variation."
    )
    shown["zoom"] = _offset_axis(label, low, high, middle)
    return shown


def _offset_axis(label: str, low: float, high: float, middle: float) -> dict[str, Any]:
    """An axis over ``[low, high]`` whose ticks are labelled as offsets from ``middle``."""
    pad = (high - low) * 0.1
    offsets = nice_ticks(low - middle - pad, high - middle + pad)
    ticks = [[middle + t, f"{t:+.3g}" if t else "0"] for t in offsets]
    return {
        "label": f"{label} − {middle:.17g}",
        "low": low - pad,
        "high": high + pad,
        "ticks": ticks,
    }


#: The most cells a heatmap carries: wider tables are drawn at evenly spaced channels.
MAX_CELLS = 2**16


def _tick_cells(axis_: dict[str, Any], drawn: npt.NDArray[np.int64]) -> list[list[Any]]:
    """``[cell index, label]`` of each tick: the drawn row or column nearest to it."""
    ticks: list[list[Any]] = []
    for value, label in axis_["ticks"]:
        index = int(np.argmin(np.abs(drawn - value)))
        if not ticks or ticks[-1][0] != index:
            ticks.append([index, label])
    return ticks


def heatmap(
    values: npt.NDArray[Any],
    x_axis: dict[str, Any],
    y_axis: dict[str, Any],
    *,
    rows: Sequence[int],
    columns: Sequence[int],
    low: float = -1.0,
    high: float = 1.0,
) -> dict[str, Any]:
    """A heatmap of ``values`` (rows drawn top to bottom) as one byte per cell.

    ``rows`` and ``columns`` give the position and channel of each row and column (the values
    of the y and x axes), so that the page can ask the server for the exact value under the
    pointer. More than :data:`MAX_CELLS` cells keep every row and evenly spaced columns (the
    first and the last included; ``drawn`` says so). ``x_cells`` and ``y_cells`` place each
    tick label on its nearest drawn column and row.
    """
    table = np.asarray(values, dtype=np.float64)
    kept = fd.even_positions(table.shape[1], max(MAX_CELLS // max(table.shape[0], 1), 2))
    table = table[:, kept]
    shown_columns = np.asarray(columns, dtype=np.int64)[kept]
    shown_rows = np.asarray(rows, dtype=np.int64)
    scaled = np.clip((table - low) / (high - low), 0.0, 1.0)
    scaled = np.where(np.isfinite(scaled), scaled, 0.0)
    cells = np.round(scaled * 255).astype(np.uint8)
    drawn = "" if kept.size == len(columns) else f"{kept.size} of {len(columns)} columns drawn"
    return {
        "kind": "heatmap",
        "x": x_axis,
        "y": y_axis,
        "width": int(table.shape[1]),
        "height": int(table.shape[0]),
        "cells": base64.b64encode(cells.tobytes()).decode("ascii"),
        "rows": shown_rows.tolist(),
        "columns": shown_columns.tolist(),
        "x_cells": _tick_cells(x_axis, shown_columns),
        "y_cells": _tick_cells(y_axis, shown_rows),
        "drawn": drawn,
        "low": low,
        "high": high,
        "colours": list(COLOURS),
    }


def table(caption: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """A small table of text cells shown under a figure."""
    return {
        "caption": caption,
        "columns": list(columns),
        "rows": [[str(c) for c in r] for r in rows],
    }


def number(value: Any) -> str:
    """A float written so that it reads back exactly (``repr`` of the float64 value)."""
    return repr(float(value))


_FLOAT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def rounded(text: str, digits: int = 6) -> str:
    """``text`` with each number that has a decimal point or an exponent rounded to
    ``digits`` significant digits (integers, exact counts, stay as they are).

    >>> rounded("111.73259061216544"), rounded("2.9785807931226316e-08, 12")
    ('111.733', '2.97858e-08, 12')
    """

    def one(match: re.Match[str]) -> str:
        word = match.group()
        if not any(c in word for c in ".eE"):
            return word
        return f"{float(word):.{digits}g}"

    return _FLOAT.sub(one, text)
