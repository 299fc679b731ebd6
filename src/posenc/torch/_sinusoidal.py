"""``SinusoidalPositionalEncoding``: adds (or returns) the sinusoidal encoding in PyTorch.

Shape legend: ``b`` batch, ``s`` sequence, ``d`` = ``d_model``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .._checks import as_length, check_base, check_bool, check_int, check_length, check_probability
from .._conventions import ConventionName, get_convention
from .._features import feature_slices
from .._frequencies import frequencies
from .._switches import fast_paths_enabled
from ._cache import CachedTables
from ._checks import as_device, as_positions, check_dtype, check_offset, check_size
from ._kernels._add import add_encoding
from ._kernels._table import sinusoidal_at, sinusoidal_rows

__all__ = ["SinusoidalPositionalEncoding"]


def _check_x(x: Any, d_model: int, batch_first: bool) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(
            f"x must be a floating-point tensor of embeddings, got dtype {x.dtype}; "
            "embed token ids first (see posenc.torch.TransformerEmbedding)"
        )
    if x.dim() not in (2, 3):
        layout = "(b, s, d)" if batch_first else "(s, b, d)"
        raise ValueError(
            f"x must have shape {layout} or (s, d) with d = d_model = {d_model}, "
            f"got {x.dim()}-D shape {tuple(x.shape)}"
        )
    if x.shape[-1] != d_model:
        raise ValueError(
            f"x must have d_model = {d_model} channels in its last dimension, "
            f"got shape {tuple(x.shape)}; for sequence-first input pass batch_first=False"
        )


def _may_overlap(t: torch.Tensor) -> bool:
    """Whether two elements of ``t`` may share memory (strides only; no data is read).

    PyTorch's own answer where it has one; else the sufficient rule: with the dimensions
    sorted by stride, each stride exceeds the span of the smaller ones.
    """
    has_overlap = getattr(torch, "_debug_has_internal_overlap", None)
    if has_overlap is not None and not torch.compiler.is_compiling():
        answer = has_overlap(t)  # 0: no overlap, 1: overlap, 2: too hard to tell
        if answer != 2:
            return bool(answer)
    span = 0
    for stride, n in sorted((abs(st), n) for st, n in zip(t.stride(), t.shape, strict=True)):
        if n > 1:
            if stride <= span:
                return True
            span += stride * (n - 1)
    return False


def _check_own_memory(out: torch.Tensor, name: str) -> None:
    """The tensor written in place (``x`` for ``add_``/``out=x``, else ``out``) must hold
    each of its elements in memory of its own."""
    fix = "pass a tensor with memory of its own (.contiguous() or .clone())"
    if any(st == 0 and n > 1 for st, n in zip(out.stride(), out.shape, strict=True)):
        raise ValueError(
            f"{name} is an expanded (broadcast) view, stride 0 in some dimension "
            f"(shape {tuple(out.shape)}, strides {out.stride()}): its elements share memory, "
            f"and writing the sum in place needs memory for each; {fix}"
        )
    if _may_overlap(out):
        raise ValueError(
            f"{name} is a self-overlapping view (shape {tuple(out.shape)}, strides "
            f"{out.stride()}): several of its elements may share memory, and writing the sum "
            f"in place needs memory for each; {fix}"
        )


def _check_out(out: Any, x: torch.Tensor) -> None:
    if not isinstance(out, torch.Tensor):
        raise TypeError(
            f"out must be a torch.Tensor of x's shape and dtype (or x itself), "
            f"got {type(out).__name__}"
        )
    if out.shape != x.shape:
        raise ValueError(f"out must have x's shape {tuple(x.shape)}, got {tuple(out.shape)}")
    if out.dtype != x.dtype or out.device != x.device:
        raise TypeError(
            f"out must have x's dtype and device ({x.dtype}, {x.device}), "
            f"got ({out.dtype}, {out.device})"
        )
    if torch.is_grad_enabled() and (x.requires_grad or out.requires_grad):
        raise ValueError(
            "out= writes without recording gradients, but x requires grad; call it under "
            "torch.no_grad() or torch.inference_mode(), or leave out=None"
        )
    _check_own_memory(out, "x" if out is x else "out")
    if (
        out.device.type != "meta"
        and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        and (out.data_ptr(), out.stride()) != (x.data_ptr(), x.stride())
    ):
        raise ValueError("out must be x itself or memory that does not overlap x")


class SinusoidalPositionalEncoding(CachedTables):
    """Adds the sinusoidal positional encoding to embeddings, then applies dropout.

    ``forward(x)`` returns ``dropout(x + PE[offset : offset + s])`` with the encoding of
    :func:`posenc.sinusoidal`; ``encoding(...)`` returns the encoding itself.

    Args:
        d_model: number of channels ``d``, an integer >= 1 (odd is fine).
        dropout: dropout probability applied after the addition, in [0, 1].
        base: wavelength base, a finite number > 0 (10000 in the paper).
        convention: ``"paper"``, ``"tensor2tensor"`` or ``"marian"`` (:data:`posenc.CONVENTIONS`).
        batch_first: ``x`` is ``(b, s, d)`` if True (default), ``(s, b, d)`` if False.
        max_len: rows to precompute in ``__init__``. An optimisation, not a limit: longer
            inputs and larger positions work too (see "Cache" below).
        device, dtype: where and in which dtype the cached table is built (factory kwargs).

    Shapes:
        - ``x``: ``(b, s, d)`` (``batch_first``), ``(s, b, d)`` (not ``batch_first``) or
          ``(s, d)`` (unbatched); any floating dtype. The output has ``x``'s shape and dtype.
        - ``positions`` (optional): ``(s,)``, or one per token: ``x.shape[:-1]``, i.e.
          ``(b, s)`` batch-first and ``(s, b)`` sequence-first. Integer or real values.
        - ``offset``: an int >= 0 added to the positions (tokens already in a KV cache).

    Precision: the table is computed in float64 and rounded once to ``x.dtype`` (also for
    float16/bfloat16, where ``Tensor.to`` would round twice), never built in the model dtype.

    Cache: the table for positions ``0 .. n-1`` is kept as a non-persistent buffer ``pe``,
    under posenc's one cache policy (docs/architecture.md): geometric growth to
    ``max(needed, 2 n)`` rows when a call runs past it from inside; far offsets, explicit
    positions outside it, real-valued positions and calls traced by ``torch.compile``
    computed on the fly with identical values; rebuilt from float64 for another dtype or
    device (``forward`` follows its input; ``.to()``, ``.half()``, ``to_empty()`` rebuild);
    never in ``state_dict``; safe to call from several threads. Explicit integer
    ``positions`` inside the cache are read from it (a slice for a contiguous range, else a
    gather) in eager mode on the CPU.

    Data checks: Python numbers and CPU tensors are checked like the NumPy core (same
    errors); the values of accelerator tensors are not read (no host synchronisation) unless
    ``posenc.torch.set_data_checks(True)``: a position that cannot be encoded exactly then
    gives a NaN row, never a plausible one.

    Speed (eager mode; ``torch.compile`` and ``posenc.set_fast_paths(False)`` run the plain
    ``dropout(x + PE)``):

    - evaluation is one addition, ``x + PE``: the cost of ``x.clone()``;
    - ``add_(x)`` / ``forward(x, out=x)`` adds in place without allocating, for inference
      (refused while autograd needs ``x``);
    - per-token positions are gathered from the cache block by block, fused with the
      addition, without materialising ``PE[positions]``;
    - training dropout is fused with the addition: the keep mask is drawn as one random
      byte per element (8 per 64-bit draw of PyTorch's generator, so ``torch.manual_seed``
      reproduces it) and stored as one byte per element for the backward pass. Each element
      is kept with probability exactly ``1 - p`` (byte ties with ``p``'s leading digits draw
      more bits; see docs/performance.md) and scaled by ``1 / (1 - p)``.
      Masks differ from ``nn.Dropout``'s for the same seed; the distribution is the same.

    >>> pe = SinusoidalPositionalEncoding(6)
    >>> x = torch.zeros(2, 4, 6)
    >>> pe(x).shape
    torch.Size([2, 4, 6])
    >>> torch.equal(pe(x)[0], pe.encoding(4))
    True
    """

    _table_names = ("pe",)
    pe: torch.Tensor

    def __init__(
        self,
        d_model: int,
        *,
        dropout: float = 0.0,
        base: float = 10000.0,
        convention: ConventionName = "paper",
        batch_first: bool = True,
        max_len: int | None = None,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model, minimum=1)
        self.base = check_base("base", base)
        self.convention = get_convention(convention).name
        self.batch_first = check_bool("batch_first", batch_first)
        self.max_len = None if max_len is None else check_length("max_len", max_len)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self._layout = feature_slices(self.d_model, self.convention)
        # Plain CPU float64 tensor, not a buffer: module casts must never touch it.
        self._omega = torch.from_numpy(
            frequencies(self.d_model, base=self.base, convention=self.convention)
        )
        dtype = check_dtype("dtype", torch.get_default_dtype() if dtype is None else dtype)
        device = as_device(device, torch.get_default_device())
        check_size("max_len and d_model", (self.max_len or 0, self.d_model), dtype.itemsize, device)
        self._init_tables(self.max_len or 0, dtype, device, key=0)

    def _compute_rows(
        self, key: Any, start: int, stop: int, dtype: torch.dtype, device: torch.device
    ) -> tuple[torch.Tensor, ...]:
        return (
            sinusoidal_rows(start, stop, self._omega, self._layout, self.d_model, dtype, device),
        )

    def _at(self, positions: torch.Tensor, dtype: torch.dtype, checked: bool) -> torch.Tensor:
        return sinusoidal_at(
            positions, self._omega, self._layout, self.d_model, dtype, checked=checked
        )

    # -- rows -------------------------------------------------------------------------------

    def _positions(
        self, positions: Any, offset: int, shape: tuple[int, ...], device: torch.device
    ) -> tuple[torch.Tensor, bool]:
        """Checked positions (plus ``offset``) for an input of ``shape``, on ``device``."""
        pos, checked = as_positions("positions", positions, device, offset=offset)
        seq_dim = 1 if (self.batch_first and len(shape) == 3) else 0
        seq_len = shape[seq_dim]
        if tuple(pos.shape) not in ((seq_len,), tuple(shape[:-1])):
            per_token = "(b, s)" if self.batch_first else "(s, b)"
            raise ValueError(
                f"positions must have shape (s,) = ({seq_len},) or {per_token} = "
                f"{tuple(shape[:-1])} for x of shape {tuple(shape)}, got {tuple(pos.shape)}"
            )
        return pos.to(device), checked

    def _lookup(
        self,
        pos: torch.Tensor,
        checked: bool,
        batch_dim: int | None,
        dtype: torch.dtype,
        device: torch.device,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The rows for explicit positions: ``(table, None)`` or ``(pe, index)`` to gather.

        Fast path (eager, CPU, checked integer positions inside the cache): read the cache, a
        slice for a contiguous range, a gather otherwise (per-token positions equal along the
        batch are treated as one row of positions). Otherwise: computed from float64.
        """
        snapshot = self._snapshot  # read once
        pe = snapshot.tables[0]
        if (
            not checked
            or not fast_paths_enabled()
            or pos.is_floating_point()
            or pos.numel() == 0
            or pos.device.type != "cpu"
            or not snapshot.serves(0, dtype, device)
        ):
            return self._at(pos, dtype, checked), None
        low, high = (int(v) for v in torch.aminmax(pos))
        if low < 0 or high >= pe.shape[0]:
            return self._at(pos, dtype, checked), None
        if pos.dtype not in (torch.int32, torch.int64):
            pos = pos.to(torch.int64)
        if batch_dim is not None:  # per token: (b, s) or (s, b)
            first = pos.narrow(batch_dim, 0, 1)
            if pos.stride(batch_dim) != 0 and not torch.equal(pos, first.expand_as(pos)):
                return pe, pos
            pos = first.squeeze(batch_dim)
        count = pos.shape[0]
        if high - low == count - 1 and int(pos[0]) == low:
            steps = pos[1:] - pos[:-1]
            if count < 2 or bool((steps == 1).all()):
                return pe[low : low + count], None
        return pe.index_select(0, pos), None

    def _rows_for(
        self,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        device: torch.device,
        positions: Any = None,
        offset: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """What to add to an input of ``shape``: ``(table, None)`` or ``(pe, index)``.

        Without an index the table broadcasts against the input: ``(s, d)``, ``(s, 1, d)``
        sequence-first, or the input's own shape (per-token positions computed on the fly).
        With one, the input gets ``pe[index]`` (``index`` of shape ``shape[:-1]``).
        """
        seq_first = len(shape) == 3 and not self.batch_first
        seq_len = shape[0 if (seq_first or len(shape) == 2) else 1]
        if positions is None:
            offset = check_offset(offset, seq_len)
            if isinstance(offset, torch.Tensor):  # unread (accelerator, traced): on the fly
                positions = torch.arange(seq_len, device=device)
        if positions is None:
            (table,), _ = self._cached_rows(offset, offset + seq_len, dtype, device)
            index = None
        else:
            pos, checked = self._positions(positions, offset, shape, device)
            per_token = len(shape) == 3 and pos.dim() == 2
            batch_dim = (1 if seq_first else 0) if per_token else None
            table, index = self._lookup(pos, checked, batch_dim, dtype, device)
        if index is None and table.dim() == 2 and seq_first:
            table = table.unsqueeze(1)  # (s, 1, d) against (s, b, d)
        return table, index

    # -- API --------------------------------------------------------------------------------

    def encoding(
        self,
        length_or_positions: Any,
        *,
        offset: int = 0,
        dtype: torch.dtype | None = None,
        device: Any = None,
    ) -> torch.Tensor:
        """The encoding itself, without adding it to anything.

        Args:
            length_or_positions: an int ``L`` (positions ``offset .. offset+L-1``) or positions
                of any shape ``S``, to which ``offset`` is added.
            offset: int >= 0.
            dtype, device: of the result; default those of the cached buffer ``pe``.

        Returns:
            ``(L, d)`` or ``(*S, d)`` tensor, no gradient.
        """
        dtype = check_dtype("dtype", self._tables_dtype if dtype is None else dtype)
        device = as_device(device, self._tables_device)
        length = as_length("length_or_positions", length_or_positions)
        if length is None:
            return self._encode("length_or_positions", length_or_positions, offset, dtype, device)
        offset = check_offset(offset, length)
        size = (length, self.d_model)
        check_size("length_or_positions and d_model", size, dtype.itemsize, device)
        (table,), _ = self._cached_rows(offset, offset + length, dtype, device, adopt=False)
        return table

    def _encode(
        self,
        name: str,
        positions: Any,
        offset: Any = 0,
        dtype: torch.dtype | None = None,
        device: Any = None,
    ) -> torch.Tensor:
        """:meth:`encoding` of explicit ``positions`` (the argument ``name`` in errors), for
        the Hugging Face drop-ins too; ``offset`` may be a tensor (see ``check_offset``)."""
        dtype = check_dtype("dtype", self._tables_dtype if dtype is None else dtype)
        device = as_device(device, self._tables_device)
        pos, checked = as_positions(name, positions, device, offset=offset)
        return self._at(pos.to(device), dtype, checked)

    def forward(
        self,
        x: torch.Tensor,
        *,
        positions: Any = None,
        offset: int = 0,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``dropout(x + PE)``; see the class docstring for shapes.

        Args:
            x: embeddings ``(b, s, d)`` / ``(s, b, d)`` / ``(s, d)``, floating point.
            positions: optional explicit positions ``(s,)`` or ``x.shape[:-1]``.
            offset: int >= 0 added to the positions (default positions are ``0 .. s-1``).
            out: optional tensor of ``x``'s shape, dtype and device to write the result to; it
                may be ``x`` itself (see :meth:`add_`). Writing into existing memory records
                no gradient, so it is refused while autograd needs ``x`` (``x.requires_grad``
                with grad mode on): use it under ``torch.no_grad()`` or
                ``torch.inference_mode()``.

        Returns:
            tensor of ``x``'s shape and dtype (``out`` when given).
        """
        _check_x(x, self.d_model, self.batch_first)
        if out is not None:
            _check_out(out, x)
        table, index = self._rows_for(tuple(x.shape), x.dtype, x.device, positions, offset)
        return add_encoding(x, table, index, self.dropout, out)

    def add_(self, x: torch.Tensor, *, positions: Any = None, offset: int = 0) -> torch.Tensor:
        """In place: ``x`` becomes ``dropout(x + PE)``; returns ``x``.

        The fastest way to add the encoding when ``x`` is not needed afterwards (inference):
        no output tensor is allocated. Same as ``forward(x, ..., out=x)``; like it, refused
        while autograd needs ``x``.

        >>> pe = SinusoidalPositionalEncoding(4)
        >>> x = torch.zeros(1, 2, 4)
        >>> with torch.inference_mode():
        ...     y = pe.add_(x)
        >>> y is x, torch.equal(x[0], pe.encoding(2))
        (True, True)
        """
        result: torch.Tensor = self(x, positions=positions, offset=offset, out=x)
        return result

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, convention={self.convention!r}, base={self.base}, "
            f"batch_first={self.batch_first}, max_len={self.max_len}"
        )
