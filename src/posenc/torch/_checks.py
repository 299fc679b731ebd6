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

The limit holds for positions *plus* their offset (``offset``, ``past_key_values_length``):
it is compared as Python numbers before any int64 addition could wrap. Unsigned integer
tensors (positions, token ids) are converted to int64 exactly; uint64 values from 2**63 up
fall under the limit like any other position beyond it.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any, overload

import torch

from .._checks import (
    MAX_EXACT_POSITION,
    as_length,
    check_allocation,
    check_position_magnitude,
    check_positions,
    check_shift,
    memory_limit,
)
from .._checks import check_offset as core_check_offset
from .._switches import Switch

__all__ = [
    "add_offset",
    "as_device",
    "as_positions",
    "check_dtype",
    "check_offset",
    "check_tensor",
    "check_token_ids",
    "data_checked",
    "positions_tensor",
    "set_data_checks",
    "shape_length",
    "token_differs",
]

_DATA_CHECKS = [False]

#: The dtypes the kernels compute in.
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

_UNSIGNED = (torch.uint8, torch.uint16, torch.uint32, torch.uint64)

#: Where unread data that cannot be a valid position (or offset) are sent: beyond the limit,
#: so their rows are NaN, and small enough that adding an offset cannot wrap int64.
_BEYOND = 2**62


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


def check_dtype(name: str, dtype: Any) -> torch.dtype:
    """``dtype`` must be one of torch.float16, bfloat16, float32, float64."""
    if dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be one of torch.float16, torch.bfloat16, torch.float32, "
            f"torch.float64, got {dtype!r}"
        )
    return dtype  # type: ignore[no-any-return]


