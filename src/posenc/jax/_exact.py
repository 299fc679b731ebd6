"""Rounding once, and float64 phasors inside a float32 graph (private).

Two jobs, both about the single rounding that every posenc table gets:

- **Static values** (:func:`round_once_numpy`): the NumPy core's float64 table rounded once
  to the requested dtype, bfloat16 included (NumPy has no bfloat16; JAX's ``ml_dtypes`` does,
  but its float64 → bfloat16 cast goes through float32, a double rounding).
- **Traced positions** (:func:`traced_phasors`): inside ``jax.jit`` the positions are not
  known when the graph is built, and a default JAX graph has no float64. The angle
  ``p·ω`` then cannot be formed in float32 (at position 10**5 it would be off by ~4e-3), so
  none is formed: an integer position is split into four bytes, ``p = Σ_j b_j·256**j``, and
  the unit phasors ``cos(b·256**j·ω) + i sin(b·256**j·ω)`` of every byte value are computed
  on the host in float64 and stored as float32 *pairs* ``hi + lo`` (48 significant bits).
  The graph gathers one phasor per byte and multiplies the four in double-float arithmetic
  (error-free products and sums built from float32 operations only), which is exact to about
  2**-44: the result rounded to float32 is within one ulp of the exact value (absolute error
  at most 2**-25 near zeros; measured: half an ulp plus 2**-44) up to 2**24, and a
  float16/bfloat16 result is the exact value rounded once (round-to-odd in float32, then to
  nearest). Beyond 2**24 the float64 angles of the tables round by up to ``|p|·2**-53``, the
  error of the NumPy core's float64 angles too. A real position's fraction is three more
  bytes (tables of ``b·256**-j·ω``) and a rest below 2**-24, whose turn is its first-order
  term.

With ``jax_enable_x64`` on, the graph computes the angles in float64 instead.

The double-float arithmetic holds when a compiler contracts a product and a sum into a
fused multiply-add (XLA does, and where it does depends on fusion): every product whose
rounding matters is of 12-bit halves (split by masking bits), hence exact, so fused or not it
gives the same numbers.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

__all__ = [
    "DIGITS",
    "DIGIT_BITS",
    "digit_tables",
    "round_once_numpy",
    "traced_phasors",
    "x64_enabled",
]

#: Positions are split into DIGITS digits of DIGIT_BITS bits: |p| < 2**32 (all of int32).
DIGIT_BITS = 8
DIGITS = 4
_RADIX = 1 << DIGIT_BITS

DFloat = tuple[jax.Array, jax.Array]  # (hi, lo): the value hi + lo, |lo| <= ulp(hi) / 2


def x64_enabled() -> bool:
    """Whether JAX's 64-bit mode is on (float64 exists inside graphs)."""
    return bool(jax.config.read("jax_enable_x64"))  # type: ignore[no-untyped-call]


# -- static values: float64 rounded once ----------------------------------------------------


