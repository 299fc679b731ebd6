"""Result checks shared by the NumPy and the PyTorch fuzz tests (NumPy only)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

import posenc

from .reference import (
    EPS,
    Channel,
    compare,
    exact_rows,
    first_outside,
    pair_channels,
    rope_channels,
    rotate_reference,
    sample_rows,
    ulp,
)


def exact(value: Any) -> Fraction:
    """The exact value of a number (NumPy scalars and Fractions included)."""
    if isinstance(value, int | Fraction):
        return Fraction(value)
    if isinstance(value, np.integer):
        return Fraction(int(value))
    return Fraction(float(value))


def check_rows(
    table: np.ndarray,
    positions: Sequence[Any],
    channels: Sequence[Channel],
    dtype_name: str,
    scale: float = 1.0,
    where: str = "",
) -> None:
    """Rows of ``table`` (``(n, d)`` float64 values) at a few sampled ``positions`` equal the
    exact values of ``channels`` within the documented accuracy."""
    count = len(positions)
    if count == 0:
        return
    largest = int(np.argmax([abs(float(p)) for p in positions]))
    rows = sample_rows(count, [largest])
    values, errors = exact_rows([(exact(positions[r]),) for r in rows], channels, scale)
    compare(table[rows], values, errors, dtype_name, scale, where)


def check_rounded_once(
    got: np.ndarray, want: np.ndarray, noise: Any = 0.0, dtype_name: str | None = None
) -> None:
    """``got`` (float16, float32 or float64, or the float64 values of a ``dtype_name`` result)
    is the float64 truth ``want`` rounded once to its dtype: within half a unit in the last
    place of that dtype at ``want``, plus ``noise``, the float64 reference's own error
    (absolute, a number or per element)."""
    name = dtype_name or got.dtype.name
    value = got.astype(np.float64)
    tol = 0.5 * ulp(name, want) + noise
    index = first_outside(value, want, tol)
    if index is not None:
        raise AssertionError(
            f"{name} at {index}: got {value[index]!r}, the float64 truth {want[index]!r} rounded "
            f"once is within {np.broadcast_to(tol, want.shape)[index]:.3g}"
        )


def rope_reference(
    head_dim: int, rotary_dim: Any, base: Any, scaling: Any, seq_len: int | None
) -> tuple[int, np.ndarray, float]:
    """``(r, ω, attention)`` of a valid RoPE configuration (``posenc.rope_frequencies``)."""
    spec = posenc.rope_scaling(scaling)
    if rotary_dim is not None:
        r = int(rotary_dim)
    elif spec is not None and spec.partial_rotary_factor is not None:
        r = int(head_dim * spec.partial_rotary_factor)
    else:
        r = head_dim
    omega, attention = posenc.rope_frequencies(
        r, base=10000.0 if base is None else base, scaling=spec, seq_len=seq_len
    )
    return r, omega, attention


def effective_seq_len(scaling: Any, seq_len: Any, positions: Sequence[Any]) -> int | None:
    """The length a length-dependent scaling sees: ``seq_len`` or the largest position + 1."""
    spec = posenc.rope_scaling(scaling)
    if seq_len is not None or spec is None or not spec.depends_on_length or not positions:
        return None if seq_len is None else int(seq_len)
    return max(int(np.floor(max(float(p) for p in positions))) + 1, 0)


def check_rope_tables(
    cos: np.ndarray,
    sin: np.ndarray,
    positions: Sequence[Any],
    omega: np.ndarray,
    attention: float,
    pairs: str,
    dtype_name: str,
) -> None:
    """RoPE cos/sin tables (``(n, r)`` float64 values) at sampled positions."""
    cos_channels, sin_channels = rope_channels(omega, pairs)
    check_rows(cos, positions, cos_channels, dtype_name, attention, "cos: ")
    check_rows(sin, positions, sin_channels, dtype_name, attention, "sin: ")


def check_rotation(
    x: np.ndarray,
    out: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    pairs: str,
    dtype_name: str,
    work_eps: float = EPS,
) -> None:
    """``out`` is ``x`` rotated pair by pair by the given tables (the formula evaluated with
    relative error ``work_eps`` and rounded once to ``dtype_name``)."""
    ref = rotate_reference(x, cos, sin, pairs)
    x64 = np.asarray(x, dtype=np.float64)
    r = cos.shape[-1]
    size = np.abs(x64).copy()
    size[..., :r] = 0.0
    magnitude = np.max(np.abs(np.asarray(cos, dtype=np.float64)), initial=0.0) + np.max(
        np.abs(np.asarray(sin, dtype=np.float64)), initial=0.0
    )
    for i, j in pair_channels(pairs, r // 2):
        both = (np.abs(x64[..., i]) + np.abs(x64[..., j])) * magnitude
        size[..., i] = size[..., j] = both
    tol = ulp(dtype_name, ref) + 4.0 * work_eps * size
    got = np.asarray(out, dtype=np.float64)
    index = first_outside(got, ref, tol)
    if index is not None:
        raise AssertionError(
            f"rotation at {index}: got {got[index]!r}, expected {ref[index]!r} "
            f"(tolerance {tol[index]:.3g})"
        )


def grid_coords(axis, shape, size, scale, offset):
    """Exact coordinates of the cells along ``axis`` (docstring of ``posenc._grid``)."""

    def pick(value, default):
        if value is None:
            return exact(default)
        if isinstance(value, list | tuple | np.ndarray):
            return exact(list(value)[axis])
        return exact(value)

    n = shape[axis]
    s, o = pick(scale, 1), pick(offset, 0)
    factor = 1 / s if size is None else pick(size, 1) / (n * s)
    return [(o + i) * factor for i in range(n)]
