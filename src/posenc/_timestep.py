"""Diffusion timestep embeddings: the sinusoidal encoding of a (possibly fractional) timestep.

The embedding of a timestep ``t`` with ``dim`` channels and ``h = dim // 2`` frequencies is ::

    ω_k = max_period^(-k / (h - downscale_freq_shift)),   k = 0 .. h - 1
    flip_sin_to_cos=False:  [sin(s·t·ω_0), ..., sin(s·t·ω_{h-1}) | cos(s·t·ω_0), ... | 0]
    flip_sin_to_cos=True:   [cos(s·t·ω_0), ..., cos(s·t·ω_{h-1}) | sin(s·t·ω_0), ... | 0]

with ``s = scale`` and a zero column appended when ``dim`` is odd. This is diffusers'
``get_timestep_embedding`` (and its ``Timesteps`` module); DDPM, ADM/guided-diffusion and DiT
write the same formula (``downscale_freq_shift=0`` and ``flip_sin_to_cos=True`` in ADM and DiT;
``downscale_freq_shift=1`` is the tensor2tensor / fairseq schedule).

diffusers computes the frequencies and angles in float32, so its angles are off by about
``1e-7·t·s`` (1e-4 at t = 1000); here they are float64 and the result is rounded once.

>>> timestep_embedding([0, 0.5, 999], 6).shape
(3, 6)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from ._checks import (
    check_allocation,
    check_base,
    check_bool,
    check_float_dtype,
    check_int,
    check_position_magnitude,
    check_positions,
    check_real,
)
from ._features import FeatureSlices, fill_features

__all__ = ["timestep_embedding", "timestep_frequencies", "timestep_layout"]


def timestep_frequencies(
    dim: int, *, max_period: float = 10000.0, downscale_freq_shift: float = 1.0
) -> npt.NDArray[np.float64]:
    """The angular frequencies ω_k = max_period^(-k / (h - downscale_freq_shift)), float64 ``(h,)``.

    ``h = dim // 2``. ``downscale_freq_shift=1`` gives the ``tensor2tensor`` schedule
    (:func:`posenc.frequencies`, last frequency exactly 1/max_period) and
    ``downscale_freq_shift=0`` the paper's max_period^(-2k/dim) for even ``dim``. ω_0 is 1 for
    every shift, also for ``h = 1`` where the exponent's denominator may vanish (diffusers gives
    NaN for ``dim`` 2 or 3 with shift 1).

    Args:
        dim: number of embedding channels, an integer >= 1.
        max_period: the longest period's base (10000 in diffusers), a finite number > 0.
        downscale_freq_shift: a finite real number; it must differ from ``h`` when ``h >= 2``
            (the exponent would divide by zero).

    Returns:
        ``np.ndarray`` of float64, shape ``(dim // 2,)``.

    >>> timestep_frequencies(8)
    array([1.00000000e+00, 4.64158883e-02, 2.15443469e-03, 1.00000000e-04])
    >>> timestep_frequencies(8, downscale_freq_shift=0)
    array([1.   , 0.1  , 0.01 , 0.001])
    """
    dim = check_int("dim", dim, minimum=1)
    max_period = check_base("max_period", max_period)
    shift = check_real("downscale_freq_shift", downscale_freq_shift)
    half = dim // 2
    if half < 2:
        return np.ones(half, dtype=np.float64)
    denominator = half - shift
    if denominator == 0.0:
        raise ValueError(
            f"downscale_freq_shift must differ from dim // 2 = {half} (the exponent "
            f"k / (dim // 2 - downscale_freq_shift) divides by it), got {shift!r}"
        )
    check_allocation("dim", (half,), 8)
    k = np.arange(half, dtype=np.float64)
    with np.errstate(over="ignore"):
        omega = np.power(max_period, -k / denominator)
    if not np.all(np.isfinite(omega)):
        raise ValueError(
            f"downscale_freq_shift={shift!r} with dim={dim} and max_period={max_period!r} makes "
            "the frequencies overflow; use a shift further below dim // 2"
        )
    return omega


def timestep_layout(dim: int, flip_sin_to_cos: bool = False) -> FeatureSlices:
    """Channel layout of the timestep embedding: ``[sin | cos | 0]`` or ``[cos | sin | 0]``.

    >>> layout = timestep_layout(5, flip_sin_to_cos=True)
    >>> layout.cos, layout.sin, layout.zero
    (slice(0, 2, None), slice(2, 4, None), slice(4, 5, None))
    """
    dim = check_int("dim", dim, minimum=1)
    flip = check_bool("flip_sin_to_cos", flip_sin_to_cos)
    half = dim // 2
    first, second = slice(0, half), slice(half, 2 * half)
    sin, cos = (second, first) if flip else (first, second)
    return FeatureSlices(sin=sin, cos=cos, zero=slice(2 * half, dim), n_sin=half, n_cos=half)


def timestep_embedding(
    timesteps: Any,
    dim: int,
    *,
    max_period: float = 10000.0,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    dtype: Any = np.float32,
) -> npt.NDArray[Any]:
    """Sinusoidal timestep embedding with diffusers ``get_timestep_embedding`` semantics.

    See the module docstring for the formula. Angles ``scale·t·ω_k`` are float64; the only
    rounding is the final cast to ``dtype``.

    Args:
        timesteps: a number or an array-like of numbers of any shape ``S`` (integers or reals;
            fractional and negative timesteps are fine). Unlike :func:`posenc.sinusoidal`, an
            int is one timestep, not a length. diffusers accepts only ``S = (N,)``.
        dim: number of channels, an integer >= 1 (odd ``dim`` ends with a zero column).
        max_period: base of the frequencies, a finite number > 0 (10000).
        flip_sin_to_cos: False for ``[sin | cos]``, True for ``[cos | sin]``.
        downscale_freq_shift: the shift in the exponent's denominator (1 in diffusers' function,
            0 in ADM / DiT); see :func:`timestep_frequencies`.
        scale: multiplies the angles, a finite real number (e.g. 1000 for t in [0, 1]).
        dtype: float32 (default), float16 or float64.

    Returns:
        ``np.ndarray`` of shape ``(*S, dim)`` (``(dim,)`` for a scalar) and the given dtype.

    Accuracy: float32 results are within 1e-7 of the exact value while ``|scale·t| < 10^7``.

    >>> timestep_embedding([0.0, 2.5], 4, max_period=100).round(4)  # ω = [1, 0.01]
    array([[ 0.    ,  0.    ,  1.    ,  1.    ],
           [ 0.5985,  0.025 , -0.8011,  0.9997]], dtype=float32)
    >>> timestep_embedding(7, 5, flip_sin_to_cos=True).shape
    (5,)
    """
    dim = check_int("dim", dim, minimum=1)
    omega = timestep_frequencies(
        dim, max_period=max_period, downscale_freq_shift=downscale_freq_shift
    )
    layout = timestep_layout(dim, flip_sin_to_cos)
    scale = check_real("scale", scale)
    out_dtype = check_float_dtype("dtype", dtype)
    t = check_positions("timesteps", timesteps)
    if t.size:  # .item(): exact Python ints for integer timesteps
        lo, hi = t.min().item(), t.max().item()
        check_position_magnitude("timesteps", lo, hi)
        largest = max(abs(lo), abs(hi)) * abs(scale) * float(np.max(omega, initial=0.0))
        if not math.isfinite(largest):
            raise ValueError(
                f"scale * timesteps * frequency overflows float64 (scale={scale!r}, "
                f"largest |timestep| {max(abs(lo), abs(hi))!r}, largest frequency "
                f"{float(np.max(omega))!r} from max_period={max_period!r} and "
                f"downscale_freq_shift={downscale_freq_shift!r}); use a smaller scale or a larger "
                "max_period"
            )
    # the float64 angles (half the channels) and the result
    check_allocation("timesteps and dim", (t.size, dim), out_dtype.itemsize + 4)
    angles = np.multiply.outer(t.astype(np.float64), scale * omega)
    out = np.empty((*t.shape, dim), dtype=out_dtype)
    return fill_features(out, angles, layout, np.sin, np.cos)