def _round_to_odd_f32(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    """float64 → float32 rounded to odd: the truncation, with the last bit set when inexact.

    Rounding that to any format of at most 22 significant bits (bfloat16: 8, float16: 11)
    gives the float64 value rounded once to nearest (the classic round-to-odd argument).
    """
    nearest = values.astype(np.float32)
    inexact = nearest.astype(np.float64) != values
    bits = np.abs(nearest).view(np.uint32)
    even = (bits & 1) == 0
    # move one ulp towards the float64 value: away from zero if |nearest| < |value|
    step = np.where(np.abs(nearest.astype(np.float64)) < np.abs(values), 1, -1).astype(np.int64)
    fixed = np.where(inexact & even, bits.astype(np.int64) + step, bits).astype(np.uint32)
    return np.copysign(fixed.view(np.float32), nearest).astype(np.float32)


def round_once_numpy(values: npt.NDArray[np.float64], dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """The float64 ``values`` rounded once (to nearest, ties to even) to ``dtype``."""
    if dtype == np.float64:
        return values
    if dtype in (np.float32, np.float16):
        return values.astype(dtype)  # NumPy rounds float64 to these directly
    return _round_to_odd_f32(values).astype(dtype)  # bfloat16


# -- double-float arithmetic in float32 -----------------------------------------------------


def _two_sum(a: jax.Array, b: jax.Array) -> DFloat:
    """``a + b`` exactly: ``(s, e)`` with ``s = fl(a + b)`` (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fast_two_sum(a: jax.Array, b: jax.Array) -> DFloat:
    """``a + b`` exactly when ``|a| >= |b|`` or ``a == 0`` (Dekker's Fast2Sum)."""
    s = a + b
    return s, b - (s - a)


def _split(a: jax.Array) -> DFloat:
    """``a = hi + lo`` with 12 significant bits in each: the low 12 bits masked off."""
    bits = jax.lax.bitcast_convert_type(a, jnp.uint32)
    hi = jax.lax.bitcast_convert_type(bits & jnp.uint32(0xFFFFF000), jnp.float32)
    return hi, a - hi


def _two_prod(a: jax.Array, b: jax.Array) -> DFloat:
    """``a·b`` as a double-float, to about 2**-36 relative (Dekker's product).

    Every multiplication here is of 12-bit halves, hence exact in float32: a compiler that
    fuses a product into a following addition (XLA does, on CPU and GPU) computes the same
    numbers. The halves' cross terms are summed with one rounding (of a term 2**-12 of the
    product), the rest exactly."""
    ah, al = _split(a)
    bh, bl = _split(b)
    high = ah * bh
    middle = ah * bl + al * bh
    s, e = _two_sum(high, middle)
    return s, e + al * bl


def _mul(a: DFloat, b: DFloat) -> DFloat:
    """Double-float product (unnormalised: ``|lo|`` small against ``hi``)."""
    p, e = _two_prod(a[0], b[0])
    return p, e + (a[0] * b[1] + a[1] * b[0])


def _sub(a: DFloat, b: DFloat) -> DFloat:
    """Double-float difference, normalised."""
    s, e = _two_sum(a[0], -b[0])
    return _fast_two_sum(s, e + (a[1] - b[1]))


def _add(a: DFloat, b: DFloat) -> DFloat:
    """Double-float sum, normalised."""
    s, e = _two_sum(a[0], b[0])
    return _fast_two_sum(s, e + (a[1] + b[1]))


def _complex_mul(x: tuple[DFloat, DFloat], y: tuple[DFloat, DFloat]) -> tuple[DFloat, DFloat]:
    """``(c1 + i s1)(c2 + i s2)`` in double-float: ``(cos, sin)`` of the summed angles."""
    (c1, s1), (c2, s2) = x, y
    return _sub(_mul(c1, c2), _mul(s1, s2)), _add(_mul(c1, s2), _mul(s1, c2))


def _pair(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    """float64 values as float32 ``(hi, lo)`` pairs, last axis: ``hi + lo`` holds 48 bits."""
    hi = values.astype(np.float32)
    lo = (values - hi.astype(np.float64)).astype(np.float32)
    return np.stack((hi, lo), axis=-1)


#: the bytes of a fraction f in [0, 1): f = Σ_j b_j·256**(j - FRACTION_DIGITS) + r, r < 2**-24
FRACTION_DIGITS = 3


def digit_tables(
    omega: npt.NDArray[np.float64], first: int = 0, digits: int = DIGITS
) -> npt.NDArray[np.float32]:
    """The phasors of every digit value: float32 ``(digits, 256·n, 4)``, row ``b·n + k`` of
    table ``j`` holding ``(cos hi, cos lo, sin hi, sin lo)`` of ``b·256**(first + j)·ω_k``
    computed in float64 (``first = -3``: the bytes of a fraction)."""
    values = np.arange(_RADIX, dtype=np.float64)
    scales = float(_RADIX) ** np.arange(first, first + digits)  # exact powers of two
    theta = (scales[:, None] * values[None, :])[..., None] * omega  # (digits, 256, n)
    table = np.concatenate((_pair(np.cos(theta)), _pair(np.sin(theta))), axis=-1)
    return table.reshape(digits, -1, 4)


def _digit_phasors(magnitude: jax.Array, tables: jax.Array) -> tuple[DFloat, DFloat]:
    """``e^{i|p_k|ω_k}`` in double-float from the uint32 magnitudes ``(..., n)`` (one
    position per pair, in units of the tables' first digit): ``(..., n)``."""
    n = magnitude.shape[-1]
    column = jnp.arange(n, dtype=jnp.int32)
    result: tuple[DFloat, DFloat] | None = None
    for j in range(tables.shape[0]):
        digit = ((magnitude >> (DIGIT_BITS * j)) & (_RADIX - 1)).astype(jnp.int32)
        row = tables[j][digit * n + column]  # (..., n, 4)
        phasor = ((row[..., 0], row[..., 1]), (row[..., 2], row[..., 3]))
        result = phasor if result is None else _complex_mul(result, phasor)
    assert result is not None
    return result


def _fraction_phasors(fraction: jax.Array, omega: npt.NDArray[np.float64]) -> tuple[DFloat, DFloat]:
    """``e^{i f ω}`` for float32 fractions ``f`` in [0, 1), in double-float.

    The first 24 bits of ``f`` are three bytes, whose phasors come from tables like the
    integer digits'; the rest, ``r < 2**-24``, turns by ``a = r·ω`` (formed exactly as a
    double-float), where ``cos a = 1 - a²/2`` and ``sin a = a`` hold to far below 2**-44."""
    bits = jnp.floor(fraction * 2.0**24)  # exact: a power-of-two scaling, then a floor
    rest = fraction - bits * 2.0**-24  # exact, in [0, 2**-24)
    phasor = _digit_phasors(
        bits.astype(jnp.uint32), jnp.asarray(digit_tables(omega, -FRACTION_DIGITS, FRACTION_DIGITS))
    )
    pairs = _pair(omega)
    a_hi, a_lo = _two_prod(rest, jnp.asarray(pairs[:, 0]))
    a_hi, a_lo = _fast_two_sum(a_hi, a_lo + rest * jnp.asarray(pairs[:, 1]))
    turn = ((jnp.ones_like(a_hi), -0.5 * a_hi * a_hi), (a_hi, a_lo))
    return _complex_mul(phasor, turn)


def _f32_phasors(positions: jax.Array, omega: npt.NDArray[np.float64]) -> tuple[DFloat, DFloat]:
    """``e^{i p_k ω_k}`` ``(..., n)`` in double-float for int or float32 positions
    ``(..., n)``, one per pair. Real positions of 2**32 and beyond (which the four digits do
    not hold) give NaN, never a plausible value."""
    tables = jnp.asarray(digit_tables(omega))
    real = jnp.issubdtype(positions.dtype, jnp.floating)
    beyond = jnp.zeros(positions.shape, dtype=bool)
    if real:
        value = positions.astype(jnp.float32)
        negative = value < 0
        # sign and magnitude: |p| = whole + fraction, both exact (a floor of -3e-7 would be -1,
        # and 1 - 3e-7 is not a float32)
        whole = jnp.floor(jnp.abs(value))
        fraction = jnp.abs(value) - whole
        beyond = whole >= 2.0**32
        magnitude = jnp.where(beyond, 0.0, whole).astype(jnp.uint32)
    elif positions.dtype == jnp.uint32:  # every value fits the four digits
        negative = jnp.zeros(positions.shape, dtype=bool)
        magnitude = positions
    else:
        ints = positions.astype(jnp.int32)
        negative = ints < 0
        # |-2**31| wraps to -2**31 in int32, which is 2**31 as uint32: still exact
        magnitude = jnp.abs(ints).astype(jnp.uint32)
    phasor = _digit_phasors(magnitude, tables)  # e^{i|p|ω} (its whole part, for reals)
    if real:
        phasor = _complex_mul(phasor, _fraction_phasors(fraction, omega))
    (c_hi, c_lo), (s_hi, s_lo) = phasor
    if real:
        nan = jnp.float32(jnp.nan)
        c_hi, s_hi = jnp.where(beyond, nan, c_hi), jnp.where(beyond, nan, s_hi)
    # a negative position turns the other way: sin changes sign, cos does not
    return (c_hi, c_lo), (jnp.where(negative, -s_hi, s_hi), jnp.where(negative, -s_lo, s_lo))


def _round_df(value: DFloat, dtype: Any) -> jax.Array:
    """The double-float ``hi + lo`` rounded once to ``dtype`` (float32 or 16-bit)."""
    hi, lo = _fast_two_sum(*value)  # hi is hi + lo rounded to nearest float32
    if dtype == jnp.float32:
        return hi
    # round to odd in float32 (sticky last bit), then to nearest in 16 bits: one rounding
    bits = jax.lax.bitcast_convert_type(jnp.abs(hi), jnp.uint32)
    inexact = (lo != 0) & ((bits & 1) == 0)
    away = jnp.sign(lo) == jnp.sign(hi)
    step = jnp.where(away, jnp.uint32(1), jnp.uint32(0xFFFFFFFF))  # +1 or -1 (wraps)
    bits = jnp.where(inexact, bits + step, bits)
    odd = jnp.copysign(jax.lax.bitcast_convert_type(bits, jnp.float32), hi)
    return odd.astype(dtype)


def _x64_tables(
    positions: jax.Array,
    omega: npt.NDArray[np.float64],
    used: list[int],
    attention: npt.NDArray[np.float64],
    dtype: Any,
) -> tuple[jax.Array, jax.Array]:
    """64-bit mode: the angles in float64, cos/sin times ``attention`` rounded once."""
    theta = jnp.zeros((*positions.shape[:-1], omega.shape[1]), dtype=jnp.float64)
    for a in used:
        theta = theta + positions[..., a].astype(jnp.float64)[..., None] * jnp.asarray(omega[a])
    factor = jnp.asarray(attention)
    values = (jnp.cos(theta) * factor, jnp.sin(theta) * factor)
    if dtype == jnp.float64:
        return values
    pairs = []
    for v in values:  # float64 as a float32 pair (hi, lo), then the one rounding
        hi = v.astype(jnp.float32)
        pairs.append(_round_df((hi, (v - hi.astype(jnp.float64)).astype(jnp.float32)), dtype))
    return pairs[0], pairs[1]


def traced_phasors(
    positions: jax.Array,
    omega: npt.NDArray[np.float64],
    attention: Any,
    dtype: Any,
) -> tuple[jax.Array, jax.Array]:
    """``(cos, sin)`` of ``positions[..., a]·omega[a]`` summed over axes, times ``attention``,
    rounded once to ``dtype``: ``(..., n)`` each.

    Args:
        positions: traced positions ``(..., A)`` (A axes; 1 for plain RoPE), any int or
            float dtype.
        omega: float64 ``(A, n)``; axes whose row is all zero are skipped.
        attention: a float or float64 ``(n,)``: the factor the values are multiplied by.
        dtype: the output dtype (float16, bfloat16, float32, or float64 under x64).
    """
    attention = np.broadcast_to(np.asarray(attention, dtype=np.float64), omega.shape[1:])
    positions = jax.lax.stop_gradient(positions)  # positions are ids: they get no gradient
    used = [a for a in range(omega.shape[0]) if np.any(omega[a])]
    if x64_enabled():
        return _x64_tables(positions, omega, used, attention, dtype)
    n = omega.shape[1]
    phasor: tuple[DFloat, DFloat] | None = None
    if all(np.count_nonzero(omega[:, k]) <= 1 for k in range(n)):
        # each pair turns with one axis (1-D RoPE, sectioned or interleaved M-RoPE): one
        # engine over the pairs, each with its own axis's coordinate
        if used:
            axis = np.argmax(omega != 0, axis=0)
            phasor = _f32_phasors(positions[..., axis], omega.sum(axis=0))
    else:  # a pair that several axes turn (a general frequency matrix): one engine per axis
        for a in used:
            shape = (*positions.shape[:-1], n)
            turn = _f32_phasors(jnp.broadcast_to(positions[..., a : a + 1], shape), omega[a])
            phasor = turn if phasor is None else _complex_mul(phasor, turn)
    if phasor is None:  # no axis turns: every angle is 0
        shape = (*positions.shape[:-1], omega.shape[1])
        zeros = jnp.zeros(shape, jnp.float32)
        phasor = ((jnp.ones(shape, jnp.float32), zeros), (zeros, zeros))
    cos, sin = phasor
    if np.any(attention != 1.0):
        pairs = _pair(attention)
        factor = (jnp.asarray(pairs[..., 0]), jnp.asarray(pairs[..., 1]))
        cos, sin = _mul(cos, factor), _mul(sin, factor)
    return _round_df(cos, dtype), _round_df(sin, dtype)
