"""Rotary position embeddings (RoPE) in PyTorch: tables from the float64 core, and the rotation.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``d`` = ``head_dim``, ``r`` =
``rotary_dim``. See :mod:`posenc.rotary` for the ``pairs`` layouts and the scalings.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from .._checks import check_base, check_int
from ..frequencies import RopeScaling, rope_frequencies, rope_scaling
from ..rotary import check_pairs, default_seq_len, resolve_rotary_dim
from .functional import as_positions, cast_exact, check_dtype, positions_tensor, work_device
from .sinusoidal import add_offset, check_offset

__all__ = ["RotaryEmbedding", "apply_rotary", "rotary_cos_sin"]


def _table_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """Tables are float64 for float64 inputs and float32 otherwise (never 16-bit)."""
    return torch.float64 if torch.float64 in dtypes else torch.float32


def cos_sin_from_omega(
    positions: torch.Tensor,
    omega: torch.Tensor,
    attention: float,
    pairs: str,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables ``(*S, 2n)`` for positions of any shape ``S`` and float64 ``omega`` (n,).

    No argument checks (the hot path of the module and the functional API). Angles, cos, sin
    and the attention factor are applied in float64; :func:`cast_exact` is the only rounding.
    """
    device = positions.device
    work = work_device(device)
    angles = positions.to(device=work, dtype=torch.float64).unsqueeze(-1) * omega.to(work)
    tables = []
    for fn in (torch.cos, torch.sin):
        values = fn(angles)
        if attention != 1.0:
            values = values * attention
        if pairs == "half":
            full = torch.cat((values, values), dim=-1)
        else:
            full = torch.stack((values, values), dim=-1).flatten(-2)
        tables.append(cast_exact(full, dtype).to(device))
    return tables[0], tables[1]


def rotary_cos_sin(
    positions: Any,
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: Any = None,
    rotary_dim: int | None = None,
    pairs: str = "half",
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
    pos = positions_tensor(positions, device)
    if seq_len is None and spec is not None and spec.depends_on_length and pos.numel():
        seq_len = default_seq_len(float(pos.max()))
    omega, attention = rope_frequencies(dim, base=base, scaling=spec, seq_len=seq_len)
    return cos_sin_from_omega(pos, torch.from_numpy(omega), attention, pairs, dtype)


def _rotate(x: torch.Tensor, pairs: str) -> torch.Tensor:
    """Each pair (a, b) → (−b, a)."""
    if pairs == "half":
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)
    pair = x.reshape(*x.shape[:-1], -1, 2)
    return torch.stack((-pair[..., 1], pair[..., 0]), dim=-1).flatten(-2)


def _check_tensor(name: str, value: Any) -> None:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")


# -- the rotation ---------------------------------------------------------------------------------
#
# Two implementations of ``x·cos + rotate(x)·sin`` with the same float32 (float64) arithmetic:
#
# - the formula, written with whole-tensor operations: what ``torch.compile`` traces (Inductor
#   fuses it into one pass), and what runs when cos/sin need gradients or a tensor subclass or
#   functorch transform is involved;
# - the fast path, for eager mode. ``x`` is read once from memory and the output written once:
#   the work is done in chunks of about ``_CHUNK_BYTES`` that stay in the CPU caches between the
#   few operations per chunk, each chunk split into one piece per intra-op thread (distant
#   pieces, so that the threads fault in fresh output pages without contending). Interleaved
#   float32/float64 pairs are one complex multiplication by ``cos + i·sin`` over the whole
#   tensor (PyTorch's scalar complex product may fuse a product into the sum: one unit in the
#   last place from the formula at most, for the elements the vectorised loop leaves to scalar
#   code; exact alternatives cost two more passes); half pairs are ``x·cos`` and ``x·sin`` per
#   chunk, then the sums of the two halves: the formula's roundings, the formula's bits.
#   16-bit inputs are converted to float32 per chunk, rotated in float32 and rounded once to
#   their dtype. Gradients: the rotation is linear and orthogonal, so the backward pass is the
#   inverse rotation, by the same fast path.

