"""The numbers and checks behind the figures of :mod:`posenc.plot` (NumPy only).

``posenc.plot`` draws; this module picks what to draw: default channels, the position grids,
the subset of positions whose differences cover every distance, and the shift residuals.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._checks import check_int, check_position_magnitude
from ._conventions import ConventionName, get_convention
from ._features import feature_slices, sin_cos_pairs
from ._frequencies import frequencies
from ._sinusoidal import sinusoidal
from .analysis._bias import (
    bias_profile_at,
    bucket_map_at,
    check_distance,
    check_table,
    slope_table,
)
from .analysis._precision import precision_report
from .analysis._properties import check_shift, shift_matrix, similarity
from .analysis._recipes import float32_recipe
from .analysis._results import BiasProfile, BucketMap, SlopeTable

MAX_PERIODS = 8  # sinusoids(): default channels show at most this many periods
#: sinusoids(): default channels show at least half a period (a wavelength at most twice the
#: range), so that none looks flat: a sine moves by at least 1 over it, a cosine by 2.
MIN_PERIODS = 0.5
#: heatmap(), similarity_plot(): longer ranges are drawn from this many evenly spaced positions
#: (more rows than the figure has pixels; the similarity profile uses at most this many too).
MAX_DRAWN_ROWS = 2048
#: sinusoids(): longer ranges are drawn through this many evenly spaced positions.
MAX_CURVE_POINTS = 10_000
SHIFT_WINDOW = 64  # shift_plot(): consecutive positions checked at each grid point
MAX_SHIFT = 10_000
MAX_SHIFTS = 6
#: The tables shift_plot() checks, in the order shift_residuals() builds them.
SHIFT_TABLES = ("posenc, float64", "posenc, float32", "float32 recipe")
#: The suffixes ``path=`` accepts (case-insensitive); the suffix picks the file format.
FORMATS = (".png", ".svg")
_SEQUENTIAL = "viridis"
_DIVERGING = "RdBu_r"


def check_channels(channels: Any, d_model: int) -> list[int]:
    """A non-empty sequence of distinct channel indices in ``[0, d_model)``."""
    if isinstance(channels, str) or not isinstance(channels, Sequence | np.ndarray):
        raise TypeError(f"channels must be None or a sequence of channel indices, got {channels!r}")
    values = [check_int("channels", c, minimum=0) for c in np.asarray(channels).tolist()]
    if not values:
        raise ValueError("channels must name at least one channel, got an empty sequence")
    bad = [c for c in values if c >= d_model]
    if bad:
        raise ValueError(
            f"channels must lie in 0 .. d_model-1 = {d_model - 1}, got {bad[0]} among them"
        )
    return list(dict.fromkeys(values))


def even_positions(length: int, count: int) -> npt.NDArray[np.int64]:
    """``0 .. length-1`` when ``length <= count``, else ``count`` of them evenly spaced (the
    first and the last included, neighbours ``(length-1)/(count-1)`` apart, rounded).

    >>> even_positions(5, 8).tolist(), even_positions(10**9, 3).tolist()
    ([0, 1, 2, 3, 4], [0, 500000000, 999999999])
    """
    if length <= count:
        return np.arange(length, dtype=np.int64)
    return np.unique(np.round(np.linspace(0, length - 1, count)).astype(np.int64))


def difference_cover(length: int, limit: int = MAX_DRAWN_ROWS) -> npt.NDArray[np.int64]:
    """Few positions in ``0 .. length-1`` whose differences include every ``0 .. length-1``.

    ``{0 .. a-1} ∪ {0, a, 2a, ...} ∪ {length-1}`` with ``a ≈ sqrt(length)``: about
    ``2·sqrt(length)`` positions instead of ``length``. When that is more than ``limit``
    (``length`` above about 10^6 for the default 2048), ``a = limit // 2`` and the multiples
    of the step ``s = ceil((length-1) / (a-1))`` are used instead: at most ``limit`` positions,
    whose differences are every distance below ``a`` and the ``a`` distances up to each
    multiple of ``s`` (``m·s - a + 1 .. m·s``), and ``length-1``.

    >>> difference_cover(10).tolist()
    [0, 1, 2, 3, 4, 8, 9]
    >>> len(difference_cover(10**9)), int(difference_cover(10**9)[-1])
    (2047, 999999999)
    """
    step = max(1, int(np.ceil(np.sqrt(length))))
    head = step
    if 2 * step + 1 > limit:
        head = limit // 2
        step = -(-(length - 1) // (head - 1))
    parts = [np.arange(head), np.arange(0, length, step), np.array([length - 1])]
    return np.unique(np.concatenate(parts)).astype(np.int64)


def precision_grid(max_position: int, per_decade: int = 4) -> npt.NDArray[np.int64]:
    """Integers on a log grid from ``min(10, max_position)`` to ``max_position``."""
    low = min(10, max_position)
    count = max(2, int(np.ceil(np.log10(max_position / low) * per_decade)) + 1)
    grid = np.round(np.geomspace(low, max_position, count)).astype(np.int64)
    return np.unique(grid)


def check_shifts(shifts: Any) -> list[int]:
    """A sequence of one to six distinct shifts in ``1 .. 10_000`` (repeats dropped)."""
    if isinstance(shifts, str) or not isinstance(shifts, Sequence | np.ndarray):
        raise TypeError(f"shifts must be a sequence of positive integers, got {shifts!r}")
    values = list(dict.fromkeys(check_int("shifts", k, minimum=1) for k in shifts))
    if not 1 <= len(values) <= MAX_SHIFTS:
        raise ValueError(f"shifts must hold 1 to {MAX_SHIFTS} distinct shifts, got {shifts!r}")
    if max(values) > MAX_SHIFT:
        raise ValueError(f"shifts must be at most {MAX_SHIFT}, got {max(values)}")
    return values


def shift_residuals(
    grid: npt.NDArray[np.int64], shifts: list[int], d_model: int, base: float, name: ConventionName
) -> dict[tuple[str, int], list[float]]:
    """``check_shift`` over positions ``P .. P+63`` for each ``P`` in ``grid``.

    Keyed by (table in :data:`SHIFT_TABLES`, shift); one value per grid point.
    """
    residuals: dict[tuple[str, int], list[float]] = {}
    span = SHIFT_WINDOW + max(shifts)
    for start in grid:
        positions = np.arange(int(start), int(start) + span)
        tables = (
            sinusoidal(positions, d_model, base=base, convention=name, dtype=np.float64),
            sinusoidal(positions, d_model, base=base, convention=name),
            float32_recipe(positions, d_model, base=base, convention=name),
        )
        for label, table in zip(SHIFT_TABLES, tables, strict=True):
            for k in shifts:
                rows = table[: SHIFT_WINDOW + k]
                value = check_shift(rows, k, base=base, convention=name)
                residuals.setdefault((label, k), []).append(value)
    return residuals


def sin_cos_channels(
    length: int, d_model: int, convention: str, lam: Any, count: int = 3
) -> list[tuple[int, int]]:
    """(sin channel, cos channel) of up to ``count`` frequencies, spread over the schedule.

    Eligible frequencies make between half a period and 8 periods in ``length`` positions:
    faster ones fill the axes with solid colour, slower ones look flat. They are spread
    evenly over the eligible ones, fastest first; with none eligible, the one nearest to
    that range (on a log scale) is shown. Each comes with the cosine channel of the same
    frequency, so a figure shows both kinds of channel. Used by ``posenc.plot.sinusoids``
    and by the explorer's channels panel.

    >>> sin_cos_channels(100, 16, "paper", [2**k for k in range(1, 9)], count=2)
    [(6, 7), (12, 13)]
    """
    pairs = sin_cos_pairs(feature_slices(d_model, convention), d_model)
    partner = dict(zip(pairs.sin.tolist(), pairs.cos.tolist(), strict=True))
    if not partner:  # d_model = 1: no cosine channel
        return []
    sines = pairs.sin.tolist()
    wavelength = np.asarray(lam, dtype=np.float64)[: len(sines)]
    low, high = length / MAX_PERIODS, length / MIN_PERIODS
    eligible = np.flatnonzero((wavelength >= low) & (wavelength <= high))
    if eligible.size == 0:
        outside = np.maximum(np.log(low / wavelength), np.log(wavelength / high))
        eligible = np.array([int(np.argmin(outside))])
    picks = np.unique(np.round(np.linspace(0, eligible.size - 1, count)).astype(int))
    return [(sines[int(eligible[i])], partner[sines[int(eligible[i])]]) for i in picks]


def rotation(
    p: int, k: int, d_model: int, pair: int, base: float, convention: ConventionName, steps: int
) -> dict[str, Any]:
    """What the rotation figures draw for one (sin, cos) pair moved from ``p`` to ``p+k``.

    ``sin``/``cos``: the pair's channels; ``start``/``end``: its (sin, cos) values at ``p``
    and ``p+k`` (float64); ``path``: ``steps`` (sin, cos) points at fractional positions from
    ``p`` to ``p+k``; ``block``: the 2x2 block of ``M_k`` on those channels, rows and columns
    in (sin, cos) order; ``omega``: the pair's frequency.

    >>> r = rotation(5, 3, 8, 1, 10000.0, "paper", 4)
    >>> r["sin"], r["cos"], round(r["omega"], 6)
    (2, 3, 0.1)
    >>> bool(np.allclose(r["block"] @ r["start"], r["end"]))
    True
    """
    pairs = sin_cos_pairs(feature_slices(d_model, convention), d_model)
    if not 0 <= pair < pairs.sin.size:
        raise ValueError(
            f"pair must lie in 0 .. {pairs.sin.size - 1} for d_model {d_model}, got {pair}"
        )
    s_ch, c_ch = int(pairs.sin[pair]), int(pairs.cos[pair])
    rows = sinusoidal([p, p + k], d_model, base=base, convention=convention, dtype=np.float64)
    walk = sinusoidal(
        np.linspace(p, p + k, steps), d_model, base=base, convention=convention, dtype=np.float64
    )
    m = shift_matrix(k, d_model, base=base, convention=convention, unpaired="drop")
    index = [s_ch, c_ch]
    return {
        "sin": s_ch,
        "cos": c_ch,
        "start": rows[0, index],
        "end": rows[1, index],
        "path": walk[:, index],
        "block": m[np.ix_(index, index)],
        "matrix": m,
        "rows": rows,
        "omega": float(frequencies(d_model, base=base, convention=convention)[pair]),
    }


def check_path(path: Any) -> Path | None:
    """``None`` or a str/PathLike ending in .png or .svg (case-insensitive)."""
    if path is None:
        return None
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or os.PathLike ending in .png or .svg, got {path!r}")
    result = Path(path)
    if result.suffix.lower() not in FORMATS:
        raise ValueError(
            f"path must end in .png or .svg (the format follows the suffix), got {str(path)!r}"
        )
    return result


def check_length(length: Any, minimum: int) -> int:
    """A number of positions ``0 .. length-1``: an integer >= ``minimum``, at most 2**53 + 1."""
    count: int = check_int("length", length, minimum=minimum)
    check_position_magnitude("length - 1", 0, count - 1)
    return count


def extent(positions: npt.NDArray[np.int64]) -> tuple[float, float]:
    """The span of evenly spaced ``positions`` drawn as cells: half a step beyond each end."""
    first, last = int(positions[0]), int(positions[-1])
    half = 0.5 * (last - first) / (len(positions) - 1) if len(positions) > 1 else 0.5
    return first - half, last + half


def sampled(shown: int, length: int, what: str) -> str:
    """A title line saying that ``shown`` of ``length`` positions were drawn (else '')."""
    if shown >= length:
        return ""
    return f"\n({what + ' ' if what else ''}{shown:,} evenly spaced of {length:,} positions)"


def convention_name(convention: Any) -> ConventionName:
    return get_convention(convention).name


def require_frequencies(d_model: int, base: float, convention: str) -> None:
    """Figures about frequencies need at least one (tensor2tensor with d_model = 1 has none)."""
    if frequencies(d_model, base=base, convention=convention).size == 0:
        raise ValueError(
            f"d_model must be >= 2 under convention {convention!r} (d_model = {d_model} has no "
            "frequencies, only a zero column)"
        )


def fitted_scale(values: npt.NDArray[np.float64]) -> tuple[str, float, float]:
    """(colour map, vmin, vmax) fitted to the finite values: sequential from the smallest to
    the largest when none is negative, diverging and centred at 0 otherwise."""
    finite = values[np.isfinite(values)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if low >= 0.0:
        return _SEQUENTIAL, low, high if high > low else low + 1.0
    top = max(-low, high)
    return _DIVERGING, -top, top


def rotation_lines(r: dict[str, Any], p: int, k: int) -> list[tuple[str, str]]:
    """The text beside the rotation figure: (line, font family), the 2x2 block with numbers."""
    (s0, c0), (s1, c1) = r["start"], r["end"]
    b = r["block"]
    return [
        (f"2×2 block of M_{k} (channels {r['sin']}, {r['cos']}):", "sans-serif"),
        (f"[[{b[0, 0]: .4f}  {b[0, 1]: .4f}]", "monospace"),
        (f" [{b[1, 0]: .4f}  {b[1, 1]: .4f}]]", "monospace"),
        (f"= [[cos kω, sin kω], [-sin kω, cos kω]],  kω = {k}·{r['omega']:.4g}", "sans-serif"),
        (f"(sin, cos) at p = {p}:     ({s0: .4f}, {c0: .4f})", "monospace"),
        (
            f"block @ that:            ({b[0] @ r['start']: .4f}, {b[1] @ r['start']: .4f})",
            "monospace",
        ),
        (f"(sin, cos) at p+k = {p + k}:  ({s1: .4f}, {c1: .4f})", "monospace"),
        ("The same block moves this pair from any p to p+k.", "sans-serif"),
    ]


def check_rotation(p: Any, k: Any, d_model: Any, pair: Any) -> tuple[int, int, int, int]:
    """The integer arguments of the rotation figure: p >= 0, k >= 1 (p + k at most 2**53),
    d_model >= 2, pair >= 0 (its upper bound is checked by :func:`rotation`)."""
    p = check_int("p", p, minimum=0)
    k = check_int("k", k, minimum=1)
    check_position_magnitude("p + k", 0, p + k)
    return p, k, check_int("d_model", d_model, minimum=2), check_int("pair", pair, minimum=0)


def similarity_views(
    length: int, d_model: int, base: float, name: ConventionName, metric: str
) -> tuple[Any, Any]:
    """(the similarity shown as a matrix, the one whose profile is drawn) for ``length``
    positions: both the full one up to 2048 positions; beyond, 2048 evenly spaced positions
    and the :func:`difference_cover` of every distance."""
    if length <= MAX_DRAWN_ROWS:
        full = similarity(length, d_model, base=base, convention=name, metric=metric)
        return full, full
    grid = even_positions(length, MAX_DRAWN_ROWS)
    shown = similarity(grid, d_model, base=base, convention=name, metric=metric)
    cover = difference_cover(length)
    return shown, similarity(cover, d_model, base=base, convention=name, metric=metric)


def precision_errors(
    grid: npt.NDArray[np.int64],
    d_model: int,
    base: float,
    name: ConventionName,
    curves: Sequence[tuple[str, str, str]],
) -> dict[str, list[float]]:
    """Max error of each (label, dtype, method) curve at each ``L`` of ``grid``:
    :func:`~posenc.analysis.precision_report` over 8 positions below ``L``."""
    errors: dict[str, list[float]] = {label: [] for label, _, _ in curves}
    for length in grid:
        reports = {
            dtype: precision_report(
                int(length), d_model, dtype, base=base, convention=name, samples=8, seed=0
            )
            for dtype in ("float32", "bfloat16")
        }
        for label, dtype, method in curves:
            errors[label].append(reports[dtype].method(method).max_error)
    return errors


# --------------------------------------------------------------------------- attention biases

#: bias_plot(): at most this many heads get a curve of their own (a legend entry each).
MAX_BIAS_CURVES = 16
#: bias_plot(): the image shows at most this many heads (rows) and relative positions
#: (columns), evenly spaced: more than the pixels it is drawn on.
MAX_IMAGE_HEADS = 512
MAX_IMAGE_COLUMNS = 2048
#: bias_plot(), slope_plot(): the most ALiBi heads a figure takes (no model has nearly as
#: many; the slopes plot draws a point per head).
MAX_FIGURE_HEADS = 1 << 16
#: slope_plot(): the largest max_bias: 2^-126 is float32's smallest normal number.
MAX_SLOPE_BIAS = 126
#: bias_plot(): a T5 table's values beyond this magnitude are refused (matplotlib's axis
#: ranges, ticks and colour scale would overflow float64).
MAX_DRAWN_VALUE = 1e300


def relative_grid(distance: Any, points: int = MAX_CURVE_POINTS) -> npt.NDArray[np.int64]:
    """The relative positions a bias or bucket figure draws: every one of ``-distance ..
    distance`` when that is at most ``points``, else evenly spaced ones, symmetric around 0
    (0 and both ends included; ``points - 1`` of them). Never anything proportional to
    ``distance`` (an int in ``[1, 2**20]``).

    >>> relative_grid(2).tolist(), relative_grid(2**20).size, relative_grid(50, 6).tolist()
    ([-2, -1, 0, 1, 2], 9999, [-50, -25, 0, 25, 50])
    """
    far = check_distance(distance)
    if 2 * far + 1 <= points:
        return np.arange(-far, far + 1, dtype=np.int64)
    half = even_positions(far + 1, points // 2)
    return np.concatenate([-half[:0:-1], half])


@dataclass(frozen=True)
class BiasFigureData:
    """What :func:`posenc.plot.bias_plot` draws (:func:`bias_curves`).

    Attributes:
        curves: the profile of the heads that get a curve, at up to 9,999 relative positions.
        curve_heads: their head indices (all heads up to 16, else 16 evenly spaced).
        image: the profile of the image's rows, at up to 2047 relative positions.
        image_heads: their head indices (all heads up to 512, else 512 evenly spaced).
        heads: how many heads there are; positions: how many relative positions.
    """

    curves: BiasProfile
    curve_heads: npt.NDArray[np.int64]
    image: BiasProfile
    image_heads: npt.NDArray[np.int64]
    heads: int
    positions: int


def bias_curves(
    heads: int | None, distance: int, max_bias: float, table: Any, buckets: tuple[int, int, bool]
) -> BiasFigureData:
    """The bias against ``key − query`` (ALiBi without ``table``, else T5's buckets
    ``(num_buckets, max_distance, bidirectional)`` over ``table``) as a figure draws it:
    curves through :data:`MAX_CURVE_POINTS` relative positions at most, and an image of at
    most :data:`MAX_IMAGE_HEADS` heads by :data:`MAX_IMAGE_COLUMNS` relative positions (more
    than its pixels), each evenly spaced; nothing proportional to ``distance`` or to the
    number of heads beyond them."""
    curve_grid, image_grid = relative_grid(distance), relative_grid(distance, MAX_IMAGE_COLUMNS)
    positions = 2 * int(curve_grid[-1]) + 1
    if table is None:
        count = _check_figure_heads(8 if heads is None else heads)

        def profile(relative: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]) -> BiasProfile:
            return bias_profile_at("alibi", relative, heads=count, max_bias=max_bias, rows=rows)

    else:
        count_buckets, far, both = buckets
        weights = check_table(table, check_int("num_buckets", count_buckets, minimum=2))
        peak = float(np.max(np.abs(weights)))
        if peak > MAX_DRAWN_VALUE:
            raise ValueError(
                f"table holds values up to {peak:.3g} in magnitude: a figure draws values "
                f"within +-{MAX_DRAWN_VALUE:.0e} (its axes and colour scale would overflow)"
            )
        count = weights.shape[1]

        def profile(relative: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]) -> BiasProfile:
            return bias_profile_at(
                "t5", relative, heads=heads, table=weights, num_buckets=count_buckets,
                max_distance=far, bidirectional=both, rows=rows,
            )  # fmt: skip

    curve_heads = even_positions(count, MAX_BIAS_CURVES)
    image_heads = even_positions(count, MAX_IMAGE_HEADS)
    return BiasFigureData(
        profile(curve_grid, curve_heads), curve_heads, profile(image_grid, image_heads),
        image_heads, count, positions,
    )  # fmt: skip


def bucket_regions(
    method: str, distance: int, num_buckets: int | None, max_distance: int | None, both: bool
) -> tuple[BucketMap, list[tuple[str, int, int]]]:
    """The bucket map and its regions as ``(label, first, last)`` ranges of distances
    ``|key − query|`` within ``distance``: exact, logarithmic, and (T5) the last bucket from
    ``max_distance`` on."""
    m = bucket_map_at(
        method, relative_grid(distance), num_buckets=num_buckets, max_distance=max_distance,
        bidirectional=both,
    )  # fmt: skip
    far = int(m.relative[-1])
    bounds = [("exact", 0, m.exact_limit)]
    if m.method == "t5":
        bounds += [
            ("logarithmic", m.exact_limit + 1, m.max_distance - 1),
            ("last bucket", m.max_distance, far),
        ]
    else:
        bounds.append(("logarithmic", m.exact_limit + 1, far))
    return m, [(label, low, min(high, far)) for label, low, high in bounds if low <= far]


def slope_rows(heads: int, max_bias: float) -> SlopeTable:
    """The slopes of every head, exact and in each framework's rule (at most
    :data:`MAX_FIGURE_HEADS` heads: a point each)."""
    _check_figure_heads(heads)
    table = slope_table(heads, max_bias=max_bias)
    if table.max_bias > MAX_SLOPE_BIAS:
        raise ValueError(
            f"max_bias must be at most {MAX_SLOPE_BIAS} for the slopes figure, got "
            f"{table.max_bias:g}: the smallest slope 2^-max_bias would be below float32's "
            "normal range, where the rules' ulps mean nothing and the log axis loses them"
        )
    return table


def _check_figure_heads(heads: Any) -> int:
    count: int = check_int("heads", heads, minimum=1)
    if count > MAX_FIGURE_HEADS:
        raise ValueError(f"heads must be at most {MAX_FIGURE_HEADS} for a figure, got {count}")
    return count
