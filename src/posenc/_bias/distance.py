"""Distance functions with a few parameters per head: Kerple, FIRE's input and Sandwich.

All three are functions of the distance between query ``i`` and key ``j``:

- **Kerple** (Chi et al. 2022, "KERPLE: Kernelized Relative Positional Embedding"), per head
  parameters ``r1, r2 > 0``::

      "log":    −r1·ln(1 + r2·|j − i|)
      "power":  −r1·|j − i|^r2            (0 < r2 <= 2)

- **FIRE** (Li et al. 2024, "Functional Interpolation for Relative Positions"): a learned
  MLP ``f`` of the normalised causal distance ``ψ(i − j) / ψ(max(L, i))``,
  ``ψ(x) = ln(1 + c·x)``; :func:`fire_distance` gives that input (keys after the query, masked
  in causal attention, get the input of distance 0). The MLP is ``posenc.torch.FireBias``.
- **Sandwich** (Chi et al. 2023, "Dissecting Transformer Length Extrapolation via the Lens of
  Receptive Field Analysis"): the position-position term of sinusoidal embeddings,
  ``Σ_k cos((i − j)·ω_k)``, ω_k = base^(−2k/dim), k < dim/2, divided per head by
  ``8·(h + 1)/heads`` (attention-gym's ``generate_sandwich_bias``).

Everything in float64, rounded once to ``dtype``.

>>> kerple_bias(2, 3, r1=[1.0, 2.0], r2=1.0, kind="power")[:, 0]
array([[ 0., -1., -2.],
       [ 0., -2., -4.]], dtype=float32)
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._checks import check_base, check_float_dtype, check_int, check_real
from .positions import (
    as_position_pair,
    cast_bias,
    check_count,
    check_number,
    check_pairs,
    check_parameter,
    position_count,
)

__all__ = ["KerpleKind", "fire_distance", "kerple_bias", "sandwich_bias"]

KerpleKind = Literal["log", "power"]


def _distance(query: npt.NDArray[np.int64], key: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """``|j − i|`` as float64 ``(q, k)`` (exact: integers within 2**54 hold in float64 up
    to one rounding of the largest, far beyond any bias' resolution)."""
    gap: npt.NDArray[np.float64] = np.abs(key[None, :] - query[:, None]).astype(np.float64)
    return gap


def _log1p_scaled(
    scale: npt.NDArray[np.float64], x: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """``ln(1 + scale·x)`` for ``scale > 0``, ``x >= 0`` as ``(m, e)`` with value ``m·2^e``,
    finite for every finite input: where ``scale·x`` would overflow it is
    ``ln(scale) + ln(x)`` (the ``1`` is below float64's resolution there), and where it is
    below ``2^-60`` it is ``scale·x`` itself, kept as a mantissa and an exponent so that it
    never underflows (a quotient of two of them is then exact to a few ulps)."""
    scale, x = np.broadcast_arrays(scale, x)
    m_scale, e_scale = np.frexp(scale)
    m_x, e_x = np.frexp(x)
    mantissa = m_scale * m_x
    exponent = (e_scale + e_x).astype(np.int64)
    tiny = (exponent < -60) | (mantissa == 0.0)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        product = np.ldexp(mantissa, np.where(tiny, 0, exponent))  # scale·x (inf: overflowed)
        wide = np.where(
            np.isfinite(product), np.log1p(product), np.log(scale) + np.log(np.maximum(x, 1.0))
        )
    m_wide, e_wide = np.frexp(wide)
    return np.where(tiny, mantissa, m_wide), np.where(tiny, exponent, e_wide).astype(np.int64)


def _log1p(scale: npt.NDArray[np.float64], x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``ln(1 + scale·x)``, finite where it is (see :func:`_log1p_scaled`)."""
    mantissa, exponent = _log1p_scaled(scale, x)
    result: npt.NDArray[np.float64] = np.ldexp(mantissa, exponent)
    return result


def kerple_bias(
    query_positions: Any,
    key_positions: Any,
    *,
    r1: Any,
    r2: Any,
    kind: KerpleKind = "log",
    dtype: Any = np.float32,
) -> npt.NDArray[Any]:
    """The Kerple bias ``(heads, q, k)``; ``heads`` is the length of ``r1`` / ``r2``.

    Args:
        query_positions, key_positions: an int ``L`` or 1-D integer positions each.
        r1: per-head scale(s), > 0: a number or shape ``(heads,)`` (at least one head); a
            framework's parameter (``torch.nn.Parameter``) is read detached.
        r2: per-head rate(s) or power(s), > 0 (<= 2 for ``"power"``); a list the length of
            ``r1`` when both are lists.
        kind: ``"log"`` (default) or ``"power"``.
        dtype: float32 (default), float16 or float64.

    The logarithm is computed for any finite ``r2``: where ``r2·|j − i|`` overflows float64,
    ``ln(1 + r2·|j − i|) = ln r2 + ln|j − i|``. A bias beyond float64 (``r1`` near 1e308)
    is refused naming ``r1`` and ``r2``.

    >>> kerple_bias([2], 3, r1=1.0, r2=1.0).round(4)
    array([[[-1.0986, -0.6931,  0.    ]]], dtype=float32)
    """
    if kind not in ("log", "power"):
        raise ValueError(f"kind must be 'log' or 'power', got {kind!r}")
    out_dtype = check_float_dtype("dtype", dtype)
    scale = check_parameter("r1", r1, positive=True)
    rate = check_parameter("r2", r2, positive=True)
    if scale.ndim and rate.ndim and scale.shape != rate.shape:
        raise ValueError(f"r1 and r2 must have the same length, got {scale.shape}, {rate.shape}")
    if kind == "power" and np.any(rate > 2):
        raise ValueError(f"r2 must be in (0, 2] for kind='power', got {float(rate.max())!r}")
    heads = max(scale.size, rate.size)
    query, key = as_position_pair(query_positions, key_positions, heads=heads, head_names="r1")
    distance = _distance(query, key)[None]
    scale = np.atleast_1d(scale)[:, None, None]
    rate = np.atleast_1d(rate)[:, None, None]
    with np.errstate(over="ignore"):  # a bias beyond float64 is refused below, by name
        grows = _log1p(rate, distance) if kind == "log" else distance**rate
        bias = -scale * grows
    if not np.isfinite(bias).all():
        raise ValueError(
            f"r1 and r2 give a Kerple bias beyond float64 (r1 up to {float(scale.max()):.6g} "
            f"times {float(np.max(grows)):.6g}); the bias must stay within +-1.8e308"
        )
    return cast_bias(bias, out_dtype)


def fire_distance(
    query_positions: Any, key_positions: Any, *, c: float = 1.0, threshold: float = 1.0
) -> npt.NDArray[np.float64]:
    """FIRE's normalised distance ``ψ(max(i − j, 0)) / ψ(max(threshold, i))``: float64 (q, k).

    Args:
        query_positions, key_positions: an int ``L`` or 1-D integer positions each (query
            positions >= 0).
        c: ψ's scale, > 0 (learned in FIRE; 1 at initialisation); any finite number: where
            ``c·x`` would overflow float64, ``ψ(x) = ln c + ln x``, and where it is tiny,
            ``ψ(x) = c·x`` without underflow.
        threshold: ``L`` of the paper, > 0: queries before it are normalised as if at it.

    Accuracy: within a few float64 ulps of the exact quotient, for every finite ``c`` and
    ``threshold``. A quotient beyond float64 (a ``threshold`` so small that ``ψ(threshold)``
    is below ``1e-308`` times ``ψ`` of a distance) is a ``ValueError`` naming ``threshold``.

    >>> fire_distance(3, 3)
    array([[0.        , 0.        , 0.        ],
           [1.        , 0.        , 0.        ],
           [1.        , 0.63092975, 0.        ]])
    >>> fire_distance([2], [0, 1], c=1e308)    # ln(1e308·x) / ln(1e308·2), never NaN
    array([[1.        , 0.99902358]])
    """
    scale = check_number("c", c, positive=True)
    floor = check_number("threshold", threshold, positive=True)
    query, key = as_position_pair(query_positions, key_positions)
    if query.size and int(query.min()) < 0:
        raise ValueError(f"query_positions must be >= 0 for FIRE, got {int(query.min())}")
    causal = np.maximum(query[:, None] - key[None, :], 0).astype(np.float64)
    rate = np.array(scale, dtype=np.float64)
    m_num, e_num = _log1p_scaled(rate, causal)
    m_den, e_den = _log1p_scaled(rate, np.maximum(query.astype(np.float64), floor))
    with np.errstate(over="ignore"):
        result: npt.NDArray[np.float64] = np.ldexp(m_num / m_den[:, None], e_num - e_den[:, None])
    if not np.isfinite(result).all():
        raise ValueError(
            f"threshold={floor!r} with c={scale!r} gives FIRE distances beyond float64: "
            f"ψ(threshold) = ln(1 + c·threshold) is too small against the distances' ψ; "
            "pass a larger threshold"
        )
    return result


def sandwich_bias(
    heads: int,
    query_positions: Any,
    key_positions: Any,
    *,
    dim: int = 128,
    base: float = 10000.0,
    dtype: Any = np.float32,
) -> npt.NDArray[Any]:
    """The Sandwich bias ``(heads, q, k)``: ``Σ_k cos((i − j)·ω_k) · heads / (8·(h + 1))``.

    Args:
        heads: number of heads, an int >= 1.
        query_positions, key_positions: an int ``L`` or 1-D integer positions each.
        dim: the sinusoid's ``d̄`` (128 in the paper), an even int >= 2; ``dim // 2`` terms.
        base: the wavelength base, > 0.
        dtype: float32 (default), float16 or float64.

    >>> sandwich_bias(1, 2, 2, dim=2)
    array([[[0.125     , 0.06753778],
            [0.06753778, 0.125     ]]], dtype=float32)
    """
    count = check_count("heads", heads)
    width = check_int("dim", dim, minimum=2)
    if width % 2:
        raise ValueError(f"dim must be even (dim // 2 cosines), got {width}")
    check_pairs("dim", (width // 2,), copies=2)
    wavelength = check_base("base", base)
    out_dtype = check_float_dtype("dtype", dtype)
    check_real("base", wavelength)
    with np.errstate(over="ignore"):  # a base below 1 raises the frequencies: refused below
        omega = wavelength ** (-2.0 * np.arange(width // 2) / width)
    q = position_count("query_positions", query_positions)
    k = position_count("key_positions", key_positions)
    check_pairs("query_positions, key_positions and dim", (q, k, width // 2), 2)
    query, key = as_position_pair(query_positions, key_positions, heads=count)
    distance = _distance(query, key)
    with np.errstate(over="ignore", invalid="ignore"):
        angles = distance[..., None] * omega
    if not np.isfinite(angles).all():
        raise ValueError(
            f"base={wavelength!r} with dim={width} gives angles (i − j)·base^(−2k/dim) beyond "
            "float64: a base below 1 makes the frequencies grow; pass a base >= 1"
        )
    total = np.cos(angles).sum(axis=-1)
    ratio = count / (8.0 * np.arange(1, count + 1, dtype=np.float64))
    result = cast_bias(ratio[:, None, None] * total[None], out_dtype)
    return result
