"""ALiBi: a linear penalty per head on the distance between query and key (Press et al.,
"Train Short, Test Long", 2022).

Head ``h`` of ``n`` gets a slope ``m_h``; the score of query ``i`` and key ``j`` gets
``m_h·f(i, j)`` added, where the frameworks choose ``f`` differently (``form``)::

    "distance"   -m·|j − i|     the paper; x-transformers (queries aligned to the end of the
                                keys); flash-attn's ``alibi_slopes`` with query positions
                                ``k_len − q_len + i``
    "relative"    m·(j − i)     MPT (``build_mpt_alibi_tensor``: one query at i = L − 1)
    "key"         m·j           BLOOM and Falcon (``build_alibi_tensor``)

Under a causal mask (j <= i) the three differ by a constant per query row, so the softmax
is the same; as tensors they differ.

Slopes (the paper's rule): for ``n`` a power of two, ``m_h = 2^(−max_bias·h/n)``,
``h = 1 .. n``; otherwise the ``p`` slopes of the largest power of two ``p < n``, then the
odd-numbered slopes of the ``2p`` rule until there are ``n``. ``max_bias`` is 8 in the paper
(MPT's ``alibi_bias_max``). The conventions (``convention``):

- ``"exact"``: float64 slopes, products in float64, rounded once to ``dtype``.
- ``"bloom"``: transformers' BLOOM ``_get_alibi_slopes``: the base rounded to float32 and
  raised to integer powers in float32 (BLOOM's slopes are up to 9.1 float32 ulps of the
  exact slope from it, at 121 and at 128 heads; 11 ulps of BLOOM's own value at 128 heads,
  where it sits just below a power of two); products rounded to float32. NumPy takes the
  correctly rounded power, which for some slopes from 32 heads on is one ulp from
  ``torch.pow``'s: ``posenc.torch.alibi_bias`` uses ``torch.pow`` and is bit for bit.
- ``"mpt"``: transformers' ``build_mpt_alibi_tensor``: exponents in float32, the power
  ``2^x`` correctly rounded to float32, then ``1 / 2^x`` in float32; products rounded to
  float32. Bit for bit with transformers for ``max_bias`` 8 or 16 and 1 to 128 heads.
  transformers raises ``2^x`` with ``torch.pow``, which is not correctly rounded at some
  ``x`` (SLEEF's vector pow for whole chunks of heads, libm's ``powf`` for the rest: its
  result depends on the CPU kernel and the head count); with another ``max_bias`` a power
  may be one float32 ulp from it, so a slope up to two (``max_bias`` 0.5 or 2 from 16 heads
  on, for instance).
- ``"falcon"``: transformers' Falcon ``build_alibi_tensor``: BLOOM's slopes rounded to
  bfloat16, positions rounded to bfloat16, products rounded to bfloat16 (values returned in
  float32, each a bfloat16 number). Falcon then divides by sqrt(head_dim) in the model's
  dtype; that step is not part of the bias.

>>> alibi_slopes(4)
array([0.25      , 0.0625    , 0.015625  , 0.00390625])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._checks import as_float, check_float_dtype, check_sequence
from .positions import as_position_pair, bfloat16_round, cast_in_blocks, check_count, check_pairs

__all__ = [
    "ALIBI_FORMS",
    "AlibiConvention",
    "AlibiForm",
    "alibi_bias",
    "alibi_blocks",
    "alibi_slopes",
    "check_total_heads",
]

AlibiForm = Literal["distance", "relative", "key"]
AlibiConvention = Literal["exact", "bloom", "mpt", "falcon"]
ALIBI_FORMS = ("distance", "relative", "key")
_CONVENTIONS = ("exact", "bloom", "mpt", "falcon")


def _exponents(heads: int) -> npt.NDArray[np.float64]:
    """The exponent of each head as a fraction ``(k, n)``, one row per head: slope
    ``2^(−max_bias·k/n)``."""
    check_pairs("heads", (heads, 2), copies=3)
    lower = 1 << (heads.bit_length() - 1)  # the largest power of two <= heads
    first = np.arange(1, lower + 1, dtype=np.float64)
    odd = np.arange(1, 2 * (heads - lower), 2, dtype=np.float64)
    numerators = np.concatenate([first, odd])
    denominators = np.where(np.arange(heads) < lower, float(lower), 2.0 * lower)
    return np.stack([numerators, denominators], axis=1)


def check_total_heads(total_heads: Any, heads: int) -> int:
    """``total_heads``: None (``heads``) or an int >= ``heads``."""
    if total_heads is None:
        return heads
    total = check_count("total_heads", total_heads)
    if total < heads:
        raise ValueError(
            f"total_heads must be an integer >= {heads} (heads: the heads with ALiBi come "
            f"first, the rest get no bias), got {total}"
        )
    return total


def _check_shard(shard: Any, heads: int) -> tuple[int, int]:
    """``shard = (rank, ranks)``: ``ranks`` divides ``heads``, ``0 <= rank < ranks``."""
    items = check_sequence("shard", shard, "a pair (rank, ranks)")
    if len(items) != 2:
        raise ValueError(f"shard must be a pair (rank, ranks), got {shard!r}")
    ranks = check_count("shard[1] (ranks)", items[1])
    rank = check_count("shard[0] (rank)", items[0], minimum=0)
    if rank >= ranks or heads % ranks:
        raise ValueError(
            f"shard must be (rank, ranks) with 0 <= rank < ranks and ranks dividing "
            f"heads={heads}, got {shard!r}"
        )
    return rank, ranks


def _check_convention(convention: Any) -> str:
    if convention not in _CONVENTIONS:
        raise ValueError(f"convention must be one of {_CONVENTIONS}, got {convention!r}")
    return str(convention)


def _check_max_bias(max_bias: Any) -> float:
    value = as_float("max_bias", max_bias, "a positive finite number")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"max_bias must be a positive finite number, got {value!r}")
    return value


def alibi_slopes(
    heads: int,
    *,
    max_bias: float = 8.0,
    shard: tuple[int, int] | None = None,
    convention: AlibiConvention = "exact",
    total_heads: int | None = None,
) -> npt.NDArray[Any]:
    """The ALiBi slope of every head (see the module docstring for the rule).

    Args:
        heads: number of attention heads with ALiBi (all ranks together), an int >= 1: the
            slope rule is the one of ``heads`` heads.
        max_bias: ``8`` in the paper; MPT's ``alibi_bias_max``. Only ``"exact"`` and
            ``"mpt"`` take another value.
        shard: ``(rank, ranks)`` for tensor parallelism: the slopes of rank ``rank``'s
            ``total_heads // ranks`` consecutive heads, which are the global heads' slopes.
        convention: ``"exact"`` (float64), ``"bloom"`` / ``"mpt"`` (float32) or ``"falcon"``
            (bfloat16 values held in float32).
        total_heads: the heads of the whole attention, an int >= ``heads`` (default
            ``heads``): ALiBi on the first ``heads`` of them, slope 0 (no bias) on the rest,
            as x-transformers' ``AlibiPositionalBias(heads, total_heads)``.

    Returns:
        ``(total_heads,)`` or ``(total_heads // ranks,)``: float64 for ``"exact"``, else
        float32.

    Accuracy: ``"exact"`` is within one float64 ulp of ``2^(−max_bias·k/n)``.

    >>> alibi_slopes(6)                   # 4 slopes of the 4-head rule, then 2 of the 8-head rule
    array([0.25      , 0.0625    , 0.015625  , 0.00390625, 0.5       , 0.125     ])
    >>> alibi_slopes(8, shard=(1, 2))     # rank 1 of 2 holds heads 4..7 of the model
    array([0.03125   , 0.015625  , 0.0078125 , 0.00390625])
    >>> alibi_slopes(2, total_heads=4)    # ALiBi on 2 of 4 heads
    array([0.0625    , 0.00390625, 0.        , 0.        ])
    """
    heads = check_count("heads", heads)
    total = check_total_heads(total_heads, heads)
    mode = _check_convention(convention)
    bias_max = _check_max_bias(max_bias)
    if bias_max != 8.0 and mode in ("bloom", "falcon"):
        raise ValueError(f"max_bias must be 8 under convention={mode!r}, got {max_bias!r}")
    fractions = _exponents(heads)
    if mode == "mpt":
        slopes: npt.NDArray[Any] = _mpt_slopes(fractions, bias_max)
    elif mode == "exact":
        # k/n first (exact: n is a power of two): no overflow for any finite max_bias
        slopes = np.exp2(-bias_max * (fractions[:, 0] / fractions[:, 1]))
    else:
        # base = float32(2^(-8/n)) raised in float32: the product of float32 roundings
        base = np.float32(2.0 ** (-8.0 / fractions[:, 1]))
        slopes = (base.astype(np.float64) ** fractions[:, 0]).astype(np.float32)
        if mode == "falcon":
            slopes = bfloat16_round(slopes)
    if total > heads:
        check_count("total_heads", total)  # one float64 per head: it must fit
        slopes = np.concatenate([slopes, np.zeros(total - heads, dtype=slopes.dtype)])
    if shard is not None:
        rank, ranks = _check_shard(shard, total)
        size = total // ranks
        slopes = slopes[rank * size : (rank + 1) * size]
    return slopes


def _mpt_slopes(fractions: npt.NDArray[np.float64], max_bias: float) -> npt.NDArray[np.float32]:
    """MPT's float32 steps: ``x = float32(k_global · float32(max_bias / n2))``, then
    ``1 / float32(2^x)``, where ``n2`` is the power of two at or above ``heads``."""
    n2 = int(fractions[:, 1].max())
    k_global = fractions[:, 0] * (n2 / fractions[:, 1])
    with np.errstate(over="ignore"):  # max_bias beyond float32: 2^inf, slope 0, as in torch
        step = np.float32(max_bias / n2)
        exponent = (k_global * np.float64(step)).astype(np.float32)
        power = np.exp2(exponent.astype(np.float64)).astype(np.float32)
    slopes: npt.NDArray[np.float32] = (1.0 / power.astype(np.float64)).astype(np.float32)
    return slopes


def alibi_bias(
    heads: int,
    query_positions: Any,
    key_positions: Any,
    *,
    form: AlibiForm = "distance",
    max_bias: float = 8.0,
    shard: tuple[int, int] | None = None,
    convention: AlibiConvention = "exact",
    dtype: Any = np.float32,
    total_heads: int | None = None,
) -> npt.NDArray[Any]:
    """The dense ALiBi bias ``(heads, q, k)`` of query and key positions.

    Args:
        heads, max_bias, shard, convention, total_heads: as :func:`alibi_slopes` (with
            ``total_heads``, the bias is ``(total_heads, q, k)``, zero on the heads from
            ``heads`` on).
        query_positions: an int ``q`` (positions ``0 .. q-1``) or 1-D integer positions.
        key_positions: the same for the keys.
        form: ``"distance"`` (``-m·|j − i|``, default), ``"relative"`` (``m·(j − i)``) or
            ``"key"`` (``m·j``).
        dtype: float32 (default), float16 or float64.

    Returns:
        ``out[h, a, b] = m_h·f(query_positions[a], key_positions[b])`` in ``dtype``:
        ``"exact"`` rounds the float64 product once; the framework conventions round as
        their function does (float32 products; ``"falcon"``: bfloat16 products), then cast.

    >>> alibi_bias(2, [3], 4)[0]                     # decoding step: query 3, keys 0..3
    array([[-0.1875, -0.125 , -0.0625,  0.    ]], dtype=float32)
    >>> alibi_bias(2, [3], 4, form="key", convention="bloom")[0]
    array([[0.    , 0.0625, 0.125 , 0.1875]], dtype=float32)
    >>> alibi_bias(1, [1], 2, total_heads=2)[:, 0]    # x-transformers' AlibiPositionalBias(1, 2)
    array([[-0.00390625,  0.        ],
           [ 0.        ,  0.        ]], dtype=float32)
    """
    if form not in ALIBI_FORMS:
        raise ValueError(f"form must be one of {ALIBI_FORMS}, got {form!r}")
    out_dtype = check_float_dtype("dtype", dtype)
    shape, block = alibi_blocks(
        heads, query_positions, key_positions, form=form, max_bias=max_bias, shard=shard,
        convention=convention, total_heads=total_heads,
    )  # fmt: skip
    out = np.empty(shape, dtype=out_dtype)

    def store(rows: slice, values: npt.NDArray[Any]) -> None:
        out[:, rows] = values + 0.0  # rounded once; + 0.0 turns negative zeros into zeros

    cast_in_blocks(shape, block, store, float(np.finfo(out_dtype).max), out_dtype.name)
    return out


def alibi_blocks(
    heads: int,
    query_positions: Any,
    key_positions: Any,
    *,
    form: AlibiForm = "distance",
    max_bias: float = 8.0,
    shard: tuple[int, int] | None = None,
    convention: AlibiConvention = "exact",
    total_heads: int | None = None,
) -> tuple[tuple[int, int, int], Callable[[slice], npt.NDArray[Any]]]:
    """The arguments of :func:`alibi_bias`, checked: the bias's shape ``(heads, q, k)``
    (``total_heads`` or a shard's share of them when given) and ``block(rows)``, its values
    ``[:, rows, :]`` before the cast to ``dtype`` (float64 for ``"exact"``, else the
    framework's float32 values)."""
    if form not in ALIBI_FORMS:
        raise ValueError(f"form must be one of {ALIBI_FORMS}, got {form!r}")
    slopes = alibi_slopes(
        heads, max_bias=max_bias, shard=shard, convention=convention, total_heads=total_heads
    )
    query, key = as_position_pair(query_positions, key_positions, heads=slopes.size)

    def block(rows: slice) -> npt.NDArray[Any]:
        part = query[rows]
        if form == "key":
            factor = np.broadcast_to(key[None, :], (part.size, key.size))
        elif form == "relative":
            factor = key[None, :] - part[:, None]
        else:
            factor = -np.abs(key[None, :] - part[:, None])
        return _scaled(slopes, factor, convention)

    return (slopes.size, query.size, key.size), block


def _scaled(
    slopes: npt.NDArray[Any], factor: npt.NDArray[np.int64], convention: str
) -> npt.NDArray[Any]:
    """``slopes[:, None, None] · factor`` rounded as ``convention`` rounds it."""
    values = factor.astype(np.float64)
    if convention == "falcon":
        values = bfloat16_round(values).astype(np.float64)
    elif convention != "exact":
        values = values.astype(np.float32).astype(np.float64)  # torch casts positions first
    product = slopes.astype(np.float64)[:, None, None] * values[None, :, :]
    if convention == "exact":
        return product
    # two float32 (or bfloat16) numbers multiply exactly in float64: one rounding to float32
    # is the framework's float32 multiplication (a bfloat16 product is exact in float32)
    rounded = product.astype(np.float32)
    return bfloat16_round(rounded) if convention == "falcon" else rounded