def check_tensor(name: str, value: Any) -> None:
    """``value`` must be a dense (strided) floating-point tensor of a dtype the kernels
    compute in: float16, bfloat16, float32 or float64 (metadata only, always checked)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.is_nested:  # before anything asks for its shape, which it may not have
        raise TypeError(
            f"{name} must be a dense tensor, got a nested tensor; rotate each of its tensors"
        )
    if value.layout != torch.strided:
        raise TypeError(
            f"{name} must be a dense tensor, got layout {value.layout}; pass {name}.to_dense()"
        )
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    if value.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be a float16, bfloat16, float32 or float64 tensor, got dtype "
            f"{value.dtype}"
        )


_DEVICES = "None, a torch.device, a string such as 'cpu', 'cuda:0' or 'meta', or a device index"


@functools.lru_cache(maxsize=32)
def _missing(device: torch.device) -> str | None:
    """Why this machine cannot hold tensors on ``device``, or None when it can."""
    if device.type in ("cpu", "meta"):
        return None
    backend = getattr(torch, device.type, None)
    available = getattr(backend, "is_available", None)
    if callable(available):
        if not available():
            return f"torch.{device.type}.is_available() is False"
        count = getattr(backend, "device_count", None)
        if device.index is not None and callable(count) and device.index >= count():
            return f"it has {count()} {device.type} device(s)"
        return None
    try:  # a backend without an is_available(): ask for an empty tensor there
        torch.empty(0, device=device)
    except Exception as exc:  # torch raises RuntimeError, NotImplementedError, ImportError...
        return f"torch cannot allocate there: {type(exc).__name__}"
    return None


@overload
def as_device(value: Any, default: torch.device) -> torch.device: ...
@overload
def as_device(value: Any, default: None = None) -> torch.device | None: ...
def as_device(value: Any, default: torch.device | None = None) -> torch.device | None:
    """The ``device`` argument as a ``torch.device`` (``default`` for None), refused by name
    unless torch can parse it and this machine has it; the one gate of ``device=``.

    Python values only, no tensor is read: a string, an index or a ``torch.device``.
    """
    if value is None:
        return default
    if isinstance(value, torch.device):
        device = value
    elif isinstance(value, str | numbers.Integral) and not isinstance(value, bool):
        try:
            device = torch.device(value if isinstance(value, str) else int(value))
        except (RuntimeError, ValueError) as exc:  # torch's text lists every device type
            raise ValueError(f"device must be {_DEVICES}, got {value!r}") from exc
    else:
        raise TypeError(f"device must be {_DEVICES}, got {value!r} ({type(value).__name__})")
    if not torch.compiler.is_compiling():
        reason = _missing(device)
        if reason is not None:
            raise ValueError(
                f"device must be a device this machine has, got {str(device)!r} ({reason})"
            )
    return device


def shape_length(name: str, shape: Any) -> Any:
    """``s`` of the shape argument ``name``, ``(b, s, ...)``: a ``torch.Size``, tuple or list
    of integers >= 0 (``torch.SymInt`` while traced), with ``s <= 2**53 + 1`` (positions
    ``0 .. s-1`` within the limit). Python values only."""
    allowed = f"{name} must be (b, s): a torch.Size, tuple or list of integers >= 0"
    if not isinstance(shape, tuple | list):  # torch.Size is a tuple
        raise TypeError(f"{allowed}, got {shape!r:.80} ({type(shape).__name__})")
    if len(shape) < 2:
        raise ValueError(f"{allowed}, got {tuple(shape)!r:.80}")
    for n in shape[:2]:
        if isinstance(n, torch.SymInt):
            continue
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"{allowed}, got {tuple(shape)!r:.80} (a {type(n).__name__})")
        if n < 0:
            raise ValueError(f"{allowed}, got {tuple(shape)!r:.80}")
    length = shape[1]
    if isinstance(length, torch.SymInt):
        return length
    if length - 1 > MAX_EXACT_POSITION:
        raise ValueError(
            f"{allowed}, with s <= 2**53 + 1 (positions 0 .. s-1 within 2**53, where float64 "
            f"holds them exactly), got s = {length}"
        )
    return int(length)


def check_token_ids(name: str, ids: Any, what: str = "token ids") -> torch.Tensor:
    """``ids`` must be a tensor of integer token ids: any integer dtype, unsigned included
    (compared and converted exactly by the callers); booleans, complex and floating-point
    tensors are refused. Metadata only, no value is read."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of integer {what}, got {type(ids).__name__}"
        )
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(
            f"{name} must be an integer tensor of {what}, got dtype {ids.dtype} "
            "(any integer dtype is accepted, unsigned included)"
        )
    return ids


def token_differs(ids: torch.Tensor, value: int) -> torch.Tensor:
    """``ids != value`` exactly, as a bool tensor of ``ids``' shape: a ``value`` that the
    ids' dtype cannot hold equals no id (it is never wrapped into the dtype's range, as
    ``ids.ne(value)`` would). A Python-number comparison, no value of ``ids`` is read."""
    info = torch.iinfo(ids.dtype)
    if info.min <= value <= info.max:
        return ids.ne(value)
    return torch.ones(ids.shape, dtype=torch.bool, device=ids.device)


def _signed(name: str, values: torch.Tensor, checked: bool) -> torch.Tensor:
    """Unsigned integers as int64, exactly. uint64 values from 2**63 up do not fit: checked
    data raise the position limit's error; unread data get a value beyond the limit (NaN rows
    downstream, no synchronisation)."""
    if values.dtype not in _UNSIGNED:
        return values
    if values.dtype != torch.uint64:
        return values.to(torch.int64)
    wide = values.view(torch.int64)  # from 2**63 up: negative
    if not checked:
        return wide.masked_fill(wide < 0, _BEYOND)
    if wide.numel() and int(wide.min()) < 0:
        check_position_magnitude(name, 0, int(wide[wide < 0].max()) + 2**64)
    return wide


