"""Panels 8-10: RoPE as turning pairs, its scalings, and multi-axis RoPE presets."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._features import pair_slices
from .._rope.multi_axis import AxisOrder, AxisSchedule, multi_axis_frequencies
from .._rope.rotary import apply_rotary, rotary_cos_sin
from .._rope.scaling import rope_frequencies
from . import _charts as ch
from . import _controls as c
from ._controls import Control
from ._panel import Panel, result

N = ch.number
#: The fixed query and key of the RoPE panel: any two vectors show the same properties.
SCORE_POINTS = 200


def _query_key(head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    grid = np.linspace(-1.0, 1.0, head_dim)
    return grid, 0.5 - grid[::-1] ** 2


def _rotate(x: np.ndarray, positions: Any, v: dict[str, Any]) -> np.ndarray:
    cos, sin = rotary_cos_sin(
        positions, v["head_dim"], base=v["base"], pairs=v["pairs"], dtype=np.float64
    )
    rows = np.broadcast_to(x, (cos.shape[0], x.size))
    return apply_rotary(rows, cos, sin, pairs=v["pairs"])


def rope_panel(v: dict[str, Any]) -> dict[str, Any]:
    d, p, dist, i = v["head_dim"], v["p"], v["distance"], v["pair"]
    if d % 2:
        raise ValueError(f"head_dim must be even (RoPE turns pairs of channels), got {d}")
    if not 0 <= i < d // 2:
        raise ValueError(f"pair must lie in 0 .. {d // 2 - 1} (head_dim {d} has {d // 2} pairs), "
                         f"got {i}")  # fmt: skip
    if dist > p:
        raise ValueError(f"distance must be at most p = {p} (the key sits at p - distance)")
    q, k = _query_key(d)
    first, second = pair_slices(v["pairs"], d // 2)
    a, b = range(d)[first][i], range(d)[second][i]
    q_rot, k_rot = _rotate(q, [p], v)[0], _rotate(k, [p - dist], v)[0]
    ring = np.linspace(0, 2 * math.pi, 121)
    radius = max(math.hypot(q[a], q[b]), math.hypot(k[a], k[b]), 1e-3) * 1.15
    circle = ch.lines(
        ch.axis(f"channel {a}", -radius, radius),
        ch.axis(f"channel {b}", -radius, radius),
        [
            ch.series("circle", math.hypot(q[a], q[b]) * np.cos(ring),
                      math.hypot(q[a], q[b]) * np.sin(ring), colour=6),
            ch.series(f"query at {p}", [0, q_rot[a]], [0, q_rot[b]], colour=0),
            ch.series(f"key at {p - dist}", [0, k_rot[a]], [0, k_rot[b]], colour=1),
        ],
    )  # fmt: skip
    circle["square"] = True
    starts = np.unique(np.linspace(dist, dist + 10 * max(p, 100), SCORE_POINTS).astype(np.int64))
    scores = np.einsum("ij,ij->i", _rotate(q, starts, v), _rotate(k, starts - dist, v))
    flat = ch.lines(
        ch.axis("query position (key at query - distance)", float(starts[0]), float(starts[-1])),
        ch.fitted("score q·k", scores, pad=0.5),
        [ch.series(f"score at distance {dist}", starts, scores, colour=2)],
    )
    score = float(q_rot @ k_rot)
    shown = sorted({0, min(1, d // 2 - 1), i, d // 2 - 1})
    pairs_table = ch.table(
        "Which channels form pair k",
        ["layout", *(f"pair {j}" for j in shown)],
        [[lay, *(f"({range(d)[pair_slices(lay, d // 2)[0]][j]}, "
                 f"{range(d)[pair_slices(lay, d // 2)[1]][j]})" for j in shown)]
         for lay in ("half", "interleaved")],
    )  # fmt: skip
    return result(
        f"Pair {i} (channels {a} and {b}) of the query turns by p·ω_{i}, the key's by "
        f"(p - {dist})·ω_{i}: the score depends only on the distance, so the curve is flat.",
        [
            ("score", f"score of query at {p} and key at {p - dist}", N(score)),
            ("spread", "max - min of the score over the query positions", N(np.ptp(scores))),
        ],
        [circle, flat],
        [pairs_table],
    )


def scaling_params(v: dict[str, Any]) -> dict[str, Any] | None:
    """The Hugging Face rope parameters of the panel's rope type, factor and context."""
    kind, factor, context, n = v["rope_type"], v["factor"], v["context"], v["head_dim"] // 2
    if kind == "default":
        return None
    trained = {"original_max_position_embeddings": context}
    params: dict[str, Any] = {
        "linear": {"factor": factor},
        "dynamic": {"factor": factor, **trained},
        "yarn": {"factor": factor, **trained},
        "llama3": {"factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0, **trained},
        "longrope": {"factor": factor, "short_factor": [1.0] * n,
                     "long_factor": np.linspace(1.0, factor, n).tolist(), **trained},
        "proportional": {"factor": factor},
        "ntk_alpha": {"alpha": factor},
    }[kind]  # fmt: skip
    return {"rope_type": kind, **params}


def scaling_panel(v: dict[str, Any]) -> dict[str, Any]:
    d, base, context = v["head_dim"], v["base"], v["context"]
    if d % 2:
        raise ValueError(f"head_dim must be even, got {d}")
    seq_len = int(context * v["factor"])
    plain, _ = rope_frequencies(d, base=base)
    scaled, attention = rope_frequencies(d, base=base, scaling=scaling_params(v), seq_len=seq_len)
    k = np.arange(plain.size)
    lam = 2 * math.pi / plain
    with np.errstate(divide="ignore"):
        lam_s = np.where(scaled > 0, 2 * math.pi / np.where(scaled > 0, scaled, 1), np.inf)
    low, high = ch.bounds(lam, lam_s[np.isfinite(lam_s)], [context])
    curves = [
        ch.series("unscaled", k, np.log10(lam), mode="points", colour=0),
        ch.series(v["rope_type"], k, np.log10(lam_s), mode="points", colour=1),
        ch.series("trained context", [0, max(k[-1], 1)], [math.log10(context)] * 2, colour=6),
    ]
    chart = ch.lines(
        ch.axis("pair k", 0, max(k[-1], 1)),
        ch.axis("wavelength 2π/ω_k (positions, log scale)", low, high, log=True),
        curves,
    )
    longer = int(np.sum(lam_s > context))
    return result(
        f"{v['rope_type']}: wavelengths above the trained context ({context}) are pairs that "
        "never completed a turn in training; scalings stretch them so that longer inputs stay "
        f"within what was seen. Evaluated at sequence length {seq_len}.",
        [
            ("omega_last", "ω of the last pair, scaled", N(scaled[-1])),
            ("omega_first", "ω of pair 0, scaled", N(scaled[0])),
            ("attention", "attention factor", N(attention)),
            ("longer", "pairs with a wavelength above the context", str(longer)),
        ],
        chart,
    )


#: Multi-axis presets: sections (pairs per axis), order, schedule and base.
PRESETS: dict[str, tuple[tuple[int, ...], AxisOrder, AxisSchedule, float]] = {
    "Qwen2-VL (M-RoPE)": ((16, 24, 24), "sectioned", "shared", 1e6),
    "Qwen3-VL (interleaved M-RoPE)": ((24, 20, 20), "interleaved", "shared", 5e6),
    "Flux (axes_dim 16, 56, 56)": ((8, 28, 28), "sectioned", "per_axis", 1e4),
    "Wan 2.1 (head 128)": ((22, 21, 21), "sectioned", "per_axis", 1e4),
}
AXES = ("t", "h", "w")


def multi_axis_panel(v: dict[str, Any]) -> dict[str, Any]:
    sections, order, schedule, default_base = PRESETS[v["preset"]]
    base = default_base if v["base"] == 0 else v["base"]
    f = multi_axis_frequencies(sections, order=order, schedule=schedule, base=base)
    axis_of = f.axis
    omega = f.frequencies.max(axis=0)
    k = np.arange(omega.size)
    keep = omega > 0
    low, high = ch.bounds(omega[keep])
    curves = [
        ch.series(f"turns with {name}", k[axis_of == a], np.log10(omega[axis_of == a]),
                  mode="points", colour=a)
        for a, name in enumerate(AXES)
    ]  # fmt: skip
    chart = ch.lines(
        ch.axis("pair k", 0, max(k[-1], 1)),
        ch.axis("frequency ω_k (log scale)", low, high, log=True),
        curves,
    )
    return result(
        f"{v['preset']}: {order} pairs, {schedule} schedule, base {base:g}. Each pair turns with "
        "one coordinate: t (time or text position), h (row) or w (column).",
        [(f"pairs_{n}", f"pairs turning with {n}", str(int(np.sum(axis_of == a))))
         for a, n in enumerate(AXES)]
        + [("omega_max", "largest ω", N(omega.max())),
           ("omega_min", "smallest ω", N(omega[keep].min()))],
        chart,
    )  # fmt: skip


ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional",
              "ntk_alpha")  # fmt: skip
