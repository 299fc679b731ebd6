"""The attention temperature of :func:`posenc.attention_temperature` on torch positions: the
same float64 formulas, computed on the positions' device (the CPU for MPS, which has no
float64), with no host work, so that a swapped model traces with ``torch.compile``."""

from __future__ import annotations

import torch

from .._rope.temperature import AttentionTemperature
from ._kernels._table import work_device

__all__ = ["temperature_at"]


def temperature_at(positions: torch.Tensor, temperature: AttentionTemperature) -> torch.Tensor:
    """``temperature``'s scale at integer ``positions`` (any shape): float64, the shape of
    ``positions``, on their device (the CPU for MPS). No checks: the parameters were checked
    when ``temperature`` was made, and the positions come from the model."""
    params = dict(temperature.params)
    p = positions.to(device=work_device(positions.device), dtype=torch.float64)
    kind = temperature.kind
    if kind == "llama4":
        steps = torch.floor((p + 1.0) / params["floor_scale"])
        return 1.0 + params["attn_scale"] * torch.log1p(steps)
    if kind == "llama4_beta":
        steps = torch.floor(p / params["original_max_position_embeddings"])
        return 1.0 + params["beta"] * torch.log1p(steps)
    if kind == "log":
        ratio = torch.clamp((p + 1.0) / params["n_floor"], min=1.0)
        return 1.0 + params["alpha"] * torch.log(ratio)
    return torch.full_like(p, params["scale"])