def _host_positions(name: str, positions: Any, device: Any) -> torch.Tensor:
    """Arrays and lists checked like the NumPy core's, as a tensor on ``device``; an array
    view with negative strides (``a[::-1]``), which torch cannot share, is copied."""
    values = check_positions(name, positions)
    if any(step < 0 for step in values.strides):
        values = values.copy()
    return torch.as_tensor(values, device=device)


def _check_not_meta(name: str, positions: torch.Tensor, device: Any, against: str) -> None:
    """Meta positions hold no values: they cannot make a table anywhere but on meta."""
    if positions.device.type != "meta" or device is None:
        return
    target = torch.device(device)
    if target.type != "meta":
        where = f"device={str(target)!r} was asked" if against == "device" else None
        raise ValueError(
            f"{name} are on the meta device, which holds shapes but no values, and "
            f"{where or f'{against} is on {target}'}: pass {name} on {target} "
            "(or everything on the meta device)"
        )


def as_positions(
    name: str, positions: Any, device: Any = None, *, offset: Any = 0, against: str = "x"
) -> tuple[torch.Tensor, bool]:
    """``positions + offset`` as an integer or float tensor (from a tensor, array or list),
    and whether their values were checked: the one gate of explicit positions.

    Booleans and complex numbers are refused (metadata, always); unsigned integers become
    int64 exactly. ``offset`` goes through :func:`check_offset`. Values (finite, within
    +-2**53 once the offset is added) are checked where :func:`data_checked` allows, against
    the limits as Python numbers, before the addition (which widens to int64 / float64)
    could wrap; otherwise the caller marks unencodable positions with NaN rows. Positions on
    the meta device for a ``device`` that is not meta are refused, naming ``against`` (what
    decided ``device``: ``"x"``, ``"q"``, ``"device"``).
    """
    if not isinstance(positions, torch.Tensor):  # host data, checked like the NumPy core's
        positions = _host_positions(name, positions, device)
    if positions.is_nested:
        raise TypeError(f"{name} must be a dense tensor, got a nested tensor")
    if positions.layout != torch.strided:
        raise TypeError(
            f"{name} must be a dense tensor, got layout {positions.layout}; pass {name}.to_dense()"
        )
    _check_not_meta(name, positions, device, against)
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"{name} must hold integers or real numbers, got dtype {positions.dtype}")
    offset = check_offset(offset)
    checked = data_checked(positions) and not isinstance(offset, torch.Tensor)
    positions = _signed(name, positions, checked)
    if checked and positions.numel():
        # one pass; NaN propagates to both ends; .item(): exact Python ints for integers
        ends = torch.aminmax(positions)
        low, high = ends.min.item(), ends.max.item()
        if positions.is_floating_point() and not (math.isfinite(low) and math.isfinite(high)):
            raise ValueError(f"{name} must be finite, got NaN or infinity among its values")
        shifted = f"{name} + offset" if isinstance(offset, int) and offset else name
        check_position_magnitude(shifted, low + offset, high + offset)
    return add_offset(positions, offset), checked


def positions_tensor(
    positions: Any, device: Any = None, *, table: tuple[str, int, int] = ("positions", 1, 0)
) -> tuple[torch.Tensor, bool]:
    """An int ``L`` means ``arange(L)``; anything else goes through :func:`as_positions`.

    ``table`` is ``(names, width, itemsize)`` of the table the positions are for: for a
    length, a table that cannot fit in memory is refused before ``arange(L)`` is made.
    Returns the positions (on ``device`` when one is given) and whether they were checked.
    """
    length = as_length("positions", positions)
    if length is not None:
        names, width, itemsize = table
        check_allocation(names, (length, width), itemsize)
        return torch.arange(length, device=device), True
    pos, checked = as_positions("positions", positions, device, against="device")
    return (pos if device is None else pos.to(device)), checked


