"""The functional PyTorch API: the float64 core's tables as tensors, rounded once, and RoPE.

Shapes: ``S`` is any shape of positions, ``d`` is ``d_model``, ``r`` the rotated channels.
"""

from __future__ import annotations

from typing import Any

import torch

from .._checks import check_base, check_int
from .._conventions import ConventionName, get_convention
from .._features import PairLayout, check_pairs, feature_slices
from .._frequencies import frequencies
from .._rope_scaling import rope_frequencies, rope_scaling
from .._rotary import default_seq_len, resolve_rotary_dim
from ._checks import check_dtype, check_tensor, positions_tensor
from ._kernels._cast import cast_exact
from ._kernels._rope import RopeTables, rotate
from ._kernels._table import rope_cos_sin, sinusoidal_at

__all__ = ["apply_rotary", "cast_exact", "largest_position_seq_len", "rotary_cos_sin", "sinusoidal"]


def largest_position_seq_len(positions: torch.Tensor) -> int:
    """The sequence length a length-dependent RoPE scaling sees: the largest position + 1
    (Hugging Face's rule), 0 for no positions.

    It reads the positions: on an accelerator that is a host synchronisation (pass
    ``seq_len=`` to avoid it), and under ``torch.compile`` it is refused.
    """
    if torch.compiler.is_compiling():
        raise ValueError(
            "a rope_type that depends on the sequence length (dynamic, longrope) needs the "
            "largest position: under torch.compile pass seq_len= together with positions="
        )
    if not positions.numel() or positions.device.type == "meta":
        return 0
    length = default_seq_len(float(positions.max()))
    return 0 if length is None else length


