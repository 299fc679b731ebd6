"""The functional PyTorch API: the float64 core's tables as tensors, rounded once, and RoPE.

Shapes: ``S`` is any shape of positions, ``d`` is ``d_model``, ``r`` the rotated channels.
"""

from __future__ import annotations

from typing import Any

import torch

from .._checks import check_base, check_int
from .._conventions import ConventionName, get_convention
from .._features import (
    PairLayout,
    check_pairs,
    feature_slices,
    layout_error,
    pair_columns_agree,
    pair_slices,
)
from .._frequencies import frequencies
from .._rope.rotary import (
    check_inverse,
    check_rotation_shapes,
    default_seq_len,
    resolve_rotary_dim,
)
from .._rope.scaling import rope_base, rope_frequencies, rope_scaling
from ._checks import as_device, check_dtype, check_tensor, data_checked, positions_tensor
from ._kernels._cast import cast_exact
from ._kernels._rope import RopeTables, rotate
from ._kernels._table import rope_cos_sin, sinusoidal_at

__all__ = [
    "apply_rotary",
    "cast_exact",
    "largest_position_seq_len",
    "refuse_length_export",
    "rotary_cos_sin",
    "sinusoidal",
]


def refuse_length_export(rope_type: str = "dynamic or longrope") -> None:
    """Refuse to export a RoPE whose frequencies switch with the sequence length: the switch
    is a branch on the length (or on the largest position) that one graph cannot hold."""
    raise ValueError(
        f"rope_type {rope_type} cannot be exported: it switches its frequencies with the "
        "sequence length, a branch that one exported graph cannot hold. Export "
        "RotaryEmbedding with a fixed seq_len= (the frequencies of that length), or a "
        "rope_type that does not depend on the length (default, linear, yarn, llama3)"
    )


#: What a caller whose ``forward`` takes ``seq_len=`` advises under ``torch.compile``.
PASS_SEQ_LEN = "under torch.compile pass seq_len= together with positions="