PAIRS = Control("pairs", "pairs (layout)", "choice", "half", choices=("half", "interleaved"))

PANELS = (
    Panel("rope", "RoPE: pairs turned by position", "The query and key turn by angles that grow "
          "with their positions; their score depends only on the distance between them.",
          (c.even_dim(64), c.base(),
           Control("p", "p (query position)", "int", 12, 0, 10**7, step=1),
           Control("distance", "distance (query - key)", "int", 3, 0, 10**7, step=1),
           PAIRS, Control("pair", "pair k", "int", 1, 0, 2048, step=1)), rope_panel),
    Panel("scaling", "RoPE scalings", "Scalings lengthen the wavelengths that are longer than "
          "the trained context and leave the short ones (almost) alone.",
          (Control("rope_type", "rope type", "choice", "yarn", choices=ROPE_TYPES),
           Control("factor", "factor (or alpha)", "float", 8.0, 1.0, 1024.0, step=0.5),
           c.even_dim(128), c.base(500000.0),
           Control("context", "trained context (original_max_position_embeddings)", "int",
                   8192, 16, 10**7, step=1)), scaling_panel),
    Panel("multi_axis", "Multi-axis RoPE", "Each rotary pair turns with one coordinate of the "
          "token: its time, its row or its column.",
          (Control("preset", "preset", "choice", "Qwen2-VL (M-RoPE)", choices=tuple(PRESETS)),
           Control("base", "base (0: the preset's)", "float", 0.0, 0.0, 1e12)), multi_axis_panel),
)  # fmt: skip