def sinusoidal(
    positions: Any,
    d_model: int,
    *,
    base: float = 10000.0,
    convention: ConventionName = "paper",
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
    table = ("positions and d_model", d_model, d_model * dtype.itemsize)
    pos, checked = positions_tensor(positions, device, table=table)
    omega = torch.from_numpy(frequencies(d_model, base=base, convention=convention))
    layout = feature_slices(d_model, get_convention(convention))
    return sinusoidal_at(pos, omega, layout, d_model, dtype, checked=checked)


def rotary_cos_sin(
    positions: Any,
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: Any = None,
    rotary_dim: int | None = None,
    pairs: PairLayout = "half",
    dtype: torch.dtype | None = None,
    device: Any = None,
    seq_len: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`posenc.rotary_cos_sin` as tensors, in any float dtype including bfloat16.

    Args:
        positions: an int ``L`` (positions ``0 .. L-1``) or a tensor/array of positions of any
            shape ``S`` (e.g. Hugging Face ``position_ids`` of shape ``(b, s)``).
        head_dim, base, scaling, rotary_dim, pairs, seq_len: as in :func:`posenc.rotary_cos_sin`.
        dtype: float16, bfloat16, float32 or float64; default ``torch.get_default_dtype()``.
        device: where the result lives; default the positions' device (CPU for an int).

    Returns:
        ``(cos, sin)`` of shape ``(L, r)`` or ``(*S, r)``, the float64 values (times the
        scaling's attention factor) rounded once: for ``pairs="half"`` what Hugging Face's
        ``LlamaRotaryEmbedding(x, position_ids)`` returns, without its float32 angle error.

    >>> cos, sin = rotary_cos_sin(torch.tensor([[0, 1]]), 4)
    >>> cos
    tensor([[[1.0000, 1.0000, 1.0000, 1.0000],
             [0.5403, 0.9999, 0.5403, 0.9999]]])
    >>> rotary_cos_sin(3, 8, dtype=torch.bfloat16)[1].dtype
    torch.bfloat16
    """
    head_dim = check_int("head_dim", head_dim, minimum=2)
    spec = rope_scaling(scaling)
    dim = resolve_rotary_dim(head_dim, rotary_dim, spec)
    pairs = check_pairs(pairs)
    base = check_base("base", base)
    dtype = check_dtype("dtype", torch.get_default_dtype() if dtype is None else dtype)
    table = ("positions and head_dim", dim, 2 * dim * dtype.itemsize)
    pos, checked = positions_tensor(positions, device, table=table)
    if seq_len is None and spec is not None and spec.depends_on_length:
        seq_len = largest_position_seq_len(pos)
    omega, attention = rope_frequencies(dim, base=base, scaling=spec, seq_len=seq_len)
    return rope_cos_sin(pos, torch.from_numpy(omega), attention, pairs, dtype, checked=checked)


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, pairs: PairLayout = "half"
) -> torch.Tensor:
    """Rotate the first ``r = cos.shape[-1]`` channels of ``x``; the rest pass through.

    ``x[..., :r]·cos + rotate(x[..., :r])·sin`` with ``rotate`` mapping each pair ``(a, b)``
    to ``(−b, a)``: Hugging Face's ``apply_rotary_pos_emb`` for ``pairs="half"`` (pass
    ``cos.unsqueeze(1)`` for its ``unsqueeze_dim=1``), the Meta/torchtune rotation for
    ``"interleaved"``. Partial rotation as in GPT-NeoX when ``r < x.shape[-1]``.

    Args:
        x: floating tensor ``(..., d)``, e.g. queries ``(b, h, s, d)``.
        cos, sin: tables of the same shape ``(..., r)`` (from :func:`rotary_cos_sin` with the
            same ``pairs``), broadcastable against ``x[..., :r]``, e.g. ``(s, r)`` or
            ``(b, 1, s, r)`` for ``x`` of shape ``(b, h, s, d)``; on ``x``'s device.
        pairs: ``"half"`` or ``"interleaved"``.

    Returns:
        tensor of ``x``'s shape and dtype. The arithmetic runs in float32 (float64 if ``x`` or
        ``cos`` is float64) and is rounded once to ``x.dtype``, so 16-bit inputs are rotated
        by float32 tables rather than tables rounded to 16 bits. In eager mode a fast path
        reads ``x`` once and writes the result once, in chunks that stay in the CPU caches.
        Half pairs give the formula's bits. Interleaved pairs are one complex multiplication,
        which PyTorch may evaluate with a fused multiply-add for some elements (those its
        vectorised loop leaves to scalar code): within one unit in the last place of the
        float32 (float64) formula, so the same token may differ in that last bit between
        calls of different shapes. Gradients flow to ``x`` (and to ``cos``/``sin`` when
        they require them, through the formula).

    >>> cos, sin = rotary_cos_sin(torch.tensor([1]), 4)
    >>> apply_rotary(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), cos, sin)
    tensor([[0.5403, 0.0000, 0.8415, 0.0000]])
    """
    pairs = check_pairs(pairs)
    check_tensor("x", x)
    check_tensor("cos", cos)
    check_tensor("sin", sin)
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if cos.device != x.device or sin.device != x.device:
        raise ValueError(
            f"cos and sin must be on x's device {x.device}, got {cos.device} and {sin.device}"
        )
    if x.dim() == 0 or cos.dim() == 0:
        raise ValueError(
            f"x and cos must have a channel dimension, got shapes {tuple(x.shape)} "
            f"and {tuple(cos.shape)}"
        )
    dim = cos.shape[-1]
    if dim < 2 or dim % 2 or dim > x.shape[-1]:
        raise ValueError(
            f"cos must have an even number of channels <= x.shape[-1] = {x.shape[-1]}, "
            f"got shape {tuple(cos.shape)}"
        )
    part = (*x.shape[:-1], dim)
    try:
        together = tuple(torch.broadcast_shapes(part, cos.shape))  # type: ignore[no-untyped-call]
    except RuntimeError:
        together = None
    if together != part:
        raise ValueError(
            f"cos/sin of shape {tuple(cos.shape)} must broadcast against x[..., :{dim}] of "
            f"shape {part} (x has shape {tuple(x.shape)})"
        )
    return rotate((x,), RopeTables(cos, sin), pairs)[0]
