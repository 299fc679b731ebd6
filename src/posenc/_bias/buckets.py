"""Relative-position buckets: T5's and DeBERTa-v2's logarithmic bins.

Both map a relative position to an integer bucket: exact near zero, logarithmic further out.

**T5** (Raffel et al. 2020; mesh-tensorflow ``_relative_position_bucket``), relative position
``r = key − query``. Bidirectional: half the buckets for ``r > 0`` (offset ``num_buckets//2``),
half for ``r <= 0``; causal (``bidirectional=False``): ``r > 0`` is bucket 0 and ``d = −r``.
With ``n`` buckets per side, ``e = n // 2`` exact ones and distance ``d = |r|``::

    bucket(d) = d                                                   d < e
              = min(e + floor((n − e)·ln(d/e) / ln(max_distance/e)), n − 1)    d >= e

**DeBERTa-v2** (``make_log_bucket_position``), relative position ``r = query − key`` (the
other sign), ``mid = bucket_size // 2``::

    bucket(r) = r                                                  |r| <= mid
              = sign(r)·(mid + ceil((mid − 1)·ln(|r|/mid) / ln((max_position − 1)/mid)))

(not clamped: DeBERTa clamps to its attention span later).

Conventions: ``"exact"`` takes the floor/ceil of the exact real number (decided with integer
arithmetic where float64 is too close to call); ``"transformers"`` follows transformers'
float32 steps (a float32 ratio, its float32 log, divided and scaled in float32), which moves
a few bucket edges by one distance. NumPy cannot call the C library's float32 ``logf`` that
``torch.log`` uses, which is not always correctly rounded: this core takes the correctly
rounded float32 log, so a value on a bucket edge can still differ (DeBERTa, bucket_size 256,
max_position 512: at ``|r| = 403269`` of all ``|r| <= 10^6``). The PyTorch front-end's
``posenc.torch.t5_buckets`` / ``deberta_buckets`` run the same steps with ``torch.log`` and
are equal bit for bit.

>>> t5_buckets([-3, -1, 0, 1, 3], num_buckets=8, max_distance=16)
array([2, 1, 0, 5, 6])
"""

from __future__ import annotations

import decimal
import math
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._checks import _show, check_int, detached, is_integer

__all__ = [
    "MAX_BUCKETS",
    "BucketConvention",
    "check_buckets",
    "check_far",
    "deberta_buckets",
    "t5_buckets",
]

BucketConvention = Literal["exact", "transformers"]


def _relative(value: Any) -> npt.NDArray[np.int64]:
    """Integer relative positions of any shape, within +-2**54 (differences of positions);
    Python integers of any size (an object array of them) are compared exactly."""
    try:
        array = np.asarray(detached(value))
    except Exception as exc:  # ragged lists and the like
        raise TypeError(
            f"relative_positions must be an array of integers, got {_show(value)}"
        ) from exc
    if array.size == 0 and array.dtype.kind in "fO":  # [] holds no positions, of no dtype
        return np.zeros(array.shape, dtype=np.int64)
    if array.dtype.kind == "O" and array.size and all(is_integer(v) for v in array.flat):
        if max(abs(int(v)) for v in array.flat) > 2**54:
            raise ValueError(
                "relative_positions must lie within +-2**54 (differences of positions)"
            )
        array = array.astype(np.int64)
    if array.dtype.kind == "b" or array.dtype.kind not in "iu":
        raise TypeError(
            f"relative_positions must be integers (see posenc.relative_positions), got dtype "
            f"{array.dtype}"
        )
    if array.size and (int(array.max()) > 2**54 or int(array.min()) < -(2**54)):
        raise ValueError("relative_positions must lie within +-2**54 (differences of positions)")
    return array.astype(np.int64)


#: The most buckets (T5's ``num_buckets``, DeBERTa's ``bucket_size``) the functions take: far
#: beyond any model, and where float64 still decides nearly every bucket edge on its own (the
#: exact comparison of the few near an edge costs what it costs at 32 buckets).
MAX_BUCKETS = 1 << 24


