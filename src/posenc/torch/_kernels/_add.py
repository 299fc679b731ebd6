"""Kernel family **add**: adding an encoding to embeddings (with dropout), and the embedding sum.

Entry points, each choosing between its fast path and the plain formula written in it:

- :func:`add_encoding`: ``dropout(x + T)`` with ``T = table`` or ``table[index]``;
- :func:`embed`: ``dropout(E[tokens]·scale + T + S[segments])`` (``TransformerEmbedding``).

The plain formulas are the obvious PyTorch expressions: what ``torch.compile`` traces, what
runs under ``posenc.set_fast_paths(False)``, for a replaced dropout module, when the table
needs gradients, and for dropout off the CPU (the exact-probability mask reads tensor data).

The fast paths: PyTorch runs each elementwise operation as its own pass over memory, and on
the CPU a fresh output tensor costs more than the arithmetic. :func:`fused_sum` walks the
output in cache-sized blocks and, for each block, gathers rows, scales, adds and applies a
dropout mask while the block is still in cache, so each tensor is read or written about once
from main memory. No compiler is involved; every operation is an ordinary PyTorch call.

Shape legend: ``A, B`` the two leading dimensions (``(b, s)`` batch-first, ``(s, b)``
sequence-first, ``(1, s)`` unbatched), ``d`` channels.

Dropout keeps each element with probability exactly ``1 - p`` (see :func:`keep_mask`) and stores
its mask as one byte per element for the backward pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch import nn

from ..._switches import fast_paths_enabled
from . import _workers

__all__ = ["Rows", "add_dropout", "add_encoding", "embed", "fused_sum", "keep_mask"]

#: Bytes of output per block handed to a thread (:mod:`._workers`): a block and its operands
#: stay in its core's cache between the operations applied to it. Work too small to hand to
#: threads goes in blocks of ``8 * BLOCK_BYTES`` that stay in the shared last-level cache.
BLOCK_BYTES = 1 << 20

#: Below this many bytes the direct ``nonzero`` is cheaper than the word-by-word scan.
_SMALL = 1 << 16

#: Outputs smaller than this many bytes are computed by the plain expression: they fit in
#: cache anyway, and fusing only adds per-call overhead.
FUSE_MIN_BYTES = 1 << 20


class Rows(NamedTuple):
    """``source[ids]`` without materialising it: rows of a 2-D ``(n, d)`` table.

    ``ids`` is an integer tensor of the leading shape of the output (``(A, B)``, or ``(s,)``
    for unbatched data); its values must lie in ``[0, n)``.
    """

    source: torch.Tensor
    ids: torch.Tensor


Term = torch.Tensor | Rows


def _as3(t: torch.Tensor) -> torch.Tensor:
    """A view with exactly three dimensions, adding leading ones."""
    while t.dim() < 3:
        t = t.unsqueeze(0)
    return t


def _index2(index: torch.Tensor) -> torch.Tensor:
    while index.dim() < 2:
        index = index.unsqueeze(0)
    if index.dtype not in (torch.int32, torch.int64):
        index = index.to(torch.int64)
    return index


def _block_rows(d: int, itemsize: int, spread: bool) -> int:
    """Rows of ``d`` elements per block: at most ``BLOCK_BYTES`` for a thread of its own (and
    as many elements as :func:`._workers.piece_elements` allows), or ``8 * BLOCK_BYTES``,
    whose operations PyTorch parallelises, on the calling thread."""
    if not spread:
        return max(1, 8 * BLOCK_BYTES // (itemsize * d))
    return max(1, _workers.piece_elements(max(1, BLOCK_BYTES // itemsize)) // d)


def _blocks(a: int, b: int, rows: int) -> list[tuple[int, int, int, int]]:
    """Blocks ``[i0:i1, j0:j1]`` of an ``(a, b, d)`` tensor with at most ``rows * d`` elements."""
    if b >= rows:
        return [(i, i + 1, j, min(j + rows, b)) for i in range(a) for j in range(0, b, rows)]
    step = max(1, rows // max(b, 1))
    return [(i, min(i + step, a), 0, b) for i in range(0, a, step)]


class _Operand:
    """One term of :func:`fused_sum`, ready to be cut into blocks."""

    def __init__(self, term: Term, shape: tuple[int, int, int], rows: int) -> None:
        a, b, d = shape
        self.scratch: dict[int, torch.Tensor] = {}  # per thread (``slot``)
        if isinstance(term, Rows):
            self.source: torch.Tensor | None = term.source
            self.ids = _index2(term.ids).expand(a, b)
            self.size = min(a * b, rows) * d
        else:
            self.source = None
            self.view = _as3(term).expand(a, b, d)

    def block(self, i0: int, i1: int, j0: int, j1: int, slot: int) -> torch.Tensor:
        if self.source is None:
            return self.view[i0:i1, j0:j1]
        index = self.ids[i0:i1, j0:j1].reshape(-1)
        n = index.numel()
        if slot not in self.scratch:
            self.scratch[slot] = self.source.new_empty(self.size)
        rows = self.scratch[slot][: n * self.source.shape[1]].view(n, self.source.shape[1])
        torch.index_select(self.source, 0, index, out=rows)
        return rows.view(i1 - i0, j1 - j0, self.source.shape[1])


def fused_sum(
    out: torch.Tensor,
    terms: Sequence[Term],
    *,
    first_scale: float | None = None,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """``out = ((t0 * first_scale) + t1 + t2 + ...) * mask * scale``, block by block.

    The arithmetic is that of the unfused expression evaluated left to right (each operation
    rounds once, as it does in PyTorch), so results are bit-identical to it. The blocks are
    shared by the threads as :mod:`._workers` describes: one synchronisation per call.

    Args:
        out: the ``(A, B, d)`` or ``(s, d)`` result, written in place (it may be the tensor
            behind ``t0``: in-place addition is fine, any other overlap is not).
        terms: tensors broadcastable to ``out`` (a zero-copy ``expand`` is taken) or
            :class:`Rows` gathers; at least one.
        first_scale: multiply ``t0`` by this before adding the others (None: not at all).
        mask: optional uint8 tensor of 0/1 with ``out``'s number of elements (contiguous).
        scale: multiply the result by this after the mask (None: not at all).

    No autograd: callers wrap it in an ``autograd.Function`` or use it where no gradient is
    needed.

    >>> table = torch.arange(6.0).view(3, 2)
    >>> x = torch.ones(2, 2, 2)
    >>> fused_sum(torch.empty(2, 2, 2), [x, Rows(table, torch.tensor([[0, 2], [1, 1]]))])[1]
    tensor([[3., 4.],
            [3., 4.]])
    """
    out3 = _as3(out)
    shape = (out3.shape[0], out3.shape[1], out3.shape[2])
    if out3.numel() == 0:
        return out
    spread = _workers.spread(out3.numel() * out.element_size(), out)
    rows = _block_rows(shape[2], out.element_size(), spread)
    operands = [_Operand(t, shape, rows) for t in terms]
    mask3 = None if mask is None else mask.view(shape)
    # Each block of the 0/1 mask is converted to out's dtype in a reused buffer per thread
    # (PyTorch would allocate a converted copy per block if the uint8 mask were multiplied).
    size = min(out3.numel(), rows * shape[2])
    converted: dict[int, torch.Tensor] = {}
    first, rest = operands[0], operands[1:]
    blocks = _blocks(shape[0], shape[1], rows)
    per_task = max(1, _workers.TASK_BYTES // (rows * shape[2] * out.element_size()))

    def task(index: int, slot: int) -> None:
        for i0, i1, j0, j1 in blocks[index * per_task : (index + 1) * per_task]:
            o = out3[i0:i1, j0:j1]
            v = first.block(i0, i1, j0, j1, slot)
            if first_scale is not None:
                if first.source is not None:
                    v.mul_(first_scale)  # gathered into scratch: scale in place
                else:
                    v = torch.mul(v, first_scale, out=o)
            keep = None
            if mask3 is not None:
                if slot not in converted:
                    converted[slot] = out.new_empty(size)
                keep = converted[slot][: o.numel()].view(o.shape)
                keep.copy_(mask3[i0:i1, j0:j1])
            if rest:
                torch.add(v, rest[0].block(i0, i1, j0, j1, slot), out=o)
                for other in rest[1:]:
                    o.add_(other.block(i0, i1, j0, j1, slot))
                if keep is not None:
                    o.mul_(keep)
            elif keep is not None:
                torch.mul(v, keep, out=o)
            elif v is not o:
                o.copy_(v)
            if scale is not None:
                o.mul_(scale)

    _workers.run(-(-len(blocks) // per_task), task, tensor=out, spread=spread)
    return out


# -- dropout mask ------------------------------------------------------------------------------


def _ties(values: torch.Tensor, lead: int) -> torch.Tensor:
    """Indices (int64, ascending) where the uint8 tensor ``values`` equals ``lead``.

    Matches are rare (about one byte in 256) and, on the CPU, ``nonzero`` over bytes (or
    over a bool tensor) is slow. So matches are flagged as 0/1 bytes, the 8-byte words
    holding one are found with ``nonzero`` over words (8 times fewer elements), and only
    those words are searched byte by byte.
    """
    if values.device.type != "cpu" or values.numel() % 8 or values.numel() <= _SMALL:
        return torch.nonzero(values == lead).squeeze(1)
    flags = torch.eq(values, lead, out=torch.empty_like(values)).view(torch.int64)
    at = flags.nonzero().squeeze(1)
    words = flags.index_select(0, at).view(torch.uint8).view(-1, 8)
    hits = words.nonzero()  # (word, byte) pairs, in order
    return at.index_select(0, hits[:, 0]).mul_(8).add_(hits[:, 1])


def _refine(count: int, rest: float, draw: Callable[[int], torch.Tensor]) -> torch.Tensor:
    """Keep decisions (uint8 0/1) for ``count`` draws whose leading byte tied with ``p``'s.

    ``rest`` in (0, 1) holds the remaining binary digits of ``p``; each round compares 32 more
    random bits (``draw(n)``: n int64 values uniform in [0, 2**32)) with the next 32 digits of
    ``p`` and leaves the ties (probability 2**-32) for the next round. A draw equal to every
    digit of ``p`` is not below ``p``: it is kept. ``p`` has finitely many binary digits, so
    this ends.
    """
    keep: torch.Tensor | None = None
    pending: torch.Tensor | None = None  # positions in ``keep`` still tied after a round
    while True:
        scaled = rest * 2.0**32  # exact: a power-of-two scaling
        level = math.floor(scaled)
        rest = scaled - level  # exact as well
        draws = draw(count)
        decided = ((draws >= level) if rest == 0.0 else (draws > level)).to(torch.uint8)
        if keep is None or pending is None:
            keep = decided
        else:
            keep[pending] = decided
        if rest == 0.0:
            return keep
        tied = (draws == level).nonzero().squeeze(1)
        if not tied.numel():
            return keep
        pending = tied if pending is None else pending[tied]
        count = tied.numel()


def keep_mask(
    numel: int, p: float, *, device: Any = None, generator: torch.Generator | None = None
) -> torch.Tensor:
    """A dropout keep-mask: ``numel`` uint8 values, each 1 with probability exactly ``1 - p``.

    Each element compares a uniform random number ``U`` in [0, 1) with ``p`` (the float64
    value, whose binary expansion is finite) and is dropped when ``U < p``. The digits of ``U``
    are drawn only as far as the comparison needs: one random byte per element decides it
    unless the byte equals the leading byte of ``p`` (probability 1/256); those ties draw 32
    more bits at a time. The probability of dropping is therefore exactly ``p``, not ``p``
    rounded to a grid of 2**-8 or 2**-32.

    Random bits come from PyTorch's generator for ``device`` (``torch.manual_seed`` makes the
    mask reproducible) via ``Tensor.random_``: 8 elements per 64-bit draw.

    Args:
        numel: number of elements, an int >= 0.
        p: drop probability in [0, 1).
        device: where the mask lives (default: the current default device).
        generator: optional ``torch.Generator`` (default: the global one of ``device``).

    Returns:
        uint8 tensor ``(numel,)`` of 0 (dropped) and 1 (kept).

    >>> _ = torch.manual_seed(0)
    >>> mask = keep_mask(1_000_000, 0.25)
    >>> mask.dtype, round(mask.double().mean().item(), 2)
    (torch.uint8, 0.75)
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be a number in [0, 1), got {p!r}")
    device = torch.get_default_device() if device is None else torch.device(device)
    raw = torch.empty(-(-numel // 8) * 8, dtype=torch.uint8, device=device)
    if numel == 0:
        return raw
    if numel > _SMALL:
        raw.zero_()  # fault fresh pages in on all threads: random_ runs on one
    raw.view(torch.int64).random_(-(2**63), None, generator=generator)
    scaled = p * 256.0
    lead = math.floor(scaled)  # U < lead/256: dropped; U >= (lead+1)/256: kept
    rest = scaled - lead
    if rest == 0.0:  # p is a multiple of 1/256: the byte decides alone
        torch.ge(raw, lead, out=raw)
        return raw[:numel]
    ties = _ties(raw, lead)
    if raw.numel() > numel:  # padding bytes are not part of the mask
        ties = ties[ties < numel]
    torch.gt(raw, lead, out=raw)
    if ties.numel():

        def draw(n: int) -> torch.Tensor:
            words = torch.empty(n, dtype=torch.int64, device=device)
            return words.random_(0, 2**32, generator=generator)

        raw[ties] = _refine(ties.numel(), rest, draw)
    return raw[:numel]


# -- add + dropout with autograd ------------------------------------------------------------------


def _apply_mask_backward(grad: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    if torch.is_grad_enabled() and grad.requires_grad:  # double backward: stay differentiable
        return grad * mask.view(grad.shape) * scale
    result = torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)
    return fused_sum(result, [grad], mask=mask, scale=scale)


class _AddDropout(torch.autograd.Function):
    """``dropout(x + term)``; the backward pass reuses the forward's uint8 mask."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        table: torch.Tensor,
        index: torch.Tensor | None,
        p: float,
        generator: torch.Generator | None,
    ) -> torch.Tensor:
        term: Term = table if index is None else Rows(table, index)
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        if p == 0.0:
            ctx.scale = None
            return fused_sum(out, [x, term])
        mask = keep_mask(x.numel(), p, device=x.device, generator=generator)
        ctx.scale = 1.0 / (1.0 - p)
        ctx.save_for_backward(mask)
        return fused_sum(out, [x, term], mask=mask, scale=ctx.scale)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (grad,) = grads
        if ctx.scale is None:
            return grad, None, None, None, None
        (mask,) = ctx.saved_tensors
        return _apply_mask_backward(grad, mask, ctx.scale), None, None, None, None


def add_dropout(
    x: torch.Tensor,
    table: torch.Tensor,
    p: float,
    *,
    index: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``dropout(x + T, p)`` in one sweep, with ``T = table`` or ``T = table[index]``.

    Equal to ``torch.nn.functional.dropout(x + T, p)`` in distribution: each element is kept
    with probability exactly ``1 - p`` (:func:`keep_mask`) and scaled by ``1 / (1 - p)``
    (computed in float64; the multiplication rounds like ``Tensor.mul_`` with a Python
    float). Given the mask, the result is bit-identical to ``(x + T) * mask * (1 / (1 - p))``.
    The backward pass multiplies the incoming gradient by the same mask and scale.

    Args:
        x: ``(A, B, d)`` or ``(s, d)`` floating tensor.
        table: broadcastable to ``x`` (without ``index``) or a 2-D ``(n, d)`` table of ``x``'s
            dtype and device (with ``index``); no gradient flows to it.
        p: drop probability in [0, 1); 0 gives ``x + T``.
        index: optional integer tensor of shape ``x.shape[:-1]`` picking rows of ``table``.
        out: optional result tensor of ``x``'s shape and dtype (it may be ``x``); only when no
            gradient is needed.
        generator: optional ``torch.Generator`` for the mask.

    Returns:
        the result: ``out`` when given, else a new contiguous tensor.

    >>> x = torch.ones(2, 3, 4)
    >>> y = add_dropout(x, torch.zeros(3, 4), 0.5)
    >>> sorted(set(y.flatten().tolist())) in ([0.0, 2.0], [0.0], [2.0])
    True
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be a number in [0, 1), got {p!r}")
    if out is None:
        if torch.is_grad_enabled() and x.requires_grad:
            result: torch.Tensor = _AddDropout.apply(  # type: ignore[no-untyped-call]
                x, table, index, p, generator
            )
            return result
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if p == 0.0 and index is None:  # nothing to fuse: one operation
        return torch.add(x, table, out=out)
    term: Term = table if index is None else Rows(table, index)
    if p == 0.0:
        return fused_sum(out, [x, term])
    mask = keep_mask(x.numel(), p, device=x.device, generator=generator)
    return fused_sum(out, [x, term], mask=mask, scale=1.0 / (1.0 - p))


# -- entry points ---------------------------------------------------------------------------------


def _dropout_p(dropout: nn.Module) -> float | None:
    """The probability of a stock ``nn.Dropout`` (0 when not training); None for anything else."""
    if type(dropout) is not nn.Dropout:
        return None
    return float(dropout.p) if dropout.training else 0.0


def refuse_exported_dropout(*dropouts: nn.Module) -> None:
    """Under ``torch.export`` (and ``torch.onnx.export``), refuse a dropout that is active: an
    exported graph is for inference, and one that drops activations gives wrong results."""
    if not torch.compiler.is_exporting():
        return
    for dropout in dropouts:
        p = getattr(dropout, "p", 0.0)
        if dropout.training and p:
            raise ValueError(
                f"cannot export with dropout active: the module is in training mode with "
                f"dropout p = {p}; call .eval() on the model before torch.export.export or "
                "torch.onnx.export (or build it with dropout=0.0)"
            )


def _plain_add(x: torch.Tensor, table: torch.Tensor, p: float) -> bool:
    """Whether :func:`add_encoding` takes the plain formula (for a stock dropout of ``p``)."""
    return (
        p == 1.0
        or not fast_paths_enabled()
        or torch.compiler.is_compiling()
        or table.requires_grad
        or x.device.type == "meta"
        or (p > 0.0 and x.device.type != "cpu")  # the exact mask reads data (nonzero)
    )


def add_encoding(
    x: torch.Tensor,
    table: torch.Tensor,
    index: torch.Tensor | None,
    dropout: nn.Module,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``dropout(x + T)`` with ``T = table`` (broadcast against ``x``) or ``table[index]``.

    Args:
        x: ``(A, B, d)`` or ``(s, d)`` floating tensor.
        table: broadcastable to ``x``, or ``(n, d)`` rows picked by ``index`` (``x.shape[:-1]``).
        index: integer tensor or None.
        dropout: the module's dropout (a stock ``nn.Dropout`` allows the fused fast path).
        out: optional result tensor of ``x``'s shape and dtype (it may be ``x``).

    Returns:
        the result (``out`` when given). The fast path is bit-identical to the plain formula
        in evaluation; in training its mask is drawn differently (see :func:`keep_mask`).
    """
    refuse_exported_dropout(dropout)
    p = _dropout_p(dropout)
    if p is None or _plain_add(x, table, p):
        term = table if index is None else table[index]
        summed = x + term if out is None else torch.add(x, term, out=out)
        result: torch.Tensor = dropout(summed)
        if out is not None and result is not out:
            out.copy_(result)
            return out
        return result
    if out is None and p == 0.0:
        if index is None:
            return x + table
        if x.numel() * x.element_size() < FUSE_MIN_BYTES:  # in cache anyway
            return x + table[index]
    return add_dropout(x, table, p, index=index, out=out)


def _embed_fusable(
    tokens: torch.Tensor,
    token: nn.Embedding,
    segment: nn.Embedding | None,
    segments: torch.Tensor | None,
    position_dropout: nn.Module,
) -> bool:
    """The fused embedding sum computes the same values as the modules it bypasses: only when
    those are the stock ones, no gradient is recorded and nothing is being traced."""
    if not fast_paths_enabled() or torch.compiler.is_compiling():
        return False
    modules = [token] if segment is None else [token, segment]
    if any(type(m) is not nn.Embedding or m.max_norm is not None for m in modules):
        return False
    weights = [m.weight for m in modules]
    weight = weights[0]
    return (
        tokens.numel() * weight.shape[1] * weight.element_size() >= FUSE_MIN_BYTES
        and _dropout_p(position_dropout) == 0.0
        and not (torch.is_grad_enabled() and any(w.requires_grad for w in weights))
        and all(w.dtype == weight.dtype and w.device == tokens.device for w in weights)
        and weight.device.type != "meta"
        and (segments is None or segments.device == tokens.device)
    )


def embed(
    tokens: torch.Tensor,
    token: nn.Embedding,
    scale: float | None,
    table: torch.Tensor,
    index: torch.Tensor | None,
    position_dropout: nn.Module,
    segment: nn.Embedding | None,
    segments: torch.Tensor | None,
    dropout: nn.Module,
) -> torch.Tensor:
    """``dropout(position_dropout(E[tokens]·scale + T) + S[segments])`` (``TransformerEmbedding``).

    ``T`` is ``table`` or ``table[index]`` (as in :func:`add_encoding`); ``segments`` None
    with a ``segment`` embedding means all zeros (row 0 is added without a gather). Fast path
    (no gradient recorded, stock modules, eager): the gather, the scaling and the additions
    fused block by block into the output, bit-identical to the plain formula.
    """
    refuse_exported_dropout(position_dropout, dropout)
    if _embed_fusable(tokens, token, segment, segments, position_dropout):
        weight = token.weight
        terms: list[Term] = [Rows(weight, tokens), table if index is None else Rows(table, index)]
        if segment is not None:
            terms.append(segment.weight[0] if segments is None else Rows(segment.weight, segments))
        out = torch.empty(
            (*tokens.shape, weight.shape[1]), dtype=weight.dtype, device=weight.device
        )
        fused_sum(out, terms, first_scale=scale)
        fused: torch.Tensor = dropout(out)
        return fused
    x = token(tokens)
    if scale is not None:
        x = x * scale
    x = add_encoding(x, table, index, position_dropout)
    if segment is not None:
        x = x + (segment(segments) if segments is not None else segment.weight[0])
    result: torch.Tensor = dropout(x)
    return result