# Bytes of the activation per chunk (in the compute dtype): 2 MiB measured best on a 2-core
# machine with 1 MiB of L2 per core (1 and 4 MiB were 5-15% slower).
_CHUNK_BYTES = 1 << 21

# Half pairs with at most this many elements take the formula: the same bits, and fewer
# operations to dispatch when the data is in cache anyway (decoding one token).
_SMALL_HALF = 1 << 15


def _rotate_formula(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairs: str
) -> torch.Tensor:
    """The reference rotation (whole-tensor operations) in the promoted dtype, rounded once."""
    dim = cos.shape[-1]
    compute = torch.promote_types(torch.promote_types(x.dtype, cos.dtype), torch.float32)
    cos, sin = cos.to(compute), sin.to(compute)
    if dim == x.shape[-1]:
        rotated = x.to(compute)
        return (rotated * cos + _rotate(rotated, pairs) * sin).to(x.dtype)
    rotated = x[..., :dim].to(compute)
    out = (rotated * cos + _rotate(rotated, pairs) * sin).to(x.dtype)
    return torch.cat((out, x[..., dim:]), dim=-1)


def _fast_tables(
    cos: torch.Tensor, sin: torch.Tensor, pairs: str, compute: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The tables of the fast path from full-layout cos/sin ``(..., r)``.

    ``half``: ``(cos, sin)`` in ``compute`` (no copy when already in it);
    ``interleaved``: ``(cos + i·sin of each pair, None)``, complex ``(..., r/2)``.
    """
    cos, sin = cos.to(compute), sin.to(compute)
    if pairs == "half":
        return cos, sin
    return torch.complex(cos[..., 0::2], sin[..., 0::2]), None


def _use_fast_path(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairs: str) -> bool:
    """Whether the chunked fast path may run (else the formula)."""
    return (
        (pairs == "interleaved" or x.numel() > _SMALL_HALF)
        and not torch.compiler.is_compiling()
        and type(x) is torch.Tensor
        and type(cos) is torch.Tensor
        and type(sin) is torch.Tensor
        and x.layout == torch.strided
        and not (cos.requires_grad or sin.requires_grad)
        and not torch._C._are_functorch_transforms_active()
    )


def _chunks(
    views: list[torch.Tensor], lead: tuple[int, ...], row_bytes: int, device: torch.device
) -> Iterator[tuple[torch.Tensor, ...]]:
    """Split views that share the leading shape ``lead`` into matching chunks.

    A chunk holds about ``_CHUNK_BYTES`` of rows of ``row_bytes`` each (CPU; elsewhere one
    chunk), as one piece per intra-op thread where the split dimension divides evenly.
    """
    if device.type != "cpu":
        yield tuple(views)
        return
    inner, axis = row_bytes, -1
    for i in range(len(lead) - 1, -1, -1):
        if inner * lead[i] > _CHUNK_BYTES:
            axis = i
            break
        inner *= lead[i]
    if axis < 0:
        yield tuple(views)
        return
    step = max(1, _CHUNK_BYTES // inner)
    threads = torch.get_num_threads()
    split = 0
    if threads > 1 and lead[axis] % threads == 0 and step >= threads:
        pieces = (threads, lead[axis] // threads)
        views = [v.view(*v.shape[:axis], *pieces, *v.shape[axis + 1 :]) for v in views]
        step, split = max(1, step // threads), 1
    for index in itertools.product(*(range(n) for n in lead[:axis])):
        yield from zip(*(torch.split(v[index], step, dim=split) for v in views), strict=True)


def _rotate_half_into(
    out: torch.Tensor,
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    inverse: bool,
) -> None:
    """Half pairs: ``out = x·cos + (−x2, x1)·sin`` (``inverse``: ``(x2, −x1)``), chunked.

    The same roundings as the formula (products, then one sum), so the same bits.
    """
    dim = cos.shape[-1]
    half = dim // 2
    lead = tuple(x.shape[:-1])
    compute = cos.dtype
    direct = x.dtype == compute
    views = [x[..., :dim], cos.expand(*lead, dim), sin.expand(*lead, dim)]
    if direct:  # the result is built in out itself: its halves are split once, with the rest
        views += [out[..., :dim], out[..., :half], out[..., half:dim]]
    else:
        views += [out[..., :dim]]
    tail = dim < x.shape[-1]
    if tail:
        views += [x[..., dim:], out[..., dim:]]
    row_bytes = dim * (x.element_size() if direct else compute.itemsize)
    # forward: first half − x2·sin, second half + x1·sin; inverse: the signs swapped
    combine_1, combine_2 = (
        (torch.Tensor.add_, torch.Tensor.sub_)
        if inverse
        else (torch.Tensor.sub_, torch.Tensor.add_)
    )
    buffers: list[torch.Tensor] = []
    shaped: dict[tuple[int, ...], tuple[torch.Tensor, ...]] = {}
    for x_r, c, s, *rest in _chunks(views, lead, row_bytes, x.device):
        size, shape = x_r.numel(), tuple(x_r.shape)
        if not buffers:  # the first chunk is the largest
            buffers = [x_r.new_empty(size, dtype=compute) for _ in range(1 if direct else 2)]
        if shape not in shaped:  # scratch views per chunk shape (all chunks but the last)
            parts = [b[:size].view(shape) for b in buffers]
            shaped[shape] = tuple(v for p in parts for v in (p, p[..., :half], p[..., half:]))
        products, products_1, products_2 = shaped[shape][:3]
        if direct:
            out_r, work_1, work_2 = rest[:3]
            torch.mul(x_r, c, out=out_r)
            torch.mul(x_r, s, out=products)
        else:
            out_r = rest[0]
            work, work_1, work_2 = shaped[shape][3:]
            products.copy_(x_r)
            torch.mul(products, c, out=work)
            products.mul_(s)
        combine_1(work_1, products_2)
        combine_2(work_2, products_1)
        if not direct:
            out_r.copy_(work)
        if tail:
            rest[-1].copy_(rest[-2])


def _complex_view(x: torch.Tensor) -> torch.Tensor | None:
    """``x`` ``(..., 2n)`` as complex ``(..., n)`` without copying, or ``None``."""
    if x.stride(-1) != 1 or x.storage_offset() % 2 or any(s % 2 for s in x.stride()[:-1]):
        return None
    return torch.view_as_complex(x.view(*x.shape[:-1], -1, 2))


def _rotate_interleaved_into(
    out: torch.Tensor, x: torch.Tensor, phasors: torch.Tensor, inverse: bool
) -> None:
    """Interleaved pairs: ``out = x · phasors`` as complex numbers (``inverse``: conjugate)."""
    half = phasors.shape[-1]
    dim = 2 * half
    lead = tuple(x.shape[:-1])
    if inverse:
        phasors = phasors.conj().resolve_conj()
    compute = phasors.real.dtype
    table = phasors.expand(*lead, half)
    tail = dim < x.shape[-1]
    x_c = _complex_view(x[..., :dim]) if x.dtype == compute else None
    out_c = _complex_view(out[..., :dim]) if x_c is not None else None
    if x_c is not None and out_c is not None and not tail:
        torch.mul(x_c, table, out=out_c)  # one pass: no chunks needed
        return
    views = [x[..., :dim], out[..., :dim], table]
    if tail:
        views += [x[..., dim:], out[..., dim:]]
    scratch = None
    for x_r, out_r, z, *rest in _chunks(views, lead, dim * compute.itemsize, x.device):
        if x_c is not None and out_c is not None:
            # chunk views of complex-viewable tensors stay complex-viewable
            torch.mul(_complex_view(x_r), z, out=_complex_view(out_r))  # type: ignore[arg-type]
        else:
            if scratch is None:  # the first chunk is the largest
                scratch = x_r.new_empty(x_r.numel(), dtype=compute)
            work = scratch[: x_r.numel()].view(x_r.shape)
            work.copy_(x_r)
            torch.view_as_complex(work.view(*work.shape[:-1], -1, 2)).mul_(z)
            out_r.copy_(work)
        if tail:
            rest[1].copy_(rest[0])


def _rotate_fast(
    x: torch.Tensor,
    first: torch.Tensor,
    second: torch.Tensor | None,
    pairs: str,
    inverse: bool,
) -> torch.Tensor:
    """The fast path without autograd: a new tensor of ``x``'s shape, dtype and layout."""
    out = torch.empty_like(x)
    if out.numel():
        if pairs == "half":
            assert second is not None
            _rotate_half_into(out, x, first, second, inverse)
        else:
            _rotate_interleaved_into(out, x, first, inverse)
    return out


class _Rotation(torch.autograd.Function):
    """The fast path with its gradient: the inverse rotation, by the fast path again."""

    @staticmethod
    def forward(
        x: torch.Tensor,
        first: torch.Tensor,
        second: torch.Tensor | None,
        pairs: str,
        inverse: bool,
    ) -> torch.Tensor:
        return _rotate_fast(x, first, second, pairs, inverse)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        _, first, second, pairs, inverse = inputs
        ctx.save_for_backward(first, second)
        ctx.pairs, ctx.inverse = pairs, inverse

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        first, second = ctx.saved_tensors
        back = _Rotation.apply(  # type: ignore[no-untyped-call]
            grad, first, second, ctx.pairs, not ctx.inverse
        )
        return back, None, None, None, None


def _rotate_with_tables(
    x: torch.Tensor, first: torch.Tensor, second: torch.Tensor | None, pairs: str
) -> torch.Tensor:
    """Rotate ``x`` by fast-path tables (:func:`_fast_tables`), with autograd where needed."""
    if torch.is_grad_enabled() and x.requires_grad:
        rotated: torch.Tensor = _Rotation.apply(  # type: ignore[no-untyped-call]
            x, first, second, pairs, False
        )
        return rotated
    return _rotate_fast(x, first, second, pairs, False)


def _apply_unchecked(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairs: str
) -> torch.Tensor:
    """:func:`apply_rotary` without the argument checks."""
    if not _use_fast_path(x, cos, sin, pairs):
        return _rotate_formula(x, cos, sin, pairs)
    compute = torch.promote_types(torch.promote_types(x.dtype, cos.dtype), torch.float32)
    first, second = _fast_tables(cos, sin, pairs, compute)
    return _rotate_with_tables(x, first, second, pairs)


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, pairs: str = "half"
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
    _check_tensor("x", x)
    _check_tensor("cos", cos)
    _check_tensor("sin", sin)
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
    return _apply_unchecked(x, cos, sin, pairs)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding of queries and keys, with the scalings of Hugging Face.

    ``forward(q, k)`` rotates the first ``rotary_dim`` channels of each head of ``q`` and
    ``k`` by the angles of their positions (:func:`posenc.rotary_cos_sin`) and returns them in
    their own dtypes.

    Args:
        head_dim: channels per head ``d``, an integer >= 2.
        base: the wavelength base (``rope_theta``), a finite number > 0.
        pairs: ``"half"`` (Hugging Face / GPT-NeoX) or ``"interleaved"`` (Meta / torchtune /
            rotary-embedding-torch); see :mod:`posenc.rotary`.
        scaling: ``None``, a dict of Hugging Face rope parameters or a
            :class:`posenc.RopeScaling` (``linear``, ``dynamic``, ``yarn``,
            ``llama3``, ``longrope``). An attention factor (YaRN, LongRoPE) multiplies the
            rotated channels, as Hugging Face's cos/sin do.
        rotary_dim: rotate only the first ``r`` channels (even, <= ``d``); default ``d``, or
            ``int(d * partial_rotary_factor)`` from the scaling.
        seq_dim: the sequence dimension of ``q``/``k``: ``-2`` for ``(b, h, s, d)`` (default),
            ``1`` or ``-3`` for ``(b, s, h, d)``. Any dimension except the last works.
        max_len: rows of the cos/sin cache to build in ``__init__``: an optimisation, not a
            limit.
        device: where the cache is built.

    Shapes:
        - ``q``, ``k``: floating tensors with the same number of dimensions (>= 2), the same
          sequence length and ``d`` channels last; heads may differ (grouped-query attention).
        - ``positions`` (optional): ``(s,)``, or ``(b, s)`` per batch element (``b`` =
          ``q.shape[0]`` or 1, as Hugging Face ``position_ids``; the sequence not in
          dimension 0). Integer or real values.
        - ``offset``: int >= 0 added to the positions (tokens already in a KV cache).
        - ``seq_len`` (optional): the length that ``dynamic`` and ``longrope`` select their
          frequencies by; default the largest position + 1, Hugging Face's rule.

    Precision: cos/sin come from float64 angles and are rounded once, to float32 (float64
    for float64 inputs); the rotation runs in float32 and is rounded once to the input dtype,
    so bfloat16/float16 inputs never meet 16-bit angles or tables. Speed: in eager mode each
    of ``q`` and ``k`` is read once and written once (see :func:`apply_rotary`); for
    interleaved pairs the cache also keeps ``cos + i·sin`` of its rows, built on first use.

    Cache: cos/sin of positions ``0 .. n-1`` are non-persistent buffers ``cos_cached`` and
    ``sin_cached`` (not in ``state_dict``), grown to ``max(needed, 2 n)`` rows when a call runs
    past them from no further than ``n``; a far jump in ``offset``, explicit ``positions``,
    ``dynamic`` scaling beyond its original length, and calls traced by ``torch.compile`` that
    need rows beyond the cache are computed on the fly from the float64 frequencies, with
    identical values. ``longrope`` keeps the cache of the factor set in use (short or long)
    and rebuilds it when the length crosses ``original_max_position_embeddings``. The cache
    follows the inputs' device and table dtype; ``.to()``, ``.double()`` and ``to_empty``
    rebuild it from float64.

    Dynamic scaling: Hugging Face keeps the frequencies of the longest sequence seen until a
    call is shorter than the original length; here they are always those of the current call
    (identical on a fresh module and whenever lengths only grow).

    >>> rope = RotaryEmbedding(8)
    >>> q = torch.randn(2, 4, 5, 8)                 # (b, h, s, d)
    >>> k = torch.randn(2, 1, 5, 8)                 # one key head (grouped-query attention)
    >>> q_rot, k_rot = rope(q, k)
    >>> q_rot.shape, k_rot.shape
    (torch.Size([2, 4, 5, 8]), torch.Size([2, 1, 5, 8]))
    >>> torch.allclose(q_rot.norm(dim=-1), q.norm(dim=-1))   # rotations keep norms
    True
    >>> step = rope(q[:, :, 4:], k[:, :, 4:], offset=4)[0]   # decoding with a KV cache
    >>> torch.allclose(step, q_rot[:, :, 4:])
    True
    """

    cos_cached: torch.Tensor
    sin_cached: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        pairs: str = "half",
        scaling: Any = None,
        rotary_dim: int | None = None,
        seq_dim: int = -2,
        max_len: int | None = None,
        device: Any = None,
    ) -> None:
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=2)
        self.base = check_base("base", base)
        self.pairs = check_pairs(pairs)
        self.scaling: RopeScaling | None = rope_scaling(scaling)
        self.rotary_dim = resolve_rotary_dim(self.head_dim, rotary_dim, self.scaling)
        self.seq_dim = check_int("seq_dim", seq_dim)
        if self.seq_dim == -1:
            raise ValueError("seq_dim must not be -1: the last dimension holds the channels")
        self.max_len = None if max_len is None else check_int("max_len", max_len, minimum=0)
        # Plain CPU float64 tensors, not buffers: module casts must never touch them.
        # Key 0: the frequencies without a length (all types; longrope's short factors);
        # key 1: longrope's long factors.
        self._freqs: dict[int, tuple[torch.Tensor, float]] = {0: self._frequencies(None)}
        original = None if self.scaling is None else self.scaling.original_length
        if self.scaling is not None and self.scaling.rope_type == "longrope":
            assert original is not None
            self._freqs[1] = self._frequencies(original + 1)
        self._original = original
        self._cache_key = 0
        device = torch.get_default_device() if device is None else torch.device(device)
        cos, sin = self._build(self.max_len or 0, torch.float32, device, 0)
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)
        # Interleaved pairs: cos + i·sin of the cached rows, built on first use from
        # cos_cached (the tensor it was built from, and the table).
        self._phasors: tuple[torch.Tensor, torch.Tensor] | None = None

    # -- tables -----------------------------------------------------------------------------

    def _frequencies(self, seq_len: int | None) -> tuple[torch.Tensor, float]:
        omega, attention = rope_frequencies(
            self.rotary_dim, base=self.base, scaling=self.scaling, seq_len=seq_len
        )
        return torch.from_numpy(omega), attention

    def _key(self, seq_len: int) -> int | None:
        """Which cached frequency set serves ``seq_len``; ``None``: none (dynamic, long)."""
        if self.scaling is None or not self.scaling.depends_on_length:
            return 0
        assert self._original is not None
        longer = seq_len > self._original
        if self.scaling.rope_type == "dynamic":
            return None if longer else 0
        return 1 if longer else 0

    def _compute(
        self, positions: torch.Tensor, seq_len: int, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        key = self._key(seq_len)
        omega, attention = self._frequencies(seq_len) if key is None else self._freqs[key]
        return cos_sin_from_omega(positions, omega, attention, self.pairs, dtype)

    def _build(
        self, rows: int, dtype: torch.dtype, device: torch.device, key: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.inference_mode(False), torch.no_grad():
            if device.type == "meta":
                empty = torch.empty((rows, self.rotary_dim), dtype=dtype, device=device)
                return empty, empty.clone()
            omega, attention = self._freqs[key]
            positions = torch.arange(rows, device=device)
            return cos_sin_from_omega(positions, omega, attention, self.pairs, dtype)

    def _rows(
        self, start: int, stop: int, seq_len: int, dtype: torch.dtype, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor, bool]:
        """cos/sin of positions ``start .. stop-1``: ``(stop - start, r)`` each, and whether
        they are rows of the cache."""
        key = self._key(seq_len)
        if key is None:
            cos, sin = self._compute(torch.arange(start, stop, device=device), seq_len, dtype)
            return cos, sin, False
        cos = self.cos_cached
        same = cos.dtype == dtype and cos.device == device and key == self._cache_key
        if same and stop <= cos.shape[0]:
            return cos[start:stop], self.sin_cached[start:stop], True
        cached = cos.shape[0]
        if not torch.compiler.is_compiling() and start <= cached:
            rows = max(stop, 2 * cached if same else cached)
            self.cos_cached, self.sin_cached = self._build(rows, dtype, device, key)
            self._cache_key = key
            self._phasors = None
            return self.cos_cached[start:stop], self.sin_cached[start:stop], True
        cos, sin = self._compute(torch.arange(start, stop, device=device), seq_len, dtype)
        return cos, sin, False

    def _cached_phasors(self) -> torch.Tensor:
        """``cos + i·sin`` of each pair of the cached rows ``(n, r/2)`` (interleaved pairs)."""
        if self._phasors is None or self._phasors[0] is not self.cos_cached:
            cos = self.cos_cached
            with torch.inference_mode(False), torch.no_grad():
                table, _ = _fast_tables(cos, self.sin_cached, "interleaved", cos.dtype)
            self._phasors = (cos, table)
        return self._phasors[1]

    def _apply(self, fn: Any, recurse: bool = True) -> RotaryEmbedding:
        # nn.Module casts (.to, .double, to_empty, ...) would round the tables twice or leave
        # them uninitialised; rebuild them from float64 where the cast put them instead.
        before = self.cos_cached
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        if self.cos_cached is not before:  # in-place ops (share_memory_, a no-op .to) keep theirs
            dtype = _table_dtype(self.cos_cached.dtype)
            rows, device = self.cos_cached.shape[0], self.cos_cached.device
            self.cos_cached, self.sin_cached = self._build(rows, dtype, device, self._cache_key)
        self._phasors = None
        return self

    # -- checks -----------------------------------------------------------------------------

    def _seq_axis(self, x: torch.Tensor) -> int:
        """The sequence dimension of ``x`` as a negative index (at most -2)."""
        axis = self.seq_dim if self.seq_dim < 0 else self.seq_dim - x.dim()
        if not -x.dim() <= axis <= -2:
            raise ValueError(
                f"seq_dim = {self.seq_dim} is not a dimension before the last of a "
                f"{x.dim()}-D input of shape {tuple(x.shape)}"
            )
        return axis

    def _check_inputs(self, tensors: dict[str, Any]) -> int:
        """Check q/k (or x); return the sequence axis (negative)."""
        for name, x in tensors.items():
            _check_tensor(name, x)
            if x.dim() < 2 or x.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} must have shape (..., s, d) with d = head_dim = {self.head_dim} "
                    f"channels last, got shape {tuple(x.shape)}"
                )
        first, *rest = tensors.values()
        axis = self._seq_axis(first)
        for x in rest:
            if x.dim() != first.dim() or x.shape[axis] != first.shape[axis]:
                raise ValueError(
                    "q and k must have the same number of dimensions and the same sequence "
                    f"length (dimension {self.seq_dim}), got shapes {tuple(first.shape)} "
                    f"and {tuple(x.shape)}"
                )
        return axis

    def _cos_sin(
        self,
        x: torch.Tensor,
        axis: int,
        dtype: torch.dtype,
        positions: Any,
        offset: Any,
        seq_len: Any,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """cos/sin shaped to broadcast against ``x`` (seq at ``axis``, r channels last), and
        for interleaved pairs served from the cache in eager mode their phasors (else None)."""
        offset = check_offset(offset)
        if seq_len is not None and not isinstance(seq_len, torch.SymInt):
            seq_len = check_int("seq_len", seq_len, minimum=0)
        length = x.shape[axis]
        shape = [1] * x.dim()
        shape[axis], shape[-1] = length, self.rotary_dim
        if positions is None:
            stop = offset + length
            cos, sin, cached = self._rows(
                offset, stop, stop if seq_len is None else seq_len, dtype, x.device
            )
            phasors = None
            if cached and self.pairs == "interleaved" and not torch.compiler.is_compiling():
                phasors = self._cached_phasors()[offset:stop].view(*shape[:-1], -1)
            return cos.view(shape), sin.view(shape), phasors
        pos = as_positions("positions", positions, x.device).to(x.device)
        per_batch = (
            x.dim() + axis > 0
            and pos.dim() == 2
            and pos.shape[1] == length
            and pos.shape[0] in (1, x.shape[0])
        )
        if tuple(pos.shape) != (length,) and not per_batch:
            allowed = f"(s,) = ({length},)"
            if x.dim() + axis > 0:
                allowed += f" or (b, s) = ({x.shape[0]}, {length}) or (1, {length})"
            raise ValueError(
                f"positions must have shape {allowed} for inputs of shape {tuple(x.shape)}, "
                f"got {tuple(pos.shape)}"
            )
        pos = add_offset(pos, offset)
        if seq_len is None:
            seq_len = self._default_seq_len(pos)
        cos, sin = self._compute(pos, seq_len, dtype)
        if per_batch:
            shape[0] = pos.shape[0]
        return cos.view(shape), sin.view(shape), None

    def _default_seq_len(self, positions: torch.Tensor) -> int:
        if self.scaling is None or not self.scaling.depends_on_length:
            return 0  # unused
        if torch.compiler.is_compiling():
            raise ValueError(
                f"rope_type {self.scaling.rope_type!r} depends on the sequence length: under "
                "torch.compile pass seq_len= together with positions="
            )
        if not positions.numel():
            return 0
        length = default_seq_len(float(positions.max()))
        assert length is not None
        return length

    # -- API --------------------------------------------------------------------------------

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        *,
        positions: Any = None,
        offset: int = 0,
        seq_len: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries and keys; see the class docstring for shapes.

        Args:
            q, k: ``(b, h, s, d)`` (``seq_dim=-2``) or ``(b, s, h, d)`` (``seq_dim=1``) or
                any shape with the sequence at ``seq_dim`` and ``d`` last; floating point.
            positions: optional explicit positions ``(s,)``, ``(b, s)`` or ``(1, s)``.
            offset: int >= 0 added to the positions (default positions ``0 .. s-1``).
            seq_len: the length ``dynamic``/``longrope`` scalings select frequencies by.

        Returns:
            ``(q_rot, k_rot)`` with the shapes and dtypes of ``q`` and ``k``.
        """
        axis = self._check_inputs({"q": q, "k": k})
        dtype = _table_dtype(q.dtype, k.dtype)
        cos, sin, phasors = self._cos_sin(q, axis, dtype, positions, offset, seq_len)
        q_rot, k_rot = self._rotate_all((q, k), cos, sin, phasors)
        return q_rot, k_rot

    def rotate(
        self,
        x: torch.Tensor,
        *,
        positions: Any = None,
        offset: int = 0,
        seq_len: int | None = None,
    ) -> torch.Tensor:
        """Rotate one tensor (queries or keys alone); arguments as in :meth:`forward`."""
        axis = self._check_inputs({"x": x})
        dtype = _table_dtype(x.dtype)
        cos, sin, phasors = self._cos_sin(x, axis, dtype, positions, offset, seq_len)
        return self._rotate_all((x,), cos, sin, phasors)[0]

    def _rotate_all(
        self,
        tensors: tuple[torch.Tensor, ...],
        cos: torch.Tensor,
        sin: torch.Tensor,
        phasors: torch.Tensor | None,
    ) -> tuple[torch.Tensor, ...]:
        """Rotate each tensor by the same tables (built once for the fast path)."""
        tables: tuple[torch.Tensor, torch.Tensor | None] | None = None
        if phasors is not None:
            tables = (phasors, None)
        rotated = []
        for x in tensors:
            if not _use_fast_path(x, cos, sin, self.pairs):
                rotated.append(_rotate_formula(x, cos, sin, self.pairs))
                continue
            if tables is None:
                # the tables' dtype (float32; float64 with a float64 input) is the compute dtype
                tables = _fast_tables(cos, sin, self.pairs, cos.dtype)
            rotated.append(_rotate_with_tables(x, *tables, self.pairs))
        return tuple(rotated)

    def extra_repr(self) -> str:
        text = (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, pairs={self.pairs!r}, "
            f"base={self.base}, seq_dim={self.seq_dim}"
        )
        return text if self.scaling is None else f"{text}, scaling={self.scaling!r}"
