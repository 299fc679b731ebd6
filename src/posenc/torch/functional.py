"""Functional PyTorch front-end: the float64 core's tables as tensors, rounded once.

Shapes: ``S`` is any shape of positions, ``d`` is ``d_model``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._checks import check_base, check_int, check_position_magnitude, is_length
from ..conventions import get_convention
from ..frequencies import frequencies
from ..sinusoidal import FeatureSlices, feature_slices, fill_features

__all__ = ["as_positions", "cast_exact", "sinusoidal", "sinusoidal_from_omega"]

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_dtype(name: str, dtype: Any) -> torch.dtype:
    """``dtype`` must be one of torch.float16, bfloat16, float32, float64."""
    if dtype not in _FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be one of torch.float16, torch.bfloat16, torch.float32, "
            f"torch.float64, got {dtype!r}"
        )
    return dtype  # type: ignore[no-any-return]


def cast_exact(table: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Round a float64 tensor to ``dtype`` once, to nearest (ties to even).

    ``Tensor.to(torch.float16 / torch.bfloat16)`` goes through float32 and so rounds twice,
    which is off by one unit in the last place for a few values. Here the float32 step uses
    round-to-odd, which makes the second rounding exact.

    >>> x = torch.tensor([1.0 + 2**-8 + 2**-30], dtype=torch.float64)
    >>> x.to(torch.bfloat16).item(), cast_exact(x, torch.bfloat16).item()
    (1.0, 1.0078125)
    """
    if table.dtype != torch.float64:
        raise TypeError(f"table must be float64, got {table.dtype}")
    if dtype in (torch.float64, torch.float32):
        return table.to(dtype)
    check_dtype("dtype", dtype)
    rounded = table.to(torch.float32)
    back = rounded.to(torch.float64)
    # Truncate toward zero (one step down in magnitude where rounding went up), then set the
    # last bit where the float32 value is inexact: that is round-to-odd.
    bits = rounded.view(torch.int32)
    bits = bits - (back.abs() > table.abs()).to(torch.int32)
    bits = bits | (back != table).to(torch.int32)
    return bits.view(torch.float32).to(dtype)


def work_device(device: torch.device) -> torch.device:
    """float64 is computed where it exists: MPS has no float64, so it is done on the CPU."""
    return torch.device("cpu") if device.type == "mps" else device


def sinusoidal_from_omega(
    positions: torch.Tensor,
    omega: torch.Tensor,
    layout: FeatureSlices,
    d_model: int,
    dtype: torch.dtype,
) -> torch.Tensor:
    """The table for ``positions`` (any shape S) given float64 frequencies: (*S, d) in ``dtype``.

    No argument checks: this is the hot path shared by the functional API and the modules.
    Angles and sin/cos are float64; :func:`cast_exact` is the only rounding.
    """
    device = positions.device
    work = work_device(device)
    pos = positions.to(device=work, dtype=torch.float64)
    angles = pos.unsqueeze(-1) * omega.to(work)
    table = torch.empty((*pos.shape, d_model), dtype=torch.float64, device=work)
    fill_features(table, angles, layout, torch.sin, torch.cos)
    return cast_exact(table, dtype).to(device)


def as_positions(name: str, positions: Any, device: Any = None) -> torch.Tensor:
    """Positions as an integer or float tensor (from a tensor, array or list); rejects bools,
    complex numbers and, outside ``torch.compile``, NaN and infinities."""
    if not isinstance(positions, torch.Tensor):
        try:
            positions = torch.as_tensor(np.asarray(positions), device=device)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(
                f"{name} must be a tensor or array of numbers, got {type(positions).__name__}"
            ) from exc
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"{name} must hold integers or real numbers, got dtype {positions.dtype}")
    if positions.numel() and positions.device.type != "meta" and not torch.compiler.is_compiling():
        if positions.is_floating_point() and not bool(torch.isfinite(positions).all()):
            raise ValueError(f"{name} must be finite, got NaN or infinity among its values")
        # .item(): exact Python ints for integer positions (2**53 + 1 is caught)
        check_position_magnitude(name, positions.min().item(), positions.max().item())
    result: torch.Tensor = positions
    return result


def positions_tensor(positions: Any, device: Any = None) -> torch.Tensor:
    """An int ``L`` means ``arange(L)``; anything else is checked (:func:`as_positions`).

    The result is on ``device`` when one is given.
    """
    if is_length(positions):
        length = check_int("positions", positions, minimum=0)
        return torch.arange(length, device=device)
    pos = as_positions("positions", positions, device)
    return pos if device is None else pos.to(device)


def sinusoidal(
    positions: Any,
    d_model: int,
    *,
    base: float = 10000.0,
    convention: Any = "paper",
    dtype: torch.dtype | None = None,
    device: Any = None,
) -> torch.Tensor:
    """:func:`posenc.sinusoidal` as a tensor, in any float dtype including bfloat16.

    Args:
        positions: an int ``L`` (positions ``0 .. L-1``) or a tensor/array of positions of any
            shape ``S`` (integer or real).
        d_model: number of channels, an integer >= 1.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.
        dtype: float16, bfloat16, float32 or float64; default ``torch.get_default_dtype()``.
        device: where the result lives; default the positions' device (CPU for an int).

    Returns:
        tensor of shape ``(L, d_model)`` or ``(*S, d_model)``: the float64 table rounded once.

    >>> sinusoidal(2, 4)
    tensor([[0.0000, 1.0000, 0.0000, 1.0000],
            [0.8415, 0.5403, 0.0100, 0.9999]])
    >>> sinusoidal(torch.tensor([65520]), 2, dtype=torch.float16)  # no inf, unlike fp16 recipes
    tensor([[-0.8706,  0.4919]], dtype=torch.float16)
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    dtype = check_dtype("dtype", torch.get_default_dtype() if dtype is None else dtype)
    pos = positions_tensor(positions, device)
    omega = torch.from_numpy(frequencies(d_model, base=base, convention=convention))
    layout = feature_slices(d_model, get_convention(convention))
    return sinusoidal_from_omega(pos, omega, layout, d_model, dtype)
