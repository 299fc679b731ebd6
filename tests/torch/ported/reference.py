"""The float64 oracle of the ported cases: each token's pairs turned by ``p·ω_k``, computed from
the definition (``ω_k = base^(−2k/r)``), and the tolerance rule of flash-attn's rotary tests.
"""

from __future__ import annotations

import numpy as np
import torch


def rotate_reference(
    x: torch.Tensor, positions: torch.Tensor, *, rotary_dim: int, pairs: str, base: float = 1e4
) -> torch.Tensor:
    """``x`` ``(..., d)`` with one position per token ``positions`` (``x.shape[:-1]`` or
    broadcastable to it), its first ``rotary_dim`` channels turned, in float64."""
    values = x.detach().double().numpy()
    omega = base ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
    angle = np.broadcast_to(positions.double().numpy(), values.shape[:-1])[..., None] * omega
    cos, sin = np.cos(angle), np.sin(angle)
    half = rotary_dim // 2
    if pairs == "half":
        a, b = values[..., :half], values[..., half:rotary_dim]
    else:
        a, b = values[..., 0:rotary_dim:2], values[..., 1:rotary_dim:2]
    turned_a, turned_b = a * cos - b * sin, b * cos + a * sin
    out = values.copy()
    if pairs == "half":
        out[..., :half], out[..., half:rotary_dim] = turned_a, turned_b
    else:
        out[..., 0:rotary_dim:2], out[..., 1:rotary_dim:2] = turned_a, turned_b
    return torch.from_numpy(out)


def flash_attn_tolerance(x: torch.Tensor) -> float:
    """flash-attn's rule, twice the error of ``x + 0.3 − 0.3`` in ``x``'s dtype, for a
    comparison against float64 instead of its float32 formula: at least 2 units in the last
    place of ``max|x|`` (the float32 formula itself is that far from float64)."""
    rule = 2 * float(((x + 0.3) - 0.3 - x).abs().max())
    ulp = float(torch.finfo(x.dtype).eps) * float(x.abs().max())
    return max(rule, 2 * ulp)
