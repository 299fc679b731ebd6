"""The numbers and checks behind the figures of :mod:`posenc.plot` (NumPy only).

``posenc.plot`` draws; this module picks what to draw: default channels, the position grids,
the subset of positions whose differences cover every distance, and the shift residuals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._checks import check_int
from ._conventions import ConventionName
from ._features import feature_slices, sin_cos_pairs
from ._sinusoidal import sinusoidal
from .analysis._properties import check_shift
from .analysis._recipes import float32_recipe

MAX_PERIODS = 20  # sinusoids(): default channels show at most this many periods
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


def default_channels(length: int, d_model: int, convention: str, lam: Any) -> list[int]:
    """The sin channels of up to five frequencies, spread evenly over the schedule.

    Only frequencies with at most 20 periods in ``length`` positions are eligible (faster
    ones fill the axes with solid colour); at least the slowest one is kept.
    """
    layout = feature_slices(d_model, convention)
    sin_channels = list(range(d_model)[layout.sin])
    if not sin_channels:  # d_model = 1 under tensor2tensor: only a zero column
        return [0]
    wavelength = np.asarray(lam, dtype=np.float64)[: len(sin_channels)]
    eligible = np.flatnonzero(wavelength >= length / MAX_PERIODS)
    if eligible.size == 0:
        eligible = np.array([int(np.argmax(wavelength))])
    picks = np.unique(np.round(np.linspace(0, eligible.size - 1, 5)).astype(int))
    return [sin_channels[int(eligible[i])] for i in picks]


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

    The frequencies are chosen as in :func:`default_channels` (at most 20 periods in
    ``length`` positions); each comes with the cosine channel of the same frequency, so a
    figure shows both kinds of channel.

    >>> sin_cos_channels(100, 16, "paper", [2**k for k in range(1, 9)], count=2)
    [(4, 5), (14, 15)]
    """
    pairs = sin_cos_pairs(feature_slices(d_model, convention), d_model)
    partner = dict(zip(pairs.sin.tolist(), pairs.cos.tolist(), strict=True))
    if not partner:  # d_model = 1: no cosine channel
        return []
    wavelength = np.asarray(lam, dtype=np.float64)[: len(partner)]
    eligible = np.flatnonzero(wavelength >= length / MAX_PERIODS)
    if eligible.size == 0:
        eligible = np.array([int(np.argmax(wavelength))])
    picks = np.unique(np.round(np.linspace(0, eligible.size - 1, count)).astype(int))
    sines = pairs.sin.tolist()
    return [(sines[int(eligible[i])], partner[sines[int(eligible[i])]]) for i in picks]
