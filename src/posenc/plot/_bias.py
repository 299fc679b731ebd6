"""The attention-bias figures of :mod:`posenc.plot`: a bias per head against the relative
position, the T5/DeBERTa bucket maps, and ALiBi's slopes in each framework's rule."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .._checks import as_float
from .._figure_data import bias_curves, bucket_regions, extent, slope_rows
from .._figure_data import check_path as _check_path
from ._canvas import Figure, _finish, _index_locator, _new_figure

__all__ = ["bias_plot", "bucket_plot", "slope_plot"]

_REGION_COLOURS = {"exact": "tab:green", "logarithmic": "tab:orange", "last bucket": "tab:gray"}
_RULE_STYLES = {
    "bloom": ("BLOOM (float32)", "tab:blue", "o"),
    "mpt": ("MPT (float32)", "tab:green", "s"),
    "falcon": ("Falcon (bfloat16)", "tab:red", "^"),
}


def bias_plot(
    heads: int | None = None,
    *,
    distance: int = 64,
    max_bias: float = 8.0,
    table: Any = None,
    num_buckets: int = 32,
    max_distance: int = 128,
    bidirectional: bool = True,
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """What each head adds to the score against the relative position ``key − query``.

    Left: one curve per head (16 evenly spaced heads when there are more); right: every head
    as a row of an image (512 evenly spaced heads when there are more). Above 10,000
    relative positions, the curves are drawn through 9,999 evenly spaced ones (0 and both
    ends included; the image through 2047), and the title says so. ALiBi (default):
    ``−m_h·|r|`` with the exact slopes of :func:`posenc.alibi_slopes`. With ``table`` (a T5
    model's learned ``(num_buckets, heads)`` weights), the T5 bias ``table[bucket(r), h]``;
    ``heads`` is then the table's. Numbers from :func:`posenc.analysis.bias_profile`.

    Args:
        heads: ALiBi's number of heads, an int in ``[1, 2**16]`` (default 8); T5: None or the
            table's.
        distance: relative positions ``-distance .. distance``, an int in ``[1, 2**20]``.
        max_bias: ALiBi's ``max_bias``.
        table, num_buckets, max_distance, bidirectional: T5's weights (finite, within
            +-1e300: an axis cannot span more) and bucket settings.
        path: ``None``, or a file name ending in ``.png`` or ``.svg`` to also save it.

    Returns:
        the Figure (curves axes, image axes, its colour bar).

    >>> fig = bias_plot(4, distance=8)
    >>> fig.axes[1].images[0].get_array().shape
    (4, 17)
    """
    target = _check_path(path)
    bias_max = as_float("max_bias", max_bias, "a positive finite number")
    data = bias_curves(heads, distance, bias_max, table, (num_buckets, max_distance, bidirectional))
    heads, curves, image_data = data.heads, data.curves, data.image
    fig = _new_figure(12.5, 4.8, wspace=0.06)
    left, right = fig.subplots(1, 2)
    colours = _colours(data.curve_heads.size)
    for colour, values, h in zip(colours, curves.values, data.curve_heads, strict=True):
        left.plot(curves.relative, values, color=colour, lw=1.2, label=f"head {int(h)}")
    left.xaxis.set_major_locator(_index_locator())
    left.set_xlabel("relative position key − query (tokens)")
    left.set_ylabel("bias added to the score (logits)")
    left.grid(alpha=0.3)
    left.legend(fontsize="x-small", ncol=2)
    some = data.curve_heads.size < heads
    left.set_title("per head" + (f" ({data.curve_heads.size} of {heads} heads)" if some else ""))
    low, high = extent(image_data.relative)
    image = right.imshow(
        image_data.values, aspect="auto", cmap="viridis", interpolation="nearest",
        extent=(low, high, heads - 0.5, -0.5),
    )  # fmt: skip
    right.set_xlabel("relative position key − query (tokens)")
    right.set_ylabel("head")
    right.yaxis.set_major_locator(_index_locator())
    drawn = data.image_heads.size
    right.set_title(
        "every head" if drawn == heads else f"{drawn:,} evenly spaced of {heads:,} heads"
    )
    fig.colorbar(image, ax=right, shrink=0.9).set_label("bias (logits)")
    if curves.method == "alibi":
        what = f"ALiBi, {heads} heads, max_bias={bias_max:g}, exact slopes"
    else:
        what = (f"T5 buckets over a learned table, {heads} heads, "
                f"num_buckets={num_buckets}, max_distance={max_distance}")  # fmt: skip
    if curves.relative.size < data.positions:
        what += (
            f"\n({curves.relative.size:,} evenly spaced of {data.positions:,} relative "
            "positions drawn)"
        )
    fig.suptitle(f"Attention bias against relative position\n{what}")
    return _finish(fig, target)


def bucket_plot(
    method: str = "t5",
    *,
    distance: int = 256,
    num_buckets: int | None = None,
    max_distance: int | None = None,
    bidirectional: bool = True,
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """The bucket of every relative position ``key − query``, with the exact region (each
    distance its own bucket), the logarithmic one, and T5's last bucket (every distance from
    ``max_distance`` on) shaded. Numbers from :func:`posenc.analysis.bucket_map`; above 10,000
    relative positions the map is drawn through 9,999 evenly spaced ones, as the title says.

    Args:
        method: ``"t5"`` (default 32 buckets, max_distance 128) or ``"deberta"`` (default
            ``bucket_size`` 256, ``max_position`` 512; buckets of ``query − key``, the
            model's sign).
        distance: relative positions ``-distance .. distance``, an int in ``[1, 2**20]``.
        num_buckets, max_distance: the bucket settings (T5's names; DeBERTa's
            ``position_buckets`` and ``max_relative_positions``).
        bidirectional: T5: False for a causal decoder.
        path: ``None``, or a file name ending in ``.png`` or ``.svg`` to also save it.

    >>> fig = bucket_plot("t5", distance=40, num_buckets=8, max_distance=16)
    >>> fig.axes[0].get_xlabel()
    'relative position key − query (tokens)'
    """
    target = _check_path(path)
    m, regions = bucket_regions(method, distance, num_buckets, max_distance, bidirectional)
    fig = _new_figure(9.0, 4.8)
    ax = fig.subplots()
    ax.step(m.relative, m.buckets, where="mid", color="black", lw=1.2)
    for label, first, last in regions:
        colour = _REGION_COLOURS[label]
        right = -first + 0.5 if first or not m.bidirectional else last + 0.5
        ax.axvspan(-last - 0.5, right, color=colour,
                   alpha=0.15, label=f"{label}: |r| in [{first}, {last}]")  # fmt: skip
        if first and m.bidirectional:
            ax.axvspan(first - 0.5, last + 0.5, color=colour, alpha=0.15)
    ax.xaxis.set_major_locator(_index_locator())
    ax.yaxis.set_major_locator(_index_locator())
    ax.set_xlabel("relative position key − query (tokens)")
    ax.set_ylabel("bucket" + (" (signed, of query − key)" if m.method == "deberta" else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    if m.method == "t5":
        direction = "bidirectional" if m.bidirectional else "causal"
        what = f"T5, num_buckets={m.num_buckets}, max_distance={m.max_distance}, {direction}"
    else:
        what = f"DeBERTa, bucket_size={m.num_buckets}, max_position={m.max_distance}"
    positions = 2 * int(m.relative[-1]) + 1
    if m.relative.size < positions:
        what += f"\n({m.relative.size:,} evenly spaced of {positions:,} relative positions drawn)"
    ax.set_title(f"Buckets against relative position\n{what}")
    return _finish(fig, target)


def slope_plot(
    heads: int = 16, *, max_bias: float = 8.0, path: str | os.PathLike[str] | None = None
) -> Figure:
    """ALiBi's slope per head: exact, and as BLOOM (float32), MPT (float32) and Falcon
    (bfloat16) compute it; right, each rule's distance from the exact slope in float32 ulps.
    Numbers from :func:`posenc.analysis.slope_table`.

    Args:
        heads: number of heads, an int in ``[1, 2**16]``.
        max_bias: 8 in the paper, at most 126 (float32's normal range); with another value
            than 8 only MPT's rule is drawn.
        path: ``None``, or a file name ending in ``.png`` or ``.svg`` to also save it.

    >>> fig = slope_plot(12)
    >>> len(fig.axes[0].get_lines())
    4
    """
    target = _check_path(path)
    t = slope_rows(heads, max_bias)
    index = np.arange(t.heads)
    fig = _new_figure(12.5, 4.8, wspace=0.06)
    left, right = fig.subplots(1, 2)
    left.plot(index, t.exact, "k-", lw=1.0, label="exact (float64)")
    for rule, values in t.rules.items():
        label, colour, marker = _RULE_STYLES[rule]
        left.plot(index, values, marker, color=colour, ms=4, ls="none", label=label)
        right.plot(index, t.ulps[rule], marker + "-", color=colour, ms=4, lw=0.8, label=label)
    left.set_yscale("log", base=2)
    for ax in (left, right):
        ax.xaxis.set_major_locator(_index_locator())
        ax.set_xlabel("head")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    left.set_ylabel("slope m (per token)")
    left.set_title("slopes")
    right.set_yscale("symlog", linthresh=1.0)
    right.set_ylabel("rule − exact (float32 ulps)")
    right.set_title("distance from the exact slope")
    fig.suptitle(f"ALiBi slopes per head\n{t.heads} heads, max_bias={t.max_bias:g}")
    return _finish(fig, target)


def _colours(count: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(x) for x in np.linspace(0.0, 0.9, count)]
