"""Panels 1-7: the sinusoidal table, its channels, wavelengths, similarity, the shift as a
rotation, precision, and the odd-exponent cosine bug. Every number is computed by posenc."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _figure_data as fd
from .._conventions import CONVENTIONS
from .._features import feature_slices, sin_cos_pairs
from .._sinusoidal import sinusoidal
from ..analysis._precision import precision_report
from ..analysis._properties import check_shift, distinct_rows, similarity, wavelengths
from ..analysis._recipes import float32_recipe, odd_exponent_table
from . import _charts as ch
from . import _controls as c
from ._controls import Control
from ._panel import Panel, result

#: Rows of the heatmap image (more than a figure has pixels; exact values come on request).
HEATMAP_ROWS = 512
CURVE_POINTS = 1000
CONVENTION = c.convention(sorted(CONVENTIONS))
N = ch.number


def _conv(v: dict[str, Any]) -> dict[str, Any]:
    return {"base": v["base"], "convention": v["convention"]}


def heatmap(v: dict[str, Any]) -> dict[str, Any]:
    length, d = v["length"], v["d_model"]
    rows = fd.even_positions(length, HEATMAP_ROWS)
    values = sinusoidal(rows, d, **_conv(v))
    chart = ch.heatmap(
        values,
        ch.axis("channel", 0, d - 1),
        ch.axis("position", 0, length - 1),
        rows=rows.tolist(),
        columns=list(range(d)),
    )
    drawn = f"{rows.size} of {length} positions drawn" if rows.size < length else "every position"
    return result(
        f"sinusoidal({length}, {d}, base={v['base']:g}, convention={v['convention']!r}): "
        f"{drawn}; colour from -1 (blue) through 0 (white) to 1 (red).",
        [
            ("first", "PE[0, 0]", N(values[0, 0])),
            ("last", f"PE[{rows[-1]}, {d - 1}]", N(values[-1, -1])),
        ],
        chart,
    )


def value_at(v: dict[str, Any], position: int, channel: int) -> str:
    """The exact float32 table value under the pointer (heatmap panel)."""
    if not 0 <= channel < v["d_model"] or not 0 <= position < v["length"]:
        raise ValueError("the pointer is outside the table")
    return N(sinusoidal([position], v["d_model"], **_conv(v))[0, channel])


def channels(v: dict[str, Any]) -> dict[str, Any]:
    length, d = v["length"], v["d_model"]
    lam = wavelengths(d, **_conv(v)).wavelengths
    chosen = c.parse_channels(v["channels"], d)
    if chosen is None:
        chosen = [
            ch for pair in fd.sin_cos_channels(length, d, v["convention"], lam) for ch in pair
        ]
        chosen = chosen or [0]
    positions = fd.even_positions(length, CURVE_POINTS)
    table = sinusoidal(positions, d, **_conv(v), dtype=np.float64)
    kinds = _channel_kinds(d, v["convention"])
    index = _channel_frequency(d, v["convention"])
    curves, numbers = [], []
    for i, channel in enumerate(chosen):
        kind = kinds[channel]
        wave = lam[index[channel]] if index[channel] >= 0 else math.inf
        name = f"{kind} channel {channel} (wavelength {wave:.4g})"
        curves.append(ch.series(name, positions, table[:, channel], colour=i))
        numbers.append((f"wavelength_{channel}", f"wavelength of channel {channel}", N(wave)))
    chart = ch.lines(ch.axis("position", 0, max(length - 1, 1)), ch.axis("value", -1, 1), curves)
    return result(
        f"Channels {', '.join(map(str, chosen))} of the table against position; a sine channel "
        "and the cosine channel of the same frequency turn together.",
        numbers,
        chart,
    )


def _channel_kinds(d: int, convention: str) -> list[str]:
    layout = feature_slices(d, convention)
    kinds = ["zero"] * d
    for i in range(d)[layout.sin]:
        kinds[i] = "sin"
    for i in range(d)[layout.cos]:
        kinds[i] = "cos"
    return kinds


def _channel_frequency(d: int, convention: str) -> list[int]:
    """The frequency index of each channel (-1 for a zero column)."""
    layout = feature_slices(d, convention)
    index = [-1] * d
    for k, i in enumerate(range(d)[layout.sin]):
        index[i] = k
    for k, i in enumerate(range(d)[layout.cos]):
        index[i] = k
    return index


def wavelength_panel(v: dict[str, Any]) -> dict[str, Any]:
    w = wavelengths(v["d_model"], **_conv(v))
    k = np.arange(w.wavelengths.size)
    low, high = ch.bounds(w.wavelengths, [2 * math.pi, v["base"] * 2 * math.pi])
    bound = [2 * math.pi, v["base"] * 2 * math.pi]
    curves = [
        ch.series("wavelength 2π/ω_k", k, np.log10(w.wavelengths), mode="points", colour=0),
        ch.series(
            "2π (the shortest a wavelength can be)",
            [0, max(k[-1], 1)],
            np.log10(bound[:1] * 2),
            colour=1,
        ),
        ch.series(
            "base·2π (the bound of the longest)",
            [0, max(k[-1], 1)],
            np.log10(bound[1:] * 2),
            colour=2,
        ),
    ]
    chart = ch.lines(
        ch.axis("frequency index k", 0, max(k[-1], 1)),
        ch.axis("wavelength (positions, log scale)", low, high, log=True),
        curves,
    )
    ratio = "not constant" if w.ratio is None else N(w.ratio)
    return result(
        f"The {k.size} wavelengths lie on a straight line on a log scale: a geometric "
        "progression, each one the previous times the same ratio.",
        [
            ("shortest", "shortest wavelength", N(w.shortest)),
            ("longest", "longest wavelength", N(w.longest)),
            ("ratio", "common ratio", ratio),
        ],
        chart,
    )


def similarity_panel(v: dict[str, Any]) -> dict[str, Any]:
    positions = fd.difference_cover(v["length"], limit=fd.MAX_DRAWN_ROWS)
    s = similarity(positions, v["d_model"], **_conv(v), metric=v["metric"])
    keep = s.distances >= 0
    x, y = s.distances[keep], s.profile[keep]
    chart = ch.lines(
        ch.axis("distance p - q", 0, max(int(x.max()), 1)),
        ch.fitted(f"{v['metric']} similarity", y),
        [ch.series("similarity of PE[p] and PE[q]", x, y, colour=0)],
    )
    return result(
        "The similarity of two rows depends on their distance only: largest at distance 0, "
        "falling off with ripples as the distance grows.",
        [
            ("at_0", "similarity at distance 0", N(y[0])),
            ("at_1", "similarity at distance 1", N(y[1]) if y.size > 1 else "-"),
            ("at_end", f"similarity at distance {int(x[-1])}", N(y[-1])),
        ],
        chart,
    )


def shift_panel(v: dict[str, Any]) -> dict[str, Any]:
    p, k, d, i = v["p"], v["k"], v["d_model"], v["pair"]
    r = fd.rotation(p, k, d, i, v["base"], v["convention"], steps=60)
    s_ch, c_ch, rows, m = r["sin"], r["cos"], r["rows"], r["matrix"]
    pairs = sin_cos_pairs(feature_slices(d, v["convention"]), d)
    moved = m @ rows[0]
    walk = r["path"]
    ring = np.linspace(0, 2 * math.pi, 121)
    curves = [
        ch.series("unit circle", np.cos(ring), np.sin(ring), colour=6),
        ch.series(f"positions {p} .. {p + k}", walk[:, 1], walk[:, 0], colour=2),
        ch.series(f"PE[{p}]", [rows[0, c_ch]], [rows[0, s_ch]], mode="points", colour=0),
        ch.series(f"PE[{p + k}]", [rows[1, c_ch]], [rows[1, s_ch]], mode="points", colour=1),
    ]
    chart = ch.lines(ch.axis("cos channel", -1.1, 1.1), ch.axis("sin channel", -1.1, 1.1), curves)
    chart["square"] = True
    block = r["block"]
    error = float(np.max(np.abs(moved - rows[1])))
    shown = [int(x) for x in pairs.sin[:4]]
    blocks = [
        (j, f"{m[j, j]:.6f}", f"{m[j, pairs.cos[n]]:.6f}", f"{m[pairs.cos[n], j]:.6f}")
        for n, j in enumerate(shown)
    ]
    return result(
        f"Shifting by k = {k} turns the point (cos, sin) of pair {i} by the angle k·ω = "
        f"{k}·ω_{i} on the unit circle. M_k, the matrix of these 2×2 rotation blocks (one per "
        "pair, the same for every p), maps PE[p] to PE[p+k].",
        [
            ("block", f"block {i} of M_k", ", ".join(f"{x:.6f}" for x in block.ravel())),
            ("moved", f"(M_k·PE[p])[{s_ch}]", N(moved[s_ch])),
            ("exact", f"PE[{p + k}][{s_ch}]", N(rows[1, s_ch])),
            ("error", "max |M_k·PE[p] - PE[p+k]|", N(error)),
        ],
        chart,
        [
            ch.table(
                "First 2×2 blocks of M_k", ["sin channel", "M[s,s]", "M[s,c]", "M[c,s]"], blocks
            )
        ],
    )


def precision_panel(v: dict[str, Any]) -> dict[str, Any]:
    top, d = v["max_position"], v["d_model"]
    grid = fd.precision_grid(top, per_decade=3)
    ours, recipe = [], []
    for start in grid:
        positions = np.arange(max(int(start) - 8, 0), int(start))
        exact = sinusoidal(positions, d, base=v["base"], dtype=np.float64)
        ours.append(
            np.max(np.abs(sinusoidal(positions, d, base=v["base"], dtype=v["dtype"]) - exact))
        )
        recipe.append(np.max(np.abs(float32_recipe(positions, d, base=v["base"]) - exact)))
    floor = 2.0**-60
    ours_l, recipe_l = np.log10(np.maximum(ours, floor)), np.log10(np.maximum(recipe, floor))
    low, high = ch.bounds(ours_l, recipe_l, pad=0.05)
    chart = ch.lines(
        ch.axis("position", float(grid[0]), float(grid[-1]), log=True),
        ch.axis("max error (log scale)", 10**low, 10**high, log=True),
        [
            ch.series(f"posenc, {v['dtype']} (rounded once)", np.log10(grid), ours_l, colour=0),
            ch.series("float32 recipe", np.log10(grid), recipe_l, colour=1),
        ],
    )
    report = precision_report(top, d, v["dtype"], base=v["base"], samples=16)
    count = min(top, fd.MAX_DRAWN_ROWS)
    distinct = [
        (dt, distinct_rows(count, dt, d_model=d, base=v["base"]).distinct)
        for dt in ("float32", "float16", "bfloat16")
    ]
    by_name = {m.name: m.max_error for m in report.methods}
    return result(
        "The float32 recipe (the usual code, which computes the angles in float32) loses digits "
        "as positions grow; posenc computes the angles in float64 and rounds each value once "
        "(a single rounding, to the dtype asked for), so its error stays below one unit in the "
        "last place (ulp) of that dtype.",
        [
            (f"method_{i}", f"{m.name}, max error", N(m.max_error))
            for i, m in enumerate(report.methods)
        ]
        + [(f"distinct_{dt}", f"distinct rows in {dt} among {count}", str(n)) for dt, n in distinct]
        + [("worst", "largest error at any position shown", N(max(by_name.values())))],
        chart,
    )


def bug_panel(v: dict[str, Any]) -> dict[str, Any]:
    length, d, i = v["length"], v["d_model"], v["pair"]
    if d % 2 or not 0 <= i < d // 2:
        raise ValueError(f"pair must lie in 0 .. {d // 2 - 1} with an even d_model, got {i}")
    positions = fd.even_positions(length, CURVE_POINTS)
    good = sinusoidal(positions, d, base=v["base"], dtype=np.float64)
    bad = odd_exponent_table(positions, d, base=v["base"], dtype=np.float64)
    curves = [
        ch.series(f"correct cos channel {2 * i + 1}", positions, good[:, 2 * i + 1], colour=0),
        ch.series(f"odd-exponent cos channel {2 * i + 1}", positions, bad[:, 2 * i + 1], colour=1),
        ch.series(f"sin channel {2 * i} (both)", positions, good[:, 2 * i], colour=2),
    ]
    chart = ch.lines(ch.axis("position", 0, max(length - 1, 1)), ch.axis("value", -1, 1), curves)
    rows = np.arange(min(length, 256) + 1)
    residual_good = check_shift(
        sinusoidal(rows, d, base=v["base"], dtype=np.float64), 1, base=v["base"]
    )
    residual_bad = check_shift(
        odd_exponent_table(rows, d, base=v["base"], dtype=np.float64), 1, base=v["base"]
    )
    return result(
        "With the bug, a cosine channel no longer shares its sine's frequency: the pair stops "
        "being a point on a circle, and no rotation matrix moves PE[p] to PE[p+1] (the shift "
        "residual, the largest |PE[p+1] - M_1·PE[p]|, is far from 0).",
        [
            ("good", "shift residual of the correct table", N(residual_good)),
            ("bad", "shift residual with the bug", N(residual_bad)),
            ("gap", "max |bug - correct|", N(np.max(np.abs(bad - good)))),
        ],
        chart,
    )


def _dtype() -> Control:
    return Control("dtype", "dtype", "choice", "float32", choices=("float32", "float16"))


def _pair(default: int = 4) -> Control:
    return Control("pair", "pair (frequency index)", "int", default, 0, c.MAX_D_MODEL, step=1)


PANELS = (
    Panel("heatmap", "The table", "Each row is one position: fast channels on the left change "
          "from row to row, slow ones on the right barely move.",
          (c.length(100, 10**7), c.d_model(64), c.base(), CONVENTION), heatmap),
    Panel("channels", "Channels against position", "A sine channel and its cosine partner "
          "have the same wavelength, shifted by a quarter period.",
          (c.length(200, 10**7), c.d_model(64), c.base(), CONVENTION,
           Control("channels", "channels (comma-separated, or auto)", "text", "auto")), channels),
    Panel("wavelengths", "Wavelengths", "The wavelengths grow by one common ratio, from 2π "
          "towards base·2π.", (c.d_model(64), c.base(), CONVENTION), wavelength_panel),
    Panel("similarity", "Similarity against distance", "The dot product of two rows depends "
          "only on how far apart the positions are.",
          (c.length(256, 10**7), c.d_model(64), c.base(), CONVENTION,
           Control("metric", "metric", "choice", "dot", choices=("dot", "cosine"))),
          similarity_panel),
    Panel("shift", "The shift is a rotation", "Moving from position p to p+k turns each "
          "(sin, cos) pair by the same angle, whatever p is.",
          (Control("p", "p (position)", "int", 3, 0, 10**7, step=1),
           Control("k", "k (shift)", "int", 5, 0, 10**6, step=1),
           c.d_model(16), c.base(), CONVENTION, _pair(1)), shift_panel),
    Panel("precision", "Precision at long positions", "The usual code computes the angles in "
          "float32 and its error grows with the position; posenc's stays at one rounding of "
          "float32.",
          (Control("max_position", "largest position", "int", 100_000, 10, 10**8, step=1),
           c.d_model(64), c.base(), _dtype()), precision_panel),
    Panel("bug", "The odd-exponent cosine bug", "Compare the buggy cosine channel with the "
          "correct one: the bug changes its frequency.",
          (c.length(200, 10**7), c.d_model(16), c.base(), _pair(4)), bug_panel),
)  # fmt: skip
