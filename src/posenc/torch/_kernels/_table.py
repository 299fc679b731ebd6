"""Kernel family **table**: sinusoidal and RoPE tables as tensors, from float64, rounded once.

Entry points (each chooses between a fast path and the plain formula written here):

- :func:`sinusoidal_rows`: the table of positions ``start .. stop-1`` (caches, default
  positions). Fast path: the angle-addition engine of ``posenc._angle_addition`` for
  consecutive positions, which reads no tensor data, on every device.
- :func:`sinusoidal_at`: the table of explicit positions of any shape. Fast path: the same
  engine with its distinct-value tables, eager and CPU only (it reads the positions).
- :func:`rope_cos_sin`, :func:`multi_axis_cos_sin`: RoPE cos/sin of 1-D positions and of
  coordinates ``(..., n_axes)`` (one formula: angles, cos, sin and the attention factor in
  float64, one rounding).

The plain formulas are those of ``posenc._sinusoidal`` (direct for real positions and float64
tables, angle addition otherwise) written with whole-tensor operations: what ``torch.compile``
traces and what runs under ``posenc.set_fast_paths(False)``; the fast paths give the same bits.

``checked=False`` marks positions whose data were not checked (accelerator tensors, traced
code): a position that cannot be encoded exactly (non-finite, beyond +-2**53) gets a NaN row
instead of a finite, plausible one, with no host synchronisation.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import sys
from collections.abc import Callable

import torch

from ..._angle_addition import fill_by_angle_addition, fill_rows
from ..._angles import angle_addition, split_positions
from ..._checks import MAX_EXACT_POSITION
from ..._features import FeatureSlices, fill_features, pair_slices
from ..._switches import fast_paths_enabled
from .._checks import check_size
from ._cast import cast_exact, store

__all__ = [
    "TorchAngleOps",
    "empty_table",
    "multi_axis_cos_sin",
    "nan_where_unencodable",
    "rope_cos_sin",
    "sinusoidal_at",
    "sinusoidal_rows",
    "work_device",
]

# Rows x frequencies per chunk of the plain formula outside torch.compile (float64 temporaries).
_FORMULA_CHUNK = 1 << 20


def work_device(device: torch.device) -> torch.device:
    """float64 is computed where it exists: MPS has no float64, so it is done on the CPU."""
    return torch.device("cpu") if device.type == "mps" else device


def _unencodable(positions: torch.Tensor) -> torch.Tensor:
    """Where ``positions`` cannot be encoded exactly: non-finite or beyond +-2**53."""
    if positions.is_floating_point():
        return ~(positions.abs() <= MAX_EXACT_POSITION)  # NaN compares false
    return (positions > MAX_EXACT_POSITION) | (positions < -MAX_EXACT_POSITION)


def nan_where_unencodable(
    table: torch.Tensor, positions: torch.Tensor, *, coordinates: bool = False
) -> torch.Tensor:
    """``table`` (``(*S, d)``) with NaN rows where ``positions`` (``S``, or ``(*S, n_axes)``
    with ``coordinates=True``: any coordinate) cannot be encoded exactly: non-finite or beyond
    +-2**53. No host synchronisation."""
    bad = _unencodable(positions)
    if coordinates:
        bad = bad.any(-1)
    return table.masked_fill(bad.unsqueeze(-1).to(table.device), float("nan"))


# -- sinusoidal: the plain formulas ------------------------------------------------------------


def _direct(
    positions: torch.Tensor, omega: torch.Tensor, layout: FeatureSlices, d: int, dtype: torch.dtype
) -> torch.Tensor:
    """``sin(p·ω)``, ``cos(p·ω)`` in float64, laid out, rounded once."""
    device, work = positions.device, work_device(positions.device)
    pos = positions.to(device=work, dtype=torch.float64)
    angles = pos.unsqueeze(-1) * omega.to(work)
    table = torch.empty((*pos.shape, d), dtype=torch.float64, device=work)
    fill_features(table, angles, layout, torch.sin, torch.cos)
    return cast_exact(table, dtype).to(device)


def _by_angle_addition(
    positions: torch.Tensor, omega: torch.Tensor, layout: FeatureSlices, d: int, dtype: torch.dtype
) -> torch.Tensor:
    """The angle-addition formula on integer positions (any shape), rounded once."""
    device, work = positions.device, work_device(positions.device)
    hi, lo = split_positions(positions.to(device=work, dtype=torch.int64))
    sin, cos = angle_addition(
        hi.to(torch.float64), lo.to(torch.float64), omega.to(work), torch.sin, torch.cos
    )
    table = torch.empty((*positions.shape, d), dtype=torch.float64, device=work)
    table[..., layout.sin] = sin[..., : layout.n_sin]
    table[..., layout.cos] = cos[..., : layout.n_cos]
    table[..., layout.zero] = 0
    return cast_exact(table, dtype).to(device)


def _formula(
    positions: torch.Tensor, omega: torch.Tensor, layout: FeatureSlices, d: int, dtype: torch.dtype
) -> torch.Tensor:
    """The plain formula for any positions; eagerly in row chunks that bound the float64
    temporaries (shapes only: no tensor data is read)."""
    build: Callable[..., torch.Tensor] = _by_angle_addition
    if positions.is_floating_point() or dtype == torch.float64:
        build = _direct
    flat = positions.reshape(-1)
    rows = max(1, _FORMULA_CHUNK // max(omega.shape[0], 1))
    if torch.compiler.is_compiling() or flat.shape[0] <= rows:
        return build(positions, omega, layout, d, dtype)
    out = torch.empty((flat.shape[0], d), dtype=dtype, device=positions.device)
    for start in range(0, flat.shape[0], rows):
        out[start : start + rows] = build(flat[start : start + rows], omega, layout, d, dtype)
    return out.reshape(*positions.shape, d)


# -- sinusoidal: the fast path ------------------------------------------------------------------

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
    if device.type != "cpu" or out.nbytes < 2 * _HUGE_PAGE:
        return out
    madvise = _madvise()
    if madvise is not None:
        start = -(-out.data_ptr() // _HUGE_PAGE) * _HUGE_PAGE
        stop = (out.data_ptr() + out.nbytes) // _HUGE_PAGE * _HUGE_PAGE
        if stop > start:
            madvise(start, stop - start, mmap.MADV_HUGEPAGE)
    return out


class TorchAngleOps:
    """The angle-addition engine's primitives (``posenc._angle_addition.AngleOps``) for torch
    tensors on one device, eager mode. ``dtype`` is the output dtype (``store`` rounds once)."""

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.device, self.dtype = device, dtype
        # Few large chunks: every op is a parallel region whose threads must all be scheduled
        # (a time slice each on a busy machine), so 32 MiB chunks, sized for a large L3 cache.
        self.chunk = 1 << 21 if device.type == "cpu" else 1 << 22

    def arange(self, n: int) -> torch.Tensor:
        return torch.arange(n, dtype=torch.float64, device=self.device)

    def float64(self, values: torch.Tensor) -> torch.Tensor:
        return values.to(torch.float64)

    def phasors(self, angles: torch.Tensor, *, conjugate: bool) -> torch.Tensor:
        sin, cos = torch.sin(angles), torch.cos(angles)
        return torch.complex(cos, sin.neg_()) if conjugate else torch.complex(sin, cos)

    def empty_phasors(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.empty(shape, dtype=torch.complex128, device=self.device)

    def multiply(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return torch.mul(a, b, out=out)

    def as_pairs(self, z: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(z)

    def unique(self, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        distinct, inverse = torch.unique(values, return_inverse=True)
        return distinct, inverse

    def consecutive_start(self, positions: torch.Tensor) -> int | None:
        if positions.dim() != 1 or positions.shape[0] == 0:
            return None
        first, last = (int(v) for v in positions[[0, -1]].tolist())
        if last - first != positions.shape[0] - 1:
            return None
        return first if bool((positions.diff() == 1).all()) else None

    def store(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        store(dst, src)


def _fast(dtype: torch.dtype) -> bool:
    """Whether the angle-addition engine may run (eager, fast paths on, a rounded dtype)."""
    return dtype != torch.float64 and fast_paths_enabled() and not torch.compiler.is_compiling()


# -- entry points -------------------------------------------------------------------------------


def sinusoidal_rows(
    start: int,
    stop: int,
    omega: torch.Tensor,
    layout: FeatureSlices,
    d: int,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """The table of positions ``start .. stop-1``: ``(stop - start, d)`` in ``dtype``.

    ``omega`` is float64 ``(n,)`` on any device. No argument checks (the hot path) but the
    size (:func:`check_size`).
    """
    check_size("positions and d_model", (stop - start, d), dtype.itemsize, device)
    if not _fast(dtype) or device.type == "meta":
        return _formula(torch.arange(start, stop, device=device), omega, layout, d, dtype)
    work = work_device(device)
    out = empty_table((stop - start, d), dtype, work)
    fill_rows(out, start, omega.to(work), layout, TorchAngleOps(work, dtype))
    return out.to(device)


def sinusoidal_at(
    positions: torch.Tensor,
    omega: torch.Tensor,
    layout: FeatureSlices,
    d: int,
    dtype: torch.dtype,
    *,
    checked: bool = True,
) -> torch.Tensor:
    """The table of ``positions`` (any shape ``S``): ``(*S, d)`` in ``dtype``, on their device.

    ``checked=False``: NaN rows where a position cannot be encoded exactly (see the module
    docstring). No argument checks (the hot path) but the size (:func:`check_size`).
    """
    check_size("positions and d_model", (positions.numel(), d), dtype.itemsize, positions.device)
    if positions.is_floating_point() or not _fast(dtype) or positions.device.type != "cpu":
        table = _formula(positions, omega, layout, d, dtype)
    else:
        flat = positions.to(torch.int64).reshape(-1)
        out = empty_table((flat.shape[0], d), dtype, positions.device)
        fill_by_angle_addition(out, flat, omega, layout, TorchAngleOps(positions.device, dtype))
        table = out.reshape(*positions.shape, d)
    return table if checked else nan_where_unencodable(table, positions)


def _pair_tables(
    angles: torch.Tensor, attention: float | torch.Tensor | None, pairs: str, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin ``(*S, 2n)`` of float64 angles ``(*S, n)``: times the attention factor (a
    number or one per pair; None for 1) in float64, laid out for ``pairs``, rounded once."""
    n = angles.shape[-1]
    first, second = pair_slices(pairs, n)
    tables = []
    for fn in (torch.cos, torch.sin):
        values = fn(angles)
        if attention is not None:
            values = values * attention
        full = torch.empty((*values.shape[:-1], 2 * n), dtype=torch.float64, device=angles.device)
        full[..., first] = values
        full[..., second] = values
        tables.append(cast_exact(full, dtype))
    return tables[0], tables[1]


