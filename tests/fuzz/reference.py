"""Exact values of the encodings (mpmath), the accuracy the docs promise, and rotations.

Written from the documented formulas (module docstrings of ``posenc._conventions``,
``posenc._grid``, ``posenc._timestep``, ``posenc._rotary``), never from posenc's code:

- a table is a list of :class:`Channel` records (sin, cos or zero of one coordinate times an
  exact frequency), evaluated at exact positions with 60 digits;
- the tolerance is what the docs promise: float32 within 1e-7 (for angles the float64 angle
  error does not dominate, i.e. positions below 10^7 under the usual bases), float16 and
  bfloat16 within one unit in the last place, plus the float64 angle error
  ``|θ| · (|ln base| · e + c) · 2^-52`` for larger angles ("relative for larger");
- rotations are written pair by pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

EPS = 2.0**-52
_DPS = 60

# mantissa bits and smallest normal exponent of each float format
_FORMATS = {
    "float16": (10, -14),
    "bfloat16": (7, -126),
    "float32": (23, -126),
    "float64": (52, -1022),
}


def ulp(dtype_name: str, magnitude: Any) -> np.ndarray:
    """The spacing of ``dtype_name`` floats at ``|magnitude|`` (subnormal spacing near 0)."""
    mant, emin = _FORMATS[dtype_name]
    _, exponent = np.frexp(np.abs(np.asarray(magnitude, dtype=np.float64)))
    return np.ldexp(1.0, np.maximum(exponent - 1, emin) - mant)


def tolerance(dtype_name: str, exact: np.ndarray, angle_error: np.ndarray, scale: float = 1.0):
    """The documented accuracy of a value ``exact`` whose angle is known to ``angle_error``."""
    m = max(abs(scale), 1e-300)
    spread = angle_error * m
    if dtype_name == "float32":
        return np.maximum(1e-7 * max(m, 1.0), 0.5 * ulp("float32", exact) + spread)
    if dtype_name == "float64":
        return 2.0 * ulp("float64", exact) + spread
    return ulp(dtype_name, exact) + spread  # float16, bfloat16: one unit in the last place


def round_bfloat16(values: Any) -> np.ndarray:
    """float64 values rounded once to bfloat16 (to nearest, ties to even), as float64: scaled
    by the power of two that makes the bfloat16 spacing 1, rounded, scaled back."""
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        _, e = np.frexp(x)
        step = np.ldexp(1.0, np.maximum(e - 8, -133))
        r = np.rint(x / step) * step
    return np.where(np.abs(r) >= 2.0**128, np.copysign(np.inf, r), r)


@dataclass(frozen=True)
class Channel:
    """One channel: ``kind`` of ``coordinate[axis] · omega`` (``zero``: the constant 0).

    ``rel`` bounds the library's float64 angle error relative to the angle.
    """

    kind: str
    axis: int = 0
    omega: Any = None
    rel: float = 0.0


ZERO = Channel("zero")


def exact_omega(base: float, exponent: Fraction) -> tuple[Any, float]:
    """``base^(-exponent)`` with 60 digits, and the relative error of the library's angle."""
    with mpmath.workdps(_DPS):
        omega = mpmath.power(
            mpmath.mpf(base), -mpmath.mpf(exponent.numerator) / exponent.denominator
        )
    rel = (abs(math.log(base)) * abs(float(exponent)) + 8.0) * EPS
    return omega, rel


def _pair(kind_axis_omega: tuple[Any, float], axis: int = 0) -> tuple[Channel, Channel]:
    omega, rel = kind_axis_omega
    return Channel("sin", axis, omega, rel), Channel("cos", axis, omega, rel)


