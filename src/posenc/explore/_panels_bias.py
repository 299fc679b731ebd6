"""Panels 13-14: attention biases. ALiBi's slope per head and its bias against distance; T5's
and DeBERTa-v2's relative-position buckets, exact near zero and logarithmic further out.

Every slope, bias and bucket is a call to posenc's ``_bias`` core in the convention chosen.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _figure_data as fd
from .._bias.alibi import alibi_bias, alibi_slopes
from .._bias.buckets import deberta_buckets, t5_buckets
from . import _charts as ch
from ._controls import Control
from ._panel import Panel, result

N = ch.number
#: Points of a curve against distance or relative position.
CURVE_POINTS = 1001
#: The most heads the ALiBi panel draws a bias curve for.
MAX_SHOWN_HEADS = 8
MAX_HEADS = 64
#: The largest max_distance of the bucket panel (the map spans twice as far).
MAX_BUCKET_DISTANCE = 100_000


def parse_heads(text: str, heads: int) -> list[int]:
    """``"1, 4"`` -> ``[1, 4]`` (heads numbered from 1); ``"auto"``: the first, middle, last.

    >>> parse_heads("auto", 12), parse_heads(" 3,1,3 ", 12)
    ([1, 6, 12], [3, 1])
    """
    text = text.strip()
    if text in ("", "auto"):
        return sorted({1, (heads + 1) // 2, heads})
    values: list[int] = []
    for item in text.split(","):
        try:
            value = int(item)
        except ValueError:
            raise ValueError(
                f"shown must be comma-separated head numbers or 'auto', got {text!r}"
            ) from None
        if not 1 <= value <= heads:
            raise ValueError(f"shown must name heads in 1 .. {heads}, got {value}")
        values.append(value)
    if len(values) > MAX_SHOWN_HEADS:
        raise ValueError(f"shown must name at most {MAX_SHOWN_HEADS} heads, got {len(values)}")
    return list(dict.fromkeys(values))


def alibi_panel(v: dict[str, Any]) -> dict[str, Any]:
    n, max_bias, convention, far = v["heads"], v["max_bias"], v["convention"], v["distance"]
    shown = parse_heads(v["shown"], n)
    slopes = alibi_slopes(n, max_bias=max_bias, convention=convention)
    exact = alibi_slopes(n, max_bias=max_bias)
    head = np.arange(1, n + 1)
    low, high = ch.bounds(np.log10(slopes), pad=0.08)
    slope_chart = ch.lines(
        ch.axis("head h", 0.5, n + 0.5),
        ch.axis("slope m_h (log scale)", 10**low, 10**high, log=True),
        [ch.series(f"slope ({convention})", head, np.log10(slopes), mode="points", colour=0)],
    )
    distances = fd.even_positions(far + 1, CURVE_POINTS)
    # the query at position `far`, keys `far - d`: the bias of each distance d
    bias = alibi_bias(n, [far], far - distances, max_bias=max_bias, convention=convention)[:, 0]
    bias_chart = ch.lines(
        ch.axis("distance |j - i| (query - key)", 0, max(far, 1)),
        ch.fitted("bias added to the score (float32)", bias[np.array(shown) - 1]),
        [ch.series(f"head {h}", distances, bias[h - 1], colour=i) for i, h in enumerate(shown)],
    )
    relative = (slopes.astype(np.float64) - exact) / exact
    rounding_chart = ch.lines(
        ch.axis("head h", 0.5, n + 0.5),
        ch.fitted("(slope - exact slope) / exact slope", relative),
        [ch.series(f"{convention} rounding", head, relative, mode="points", colour=1)],
    )
    return result(
        f"ALiBi, {n} heads, max_bias {max_bias:g}, convention {convention!r}: head h adds "
        f"-m_h·|j - i| to the score of query i and key j; at distance {far} head {shown[0]} "
        f"adds {float(bias[shown[0] - 1, -1]):.6g}. The last figure is the convention's "
        "rounding of each slope, relative to 2^(-max_bias·k/n) in float64." + _head_rule(n),
        [
            ("slope_first", "slope of head 1", N(slopes[0])),
            ("slope_last", f"slope of head {n}", N(slopes[-1])),
            *[
                (f"bias_{h}", f"bias of head {h} at distance {far} (float32)", N(bias[h - 1, -1]))
                for h in shown
            ],
            ("rounding", "largest |slope - exact| / exact", N(np.max(np.abs(relative)))),
        ],
        [slope_chart, bias_chart, rounding_chart],
    )


def _head_rule(n: int) -> str:
    """Why the slopes of ``n`` heads zig-zag when ``n`` is not a power of two (or nothing)."""
    if n & (n - 1) == 0:
        return ""
    low = 1 << (n.bit_length() - 1)
    return (
        f" {n} is not a power of two: the slopes are those of {low} heads (heads 1 .. {low}), "
        f"then every other slope of {2 * low} heads (the ones between them) for the remaining "
        f"{n - low}, so the sequence starts again near the top at head {low + 1}: the "
        "zig-zag is the paper's rule for such head counts, not a bug."
    )


def _buckets(v: dict[str, Any], relative: Any) -> np.ndarray:
    """The bucket of each relative position ``key - query`` under the panel's scheme."""
    size, far = v["num_buckets"], v["max_distance"]
    rel = np.asarray(relative, dtype=np.int64)
    if v["scheme"] == "T5":
        return t5_buckets(
            rel, bidirectional=v["bidirectional"] == "yes", num_buckets=size, max_distance=far
        )
    if far <= size // 2 + 1:
        raise ValueError(
            f"max_distance (DeBERTa's max_relative_positions) must be greater than "
            f"num_buckets // 2 + 1 = {size // 2 + 1}, got {far}"
        )
    return deberta_buckets(-rel, bucket_size=size, max_position=far)  # DeBERTa: query - key