def rope_cos_sin(
    positions: torch.Tensor,
    omega: torch.Tensor,
    attention: float,
    pairs: str,
    dtype: torch.dtype,
    *,
    checked: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE cos/sin ``(*S, 2n)`` for positions of any shape ``S`` and float64 ``omega`` (n,).

    Angles, cos, sin and the attention factor in float64; :func:`cast_exact` is the only
    rounding. ``checked=False``: NaN rows where a position cannot be encoded exactly. No
    argument checks (the hot path) but the size (:func:`check_size`: float64 work included).
    """
    device, work = positions.device, work_device(positions.device)
    n = omega.shape[0]
    check_size("positions and head_dim", (positions.numel(), 2 * n), 16 + dtype.itemsize, device)
    angles = positions.to(device=work, dtype=torch.float64).unsqueeze(-1) * omega.to(work)
    # The factor as a float64 tensor, moved like omega: the ONNX exporter writes a Python
    # float (or a fill value) as float32, one unit in the last place off
    factor = None
    if attention != 1.0:
        factor = torch.tensor(attention, dtype=torch.float64).to(work)
    cos, sin = _pair_tables(angles, factor, pairs, dtype)
    cos, sin = cos.to(device), sin.to(device)
    if checked:
        return cos, sin
    return nan_where_unencodable(cos, positions), nan_where_unencodable(sin, positions)


def multi_axis_cos_sin(
    positions: torch.Tensor,
    matrix: torch.Tensor,
    attention: torch.Tensor | None,
    axes: tuple[int, ...],
    pairs: str,
    dtype: torch.dtype,
    *,
    checked: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-axis RoPE cos/sin ``(*S, 2n)`` for coordinates ``(*S, n_axes)`` and a float64
    frequency matrix ``(n_axes, n)``.

    The angle of pair ``k`` is ``Σ_a p[a]·matrix[a, k]`` over ``axes`` (those with a non-zero
    frequency), summed in float64 from 0 in the NumPy core's order; cos, sin and
    ``attention`` (float64 ``(n,)``, None for 1) in float64; :func:`cast_exact` is the only
    rounding. ``checked=False``: NaN rows where a coordinate cannot be encoded exactly. No
    argument checks (the hot path) but the size (:func:`check_size`: float64 work included).
    """
    device, work = positions.device, work_device(positions.device)
    rows = positions.numel() // max(positions.shape[-1], 1) if positions.dim() else 0
    size = (rows, 2 * matrix.shape[1])
    check_size("positions and head_dim", size, 24 + dtype.itemsize, device)
    pos = positions.to(device=work, dtype=torch.float64)
    matrix = matrix.to(work)
    angles = torch.zeros((*pos.shape[:-1], matrix.shape[1]), dtype=torch.float64, device=work)
    for a in axes:
        angles = angles + pos[..., a : a + 1] * matrix[a]
    factor = None if attention is None else attention.to(work)
    cos, sin = _pair_tables(angles, factor, pairs, dtype)
    cos, sin = cos.to(device), sin.to(device)
    if checked:
        return cos, sin
    return (
        nan_where_unencodable(cos, positions, coordinates=True),
        nan_where_unencodable(sin, positions, coordinates=True),
    )
