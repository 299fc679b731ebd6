"""Kernel family **rope**: rotating queries and keys by RoPE tables.

Entry point :func:`rotate` (and :func:`phasors`, the complex table the interleaved fast path
multiplies by, which a cache may keep). The reference is the formula
(:func:`rotate_formula`), ``x·cos + rotate(x)·sin`` in float32 (float64 for float64 inputs)
rounded once to x's dtype, written with whole-tensor operations: what ``torch.compile``
traces (Inductor fuses it into one pass), and what runs under ``posenc.set_fast_paths(False)``,
when cos/sin need gradients, or when a tensor subclass or functorch transform is involved.

The fast path, for eager mode, gives the formula's bits on the CPU (each product rounded once,
then one sum) for every shape, layout, dtype and thread count; off the CPU, the interleaved
complex product below is the device's kernel, which may fuse a product into the sum (within
one unit in the last place). ``x`` is read once from memory and the
output written once: the work is done in pieces that stay in the CPU caches between the few
operations per piece. Large work (:func:`._workers.spread`) goes in pieces of
``_CHUNK_BYTES`` handed to threads that each run a piece's operations alone, one
synchronisation per call; smaller work in chunks of twice that, whose operations PyTorch
parallelises.

- Pairs of channels (``half``: ``(i, i + r/2)``; ``interleaved``: ``(2i, 2i + 1)``) are
  ``x·cos`` and ``x·sin`` per piece, then the sums across each pair's two channels
  (:func:`_rotate_pairs_into`).
- Interleaved pairs whose rotated width is a multiple of ``2 * _ALIGN`` channels are one
  complex multiplication by ``cos + i·sin`` (:func:`_rotate_interleaved_into`), over the
  whole tensor when it can be viewed as complex numbers. PyTorch's vectorised complex product
  rounds like the formula; its scalar loop, which takes the elements left over at the end of
  a vectorised run, may fuse a product into the sum (one unit in the last place away). Rows of
  ``_ALIGN`` complex numbers leave nothing over, provided PyTorch does not split a row among
  its threads: it splits an operation at multiples of ``ceil(numel / parts)`` elements, so the
  multiplication runs whole when those are multiples of ``_ALIGN`` and on one thread
  otherwise (:func:`_multiply`).

16-bit inputs are converted to float32 per piece, rotated in float32 and rounded once to their
dtype. Gradients: the rotation is linear and orthogonal, so the backward pass is the inverse
rotation, by the same fast path, with the formula's gradient bits.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch

from ..._switches import fast_paths_enabled
from . import _workers

__all__ = ["RopeTables", "by_phasors", "phasors", "rotate", "rotate_formula"]


class RopeTables(NamedTuple):
    """cos/sin ``(..., r)`` laid out for the pairs, broadcastable against the rotated channels,
    and optionally their interleaved phasors ``(..., r/2)`` (complex, from :func:`phasors`).

    "Laid out for the pairs" is what the fast paths rely on: each angle in both channels of
    its pair (the half path reads both halves, the interleaved path the even columns only).
    The modules build such tables; ``posenc.torch.apply_rotary`` checks the tables it is
    given (or marks their rows NaN) before they reach :func:`rotate`."""

    cos: torch.Tensor
    sin: torch.Tensor
    phasors: torch.Tensor | None = None


def _rotate(x: torch.Tensor, pairs: str) -> torch.Tensor:
    """Each pair (a, b) → (−b, a)."""
    if pairs == "half":
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)
    pair = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    return torch.stack((-pair[..., 1], pair[..., 0]), dim=-1).flatten(-2)


# Bytes of the activation (in the compute dtype) per piece that one thread rotates while it
# stays in its core's cache: 1 MiB, as each thread's share of the 2 MiB chunks measured best
# on a 2-core machine with 1 MiB of L2 per core. Work too small to hand to threads
# (:func:`._workers.spread`) goes in chunks of ``2 * _CHUNK_BYTES`` whose operations PyTorch
# parallelises; without an OpenMP runtime to talk to, pieces stay below ``GRAIN`` elements.
_CHUNK_BYTES = 1 << 20

# Pairs rotated by products and sums (:func:`_rotate_pairs_into`) with at most this many
# elements take the formula: the same bits, and fewer operations to dispatch when the data is
# in cache anyway (decoding one token).
_SMALL_HALF = 1 << 15

# Complex numbers per row for which PyTorch's vectorised complex product leaves no element to
# its scalar loop: a multiple of twice the widest vector of complex numbers (AVX-512: 8
# complex64), which its loops take two vectors at a time.
_ALIGN = 16

# PyTorch's thread count as ATen reads it (taken at import: tests patch ``torch.get_num_threads``
# to simulate other counts for posenc's workers, which must not change what ATen does).
_aten_threads = torch.get_num_threads


def rotate_formula(
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

    ``(cos, sin)`` in ``compute`` (no copy when already in it), rotated by products and sums;
    for interleaved pairs of a width that :func:`by_phasors` allows,
    ``(cos + i·sin of each pair, None)``, complex ``(..., r/2)``.
    """
    cos, sin = cos.to(compute), sin.to(compute)
    if not by_phasors(pairs, cos.shape[-1]):
        return cos, sin
    return torch.complex(cos[..., 0::2], sin[..., 0::2]), None