def largest_position_seq_len(positions: torch.Tensor, advice: str = PASS_SEQ_LEN) -> int:
    """The sequence length a length-dependent RoPE scaling sees: the largest position + 1
    (Hugging Face's rule), 0 for no positions.

    It reads the positions: on an accelerator that is a host synchronisation (pass
    ``seq_len=`` to avoid it), and under ``torch.compile`` it is refused with ``advice``
    (what the caller can do instead).
    """
    if torch.compiler.is_exporting():
        refuse_length_export()
    if torch.compiler.is_compiling():
        raise ValueError(
            "a rope_type that depends on the sequence length (dynamic, longrope) needs the "
            f"largest position: {advice}"
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
    device = as_device(device)
    table = ("positions and d_model", d_model, dtype.itemsize)
    pos, checked = positions_tensor(positions, device, table=table)
    omega = torch.from_numpy(frequencies(d_model, base=base, convention=convention))
    layout = feature_slices(d_model, get_convention(convention))
    return sinusoidal_at(pos, omega, layout, d_model, dtype, checked=checked)


def rotary_cos_sin(
    positions: Any,
    head_dim: int,
    *,
    base: float | None = None,
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
    base = check_base("base", rope_base(base, spec))
    dtype = check_dtype("dtype", torch.get_default_dtype() if dtype is None else dtype)
    device = as_device(device)
    table = ("positions and head_dim", dim, 2 * dtype.itemsize)  # cos and sin
    pos, checked = positions_tensor(positions, device, table=table)
    if seq_len is None and spec is not None and spec.depends_on_length:
        seq_len = largest_position_seq_len(pos)
    omega, attention = rope_frequencies(dim, base=base, scaling=spec, seq_len=seq_len)
    return rope_cos_sin(pos, torch.from_numpy(omega), attention, pairs, dtype, checked=checked)


def _laid_out(cos: torch.Tensor, sin: torch.Tensor, pairs: str) -> RopeTables:
    """Tables checked to be laid out for ``pairs``, by the rule for data checks.

    Read (CPU tensors, or any device under ``set_data_checks(True)``): a table of another
    layout raises the NumPy core's error. Not read (accelerator, meta, traced): the rows
    whose pairs disagree become NaN, with no synchronisation; the check runs over the tables,
    never over ``x``.
    """
    if data_checked(cos):  # sin is on cos's device (apply_rotary checks): the same answer
        first, second = pair_slices(pairs, cos.shape[-1] // 2)
        if torch.equal(cos[..., first], cos[..., second]) and torch.equal(
            sin[..., first], sin[..., second]
        ):  # the usual case, in two cheap calls
            return RopeTables(cos, sin)
        error = layout_error(cos, sin, pairs)  # NaN-aware, and says which layout they have
        if error is not None:
            raise error
        return RopeTables(cos, sin)
    agree = (pair_columns_agree(cos, pairs) & pair_columns_agree(sin, pairs)).all(
        dim=-1, keepdim=True
    )
    nan = torch.full((), float("nan"), dtype=cos.dtype, device=cos.device)
    return RopeTables(torch.where(agree, cos, nan), torch.where(agree, sin, nan))


def _spread(cos: torch.Tensor, sin: torch.Tensor, pairs: str) -> RopeTables:
    """Tables of one column per pair ``(..., r/2)`` laid out for ``pairs`` ``(..., r)``."""
    if pairs == "half":
        return RopeTables(torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1))
    return RopeTables(
        torch.stack((cos, cos), dim=-1).flatten(-2), torch.stack((sin, sin), dim=-1).flatten(-2)
    )


def apply_rotary(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    pairs: PairLayout = "half",
    rotary_dim: int | None = None,
    inverse: bool = False,
) -> torch.Tensor:
    """Rotate the first ``r`` channels of ``x``; the rest pass through.

    ``x[..., :r]·cos + rotate(x[..., :r])·sin`` with ``rotate`` mapping each pair ``(a, b)``
    to ``(−b, a)``: Hugging Face's ``apply_rotary_pos_emb`` for ``pairs="half"`` (pass
    ``cos.unsqueeze(1)`` for its ``unsqueeze_dim=1``), the Meta/torchtune rotation for
    ``"interleaved"``. Partial rotation as in GPT-NeoX when ``r < x.shape[-1]``.

    Args:
        x: floating tensor ``(..., d)``, e.g. queries ``(b, h, s, d)``.
        cos, sin: tables of the same shape, on ``x``'s device, broadcastable against ``x``
            but for their last dimension (e.g. ``(s, ·)`` or ``(b, 1, s, ·)`` for ``x`` of
            shape ``(b, h, s, d)``), of one of two forms:

            - ``(..., r)``, laid out for ``pairs`` (from :func:`rotary_cos_sin` with the same
              ``pairs``, or Hugging Face's): each angle fills both channels of its pair. A
              table of the other layout is a ``ValueError`` when its values are read (CPU,
              or ``set_data_checks(True)``); otherwise (accelerator, meta, traced) its rows
              whose pairs disagree come out NaN, without a synchronisation.
            - ``(..., r/2)``, one column per pair (flash-attn's form), with ``rotary_dim=r``:
              no layout, nothing to check.
        pairs: ``"half"`` or ``"interleaved"``, how ``x`` pairs its channels.
        rotary_dim: ``r``: ``cos.shape[-1]`` (default) or ``2 * cos.shape[-1]`` (one column
            per pair).
        inverse: turn each pair by ``−θ``, undoing the rotation by ``θ`` (``sin`` negated,
            exactly): DeepSeek-V4's rotation of its attention output,
            ``apply_rotary_pos_emb(..., cos, -sin)``.

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
        they require them, through the formula). The layout check reads the tables only,
        ``(s, r)`` against ``x``'s ``(b, h, s, d)``.

    >>> cos, sin = rotary_cos_sin(torch.tensor([1]), 4)
    >>> apply_rotary(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), cos, sin)
    tensor([[0.5403, 0.0000, 0.8415, 0.0000]])
    >>> apply_rotary(torch.ones(1, 4), cos, sin, pairs="interleaved")
    Traceback (most recent call last):
    ...
    ValueError: pairs='interleaved' does not match cos/sin: they are laid out for pairs='half' \
(channels k and k + 2 hold the same angle); pass pairs='half' if x pairs its channels that way, \
or build the tables with pairs='interleaved'
    """
    pairs = check_pairs(pairs)
    undo = check_inverse(inverse)
    check_tensor("x", x)
    check_tensor("cos", cos)
    check_tensor("sin", sin)
    if cos.device != x.device or sin.device != x.device:
        raise ValueError(
            f"cos and sin must be on x's device {x.device}, got {cos.device} and {sin.device}"
        )
    shapes = (tuple(x.shape), tuple(cos.shape), tuple(sin.shape))
    _, per_pair = check_rotation_shapes(*shapes, rotary_dim)
    tables = _spread(cos, sin, pairs) if per_pair else _laid_out(cos, sin, pairs)
    if undo:
        tables = RopeTables(tables.cos, -tables.sin)
    return rotate((x,), tables, pairs)[0]
