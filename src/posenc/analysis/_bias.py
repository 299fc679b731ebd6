"""Attention biases, seen: per head against the relative position, bucket maps, slopes.

- :func:`bias_profile`: what each head adds to the score at each relative position (ALiBi's
  slopes, or a T5 bucket table as a model learned it).
- :func:`bucket_map`: T5's and DeBERTa's bucket of each relative position, with the extent of
  the exact region and of the logarithmic one.
- :func:`slope_table`: the ALiBi slopes per head, exact and as BLOOM (float32), MPT (float32)
  and Falcon (bfloat16) compute them, with the distance in float32 ulps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .._bias.alibi import alibi_slopes
from .._bias.buckets import check_buckets, check_far, deberta_buckets, t5_buckets
from .._bias.positions import check_count, real_values
from .._checks import _show, check_allocation, check_int
from ._results import BiasProfile, BucketMap, SlopeTable

__all__ = [
    "bias_profile",
    "bias_profile_at",
    "bucket_map",
    "bucket_map_at",
    "check_distance",
    "check_table",
    "slope_table",
]

#: The largest ``distance`` the functions of this module take: ``2·distance + 1`` relative
#: positions (a figure has fewer pixels).
MAX_DISTANCE = 1 << 20

_RULES = ("bloom", "mpt", "falcon")


def check_distance(distance: Any) -> int:
    """The largest ``|r|`` shown: an int in ``[1, 2**20]``."""
    far = check_int("distance", distance, minimum=1)  # bounded before any size check
    if far > MAX_DISTANCE:
        raise ValueError(f"distance must be at most {MAX_DISTANCE} (2**20), got {far}")
    return far


def _relative(distance: Any) -> npt.NDArray[np.int64]:
    far = check_distance(distance)
    return np.arange(-far, far + 1, dtype=np.int64)


def check_table(table: Any, num_buckets: int) -> npt.NDArray[np.float64]:
    """T5's learned ``(num_buckets, heads)`` table as finite float64 numbers."""
    if table is None:
        raise ValueError(
            "method='t5' needs table=: the learned (num_buckets, heads) weights, e.g. "
            "model.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight"
        )
    values = real_values("table", table)  # a framework's parameter is read detached
    if values.ndim != 2 or values.shape[0] != num_buckets or values.shape[1] < 1:
        raise ValueError(
            f"table must have shape (num_buckets, heads) = ({num_buckets}, heads), got "
            f"{values.shape}"
        )
    return values


def bias_profile(
    method: str = "alibi",
    *,
    heads: int | None = None,
    distance: int = 64,
    max_bias: float = 8.0,
    table: Any = None,
    num_buckets: int = 32,
    max_distance: int = 128,
    bidirectional: bool = True,
) -> BiasProfile:
    """What each head adds to the attention score at each relative position ``key − query``
    from ``-distance`` to ``distance``.

    Args:
        method: ``"alibi"`` (``−m_h·|r|``, the paper's form, exact slopes) or ``"t5"``
            (``table[bucket(r), h]``, T5's buckets).
        heads: ALiBi: number of heads, an int >= 1 (default 8). T5: None (the table's
            second axis), or that number.
        distance: the largest ``|r|`` shown, an int in ``[1, 2**20]``.
        max_bias: ALiBi's ``max_bias`` (8 in the paper, MPT's ``alibi_bias_max``).
        table: T5: the learned ``(num_buckets, heads)`` weights (``relative_attention_bias.
            weight``, read detached); required for ``"t5"``.
        num_buckets, max_distance, bidirectional: T5's bucket settings (see
            :func:`posenc.t5_buckets`).

    Returns:
        :class:`BiasProfile`, ``values`` float64 ``(heads, 2·distance + 1)``; a result
        beyond the machine's memory (many heads and a long distance) is refused before it is
        allocated, naming ``heads`` (or ``table``) and ``distance``.

    >>> profile = bias_profile("alibi", heads=2, distance=2)
    >>> profile.relative
    array([-2, -1,  0,  1,  2])
    >>> profile.values
    array([[-0.125     , -0.0625    ,  0.        , -0.0625    , -0.125     ],
           [-0.0078125 , -0.00390625,  0.        , -0.00390625, -0.0078125 ]])
    """
    return bias_profile_at(
        method, _relative(distance), heads=heads, max_bias=max_bias, table=table,
        num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional,
    )  # fmt: skip


def bias_profile_at(
    method: str,
    relative: npt.NDArray[np.int64],
    *,
    heads: int | None = None,
    max_bias: float = 8.0,
    table: Any = None,
    num_buckets: int = 32,
    max_distance: int = 128,
    bidirectional: bool = True,
    rows: npt.NDArray[np.int64] | None = None,
) -> BiasProfile:
    """:func:`bias_profile` at the given ascending ``relative`` positions (checked by the
    caller), for the heads ``rows`` only (default: every head): what a figure draws of a
    long range or of many heads, without the whole profile."""
    if method == "alibi":
        if table is not None:
            raise ValueError("table applies to method='t5' only (ALiBi has no learned table)")
        slopes = alibi_slopes(8 if heads is None else heads, max_bias=max_bias)
        chosen = slopes if rows is None else slopes[rows]
        check_allocation("heads and distance", (chosen.size, relative.size), 8, 2)
        values = 0.0 - chosen[:, None] * np.abs(relative)[None, :].astype(np.float64)
        return BiasProfile("alibi", relative, values, chosen, None)
    if method == "t5":
        count = check_count("num_buckets", num_buckets, minimum=2)
        weights = check_table(table, count)
        if heads is not None and check_count("heads", heads) != weights.shape[1]:
            raise ValueError(
                f"heads must be None or the table's {weights.shape[1]} heads, got {heads!r}"
            )
        chosen_weights = weights if rows is None else weights[:, rows]
        check_allocation("table and distance", (chosen_weights.shape[1], relative.size), 8, 2)
        buckets = t5_buckets(
            relative, bidirectional=bidirectional, num_buckets=count, max_distance=max_distance
        )
        return BiasProfile("t5", relative, chosen_weights[buckets].T.copy(), None, buckets)
    raise ValueError(f"method must be 'alibi' or 't5', got {_show(method)}")


