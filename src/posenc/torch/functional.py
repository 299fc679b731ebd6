"""Functional PyTorch front-end: the float64 core's tables as tensors, rounded once.

Shapes: ``S`` is any shape of positions, ``d`` is ``d_model``.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .._checks import check_base, check_int, check_position_magnitude, is_length
from ..conventions import get_convention
from ..frequencies import frequencies
from ..sinusoidal import FeatureSlices, feature_slices, fill_by_angle_addition, fill_features

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
    # last bit where the float32 value is inexact: that is round-to-odd. ``back`` and
    # ``table`` have the same sign, and for floats of one sign the magnitudes compare like
    # their bit patterns read as int64: no abs() temporaries.
    away = back.view(torch.int64) > table.view(torch.int64)
    bits = rounded.view(torch.int32).add(away, alpha=-1) | (back != table)
    return bits.view(torch.float32).to(dtype)


_HUGE_PAGE = 2 << 20  # bytes of a transparent huge page on x86-64 and arm64 (4 KiB pages)


@functools.cache
def _madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise`` on Linux (None elsewhere or when it cannot be found)."""
    if not sys.platform.startswith("linux") or not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    function.restype = ctypes.c_int
    return function


def empty_table(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``torch.empty``, with transparent huge pages requested for a large CPU table.

    A fresh table is written once, and on Linux first-touching fresh memory costs one page
    fault per 4 KiB page, often more than computing the table. Like NumPy for its own large
    arrays, the whole 2 MiB pages inside the buffer are advised ``MADV_HUGEPAGE`` before
    anything touches them (one fault per 2 MiB where the system allows it). Only a hint: any
    failure is ignored and the tensor is an ordinary tensor either way.
    """
    out = torch.empty(shape, dtype=dtype, device=device)
    if device.type != "cpu" or out.nbytes < 2 * _HUGE_PAGE or torch.compiler.is_compiling():
        return out
    madvise = _madvise()
    if madvise is not None:
        start = -(-out.data_ptr() // _HUGE_PAGE) * _HUGE_PAGE
        stop = (out.data_ptr() + out.nbytes) // _HUGE_PAGE * _HUGE_PAGE
        if stop > start:
            madvise(start, stop - start, mmap.MADV_HUGEPAGE)
    return out


def work_device(device: torch.device) -> torch.device:
    """float64 is computed where it exists: MPS has no float64, so it is done on the CPU."""
    return torch.device("cpu") if device.type == "mps" else device


class TorchAngleOps:
    """:class:`posenc.sinusoidal.AngleOps` for torch tensors on one device.

    ``dtype`` is the output dtype: float16/bfloat16 chunks are rounded by :func:`cast_exact`.
    Inside ``torch.compile`` nothing depends on values (no deduplication, no consecutive test)
    and phasors are float64 ``(..., 2)`` pairs (inductor generates no code for complex numbers).
    """

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.device, self.dtype = device, dtype
        self.compiling = torch.compiler.is_compiling()
        # Few large chunks: every op is a parallel region whose threads must all be scheduled
        # (a time slice each on a busy machine), so 32 MiB chunks, sized for a large L3 cache.
        self.chunk = 1 << 21 if device.type == "cpu" else 1 << 22

    def arange(self, n: int) -> torch.Tensor:
        return torch.arange(n, dtype=torch.float64, device=self.device)

    def float64(self, values: torch.Tensor) -> torch.Tensor:
        return values.to(torch.float64)

    def phasors(self, angles: torch.Tensor, *, conjugate: bool) -> torch.Tensor:
        sin, cos = torch.sin(angles), torch.cos(angles)
        real, imag = (cos, sin.neg_()) if conjugate else (sin, cos)
        return torch.stack((real, imag), -1) if self.compiling else torch.complex(real, imag)

    def empty_phasors(self, shape: tuple[int, ...]) -> torch.Tensor:
        if self.compiling:
            return torch.empty((*shape, 2), dtype=torch.float64, device=self.device)
        return torch.empty(shape, dtype=torch.complex128, device=self.device)

    def multiply(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        if self.compiling:  # (real, imaginary) pairs
            out[..., 0] = a[..., 0] * b[..., 0] - a[..., 1] * b[..., 1]
            out[..., 1] = a[..., 0] * b[..., 1] + a[..., 1] * b[..., 0]
            return out
        return torch.mul(a, b, out=out)

    def as_pairs(self, z: torch.Tensor) -> torch.Tensor:
        return z if self.compiling else torch.view_as_real(z)

    def unique(self, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        if self.compiling:
            return None
        distinct, inverse = torch.unique(values, return_inverse=True)
        return distinct, inverse

    def consecutive_start(self, positions: torch.Tensor) -> int | None:
        if self.compiling or positions.dim() != 1 or positions.shape[0] == 0:
            return None
        first, last = (int(v) for v in positions[[0, -1]].tolist())
        if last - first != positions.shape[0] - 1:
            return None
        return first if bool((positions.diff() == 1).all()) else None

    def store(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        if self.dtype in (torch.float32, torch.float64):  # copy_ rounds these once
            dst.copy_(src)
            return
        # cast_exact makes several temporaries of src's size: keep them small (cache-sized,
        # recycled by the allocator instead of freshly mapped) and within torch's grain size,
        # so its ops run inline instead of as parallel regions that wait for a busy core.
        rows = max(1, (1 << 15) // max(1, src.shape[-1]))
        for start in range(0, src.shape[0], rows):
            dst[start : start + rows] = cast_exact(src[start : start + rows], self.dtype)


def sinusoidal_from_omega(
    positions: torch.Tensor,
    omega: torch.Tensor,
    layout: FeatureSlices,
    d_model: int,
    dtype: torch.dtype,
) -> torch.Tensor:
    """The table for ``positions`` (any shape S) given float64 frequencies: (*S, d) in ``dtype``.

    No argument checks: this is the hot path shared by the functional API and the modules.
    Integer positions in float32/float16/bfloat16 are built by angle addition
    (:func:`posenc.sinusoidal.fill_by_angle_addition`, the algorithm of the NumPy core, so
    both give the same values); real positions and float64 output take float64 angles and
    sin/cos directly. Either way :func:`cast_exact` (or a float32 cast) is the only rounding.
    """
    device = positions.device
    work = work_device(device)
    if positions.is_floating_point() or dtype == torch.float64 or device.type == "meta":
        pos = positions.to(device=work, dtype=torch.float64)
        angles = pos.unsqueeze(-1) * omega.to(work)
        table = torch.empty((*pos.shape, d_model), dtype=torch.float64, device=work)
        fill_features(table, angles, layout, torch.sin, torch.cos)
        return cast_exact(table, dtype).to(device)
    flat = positions.to(device=work, dtype=torch.int64).reshape(-1)
    out = empty_table((flat.shape[0], d_model), dtype, work)
    ops = TorchAngleOps(work, dtype)
    fill_by_angle_addition(out, flat, omega.to(work), layout, ops)
    return out.reshape(*positions.shape, d_model).to(device)


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