def check_buckets(name: str, value: Any, minimum: int) -> int:
    """A bucket count: an integer in ``[minimum, 2**24]``."""
    count = check_int(name, value, minimum=minimum)
    if count > MAX_BUCKETS:
        raise ValueError(
            f"{name} must be an integer >= {minimum} and at most 2**24 (no model has nearly as "
            f"many buckets), got {_show(count)}"
        )
    return count


def check_far(name: str, value: Any) -> int:
    """T5's ``max_distance`` or DeBERTa's ``max_position``: an integer in ``[1, 2**53]``, a
    distance between positions (which lie within +-2**53); nothing is allocated for it."""
    far = check_int(name, value, minimum=1)
    if far > 2**53:
        raise ValueError(
            f"{name} must be an integer >= 1 and at most 2**53 (a distance between positions), "
            f"got {_show(far)}"
        )
    return far


def _check_convention(convention: Any) -> str:
    if convention not in ("exact", "transformers"):
        raise ValueError(f"convention must be 'exact' or 'transformers', got {convention!r}")
    return str(convention)


def _floor_log_ratio(
    d: npt.NDArray[np.int64], low: int, high_num: int, high_den: int, scale: int, ceil: bool
) -> npt.NDArray[np.int64]:
    """``floor`` (or ``ceil``) of ``scale·ln(d/low) / ln(high_num/high_den)``, exactly.

    float64 first (within a few ulps); a value within 1e-12 (relative) of an integer ``t`` is
    decided exactly by the sign of
    ``scale·ln(d/low) − t·ln(high_num/high_den)`` (:func:`_log_order`), whose cost does not
    grow with ``scale`` or ``t`` (millions of buckets cost what 32 do).
    """
    unique, inverse = np.unique(d, return_inverse=True)
    # log1p of the exact integer excess: a relative error of a few ulps, even near ratio 1
    ratio = math.log1p((high_num - high_den) / high_den)
    value = scale * np.log1p((unique - low) / low) / ratio
    result = np.ceil(value) if ceil else np.floor(value)
    nearest = np.rint(value)
    near = np.abs(value - nearest) <= 1e-12 * np.maximum(1.0, np.abs(value))
    for index in np.flatnonzero(near):
        t = int(nearest[index])
        order = _log_order(int(unique[index]), low, scale, high_num, high_den, t)
        if ceil:  # value > t iff the order is positive
            result[index] = t + 1 if order > 0 else t
        else:  # value >= t iff the order is not negative
            result[index] = t if order >= 0 else t - 1
    found: npt.NDArray[np.int64] = result.astype(np.int64)[inverse.reshape(d.shape)]
    return found


def _log_order(num: int, den: int, s: int, high_num: int, high_den: int, t: int) -> int:
    """The sign of ``s·ln(num/den) − t·ln(high_num/high_den)`` (integers: ``num``, ``den``,
    ``high_den`` >= 1, ``high_num > high_den``, ``s, t >= 0``).

    Equality (``(num/den)^s = (high_num/high_den)^t``) is decided in small integers by
    :func:`_powers_equal`; any other sign by decimal logarithms (correctly rounded, so with a
    known error bound) at a precision raised until the difference exceeds that bound, which
    it does since it is not zero.

    >>> _log_order(16, 8, 8, 128, 8, 2), _log_order(17, 8, 8, 128, 8, 2)
    (0, 1)
    """
    if _powers_equal(num, den, s, high_num, high_den, t):
        return 0
    logs = [math.log(n) for n in (num, den, high_num, high_den)]
    size = s * (logs[0] + logs[1]) + t * (logs[2] + logs[3]) + 1.0  # bounds every term
    precision = 40
    while precision <= 40 * 2**10:  # a nonzero difference needs far fewer digits than this
        with decimal.localcontext(decimal.Context(prec=precision)):
            ln = [decimal.Decimal(n).ln() for n in (num, den, high_num, high_den)]
            difference = s * (ln[0] - ln[1]) - t * (ln[2] - ln[3])
            # each ln, difference and product rounded once to `precision` digits: a few
            # units of 10^(1 - precision) of `size` in all; 100 of them is a safe bound
            bound = decimal.Decimal(size) * decimal.Decimal(10) ** (3 - precision)
            if abs(difference) > bound:
                return 1 if difference > 0 else -1
        precision *= 2
    raise ArithmeticError(  # unreachable: _powers_equal decides every zero difference
        f"cannot order {s}*ln({num}/{den}) and {t}*ln({high_num}/{high_den})"
    )