def _offset_tensor(name: str, offset: torch.Tensor) -> Any:
    """A one-value integer tensor offset: its int when its data may be read (then checked
    like a Python int), else an int64 tensor with a value beyond the limit where it is
    negative or too large (NaN rows downstream, no synchronisation)."""
    if offset.dtype == torch.bool or offset.is_floating_point() or offset.is_complex():
        raise TypeError(
            f"{name} must be an int >= 0 or an integer tensor, got a tensor of dtype {offset.dtype}"
        )
    if offset.numel() != 1:
        raise ValueError(f"{name} must hold one value, got a tensor of shape {tuple(offset.shape)}")
    checked = data_checked(offset)
    offset = _signed(name, offset.reshape(()), checked)
    if checked:
        return offset.item()
    return offset.to(torch.int64).masked_fill((offset < 0) | (offset > MAX_EXACT_POSITION), _BEYOND)


def check_offset(offset: Any, length: Any = 0, *, name: str = "offset", first: int = 0) -> Any:
    """``offset`` (argument ``name``) shifts positions ``first .. first + length - 1``; all of
    them must stay within 2**53, and so must the offset itself.

    A Python (or NumPy) int is checked and returned; a ``torch.SymInt`` (``torch.compile``) is
    compared the same way; a one-value integer tensor (Hugging Face's
    ``past_key_values_length``) is read and checked like an int where :func:`data_checked`
    allows, else returned as a tensor that maps an offset that cannot be valid beyond the
    limit, so its positions get NaN rows.
    """
    largest = first + length - 1  # no branch on length: it may be a torch.SymInt
    plain = type(offset) is int and type(largest) is int  # the usual call
    if plain and 0 <= offset <= MAX_EXACT_POSITION - max(largest, 0):
        return offset  # within the limit (else the error below)
    if isinstance(offset, torch.Tensor):
        offset = _offset_tensor(name, offset)
        if isinstance(offset, torch.Tensor):
            return offset
    if not isinstance(offset, torch.SymInt):
        return core_check_offset(name, offset, largest)
    if offset < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {offset}")
    check_shift(name, offset, largest)
    return offset


def add_offset(positions: torch.Tensor, offset: Any) -> torch.Tensor:
    """``positions + offset`` in int64 / float64, so narrow dtypes neither wrap nor round.

    No check (see :func:`as_positions`). An offset is at most 2**53, so where unread int64
    positions do wrap, the sum lands below -2**63 + 2**53: far beyond the limit (a NaN row),
    never a plausible position.
    """
    if isinstance(offset, int) and not offset:
        return positions
    wide = torch.float64 if positions.is_floating_point() else torch.int64
    result: torch.Tensor = positions.to(wide) + offset
    return result


def check_size(names: str, shape: tuple[int, ...], itemsize: int, device: torch.device) -> None:
    """Refuse a table that cannot fit in ``device``'s memory, before allocating it.

    Concrete shapes only: nothing is checked while tracing or on the meta device, and nothing
    is read from the device (its total memory is a property, not a synchronisation). The hot
    path: a product and a comparison with a limit read once.
    """
    if torch.compiler.is_compiling():
        return
    needed = itemsize
    for n in shape:
        if type(n) is not int:
            return
        needed *= n
    if device.type == "cpu":
        limit = memory_limit()
    elif device.type == "cuda":
        limit = torch.cuda.get_device_properties(device).total_memory
    else:
        return
    if needed > limit:
        check_allocation(names, shape, itemsize, limit=limit)


def check_table_size(
    names: str, shape: tuple[int, ...], dtype: Any, device: Any, *, work: int = 0
) -> None:
    """:func:`check_size` for a module's table from its factory arguments (None: torch's
    default dtype and device), with ``work`` more bytes per element (float64 temporaries).

    A ``dtype`` or ``device`` that is not one is left to its own check, made elsewhere.
    """
    dtype = torch.get_default_dtype() if dtype is None else dtype
    try:
        where = torch.get_default_device() if device is None else torch.device(device)
    except (TypeError, RuntimeError):
        return
    if isinstance(dtype, torch.dtype):
        check_size(names, shape, dtype.itemsize + work, where)
