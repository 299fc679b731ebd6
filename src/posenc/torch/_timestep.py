"""Diffusion timestep embeddings in PyTorch, from float64 angles (``posenc.timestep_embedding``).

Shape legend: ``S`` is the shape of the timesteps (usually ``(b,)``), ``dim`` the channels.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from .._checks import check_base, check_bool, check_int, check_real
from .._timestep import timestep_frequencies, timestep_layout
from ._checks import as_positions, check_dtype
from ._kernels._table import sinusoidal_at

__all__ = ["TimestepEmbedding", "timestep_embedding"]


class TimestepEmbedding(nn.Module):
    """The sinusoidal embedding of diffusion timesteps (diffusers' ``Timesteps`` module).

    ``forward(t)`` equals diffusers ``get_timestep_embedding(t, dim, flip_sin_to_cos,
    downscale_freq_shift, scale, max_period)``, computed from float64 angles and rounded once,
    so it is closer to the exact value than diffusers, which works in float32 (its angles are
    off by about ``1e-7·scale·t``). This is only the sinusoidal part: diffusers' class of the
    same name is the MLP applied after it.

    Args:
        dim: number of channels, an integer >= 1 (odd ``dim`` ends with a zero column).
        max_period: base of the frequencies ω_k = max_period^(-k/(dim//2 - shift)), > 0.
        flip_sin_to_cos: False for ``[sin | cos]``, True for ``[cos | sin]``.
        downscale_freq_shift: the shift in the exponent's denominator (1 in diffusers'
            ``get_timestep_embedding``; UNets and DiT usually pass 0).
        scale: multiplies the angles, a finite real number.

    Shapes:
        - ``timesteps``: any shape ``S`` (``(b,)`` usually), integer or real, any device.
        - output: ``(*S, dim)`` on the timesteps' device.

    There is no cache (timesteps change every step): the float64 frequencies are kept as a
    plain tensor and the table is computed per call, which also works under
    ``torch.compile(fullgraph=True)``.

    Data checks (docs/architecture.md): CPU timesteps are checked like the NumPy core's
    (finite, within +-2**53, no overflow of ``scale·t·ω``); accelerator timesteps are not read
    unless ``posenc.torch.set_data_checks(True)``: a timestep that cannot be encoded gives a
    NaN row.

    >>> emb = TimestepEmbedding(320, flip_sin_to_cos=True, downscale_freq_shift=0)
    >>> emb(torch.tensor([0.0, 999.0])).shape
    torch.Size([2, 320])
    >>> emb(torch.tensor([10.5]), dtype=torch.bfloat16).dtype
    torch.bfloat16
    """

    def __init__(
        self,
        dim: int,
        *,
        max_period: float = 10000.0,
        flip_sin_to_cos: bool = False,
        downscale_freq_shift: float = 1.0,
        scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.dim = check_int("dim", dim, minimum=1)
        self.max_period = check_base("max_period", max_period)
        self.flip_sin_to_cos = check_bool("flip_sin_to_cos", flip_sin_to_cos)
        self.downscale_freq_shift = check_real("downscale_freq_shift", downscale_freq_shift)
        self.scale = check_real("scale", scale)
        omega = timestep_frequencies(
            self.dim, max_period=self.max_period, downscale_freq_shift=self.downscale_freq_shift
        )
        # Plain CPU float64 tensor, not a buffer: module casts must never touch it.
        self._omega = torch.from_numpy(self.scale * omega)
        # The largest |scale * frequency|, for the overflow check (none for dim 1: 0.0).
        self._fastest = float(abs(self.scale) * omega.max()) if omega.size else 0.0
        self._layout = timestep_layout(self.dim, self.flip_sin_to_cos)

    def forward(self, timesteps: Any, *, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The embedding of ``timesteps``: ``(*S, dim)``.

        Args:
            timesteps: tensor (or array / list / number) of timesteps, any shape ``S``.
            dtype: of the result: float16, bfloat16, float32 or float64; default
                ``torch.get_default_dtype()`` (float32, like diffusers).

        Returns:
            tensor of shape ``(*S, dim)`` on the timesteps' device.
        """
        dtype = check_dtype("dtype", torch.get_default_dtype() if dtype is None else dtype)
        t, checked = as_positions("timesteps", timesteps)
        if checked and t.numel():
            largest = float(t.detach().to(torch.float64).abs().max()) * self._fastest
            if not math.isfinite(largest):
                raise ValueError(
                    f"scale * timesteps * frequency overflows float64 (scale={self.scale!r}); "
                    "use a smaller scale"
                )
        return sinusoidal_at(t, self._omega, self._layout, self.dim, dtype, checked=checked)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, max_period={self.max_period}, "
            f"flip_sin_to_cos={self.flip_sin_to_cos}, "
            f"downscale_freq_shift={self.downscale_freq_shift}, scale={self.scale}"
        )


def timestep_embedding(
    timesteps: Any,
    dim: int,
    *,
    max_period: float = 10000.0,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """:func:`posenc.timestep_embedding` as a tensor (any float dtype, including bfloat16).

    Args: as :class:`TimestepEmbedding` and its ``forward``.

    Returns:
        tensor of shape ``(*S, dim)`` on the timesteps' device.

    >>> timestep_embedding(torch.tensor([1.0]), 4, max_period=100.0)
    tensor([[0.8415, 0.0100, 0.5403, 0.9999]])
    """
    module = TimestepEmbedding(
        dim,
        max_period=max_period,
        flip_sin_to_cos=flip_sin_to_cos,
        downscale_freq_shift=downscale_freq_shift,
        scale=scale,
    )
    result: torch.Tensor = module(timesteps, dtype=dtype)
    return result
