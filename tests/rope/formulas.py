"""RoPE written independently of posenc, for the tests of ``tests/rope``: frequencies and angles
with Python's ``math`` module one value at a time, rotations pair by pair."""

from __future__ import annotations

import math

import numpy as np


def plain_omega(dim: int, base: float = 10000.0) -> list[float]:
    """ω_k = base^(-2k/dim) with math.pow, one value at a time."""
    return [math.pow(base, -2.0 * k / dim) for k in range(dim // 2)]


def reference_tables(positions, omega, pairs: str, attention: float = 1.0):
    """cos/sin tables (float64) from a list of ω: θ = p·ω_k, laid out for ``pairs``."""
    n = len(omega)
    flat = np.asarray(positions, dtype=np.float64).reshape(-1)
    cos = np.empty((flat.size, 2 * n))
    sin = np.empty((flat.size, 2 * n))
    for row, p in enumerate(flat):
        for k, w in enumerate(omega):
            c, s = math.cos(p * w) * attention, math.sin(p * w) * attention
            cols = (k, k + n) if pairs == "half" else (2 * k, 2 * k + 1)
            for col in cols:
                cos[row, col], sin[row, col] = c, s
    shape = np.shape(positions)
    return cos.reshape(*shape, 2 * n), sin.reshape(*shape, 2 * n)


def reference_rotation(x, positions, omega, pairs: str):
    """Rotate each pair of channels of x (..., s, d) by p·ω_k with an explicit 2x2 rotation."""
    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    n = len(omega)
    for index in np.ndindex(*x.shape[:-1]):
        p = float(positions[index[-1]])
        for k, w in enumerate(omega):
            i, j = (k, k + n) if pairs == "half" else (2 * k, 2 * k + 1)
            a, b = x[(*index, i)], x[(*index, j)]
            c, s = math.cos(p * w), math.sin(p * w)
            out[(*index, i)] = a * c - b * s
            out[(*index, j)] = b * c + a * s
    return out


def half_to_interleaved(dim: int) -> np.ndarray:
    """Channel order P with interleaved[..., c] = half[..., P[c]] (pair k: channels k, k+n)."""
    n = dim // 2
    return np.array([c for k in range(n) for c in (k, k + n)])


def rng_array(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)
