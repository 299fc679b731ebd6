"""Kernel family **cast**: float64 tables rounded once to the dtype they are used in.

``Tensor.to(torch.float16 / torch.bfloat16)`` goes through float32 and so rounds twice, which
is one unit in the last place off for a few values. :func:`cast_exact` rounds once: the float32
step uses round-to-odd, which makes the second rounding exact. Entry point for writing into an
existing table: :func:`store` (fast path: cache-sized chunks; plain formula: one cast).
"""

from __future__ import annotations

from typing import Any

import torch

from ..._switches import fast_paths_enabled
from .._checks import check_dtype

__all__ = ["cast_exact", "store"]


def cast_exact(table: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Round a float64 tensor to ``dtype`` once, to nearest (ties to even).

    ``Tensor.to(torch.float16 / torch.bfloat16)`` goes through float32 and so rounds twice,
    which is off by one unit in the last place for a few values. Here the float32 step uses
    round-to-odd, which makes the second rounding exact.

    Args:
        table: a float64 tensor of any shape, on any device.
        dtype: torch.float16, bfloat16, float32 or float64.

    Returns:
        tensor of ``table``'s shape in ``dtype``.

    Gradients: where ``table`` requires grad (and grad mode is on) the result has a graph,
    in every dtype. The rounding is passed straight through: the backward pass hands the
    incoming gradient back, converted to float64 exactly, as ``Tensor.to`` does for float32.
    So a gradient computed through a 16-bit table is the float64 derivative, the same as
    through a float32 or float64 table given the same incoming gradient values.

    >>> x = torch.tensor([1.0 + 2**-8 + 2**-30], dtype=torch.float64)
    >>> x.to(torch.bfloat16).item(), cast_exact(x, torch.bfloat16).item()
    (1.0, 1.0078125)
    >>> y = cast_exact(x.requires_grad_(), torch.bfloat16)
    >>> y.sum().backward()
    >>> x.grad
    tensor([1.], dtype=torch.float64)
    """
    if not isinstance(table, torch.Tensor):
        raise TypeError(f"table must be a float64 tensor, got {type(table).__name__}")
    if table.dtype != torch.float64:
        raise TypeError(f"table must be float64, got {table.dtype}")
    check_dtype("dtype", dtype)
    if dtype in (torch.float64, torch.float32):
        return table.to(dtype)
    if table.requires_grad and torch.is_grad_enabled():  # host attributes: no sync
        result: torch.Tensor = _RoundOnce.apply(table, dtype)  # type: ignore[no-untyped-call]
        return result
    return _round_once(table, dtype)


def _round_once(table: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 ``table`` rounded once to float16/bfloat16 (no autograd)."""
    rounded = table.to(torch.float32)
    back = rounded.to(torch.float64)
    # Truncate toward zero (one step down in magnitude where rounding went up), then set the
    # last bit where the float32 value is inexact: that is round-to-odd. ``back`` and
    # ``table`` have the same sign, and for floats of one sign the magnitudes compare like
    # their bit patterns read as int64: no abs() temporaries.
    away = back.view(torch.int64) > table.view(torch.int64)
    bits = rounded.view(torch.int32).add(away, alpha=-1) | (back != table)
    return bits.view(torch.float32).to(dtype)


class _RoundOnce(torch.autograd.Function):
    """:func:`_round_once` with the rounding passed straight through in the backward pass
    (the incoming gradient converted to float64, exactly), as ``Tensor.to`` differentiates."""

    generate_vmap_rule = True

    @staticmethod
    def forward(table: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return _round_once(table, dtype)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        pass

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grads[0].to(torch.float64), None


def store(dst: torch.Tensor, src: torch.Tensor) -> None:
    """``dst[...] = src`` with a single rounding of the float64 ``src`` to ``dst``'s dtype.

    Fast path (float16/bfloat16, eager): :func:`cast_exact` in chunks of about 32 K elements.
    It makes several temporaries of its input's size; small chunks keep them in the CPU
    caches (recycled by the allocator instead of freshly mapped) and within torch's grain
    size, so its operations run inline instead of as parallel regions that wait for a busy
    core. The plain formula casts the whole of ``src`` at once: the same values.
    """
    if dst.dtype in (torch.float32, torch.float64):  # copy_ rounds these once
        dst.copy_(src)
        return
    if not fast_paths_enabled() or torch.compiler.is_compiling() or src.dim() == 0:
        dst.copy_(cast_exact(src, dst.dtype))
        return
    rows = max(1, (1 << 15) // max(1, src.shape[-1]))
    for start in range(0, src.shape[0], rows):
        dst[start : start + rows] = cast_exact(src[start : start + rows], dst.dtype)
