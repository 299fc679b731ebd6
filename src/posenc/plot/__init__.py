"""Matplotlib figures of the sinusoidal encoding (the ``plot`` extra).

Every function builds a :class:`matplotlib.figure.Figure` with the object-oriented API and an
Agg canvas: no pyplot state, no window, no change to matplotlib's global backend, so it works
headless and leaves no figure open. Pass ``path="name.png"`` or ``path="name.svg"`` to also
write the figure to a file (the format follows the suffix).

:data:`PLOTS` maps the name of each figure to its function; ``posenc plot KIND`` uses it.

>>> from posenc.plot import PLOTS, heatmap
>>> sorted(PLOTS)
['bias', 'buckets', 'heatmap', 'precision', 'rotation', 'shift', 'similarity', 'sinusoids',
 'slopes', 'wavelengths']
>>> fig = heatmap(50, 32)
>>> fig.axes[0].get_xlabel()
'channel (index)'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import numpy as np

from .. import analysis
from .._checks import check_base, check_int
from .._features import channel_frequency_index, channel_kinds, feature_slices
from .._figure_data import FORMATS as FORMATS
from .._figure_data import (
    MAX_CURVE_POINTS,
    MAX_DRAWN_ROWS,
    SHIFT_TABLES,
    SHIFT_WINDOW,
    check_channels,
    check_rotation,
    check_shifts,
    even_positions,
    precision_errors,
    precision_grid,
    rotation,
    rotation_lines,
    shift_residuals,
    similarity_views,
    sin_cos_channels,
)
from .._figure_data import (
    check_length as _check_length,
)
from .._figure_data import (
    check_path as _check_path,
)
from .._figure_data import (
    convention_name as _convention_name,
)
from .._figure_data import (
    extent as _extent,
)
from .._figure_data import (
    fitted_scale as _fitted_scale,
)
from .._figure_data import (
    require_frequencies as _require_frequencies,
)
from .._figure_data import (
    sampled as _sampled,
)
from .._sinusoidal import sinusoidal
from ._bias import bias_plot, bucket_plot, slope_plot
from ._canvas import Figure, _finish, _index_locator, _new_figure

__all__ = [
    "PLOTS",
    "bias_plot",
    "bucket_plot",
    "heatmap",
    "precision_plot",
    "rotation_plot",
    "shift_plot",
    "similarity_plot",
    "sinusoids",
    "slope_plot",
    "wavelength_plot",
]


_DIVERGING = "RdBu_r"
_DOTTED_LENGTH = 200  # sinusoids(): up to this length, integer positions are drawn as dots


# --------------------------------------------------------------------------- helpers


def _setting(d_model: int, base: float, convention: str) -> str:
    """The part of every title that says which table is shown."""
    return f"convention={convention}, base={base:g}, d_model={d_model}"


# --------------------------------------------------------------------------- figures


def heatmap(
    length: int = 100,
    d_model: int = 128,
    *,
    base: float = 10000.0,
    convention: str = "paper",
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """The table as a position × channel image (positions down, channels across).

    The image is ``posenc.sinusoidal(length, d_model, base=base, convention=convention)``
    (float32) on a diverging colour scale fixed to [-1, 1], with a colour bar. Above 2048
    positions its rows are those of 2048 evenly spaced positions (more rows than the figure
    has pixels), and the title says so: time and memory stay bounded at any length.

    Args:
        length: number of positions shown (rows ``0 .. length-1``), an integer >= 1.
        d_model: number of channels (columns), an integer >= 1.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.
        path: ``None``, or a file name ending in ``.png`` or ``.svg`` to also save the figure.

    Returns:
        the :class:`matplotlib.figure.Figure` (one image axes and its colour bar).

    Raises:
        ValueError / TypeError: a bad argument (the message names it), or a ``path`` whose
            suffix is not ``.png`` or ``.svg``.

    >>> fig = heatmap(20, 16, convention="tensor2tensor")
    >>> fig.axes[0].images[0].get_array().shape
    (20, 16)
    """
    length = _check_length(length, minimum=1)
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    name = _convention_name(convention)
    target = _check_path(path)

    rows = even_positions(length, MAX_DRAWN_ROWS)
    table = sinusoidal(rows, d_model, base=base, convention=name)
    top, bottom = _extent(rows)
    fig = _new_figure(8.0, 5.5)
    ax = fig.add_subplot()
    image = ax.imshow(
        table,
        cmap=_DIVERGING,
        vmin=-1.0,
        vmax=1.0,
        aspect="auto",
        interpolation="auto",  # nearest when each cell is >= 3 pixels, else anti-aliased
        extent=(-0.5, d_model - 0.5, bottom, top),
    )
    ax.set_xlabel("channel (index)")
    ax.set_ylabel("position (tokens)")
    ax.xaxis.set_major_locator(_index_locator())
    ax.yaxis.set_major_locator(_index_locator())
    ax.set_title(
        f"Sinusoidal positional encoding\n{_setting(d_model, base, name)}"
        + _sampled(len(rows), length, "rows:")
    )
    colorbar = fig.colorbar(image, ax=ax)
    colorbar.set_label("PE value (dimensionless)")
    return _finish(fig, target)


def sinusoids(
    length: int = 100,
    d_model: int = 128,
    *,
    channels: Sequence[int] | None = None,
    base: float = 10000.0,
    convention: str = "paper",
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """A few channels of the table drawn as curves over position.

    Args:
        length: number of positions drawn (``0 .. length-1``), an integer >= 1.
        d_model: number of channels, an integer >= 1.
        channels: channel indices in ``[0, d_model)`` to draw; ``None`` (default) draws the
            sin and the cos channel of up to three frequencies, spread evenly over those that
            make between half a period and 8 periods in ``length`` positions (none flat,
            none a solid block of colour).
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.
        path: ``None``, or a file name ending in ``.png`` or ``.svg`` to also save the figure.

    Returns:
        the :class:`matplotlib.figure.Figure`; the legend gives each curve's channel index,
        whether it is a sin, cos or zero column, and its wavelength in positions. Up to 200
        positions, the table's values at integer positions are dots on the curve the channel
        traces through fractional positions; beyond, lines join the integer positions, at
        most 10,000 of them, evenly spaced (the title then says so; a channel with more
        periods than that cannot be drawn faithfully at any resolution).

    >>> fig = sinusoids(50, 16, channels=[0, 1, 5])
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()][:2]
    ['channel 0: sin, λ = 6.28', 'channel 1: cos, λ = 6.28']
    """
    length = _check_length(length, minimum=1)
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    name = _convention_name(convention)
    picked = None if channels is None else check_channels(channels, d_model)
    target = _check_path(path)
    lam = analysis.wavelengths(d_model, base=base, convention=name).wavelengths
    if picked is None:
        pairs = sin_cos_channels(length, d_model, name, lam)
        picked = [channel for pair in pairs for channel in pair] or [0]

    positions = even_positions(length, MAX_CURVE_POINTS)
    table = sinusoidal(positions, d_model, base=base, convention=name, dtype=np.float64)
    # Short ranges: integer positions as dots on the continuous curve (fractional positions)
    few = length <= _DOTTED_LENGTH
    between = np.linspace(0.0, length - 1.0, 10 * (length - 1) + 1) if few else positions
    curves = (
        sinusoidal(between, d_model, base=base, convention=name, dtype=np.float64) if few else table
    )
    layout = feature_slices(d_model, name)
    index = channel_frequency_index(layout, d_model)
    kind = channel_kinds(layout, d_model)

    fig = _new_figure(9.0, 5.0)
    ax = fig.add_subplot()
    for channel in picked:
        k = int(index[channel])
        label = (
            f"channel {channel}: zero column"
            if k < 0
            else f"channel {channel}: {kind[channel]}, λ = {lam[k]:.3g}"
        )
        (line,) = ax.plot(between, curves[:, channel], lw=1.0 if few else 0.8, label=label)
        if few:
            ax.plot(positions, table[:, channel], ".", color=line.get_color(), markersize=4)
    ax.set_xlabel("position (tokens)")
    ax.xaxis.set_major_locator(_index_locator())
    ax.set_ylabel("PE value (dimensionless)")
    ax.set_ylim(-1.1, 1.1)
    ax.set_xlim(-0.5, length - 0.5)
    ax.grid(alpha=0.3)
    ax.legend(
        title="λ: wavelength in positions",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize="small",
    )
    ax.set_title(
        f"Channels over position\n{_setting(d_model, base, name)}"
        + _sampled(len(positions), length, "curves through")
    )
    return _finish(fig, target)


def wavelength_plot(
    d_model: int = 128,
    *,
    base: float = 10000.0,
    convention: str = "paper",
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """The wavelength 2π/ω_k of each frequency (channel pair) on a log scale.

    Horizontal lines mark 2π (the shortest wavelength any schedule starts from) and base·2π
    (the bound the paper quotes for the longest).

    Args:
        d_model: number of channels, an integer >= 1 (>= 2 under ``tensor2tensor``, whose
            d_model = 1 has no frequency).
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.
        path: ``None``, or a file name ending in ``.png`` or ``.svg`` to also save the figure.

    Returns:
        the :class:`matplotlib.figure.Figure`.

    >>> fig = wavelength_plot(64)
    >>> fig.axes[0].get_yscale()
    'log'
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    name = _convention_name(convention)
    _require_frequencies(d_model, base, name)
    target = _check_path(path)

    info = analysis.wavelengths(d_model, base=base, convention=name)
    lam = np.asarray(info.wavelengths, dtype=np.float64)
    k = np.arange(lam.shape[0])

    fig = _new_figure(8.0, 5.0)
    ax = fig.add_subplot()
    ax.axhline(2 * np.pi, color="tab:gray", ls="--", lw=1, label="2π (≈ 6.28)")
    ax.axhline(
        base * 2 * np.pi,
        color="tab:red",
        ls=":",
        lw=1.2,
        label=f"base·2π (≈ {base * 2 * np.pi:.4g})",
    )
    marker = "o" if lam.shape[0] <= 64 else None
    ax.plot(k, lam, marker=marker, markersize=3, lw=1.5, label="wavelength 2π/ω_k")
    ax.set_yscale("log")
    ax.set_xlabel("frequency index k (channel pair)")
    ax.set_ylabel("wavelength (positions)")
    ax.xaxis.set_major_locator(_index_locator())
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right", fontsize="small")
    spread = f"longest/shortest = {info.longest / info.shortest:.4g}"
    if info.ratio is not None and lam.shape[0] >= 2:
        spread += f", neighbour ratio = {info.ratio:.4g}"
    ax.set_title(
        f"Wavelengths of {lam.shape[0]} {'frequency' if lam.shape[0] == 1 else 'frequencies'}"
        f" ({spread})\n{_setting(d_model, base, name)}"
    )
    return _finish(fig, target)