def _exact_side(v: dict[str, Any]) -> int:
    """Distances ``0 .. e-1`` of one side that have a bucket each."""
    size = int(v["num_buckets"])
    if v["scheme"] == "T5":
        side = size // 2 if v["bidirectional"] == "yes" else size
        return side // 2
    return size // 2 + 1


def _regions(
    rel: np.ndarray, buckets: np.ndarray, exact: int, far: int, scheme: str, x: Any = None
) -> list[dict[str, Any]]:
    """One curve per region of the bucket map: exact, logarithmic, beyond max_distance."""
    distance = np.abs(rel)
    regions = [
        ("exact (a bucket per distance)", distance < exact),
        ("logarithmic", (distance >= exact) & (distance < far)),
        (f"distance >= max_distance = {far}"
         + (" (the last bucket)" if scheme == "T5" else " (not clamped)"), distance >= far),
    ]  # fmt: skip
    return [
        ch.series(name, rel if x is None else x, np.where(inside, buckets, np.nan), colour=i)
        for i, (name, inside) in enumerate(regions)
        if inside.any()
    ]


def buckets_panel(v: dict[str, Any]) -> dict[str, Any]:
    far, probe, scheme = v["max_distance"], v["position"], v["scheme"]
    span = 2 * far
    rel = np.unique(np.round(np.linspace(-span, span, CURVE_POINTS)).astype(np.int64))
    buckets = _buckets(v, rel).astype(np.float64)
    exact = _exact_side(v)
    curves = _regions(rel, buckets, exact, far, scheme)
    probe_bucket = int(_buckets(v, [probe])[0])
    curves.append(ch.series(f"r = {probe}", [probe], [probe_bucket], mode="points", colour=6))
    low, high = ch.bounds(buckets, [probe_bucket], pad=0.05)
    map_chart = ch.lines(
        ch.axis("relative position r = key - query", -span, span),
        ch.axis("bucket", low, high),
        curves,
    )
    # one side, keys before the query, on a log axis: the log buckets climb in equal steps
    side = np.unique(np.round(np.geomspace(1, span, CURVE_POINTS)).astype(np.int64))
    side_buckets = _buckets(v, -side).astype(np.float64)
    low, high = ch.bounds(side_buckets, pad=0.05)
    log_chart = ch.lines(
        ch.axis("distance d of a key before the query (log scale)", 1, span, log=True),
        ch.axis("bucket of r = -d", low, high),
        _regions(-side, side_buckets, exact, far, scheme, x=np.log10(side)),
    )
    every = np.arange(0, span + 1, dtype=np.int64)
    before = _buckets(v, -every)
    last = int(every[np.argmax(before == before.max())])
    distinct = np.unique(_buckets(v, np.arange(-span, span + 1))).size
    flag = (
        f", bidirectional {v['bidirectional']}"
        if scheme == "T5"
        else " (signed by side; bidirectional applies to T5 only)"
    )
    return result(
        f"{scheme} buckets, num_buckets {v['num_buckets']}, max_distance {far}{flag}: "
        f"distances below {exact} keep a bucket each, farther ones share logarithmic bins"
        + (" up to the last bucket." if scheme == "T5" else ", which keep growing slowly.")
        + f" The point marks r = {probe}, in bucket {probe_bucket}.",
        [
            ("bucket", f"bucket of r = {probe}", str(probe_bucket)),
            ("exact", "distances with a bucket each (per side)", str(exact)),
            ("last", f"first distance in the largest bucket up to {span}", str(last)),
            ("distinct", f"distinct buckets for r in -{span} .. {span}", str(distinct)),
        ],
        [map_chart, log_chart],
    )


PANELS = (
    Panel("alibi", "ALiBi: a slope per head", "Each head's penalty grows linearly with the "
          "distance to the key: heads with a steep slope look close by, heads with a shallow "
          "one look far.",
          (Control("heads", "heads (1 .. 64)", "int", 12, 1, MAX_HEADS, step=1),
           Control("max_bias", "max_bias (8 in the paper)", "float", 8.0, 0.125, 64.0, step=0.5),
           Control("convention", "convention (rounding)", "choice", "exact",
                   choices=("exact", "bloom", "mpt", "falcon")),
           Control("shown", "heads shown (comma-separated, from 1, or auto)", "text", "auto"),
           Control("distance", "largest distance", "int", 64, 1, 10**6, step=1)), alibi_panel),
    Panel("buckets", "T5 and DeBERTa buckets", "Near distances get a bucket each; farther "
          "ones share buckets that widen logarithmically, so the model cannot tell far keys "
          "apart.",
          (Control("num_buckets", "num_buckets", "int", 32, 2, 1024, step=1),
           Control("max_distance", "max_distance", "int", 128, 1, MAX_BUCKET_DISTANCE, step=1),
           Control("bidirectional", "bidirectional (T5: no for causal decoders)", "choice",
                   "yes", choices=("yes", "no")),
           Control("position", "relative position r to read", "int", -20,
                   -2 * MAX_BUCKET_DISTANCE, 2 * MAX_BUCKET_DISTANCE, step=1),
           Control("scheme", "scheme", "choice", "T5", choices=("T5", "DeBERTa-v2"))),
          buckets_panel),
)  # fmt: skip