def by_phasors(pairs: str, dim: int) -> bool:
    """Whether ``dim`` rotated channels in ``pairs`` are rotated by one complex product."""
    return pairs == "interleaved" and (dim // 2) % _ALIGN == 0


def _use_fast_path(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairs: str) -> bool:
    """Whether the chunked fast path may run (else the formula)."""
    # Traced code (torch.compile, torch.export) is refused first: reading x.numel() there
    # would put a guard on the sequence length into the graph.
    return (
        not torch.compiler.is_compiling()
        and (by_phasors(pairs, cos.shape[-1]) or x.numel() > _SMALL_HALF)
        and fast_paths_enabled()
        and type(x) is torch.Tensor
        and type(cos) is torch.Tensor
        and type(sin) is torch.Tensor
        and x.layout == torch.strided
        and not (cos.requires_grad or sin.requires_grad)
        and not torch._C._are_functorch_transforms_active()
    )


class _Pieces:
    """Views sharing the leading shape ``lead`` cut into pieces of whole rows, grouped into
    tasks for :func:`~._workers.run`.

    A piece holds at most ``_CHUNK_BYTES`` bytes of rows of ``row_bytes`` each (and as many
    elements as :func:`._workers.piece_elements` allows); a task is about ``TASK_BYTES`` of
    consecutive pieces. Off the CPU the whole views are one piece.
    """

    def __init__(
        self, views: list[torch.Tensor], lead: tuple[int, ...], row_bytes: int, row: int
    ) -> None:
        self.views = views
        total = math.prod(lead) * row_bytes
        self.spread = _workers.spread(total, views[0])
        if self.spread:
            budget = _workers.piece_elements(max(1, _CHUNK_BYTES * row // max(row_bytes, 1)))
        else:
            budget = max(1, 2 * _CHUNK_BYTES * row // max(row_bytes, 1))
        self.axis, inner = -1, row
        if views[0].device.type == "cpu":
            for i in range(len(lead) - 1, -1, -1):
                if inner * lead[i] > budget:
                    self.axis = i
                    break
                inner *= lead[i]
        if self.axis < 0:
            self.outer: tuple[int, ...] = ()
            self.step = self.per_task = self.tasks_per_outer = self.count = 1
            self.spread = False
            #: elements of a row-sized view in the largest piece (a per-thread scratch size)
            self.largest = math.prod(lead) * row
            return
        self.outer = lead[: self.axis]
        self.length = lead[self.axis]
        self.step = max(1, budget // inner)
        self.largest = min(self.step, self.length) * inner
        piece_bytes = self.step * inner * row_bytes // row
        self.per_task = self.step * max(1, _workers.TASK_BYTES // max(piece_bytes, 1))
        if not self.spread:  # one task per outer index: the calling thread does them all
            self.per_task = self.length
        self.tasks_per_outer = -(-self.length // self.per_task)
        self.count = math.prod(self.outer) * self.tasks_per_outer

    def task(self, index: int) -> Iterator[tuple[torch.Tensor, ...]]:
        """The pieces of task ``index`` (``0 <= index < count``), as tuples of views."""
        if self.axis < 0:
            yield tuple(self.views)
            return
        outer, part = divmod(index, self.tasks_per_outer)
        position = []
        for size in reversed(self.outer):
            outer, i = divmod(outer, size)
            position.append(i)
        at = tuple(reversed(position))
        start = part * self.per_task
        size = min(self.per_task, self.length - start)
        parts = [v[at].narrow(0, start, size) for v in self.views]
        yield from zip(*(torch.split(p, self.step) for p in parts), strict=True)


def _channels(t: torch.Tensor, pairs: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The first and second channels of each pair of ``t`` ``(..., r)``, as views."""
    if pairs == "half":
        half = t.shape[-1] // 2
        return t[..., :half], t[..., half:]
    return t[..., 0::2], t[..., 1::2]


def _rotate_pairs_into(
    out: torch.Tensor,
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    pairs: str,
    inverse: bool,
) -> None:
    """``out = x·cos + (−x2, x1)·sin`` (``inverse``: ``(x2, −x1)``) for the pairs ``(x1, x2)``
    of ``pairs``, in pieces.

    The same roundings as the formula (products, then one sum), so the same bits.
    """
    dim = cos.shape[-1]
    lead = tuple(x.shape[:-1])
    compute = cos.dtype
    direct = x.dtype == compute
    views = [x[..., :dim], cos.expand(*lead, dim), sin.expand(*lead, dim)]
    if direct:  # the result is built in out itself: its channels are split once, with the rest
        views += [out[..., :dim], *_channels(out[..., :dim], pairs)]
    else:
        views += [out[..., :dim]]
    tail = dim < x.shape[-1]
    if tail:
        views += [x[..., dim:], out[..., dim:]]
    row_bytes = dim * (x.element_size() if direct else compute.itemsize)
    pieces = _Pieces(views, lead, row_bytes, dim)
    # forward: first channel − x2·sin, second + x1·sin; inverse: the signs swapped
    combine_1, combine_2 = (
        (torch.Tensor.add_, torch.Tensor.sub_)
        if inverse
        else (torch.Tensor.sub_, torch.Tensor.add_)
    )
    buffers: dict[int, list[torch.Tensor]] = {}  # scratch per thread, for the largest piece

    def task(index: int, slot: int) -> None:
        for x_r, c, s, *rest in pieces.task(index):
            size, shape = x_r.numel(), tuple(x_r.shape)
            if slot not in buffers:
                buffers[slot] = [
                    x_r.new_empty(pieces.largest, dtype=compute) for _ in range(1 if direct else 2)
                ]
            parts = [b[:size].view(shape) for b in buffers[slot]]
            products = parts[0]
            products_1, products_2 = _channels(products, pairs)
            if direct:
                out_r, work_1, work_2 = rest[:3]
                torch.mul(x_r, c, out=out_r)
                torch.mul(x_r, s, out=products)
            else:
                out_r, work = rest[0], parts[1]
                work_1, work_2 = _channels(work, pairs)
                products.copy_(x_r)
                torch.mul(products, c, out=work)
                products.mul_(s)
            combine_1(work_1, products_2)
            combine_2(work_2, products_1)
            if not direct:
                out_r.copy_(work)
            if tail:
                rest[-1].copy_(rest[-2])

    _workers.run(pieces.count, task, tensor=x, spread=pieces.spread)


def _complex_view(x: torch.Tensor) -> torch.Tensor | None:
    """``x`` ``(..., 2n)`` as complex ``(..., n)`` without copying, or ``None``."""
    if x.stride(-1) != 1 or x.storage_offset() % 2 or any(s % 2 for s in x.stride()[:-1]):
        return None
    return torch.view_as_complex(x.view(*x.shape[:-1], -1, 2))


def _runs_whole(numel: int) -> bool:
    """Whether PyTorch runs an elementwise operation on ``numel`` elements (rows of
    ``_ALIGN``) without cutting a row: on one thread, or split among ``parts`` threads at
    multiples of ``ceil(numel / parts)`` elements that are multiples of ``_ALIGN``."""
    parts = min(int(_aten_threads()), -(-numel // _workers.GRAIN))
    return parts <= 1 or -(-numel // parts) % _ALIGN == 0


def _multiply(a: torch.Tensor, z: torch.Tensor, out: torch.Tensor) -> None:
    """``out = a · z`` (complex, rows of ``_ALIGN``) by PyTorch's vectorised loop only: on the
    calling thread alone where PyTorch would cut a row among its threads."""
    if _runs_whole(out.numel()):
        torch.mul(a, z, out=out)
        return
    with _workers.alone():  # pieces are below GRAIN where this cannot act: one thread anyway
        torch.mul(a, z, out=out)


def _rotate_interleaved_into(
    out: torch.Tensor, x: torch.Tensor, phasors: torch.Tensor, inverse: bool
) -> None:
    """Interleaved pairs: ``out = x · phasors`` as complex numbers (``inverse``: conjugate);
    the phasors' rows are multiples of ``_ALIGN``."""
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
    if x_c is not None and out_c is not None and not tail and _runs_whole(out_c.numel()):
        torch.mul(x_c, table, out=out_c)  # one pass: no chunks needed
        return
    views = [x[..., :dim], out[..., :dim], table]
    if tail:
        views += [x[..., dim:], out[..., dim:]]
    pieces = _Pieces(views, lead, dim * compute.itemsize, dim)
    scratch: dict[int, torch.Tensor] = {}  # per thread, for the largest piece

    def task(index: int, slot: int) -> None:
        for x_r, out_r, z, *rest in pieces.task(index):
            if x_c is not None and out_c is not None:
                # piece views of complex-viewable tensors stay complex-viewable
                x_z, out_z = _complex_view(x_r), _complex_view(out_r)
                _multiply(x_z, z, out_z)  # type: ignore[arg-type]
            else:
                if slot not in scratch:
                    scratch[slot] = x_r.new_empty(pieces.largest, dtype=compute)
                work = scratch[slot][: x_r.numel()].view(x_r.shape)
                work.copy_(x_r)
                work_z = torch.view_as_complex(work.view(*work.shape[:-1], -1, 2))
                _multiply(work_z, z, work_z)
                out_r.copy_(work)
            if tail:
                rest[1].copy_(rest[0])

    _workers.run(pieces.count, task, tensor=x, spread=pieces.spread)


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
        if second is not None:
            _rotate_pairs_into(out, x, first, second, pairs, inverse)
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


def phasors(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``cos + i·sin`` of each interleaved pair: complex ``(..., r/2)``, in cos's dtype."""
    table, _ = _fast_tables(cos, sin, "interleaved", cos.dtype)
    return table


def rotate(
    tensors: tuple[torch.Tensor, ...], tables: RopeTables, pairs: str
) -> tuple[torch.Tensor, ...]:
    """Rotate the first ``r`` channels of each tensor by ``tables``; the rest pass through.

    Each result has its input's shape and dtype. The arithmetic runs in float32 (float64 when
    an input or the tables are float64) and is rounded once. The fast path's tables are built
    once for all the tensors (or taken from ``tables.phasors``).
    """
    cos, sin = tables.cos, tables.sin
    built: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor | None]] = {}
    if tables.phasors is not None and by_phasors(pairs, cos.shape[-1]):
        built[tables.phasors.real.dtype] = (tables.phasors, None)
    rotated = []
    for x in tensors:
        if not _use_fast_path(x, cos, sin, pairs):
            rotated.append(rotate_formula(x, cos, sin, pairs))
            continue
        compute = torch.promote_types(torch.promote_types(x.dtype, cos.dtype), torch.float32)
        if compute not in built:
            built[compute] = _fast_tables(cos, sin, pairs, compute)
        rotated.append(_rotate_with_tables(x, *built[compute], pairs))
    return tuple(rotated)