def _powers_equal(num: int, den: int, s: int, high_num: int, high_den: int, t: int) -> bool:
    """Whether ``(num/den)^s == (high_num/high_den)^t`` exactly (``high_num > high_den``,
    ``s, t >= 0``).

    In lowest terms ``p/q`` and ``P/Q``, and with ``g = gcd(s, t)``: ``p^(s/g) = P^(t/g)``
    and ``q^(s/g) = Q^(t/g)``; with ``s/g`` and ``t/g`` coprime, ``p`` and ``q`` are then
    ``(t/g)``-th powers ``z^(t/g)`` with ``P = z^(s/g)`` (and the same for ``q``, ``Q``).
    Integer roots of numbers of a few dozen bits: no big powers.
    """
    g = math.gcd(num, den)
    p, q = num // g, den // g
    g = math.gcd(high_num, high_den)
    big_p, big_q = high_num // g, high_den // g
    left_is_one, right_is_one = s == 0 or p == q, t == 0  # P > Q: a power of it is not 1
    if left_is_one or right_is_one:
        return left_is_one and right_is_one
    g = math.gcd(s, t)
    s1, t1 = s // g, t // g
    for small, big in ((p, big_p), (q, big_q)):
        root = _integer_root(small, t1)
        if root is None or not _is_power(big, root, s1):
            return False
    return True


def _integer_root(n: int, k: int) -> int | None:
    """The integer ``z`` with ``z^k = n`` (``n >= 1``, ``k >= 1``), or None."""
    if n == 1:
        return 1
    if k >= n.bit_length():  # z >= 2 gives z^k >= 2^k > n
        return None
    guess = round(math.pow(n, 1.0 / k))
    for z in (guess - 1, guess, guess + 1):
        if z >= 2 and z**k == n:
            return z
    return None


def _is_power(n: int, z: int, k: int) -> bool:
    """Whether ``z^k == n`` (``z >= 1``, ``k >= 1``), without a power bigger than ``n``."""
    if z == 1:
        return n == 1
    if k * (z.bit_length() - 1) > n.bit_length():
        return False
    return bool(z**k == n)


def t5_buckets(
    relative_positions: Any,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    convention: BucketConvention = "exact",
) -> npt.NDArray[np.int64]:
    """T5's relative-position bucket of every relative position (see the module docstring).

    Args:
        relative_positions: integers ``key − query``, any shape (e.g.
            :func:`posenc.relative_positions`).
        bidirectional: ``True`` for encoders (T5's ``not is_decoder``), ``False`` for causal
            decoders (keys after the query share bucket 0).
        num_buckets: total buckets, an int >= 2 (>= 4 when bidirectional).
        max_distance: distances from here on share the last bucket; an int greater than
            the ``max_exact = num_buckets // 2`` (per side) exact buckets.
        convention: ``"exact"`` (default) or ``"transformers"`` (bit for bit
            ``T5Attention._relative_position_bucket``, with its float32 log).

    Returns:
        int64 buckets in ``[0, num_buckets)``, the shape of ``relative_positions``.

    >>> t5_buckets([-200, -128, -127, -16, -8, 0], num_buckets=32, max_distance=128)
    array([15, 15, 15, 10,  8,  0])
    >>> t5_buckets([-127], convention="transformers"), t5_buckets([-127])
    (array([15]), array([15]))
    """
    if not isinstance(bidirectional, bool | np.bool_):
        raise TypeError(f"bidirectional must be True or False, got {bidirectional!r}")
    buckets = check_buckets("num_buckets", num_buckets, 4 if bidirectional else 2)
    mode = _check_convention(convention)
    rel = _relative(relative_positions)
    side = buckets // 2 if bidirectional else buckets
    exact = side // 2
    far = check_far("max_distance", max_distance)
    if far <= exact:
        raise ValueError(
            f"max_distance must be greater than max_exact = {exact} (half of the "
            f"{side} buckets per side), got {far}: the log bins would be empty or negative"
        )
    offset = np.where(rel > 0, side, 0) if bidirectional else np.zeros_like(rel)
    distance = np.abs(rel) if bidirectional else np.maximum(-rel, 0)
    large = np.maximum(distance, exact)
    if mode == "exact":  # from max_distance on, every distance is in the last bucket
        nearer = np.minimum(large, far)
        log_bin = _floor_log_ratio(nearer, exact, far, exact, side - exact, ceil=False)
    else:
        log_bin = _t5_float32(large, exact, far, side - exact)
    far_bucket = np.minimum(exact + log_bin, side - 1)
    return np.asarray(offset + np.where(distance < exact, distance, far_bucket), dtype=np.int64)


