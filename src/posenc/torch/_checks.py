"""Argument checks of the PyTorch front-end, and its one rule for checks that read tensor data.

The rule:

- **Python numbers** (lengths, offsets, dimensions, probabilities) are always checked and a bad
  one raises ``ValueError``/``TypeError`` naming the argument.
- **CPU tensors, arrays and lists** in eager mode: their values are checked like the NumPy
  core's, with the same errors (positions must be finite and within +-2**53, ...).
- **Accelerator tensors** (CUDA, MPS, ...; also meta tensors and anything traced by
  ``torch.compile``) are never read by a check, so the hot path never synchronises the host
  with the device. Checks that need their data run only on request:
  ``posenc.torch.set_data_checks(True)`` (eager mode). Without it a position that cannot be
  encoded exactly (non-finite, beyond +-2**53) never yields a finite, plausible value: its row
  of the table is NaN (a ``masked_fill`` on the positions, no synchronisation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._checks import MAX_EXACT_POSITION, check_int, check_position_magnitude, is_length
from .._switches import Switch
from ._kernels._cast import check_dtype

__all__ = [
    "add_offset",
    "as_positions",
    "check_dtype",
    "check_offset",
    "check_tensor",
    "data_checked",
    "positions_tensor",
    "set_data_checks",
]

_DATA_CHECKS = [False]


class set_data_checks(Switch):
    """Check the values of accelerator tensors too (eager mode): a call, or a ``with`` block
    that restores the previous setting on exit.

    By default only CPU tensors (and arrays, lists) have their values checked, because
    reading an accelerator tensor synchronises the host with the device; see the rule in
    the docs (docs/architecture.md). With ``set_data_checks(True)`` positions on any device
    raise the NumPy core's errors, at the price of one synchronisation per call.

    Args:
        enabled: True to check accelerator tensors' values; False (the default) not to.

    >>> import posenc.torch
    >>> with posenc.torch.set_data_checks(True):
    ...     pass
    """

    _state = _DATA_CHECKS


def data_checked(tensor: torch.Tensor) -> bool:
    """Whether the values of ``tensor`` are checked (see the module docstring)."""
    if torch.compiler.is_compiling() or tensor.device.type == "meta":
        return False
    return tensor.device.type == "cpu" or _DATA_CHECKS[0]


def check_tensor(name: str, value: Any) -> None:
    """``value`` must be a floating-point tensor."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")


def as_positions(name: str, positions: Any, device: Any = None) -> tuple[torch.Tensor, bool]:
    """Positions as an integer or float tensor (from a tensor, array or list), and whether
    their values were checked.

    Booleans and complex numbers are refused (metadata, always). Values (finite, within
    +-2**53) are checked where :func:`data_checked` allows; otherwise the caller marks
    unencodable positions with NaN rows.
    """
    if not isinstance(positions, torch.Tensor):
        try:
            positions = torch.as_tensor(np.asarray(positions), device=device)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(
                f"{name} must be a tensor or array of numbers, got {type(positions).__name__}"
            ) from exc
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"{name} must hold integers or real numbers, got dtype {positions.dtype}")
    checked = data_checked(positions)
    if checked and positions.numel():
        if positions.is_floating_point() and not bool(torch.isfinite(positions).all()):
            raise ValueError(f"{name} must be finite, got NaN or infinity among its values")
        # .item(): exact Python ints for integer positions (2**53 + 1 is caught)
        check_position_magnitude(name, positions.min().item(), positions.max().item())
    return positions, checked


def positions_tensor(positions: Any, device: Any = None) -> tuple[torch.Tensor, bool]:
    """An int ``L`` means ``arange(L)``; anything else goes through :func:`as_positions`.

    Returns the positions (on ``device`` when one is given) and whether they were checked.
    """
    if is_length(positions):
        length = check_int("positions", positions, minimum=0)
        check_position_magnitude("positions", 0, length)
        return torch.arange(length, device=device), True
    pos, checked = as_positions("positions", positions, device)
    return (pos if device is None else pos.to(device)), checked


def check_offset(offset: Any, length: Any = 0) -> int:
    """``offset`` must be an int >= 0 with ``offset + length`` within 2**53 (a ``torch.SymInt``
    under ``torch.compile`` is compared the same way)."""
    if not isinstance(offset, torch.SymInt):
        offset = check_int("offset", offset, minimum=0)
    elif offset < 0:
        raise ValueError(f"offset must be an integer >= 0, got {offset}")
    if offset + length > MAX_EXACT_POSITION + 1:  # the last position is offset + length - 1
        raise ValueError(
            f"offset must keep positions within 2**53 (float64 holds them exactly), got "
            f"offset={offset} for {length} positions"
        )
    return offset  # type: ignore[no-any-return]


def add_offset(positions: torch.Tensor, offset: int) -> torch.Tensor:
    """``positions + offset`` in int64 / float64, so narrow dtypes neither wrap nor round."""
    if isinstance(offset, int) and not offset:
        return positions
    wide = torch.float64 if positions.is_floating_point() else torch.int64
    return positions.to(wide) + offset