def sinusoid_channels(d: int, base: float, convention: str, axis: int = 0) -> list[Channel]:
    """The channels of a 1-D table (docstring of ``posenc._conventions``)."""
    if convention == "tensor2tensor":
        h = d // 2
        omegas = [exact_omega(base, Fraction(k, max(h - 1, 1))) for k in range(h)]
        sins = [_pair(w, axis)[0] for w in omegas]
        coss = [_pair(w, axis)[1] for w in omegas]
        return sins + coss + [ZERO] * (d - 2 * h)
    omegas = [exact_omega(base, Fraction(2 * k, d)) for k in range((d + 1) // 2)]
    if convention == "paper":
        out: list[Channel] = []
        for w in omegas:
            out.extend(_pair(w, axis))
        return out[:d]
    n_sin, n_cos = (d + 1) // 2, d // 2  # marian
    return [_pair(w, axis)[0] for w in omegas[:n_sin]] + [_pair(w, axis)[1] for w in omegas[:n_cos]]


def timestep_channels(dim: int, max_period: float, shift: float, flip: bool) -> list[Channel]:
    """``[sin | cos | 0]`` (or ``[cos | sin | 0]``) of ω_k = max_period^(-k/(h - shift))."""
    h = dim // 2
    if h < 2:
        omegas = [(mpmath.mpf(1), 8.0 * EPS)] * h
    else:
        denominator = Fraction(h) - Fraction(shift)
        omegas = [exact_omega(max_period, Fraction(k) / denominator) for k in range(h)]
    sins = [_pair(w)[0] for w in omegas]
    coss = [_pair(w)[1] for w in omegas]
    first, second = (coss, sins) if flip else (sins, coss)
    return first + second + [ZERO] * (dim - 2 * h)


def _sin_cos_block(omegas: list[tuple[Any, float]], axis: int) -> list[Channel]:
    return [_pair(w, axis)[0] for w in omegas] + [_pair(w, axis)[1] for w in omegas]


def grid_channels(convention: str, d: int, ndim: int, base: float) -> list[Channel]:
    """The channels of a grid (docstring of ``posenc._grid``); axes in the order of ``shape``."""
    if convention == "positional_encodings":
        c = 2 * math.ceil(d / (2 * ndim))
        out: list[Channel] = []
        for axis in range(ndim):
            out.extend(sinusoid_channels(c, base, "paper", axis))
        return out[:d]
    if convention == "diffusers_3d":
        temporal = [exact_omega(base, Fraction(k, d // 8)) for k in range(d // 8)]
        spatial = [exact_omega(base, Fraction(16 * k, 3 * d)) for k in range(3 * d // 16)]
        return _sin_cos_block(temporal, 0) + _sin_cos_block(spatial, 2) + _sin_cos_block(spatial, 1)
    q = d // 4
    omegas = [exact_omega(base, Fraction(k, q)) for k in range(q)]
    h_sin, h_cos = [_pair(w, 0)[0] for w in omegas], [_pair(w, 0)[1] for w in omegas]
    w_sin, w_cos = [_pair(w, 1)[0] for w in omegas], [_pair(w, 1)[1] for w in omegas]
    if convention == "mae":
        return w_sin + w_cos + h_sin + h_cos
    if convention == "timm":
        return h_sin + w_sin + h_cos + w_cos
    return h_sin + h_cos + w_sin + w_cos  # timm_interleaved


def rope_channels(omega: np.ndarray, pairs: str) -> tuple[list[Channel], list[Channel]]:
    """cos and sin channels of RoPE tables for the float64 frequencies ``omega``."""
    n = len(omega)
    order = list(range(n)) * 2 if pairs == "half" else [k for k in range(n) for _ in range(2)]
    ws = [mpmath.mpf(float(omega[k])) for k in order]
    cos = [Channel("cos", 0, w, 8.0 * EPS) for w in ws]
    sin = [Channel("sin", 0, w, 8.0 * EPS) for w in ws]
    return cos, sin


def exact_rows(
    coords: Sequence[Sequence[Any]], channels: Sequence[Channel], scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Exact values (float64) and angle errors of the rows at ``coords`` (one tuple of exact
    coordinates per row). An angle error of ``inf`` marks a value the docs do not pin down
    (the float64 angle error there exceeds the range of sin and cos)."""
    values = np.zeros((len(coords), len(channels)))
    errors = np.zeros_like(values)
    with mpmath.workdps(_DPS):
        for r, coord in enumerate(coords):
            exact = [mpmath.mpf(Fraction(c).numerator) / Fraction(c).denominator for c in coord]
            for c, ch in enumerate(channels):
                if ch.kind == "zero":
                    continue
                angle = exact[ch.axis] * ch.omega
                error = float(abs(angle)) * ch.rel + 2.0**-50
                if not error < 2.0:
                    errors[r, c] = math.inf
                    continue
                value = mpmath.sin(angle) if ch.kind == "sin" else mpmath.cos(angle)
                values[r, c] = float(value) * scale
                errors[r, c] = error
    return values, errors


def first_outside(got: Any, want: Any, tol: Any) -> tuple[int, ...] | None:
    """The index of the first element of ``got`` farther than ``tol`` from ``want`` (a NaN
    always is), or None when every element is within."""
    bad = ~(np.abs(np.asarray(got, dtype=np.float64) - want) <= tol)
    return tuple(int(i) for i in np.argwhere(bad)[0]) if np.any(bad) else None


def compare(
    got: np.ndarray,
    exact: np.ndarray,
    errors: np.ndarray,
    dtype_name: str,
    scale: float = 1.0,
    where: str = "",
) -> None:
    """Assert ``got`` (float64 of the result's values) is within the documented accuracy."""
    got = np.asarray(got, dtype=np.float64)
    free = np.isinf(errors)
    bound = abs(scale) * (1.0 + 2.0**-7)
    if np.any(np.abs(got[free]) > bound):
        raise AssertionError(f"{where}value beyond ±{bound:g} where sin/cos are free")
    tol = tolerance(dtype_name, exact, np.where(free, 0.0, errors), scale)
    index = first_outside(got, exact, np.where(free, np.inf, tol))
    if index is not None:
        r, c = index
        raise AssertionError(
            f"{where}row {r} channel {c}: got {got[r, c]!r}, exact {exact[r, c]!r}, "
            f"error {abs(got[r, c] - exact[r, c]):.3g} > tolerance {tol[r, c]:.3g} ({dtype_name})"
        )


def sample_rows(count: int, extra: Sequence[int] = ()) -> list[int]:
    """A few row indices of a flattened table: first, middle, last (and ``extra``)."""
    if count == 0:
        return []
    rows = {0, count // 2, count - 1, *(i for i in extra if 0 <= i < count)}
    return sorted(rows)


# -- rotations ---------------------------------------------------------------------------------


def pair_channels(pairs: str, n: int) -> list[tuple[int, int]]:
    """The channel pairs that turn together (docstring of ``posenc._rotary``)."""
    if pairs == "half":
        return [(k, k + n) for k in range(n)]
    return [(2 * k, 2 * k + 1) for k in range(n)]


def rotate_reference(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, pairs: str) -> np.ndarray:
    """``(a, b) -> (a·cos − b·sin, b·cos + a·sin)`` pair by pair, in float64; the channels
    past ``cos.shape[-1]`` pass through. ``cos``/``sin`` broadcast against ``x[..., :r]``."""
    x = np.asarray(x, dtype=np.float64)
    r = cos.shape[-1]
    part = x[..., :r]
    cos = np.broadcast_to(np.asarray(cos, dtype=np.float64), part.shape)
    sin = np.broadcast_to(np.asarray(sin, dtype=np.float64), part.shape)
    out = x.copy()
    for i, j in pair_channels(pairs, r // 2):
        a, b = part[..., i], part[..., j]
        out[..., i] = a * cos[..., i] - b * sin[..., i]
        out[..., j] = b * cos[..., j] + a * sin[..., j]
    return out


def check_pair_norms(
    x: np.ndarray,
    out: np.ndarray,
    pairs: str,
    r: int,
    factor: float,
    rtol: float,
    dtype_name: str = "float64",
) -> None:
    """Each rotated pair keeps its norm (times ``factor``, within ``rtol`` and the rounding of
    the output's two channels to ``dtype_name``); the other channels pass through."""
    x = np.asarray(x, dtype=np.float64)
    out = np.asarray(out, dtype=np.float64)
    for i, j in pair_channels(pairs, r // 2):
        before = np.hypot(x[..., i], x[..., j]) * abs(factor)
        after = np.hypot(out[..., i], out[..., j])
        slack = rtol * before + 2.0 * ulp(dtype_name, after)
        if not np.all(np.abs(after - before) <= slack):
            worst = float(np.max(np.abs(after - before) / np.maximum(before, 1e-30)))
            raise AssertionError(f"pair ({i}, {j}) changes its norm (relative {worst:.3g})")
    if not np.array_equal(out[..., r:], x[..., r:]):
        raise AssertionError(f"channels past rotary_dim = {r} changed")


def check_relative(
    rotate: Callable[[np.ndarray, float], np.ndarray],
    q: np.ndarray,
    k: np.ndarray,
    at: tuple[float, float],
    shift: float,
    rtol: float,
) -> None:
    """``rotate(q, p) · rotate(k, p')`` depends on ``p - p'`` only: shifting both positions by
    ``shift`` keeps the dot product (within ``rtol · |q| · |k|``)."""
    p, p2 = at
    before = float(np.dot(rotate(q, p), rotate(k, p2)))
    after = float(np.dot(rotate(q, p + shift), rotate(k, p2 + shift)))
    slack = rtol * float(np.linalg.norm(q) * np.linalg.norm(k)) + 2.0**-60
    if not abs(before - after) <= slack:
        raise AssertionError(
            f"dot product depends on absolute positions: {before!r} at ({p}, {p2}), "
            f"{after!r} at ({p + shift}, {p2 + shift})"
        )