def similarity_plot(
    length: int = 100,
    d_model: int = 128,
    *,
    base: float = 10000.0,
    convention: str = "paper",
    metric: str = "dot",
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """Two panels: the similarity of every pair of positions, and its mean against distance.

    Both come from :func:`posenc.analysis.similarity`. Left: the ``(length, length)`` matrix,
    its colour scale fitted to its values: sequential (``viridis``, from the smallest value to
    the largest) when none is negative, diverging (``RdBu_r``) centred at 0 otherwise, with a
    labelled colour bar. Right: the profile, the mean similarity of the pairs at each
    distance ``|p - q|``.

    Above 2048 positions the matrix is drawn from 2048 evenly spaced positions (more than a
    screen shows), and the profile from about ``2·sqrt(length)`` positions whose differences
    still cover every distance ``0 .. length-1``. The profile is then exact whenever the
    similarity depends on distance only (every sine has its cosine partner: even
    ``d_model``, or the tensor2tensor convention); for an odd ``d_model`` under ``paper`` or
    ``marian`` it is the mean over that subset of pairs. Above about 10^6 positions that
    subset would exceed 2048 positions; the profile then shows sampled distances (every
    distance below 1024, and bands of 1024 consecutive distances spread evenly up to
    ``length - 1``) and its title says so, so time and memory stay bounded at any length.

    Args:
        length: number of positions (``0 .. length-1``), an integer >= 2.
        d_model: number of channels, an integer >= 1.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.
        metric: ``"dot"`` (default) or ``"cosine"``.
        path: ``None``, or a file name ending in ``.png`` or ``.svg`` to also save the figure.

    Returns:
        the :class:`matplotlib.figure.Figure` (matrix axes, its colour bar, profile axes).

    >>> fig = similarity_plot(32, 16, metric="cosine")
    >>> fig.axes[0].images[0].get_array().shape
    (32, 32)
    """
    length = _check_length(length, minimum=2)
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    name = _convention_name(convention)
    if metric not in ("dot", "cosine"):
        raise ValueError(f"metric must be 'dot' or 'cosine', got {metric!r}")
    target = _check_path(path)

    shown, profile = similarity_views(length, d_model, base, name, metric)

    what = "dot product" if metric == "dot" else "cosine similarity"
    fig = _new_figure(12.5, 5.2, wspace=0.06)
    left, right = fig.subplots(1, 2, width_ratios=(1.0, 1.15))

    matrix = shown.matrix
    cmap, vmin, vmax = _fitted_scale(matrix)
    low, high = _extent(shown.positions)
    image = left.imshow(
        matrix,
        cmap=cmap,
        vmin=vmin,
        vmax=vmax,
        interpolation="auto",  # nearest when each cell is >= 3 pixels, else anti-aliased
        extent=(low, high, high, low),
    )
    left.xaxis.set_major_locator(_index_locator())
    left.yaxis.set_major_locator(_index_locator())
    left.set_xlabel("position q (tokens)")
    left.set_ylabel("position p (tokens)")
    left.set_title("similarity matrix" + _sampled(len(shown.positions), length, ""))
    colorbar = fig.colorbar(image, ax=left, shrink=0.9)
    colorbar.set_label(
        ("PE[p]·PE[q]" if metric == "dot" else "cosine(PE[p], PE[q])") + " (dimensionless)"
    )

    marker = "." if profile.distances.shape[0] <= 200 else None
    right.plot(profile.distances, profile.profile, marker=marker, markersize=4, lw=1.2)
    right.axhline(0.0, color="tab:gray", lw=0.8)
    right.xaxis.set_major_locator(_index_locator())
    right.set_xlabel("distance |p - q| (positions)")
    right.set_ylabel(f"mean {what} (dimensionless)")
    right.set_xlim(0, float(profile.distances[-1]))
    right.grid(alpha=0.3)
    sampled = profile.distances.shape[0] < length
    right.set_title("similarity vs distance" + (" (sampled distances)" if sampled else ""))

    fig.suptitle(f"Similarity of encodings ({what})\n{_setting(d_model, base, name)}")
    return _finish(fig, target)


#: (label, precision_report dtype, method name, colour, line style) of each precision curve.
_PRECISION_CURVES = (
    ("posenc, float32", "float32", "posenc", "tab:blue", "-"),
    ("float32 recipe", "float32", "float32 recipe", "tab:orange", "-"),
    ("posenc, bfloat16", "bfloat16", "posenc", "tab:blue", "--"),
    ("bfloat16 recipe", "bfloat16", "recipe in bfloat16", "tab:orange", "--"),
)


def precision_plot(
    max_position: int = 10**6,
    d_model: int = 128,
    *,
    base: float = 10000.0,
    convention: str = "paper",
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """Max absolute error against position, log-log, for four ways to build a table.

    For each ``L`` on a log grid (4 per decade, from 10 up to ``max_position``)
    :func:`posenc.analysis.precision_report` measures, over 8 positions below ``L`` (the last
    four and four random ones) and all channels, the max error against a wider-precision
    reference of: posenc in float32, the float32 recipe (:func:`posenc.analysis.float32_recipe`),
    posenc rounded once to bfloat16, and the recipe with every operation in bfloat16. Dotted
    lines mark half a unit in the last place of each dtype for values in [0.5, 1), the
    largest error of one correct rounding of a value near ±1.

    Args:
        max_position: the largest ``L``, an integer between 10 and 2**53.
        d_model: number of channels, an integer >= 1 (>= 2 under ``tensor2tensor``).
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.
        path: ``None``, or a file name ending in ``.png`` or ``.svg`` to also save the figure.

    Returns:
        the :class:`matplotlib.figure.Figure`. An error of exactly 0 is not drawn (log scale).

    >>> fig = precision_plot(10**4, 16)
    >>> fig.axes[0].get_xscale(), fig.axes[0].get_yscale()
    ('log', 'log')
    """
    max_position = check_int("max_position", max_position, minimum=10)
    if max_position > 2**53:
        raise ValueError(f"max_position must be at most 2**53, got {max_position}")
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    name = _convention_name(convention)
    _require_frequencies(d_model, base, name)
    target = _check_path(path)

    grid = precision_grid(max_position)
    curves = [curve[:3] for curve in _PRECISION_CURVES]
    errors = precision_errors(grid, d_model, base, name, curves)

    fig = _new_figure(8.5, 5.5)
    ax = fig.add_subplot()
    for label, _, _, colour, style in _PRECISION_CURVES:
        values = np.asarray(errors[label], dtype=np.float64)
        values = np.where(values > 0, values, np.nan)  # log scale cannot show 0
        ax.plot(grid, values, color=colour, ls=style, marker="o", markersize=3, label=label)
    for dtype_label, half_ulp in (("float32", 2.0**-25), ("bfloat16", 2.0**-9)):
        ax.axhline(half_ulp, color="tab:gray", ls=":", lw=1)
        ax.annotate(
            f"one rounding to {dtype_label}: ½ ulp in [0.5, 1) = {half_ulp:.2g}",
            xy=(0.01, half_ulp),
            xycoords=("axes fraction", "data"),
            xytext=(0, 3),
            textcoords="offset points",
            fontsize="small",
            color="tab:gray",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("L: positions sampled below L (tokens)")
    ax.set_ylabel("max absolute error (PE units)")
    ax.grid(alpha=0.3, which="major")
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 0.1), fontsize="small")
    ax.set_title(f"Accuracy of the table vs position\n{_setting(d_model, base, name)}")
    return _finish(fig, target)


#: Marker of each shift and colour of each table (``SHIFT_TABLES``) in :func:`shift_plot`.
_SHIFT_MARKERS = ("o", "s", "^", "v", "D", "P")
_SHIFT_COLOURS = ("tab:green", "tab:blue", "tab:orange")


def shift_plot(
    max_position: int = 10**6,
    d_model: int = 128,
    *,
    shifts: Sequence[int] = (1, 10, 100),
    base: float = 10000.0,
    convention: str = "paper",
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """How well ``PE[p+k] = M_k @ PE[p]`` holds against position, log-log.

    M_k is :func:`posenc.analysis.shift_matrix`, the exact rotation by ``k`` positions. For
    each ``P`` on a log grid (4 per decade, from 10 up to ``max_position``) and each shift
    ``k``, :func:`posenc.analysis.check_shift` gives ``max |PE[p+k] - M_k @ PE[p]|`` over the
    64 positions ``p = P .. P+63`` and all channels, for three tables of those positions:
    posenc's in float64, posenc's in float32 and the float32 recipe
    (:func:`posenc.analysis.float32_recipe`). Colour is the table, the marker the shift.

    Grey lines are the scales that explain the curves: ``p·2^-53`` and ``p·2^-24``, the
    bound on one rounding of the angle ``p·ω`` (ω = 1) in float64 and in float32 arithmetic,
    drawn for the largest position compared (``p = P + 63 + max(shifts)``, which is why the
    curves level off below P ≈ 100), and ``(1 + √2)·2^-25`` ≈ 7.2e-8, the most that rounding
    the stored values to float32 can add (half a unit in the last place on ``PE[p+k]``, √2
    times that through the rotation).

    Args:
        max_position: the largest ``P``, an integer >= 10; positions up to
            ``max_position + 63 + max(shifts)`` must not exceed 2**53.
        d_model: number of channels, an integer >= 1 (>= 2 under ``tensor2tensor``).
        shifts: one to six distinct integer shifts ``k`` in ``1 .. 10_000``.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.
        path: ``None``, or a file name ending in ``.png`` or ``.svg`` to also save the figure.

    Returns:
        the :class:`matplotlib.figure.Figure`. A residual of exactly 0 is not drawn (log scale).

    >>> fig = shift_plot(10**4, 16, shifts=[1, 5])
    >>> fig.axes[0].get_xscale(), fig.axes[0].get_yscale()
    ('log', 'log')
    """
    max_position = check_int("max_position", max_position, minimum=10)
    d_model = check_int("d_model", d_model, minimum=1)
    picked = check_shifts(shifts)
    if max_position + SHIFT_WINDOW - 1 + max(picked) > 2**53:
        raise ValueError(
            f"max_position + 63 + max(shifts) must be at most 2**53, got {max_position} and "
            f"shifts up to {max(picked)}"
        )
    base = check_base("base", base)
    name = _convention_name(convention)
    _require_frequencies(d_model, base, name)
    target = _check_path(path)

    grid = precision_grid(max_position)
    residuals = shift_residuals(grid, picked, d_model, base, name)

    fig = _new_figure(10.0, 5.8)
    ax = fig.add_subplot()
    for label, colour in zip(SHIFT_TABLES, _SHIFT_COLOURS, strict=True):
        for k, marker in zip(picked, _SHIFT_MARKERS, strict=False):
            values = np.asarray(residuals[(label, k)], dtype=np.float64)
            values = np.where(values > 0, values, np.nan)  # log scale cannot show 0
            ax.plot(
                grid,
                values,
                color=colour,
                marker=marker,
                markersize=4,
                lw=1.0,
                fillstyle="none",
                label=f"{label}, k = {k}",
            )
    last = (grid + SHIFT_WINDOW - 1 + max(picked)).astype(np.float64)  # largest p compared
    guides = (
        (last * 2.0**-53, "--", "p·2⁻⁵³: one float64 rounding of the angle"),
        (last * 2.0**-24, "-.", "p·2⁻²⁴: one float32 rounding of the angle"),
        (np.full(grid.shape, (1 + np.sqrt(2)) * 2.0**-25), ":", "(1+√2)·2⁻²⁵: float32 storage"),
    )
    for level, style, label in guides:
        ax.plot(grid, level, color="tab:gray", ls=style, lw=1.0, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"P: residual over positions p = P .. P+{SHIFT_WINDOW - 1} (tokens)")
    ax.set_ylabel("max |PE[p+k] - M_k·PE[p]| (PE units)")
    ax.grid(alpha=0.3, which="major")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.set_title(
        f"Shift property PE[p+k] = M_k·PE[p]: residual vs position\n{_setting(d_model, base, name)}"
    )
    return _finish(fig, target)


def rotation_plot(
    p: int = 5,
    k: int = 3,
    d_model: int = 8,
    *,
    pair: int = 1,
    base: float = 10000.0,
    convention: str = "paper",
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """The shift as a rotation: one (sin, cos) pair turning on the unit circle from p to p+k.

    Left: the unit circle in the plane (cos channel, sin channel) of frequency ``pair``; the
    pair's value at position ``p`` is the point at angle ``p·ω``, at ``p + k`` the point at
    angle ``(p+k)·ω``, and the arc between them is traced through fractional positions (dots
    at the integer ones). Right: the 2x2 block of ``M_k`` (:func:`posenc.analysis.shift_matrix`)
    on the pair's two channels, ``[[cos kω, sin kω], [-sin kω, cos kω]]``, and the product
    that moves the pair from ``p`` to ``p+k``, with numbers. The block does not depend on p.

    Args:
        p: the starting position, an integer >= 0.
        k: the shift, an integer >= 1; ``p + k`` at most 2**53.
        d_model: number of channels, an integer >= 2.
        pair: the frequency index (channel pair), in ``0 .. (number of pairs - 1)``.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.
        path: ``None``, or a file name ending in ``.png`` or ``.svg`` to also save the figure.

    Returns:
        the :class:`matplotlib.figure.Figure` (the circle axes, then the block axes).

    >>> fig = rotation_plot(5, 3, 8, pair=1)
    >>> [t.get_text() for t in fig.axes[1].texts][1]
    '[[ 0.9553   0.2955]'
    """
    p, k, d_model, pair = check_rotation(p, k, d_model, pair)
    base = check_base("base", base)
    name = _convention_name(convention)
    target = _check_path(path)
    r = rotation(p, k, d_model, pair, base, name, steps=max(2, 20 * k + 1))
    (s0, c0), (s1, c1) = r["start"], r["end"]

    fig = _new_figure(10.0, 4.6, wspace=0.02)
    circle, matrix = fig.subplots(1, 2, width_ratios=(1.0, 1.25))
    ring = np.linspace(0.0, 2.0 * np.pi, 361)
    circle.plot(np.cos(ring), np.sin(ring), color="tab:gray", lw=0.8, label="_unit circle")
    circle.plot(r["path"][:, 1], r["path"][:, 0], color="tab:green", lw=2.0, label="_arc")
    dots = r["path"][::20] if k <= 50 else r["path"][:0]  # the integer positions
    circle.plot(dots[:, 1], dots[:, 0], ".", color="tab:green", label="_integer positions")
    for (s, c), colour, label in (
        ((s0, c0), "tab:blue", f"PE[{p}]"),
        ((s1, c1), "tab:orange", f"PE[{p + k}]"),
    ):
        circle.plot([0.0, c], [0.0, s], color=colour, lw=1.0, label="_radius")
        circle.plot([c], [s], "o", color=colour, markersize=7, label=label)
    circle.set(xlim=(-1.2, 1.2), ylim=(-1.2, 1.2), aspect="equal")
    circle.set(xlabel=f"channel {r['cos']}: cos(p·ω)", ylabel=f"channel {r['sin']}: sin(p·ω)")
    circle.axhline(0.0, color="tab:gray", lw=0.5)
    circle.axvline(0.0, color="tab:gray", lw=0.5)
    circle.legend(loc="lower left", fontsize="small")
    circle.set_title(
        f"pair {pair}: ω = {r['omega']:.4g} rad per position; k·ω = {k * r['omega']:.4g} rad"
    )

    matrix.set_axis_off()
    lines = rotation_lines(r, p, k)
    for row, (text, family) in enumerate(lines):
        matrix.text(
            0.0,
            0.95 - 0.12 * row,
            text,
            family=family,
            fontsize=10.5,
            transform=matrix.transAxes,
            va="top",
        )
    fig.suptitle(f"Shifting by k = {k} turns each pair by k·ω\n{_setting(d_model, base, name)}")
    return _finish(fig, target)


_PlotFunction = Callable[..., Figure]

#: Name → figure function, as used by ``posenc plot KIND``: ``"heatmap"`` (:func:`heatmap`),
#: ``"sinusoids"`` (:func:`sinusoids`), ``"wavelengths"`` (:func:`wavelength_plot`),
#: ``"similarity"`` (:func:`similarity_plot`), ``"precision"`` (:func:`precision_plot`) and
#: ``"shift"`` (:func:`shift_plot`) and ``"rotation"`` (:func:`rotation_plot`) take ``base=``
#: and ``convention=``; the attention-bias figures ``"bias"`` (:func:`bias_plot`),
#: ``"buckets"`` (:func:`bucket_plot`) and ``"slopes"`` (:func:`slope_plot`) do not. Every
#: function takes ``path=`` and returns a Figure.
PLOTS: Mapping[str, _PlotFunction] = MappingProxyType(
    {
        "heatmap": heatmap,
        "sinusoids": sinusoids,
        "wavelengths": wavelength_plot,
        "similarity": similarity_plot,
        "precision": precision_plot,
        "shift": shift_plot,
        "rotation": rotation_plot,
        "bias": bias_plot,
        "buckets": bucket_plot,
        "slopes": slope_plot,
    }
)