def _t5_float32(
    d: npt.NDArray[np.int64], exact: int, far: int, log_buckets: int
) -> npt.NDArray[np.int64]:
    """``(log(d.float() / e) / float32(ln(far/e)) * n).long()``, each step in float32."""
    ratio = (d.astype(np.float32).astype(np.float64) / exact).astype(np.float32)
    logs = np.log(ratio.astype(np.float64)).astype(np.float32)
    scaled = (logs / np.float32(math.log(far / exact))).astype(np.float32)
    truncated: npt.NDArray[np.int64] = np.trunc(scaled * np.float32(log_buckets)).astype(np.int64)
    return truncated


def deberta_buckets(
    relative_positions: Any,
    *,
    bucket_size: int = 256,
    max_position: int = 512,
    convention: BucketConvention = "exact",
) -> npt.NDArray[np.int64]:
    """DeBERTa-v2/v3's log bucket of every relative position (see the module docstring).

    Args:
        relative_positions: integers ``query − key`` (DeBERTa's sign: pass
            ``-posenc.relative_positions(q, k)``), any shape.
        bucket_size: ``position_buckets`` of the config, an int >= 2.
        max_position: ``max_relative_positions`` of the config; must exceed
            ``bucket_size // 2 + 1`` (else the log bins are empty or negative).
        convention: ``"exact"`` (default) or ``"transformers"`` (bit for bit
            ``make_log_bucket_position``, with its float32 log).

    Returns:
        int64 buckets, signed like ``relative_positions``, the same shape.

    >>> deberta_buckets([0, 3, 4, 5, 100, -100], bucket_size=8, max_position=64)
    array([ 0,  3,  4,  5,  8, -8])
    """
    size = check_buckets("bucket_size", bucket_size, 2)
    mode = _check_convention(convention)
    position = check_far("max_position", max_position)
    mid = size // 2
    if position - 1 <= mid:
        raise ValueError(
            f"max_position must be greater than bucket_size // 2 + 1 = {mid + 1}, got "
            f"{position}: the log bins would be empty or negative"
        )
    rel = _relative(relative_positions)
    magnitude = np.where(np.abs(rel) < mid, mid - 1, np.abs(rel))
    if mode == "exact":
        log_bin = _floor_log_ratio(
            np.maximum(magnitude, mid), mid, position - 1, mid, mid - 1, ceil=True
        )
        far = np.sign(rel) * (mid + log_bin)
    else:
        far = _deberta_float32(rel, magnitude, mid, position)
    return np.where(magnitude <= mid, rel, far).astype(np.int64)


def _deberta_float32(
    rel: npt.NDArray[np.int64], magnitude: npt.NDArray[np.int64], mid: int, position: int
) -> npt.NDArray[np.int64]:
    """transformers' steps: float32 ratio, float32 logs, float32 quotient, ceil, + mid."""
    ratio = (magnitude.astype(np.float32).astype(np.float64) / mid).astype(np.float32)
    logs = np.log(ratio.astype(np.float64)).astype(np.float32)
    denominator = np.float32(math.log(np.float64(np.float32((position - 1) / mid))))
    scaled = ((logs / denominator).astype(np.float32) * np.float32(mid - 1)).astype(np.float32)
    log_pos = (np.ceil(scaled) + np.float32(mid)).astype(np.float32)
    signed: npt.NDArray[np.int64] = (log_pos * np.sign(rel).astype(np.float32)).astype(np.int64)
    return signed