def bucket_map(
    method: str = "t5",
    *,
    distance: int = 256,
    num_buckets: int | None = None,
    max_distance: int | None = None,
    bidirectional: bool = True,
) -> BucketMap:
    """The bucket of every relative position ``key − query`` from ``-distance`` to
    ``distance``, and where the exact and the logarithmic regions end.

    Args:
        method: ``"t5"`` (:func:`posenc.t5_buckets`; defaults 32 buckets, max_distance 128)
            or ``"deberta"`` (:func:`posenc.deberta_buckets` of ``query − key``, the model's
            sign; defaults ``bucket_size`` 256, ``max_position`` 512, always bidirectional).
        distance: the largest ``|r|`` shown, an int in ``[1, 2**20]``.
        num_buckets: T5's ``num_buckets``; DeBERTa's ``bucket_size`` (``position_buckets``).
        max_distance: T5's ``max_distance``; DeBERTa's ``max_position``.
        bidirectional: T5 only (False: a causal decoder's buckets).

    Returns:
        :class:`BucketMap`: ``exact_limit`` is the largest distance with a bucket of its own.

    >>> m = bucket_map("t5", distance=4, num_buckets=8, max_distance=16)
    >>> m.buckets, m.exact_limit
    (array([2, 2, 2, 1, 0, 5, 6, 6, 6]), 1)
    """
    return bucket_map_at(
        method, _relative(distance), num_buckets=num_buckets, max_distance=max_distance,
        bidirectional=bidirectional,
    )  # fmt: skip


def bucket_map_at(
    method: str,
    relative: npt.NDArray[np.int64],
    *,
    num_buckets: int | None = None,
    max_distance: int | None = None,
    bidirectional: bool = True,
) -> BucketMap:
    """:func:`bucket_map` at the given ascending ``relative`` positions (checked by the
    caller): what a figure draws of a long range."""
    if method == "t5":
        count = 32 if num_buckets is None else num_buckets
        far = 128 if max_distance is None else max_distance
        buckets = t5_buckets(
            relative, bidirectional=bidirectional, num_buckets=count, max_distance=far
        )
        side = count // 2 if bidirectional else count
        return BucketMap("t5", relative, buckets, side // 2 - 1, far, count, bool(bidirectional))
    if method == "deberta":
        if not isinstance(bidirectional, bool | np.bool_):
            raise TypeError(f"bidirectional must be True or False, got {_show(bidirectional)}")
        if not bidirectional:
            raise ValueError("bidirectional must be True for method='deberta' (an encoder)")
        # DeBERTa's bucket_size and max_position, checked under this function's names
        size = check_buckets("num_buckets", 256 if num_buckets is None else num_buckets, 2)
        far = check_far("max_distance", 512 if max_distance is None else max_distance)
        if far - 1 <= size // 2:
            raise ValueError(
                f"max_distance (DeBERTa's max_position) must be greater than num_buckets // 2 "
                f"+ 1 = {size // 2 + 1}, got {far}: the log buckets would be empty"
            )
        buckets = deberta_buckets(-relative, bucket_size=size, max_position=far)
        return BucketMap("deberta", relative, buckets, size // 2, far, size, True)
    raise ValueError(f"method must be 't5' or 'deberta', got {_show(method)}")


def slope_table(heads: int, *, max_bias: float = 8.0) -> SlopeTable:
    """The ALiBi slope of every head: exact, and as the frameworks compute it.

    Args:
        heads: number of heads, an int >= 1.
        max_bias: 8 in the paper (MPT's ``alibi_bias_max``). BLOOM's and Falcon's rules are
            defined for 8 only: with another value only MPT's is compared.

    Returns:
        :class:`SlopeTable`: exact float64 slopes, each rule's slopes and their distance from
        the exact ones in float32 ulps.

    >>> t = slope_table(12)
    >>> sorted(t.rules)
    ['bloom', 'falcon', 'mpt']
    >>> int(np.abs(t.ulps["bloom"]).max()), int(np.abs(t.ulps["falcon"]).max()) > 1000
    (1, True)
    """
    count = check_count("heads", heads)
    exact = alibi_slopes(count, max_bias=max_bias)
    rules: dict[str, npt.NDArray[np.float64]] = {}
    for rule in _RULES if float(max_bias) == 8.0 else ("mpt",):
        convention: Any = rule
        slopes = alibi_slopes(count, max_bias=max_bias, convention=convention)
        rules[rule] = slopes.astype(np.float64)
    spacing = np.spacing(exact.astype(np.float32)).astype(np.float64)
    ulps = {rule: (values - exact) / spacing for rule, values in rules.items()}
    return SlopeTable(count, float(max_bias), exact, rules, ulps)
