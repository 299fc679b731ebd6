"""``SinusoidalPositionalEncoding``: adds (or returns) the sinusoidal encoding in PyTorch.

Shape legend: ``b`` batch, ``s`` sequence, ``d`` = ``d_model``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .._checks import check_base, check_bool, check_int, check_probability, is_length
from ..conventions import get_convention
from ..frequencies import frequencies
from ..sinusoidal import feature_slices
from . import _fused
from .functional import as_positions, check_dtype, sinusoidal_from_omega

__all__ = ["SinusoidalPositionalEncoding", "check_offset"]


def add_offset(positions: torch.Tensor, offset: int) -> torch.Tensor:
    """``positions + offset`` in int64 / float64, so narrow dtypes neither wrap nor round."""
    if not offset:
        return positions
    wide = torch.float64 if positions.is_floating_point() else torch.int64
    return positions.to(wide) + offset


def check_offset(offset: Any) -> int:
    """``offset`` must be an int >= 0 (a ``torch.SymInt`` under ``torch.compile`` passes)."""
    if isinstance(offset, torch.SymInt):
        return offset  # type: ignore[return-value]
    return check_int("offset", offset, minimum=0)


class SinusoidalPositionalEncoding(nn.Module):
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

    Cache: the table for positions ``0 .. n-1`` is kept as a non-persistent buffer ``pe``
    (not in ``state_dict``; checkpoints load whatever ``max_len`` was used). When a call
    needs rows past ``n`` starting no further than ``n`` (the usual growth of a sequence) the
    buffer is rebuilt with ``max(needed, 2 n)`` rows: amortised geometric growth whose size
    stays within twice the longest contiguous range ever requested. Explicit integer
    ``positions`` inside ``0 .. n-1`` are read from the buffer (a slice when they are a
    contiguous range, else a gather) but never grow it. Anything else (a far jump in
    ``offset``, real-valued or out-of-cache ``positions``, ``encoding`` in a dtype/device
    other than the buffer's, or a call traced by ``torch.compile``) is computed on the fly
    from the float64 frequencies, with identical values. ``forward`` on an input of another
    dtype or device rebuilds the buffer there (the cache follows the input; inputs that
    alternate dtypes pay a rebuild each time). ``.to(dtype/device)``, ``.half()`` and
    ``to_empty`` rebuild the buffer from float64 instead of casting it.

    Speed (eager mode; ``torch.compile`` traces the plain ``dropout(x + PE)``):

    - evaluation is one addition, ``x + PE``: the cost of ``x.clone()``;
    - ``add_(x)`` / ``forward(x, out=x)`` adds in place without allocating, for inference
      (refused while autograd needs ``x``);
    - per-token positions are gathered from the cache block by block, fused with the
      addition, without materialising ``PE[positions]``;
    - training dropout is fused with the addition: the keep mask is drawn as one random
      byte per element (8 per 64-bit draw of PyTorch's generator, so ``torch.manual_seed``
      reproduces it) and stored as one byte per element for the backward pass. Each element
      is kept with probability exactly ``1 - p`` (byte ties with ``p``'s leading digits draw
      more bits; see :func:`posenc.torch._fused.keep_mask`) and scaled by ``1 / (1 - p)``.
      Masks differ from ``nn.Dropout``'s for the same seed; the distribution is the same.

    >>> pe = SinusoidalPositionalEncoding(6)
    >>> x = torch.zeros(2, 4, 6)
    >>> pe(x).shape
    torch.Size([2, 4, 6])
    >>> torch.equal(pe(x)[0], pe.encoding(4))
    True
    """

    pe: torch.Tensor

    def __init__(
        self,
        d_model: int,
        *,
        dropout: float = 0.0,
        base: float = 10000.0,
        convention: str = "paper",
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
        self.max_len = None if max_len is None else check_int("max_len", max_len, minimum=0)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self._layout = feature_slices(self.d_model, self.convention)
        # Plain CPU float64 tensor, not a buffer: module casts must never touch it.
        self._omega = torch.from_numpy(
            frequencies(self.d_model, base=self.base, convention=self.convention)
        )
        dtype = check_dtype("dtype", torch.get_default_dtype() if dtype is None else dtype)
        device = torch.get_default_device() if device is None else torch.device(device)
        self.register_buffer("pe", self._build(self.max_len or 0, dtype, device), persistent=False)

    # -- table ------------------------------------------------------------------------------

    def _compute(self, positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return sinusoidal_from_omega(positions, self._omega, self._layout, self.d_model, dtype)

    def _build(self, rows: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        with torch.inference_mode(False), torch.no_grad():
            if device.type == "meta":
                return torch.empty((rows, self.d_model), dtype=dtype, device=device)
            return self._compute(torch.arange(rows, device=device), dtype)

    def _rows(
        self, start: int, stop: int, dtype: torch.dtype, device: torch.device, *, adopt: bool
    ) -> torch.Tensor:
        """Rows ``start .. stop-1`` of the table in ``dtype`` on ``device``: (stop-start, d).

        ``adopt``: a dtype/device other than the cache's may replace the cache (forward follows
        its input); otherwise such a request is computed on the fly.
        """
        pe = self.pe
        same = pe.dtype == dtype and pe.device == device
        if same and stop <= pe.shape[0]:
            return pe[start:stop]
        cached = pe.shape[0]
        if not torch.compiler.is_compiling() and (same or adopt) and start <= cached:
            self.pe = self._build(max(stop, 2 * cached if same else cached), dtype, device)
            return self.pe[start:stop]
        return self._compute(torch.arange(start, stop, device=device), dtype)

    def _apply(self, fn: Any, recurse: bool = True) -> SinusoidalPositionalEncoding:
        # nn.Module casts (.to, .half, .bfloat16, to_empty, ...) would round the table twice or
        # leave it uninitialised; rebuild it from float64 where the cast put it instead.
        before = self.pe
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        if self.pe is not before:  # in-place ops (share_memory_, a no-op .to) keep theirs
            self.pe = self._build(self.pe.shape[0], self.pe.dtype, self.pe.device)
        return self

    # -- checks -----------------------------------------------------------------------------

    def _check_x(self, x: Any) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_floating_point():
            raise TypeError(
                f"x must be a floating-point tensor of embeddings, got dtype {x.dtype}; "
                "embed token ids first (see posenc.torch.TransformerEmbedding)"
            )
        if x.dim() not in (2, 3):
            layout = "(b, s, d)" if self.batch_first else "(s, b, d)"
            raise ValueError(
                f"x must have shape {layout} or (s, d) with d = d_model = {self.d_model}, "
                f"got {x.dim()}-D shape {tuple(x.shape)}"
            )
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have d_model = {self.d_model} channels in its last dimension, "
                f"got shape {tuple(x.shape)}; for sequence-first input pass batch_first=False"
            )

    def _positions(
        self, positions: Any, offset: int, shape: tuple[int, ...], device: torch.device
    ) -> torch.Tensor:
        """Checked positions (plus ``offset``) for an input of ``shape``, on ``device``."""
        pos = as_positions("positions", positions, device)
        seq_dim = 1 if (self.batch_first and len(shape) == 3) else 0
        seq_len = shape[seq_dim]
        if tuple(pos.shape) not in ((seq_len,), tuple(shape[:-1])):
            per_token = "(b, s)" if self.batch_first else "(s, b)"
            raise ValueError(
                f"positions must have shape (s,) = ({seq_len},) or {per_token} = "
                f"{tuple(shape[:-1])} for x of shape {tuple(shape)}, got {tuple(pos.shape)}"
            )
        return add_offset(pos.to(device), offset)

    def _lookup(
        self, pos: torch.Tensor, batch_dim: int | None, dtype: torch.dtype, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The rows for explicit positions: ``(table, None)`` or ``(pe, index)`` to gather.

        Integer positions inside the cache are read from it (a slice for a contiguous range,
        a gather otherwise; per-token positions equal along the batch are treated as one
        row of positions). Anything else is computed from float64, as before.
        """
        pe = self.pe
        if (
            torch.compiler.is_compiling()
            or pos.is_floating_point()
            or pos.numel() == 0
            or pe.dtype != dtype
            or pe.device != device
            or device.type == "meta"
        ):
            return self._compute(pos, dtype), None
        low, high = (int(v) for v in torch.aminmax(pos))
        if low < 0 or high >= pe.shape[0]:
            return self._compute(pos, dtype), None
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

    def _table(
        self,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        device: torch.device,
        positions: Any,
        offset: int,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """What to add to an input of ``shape``: ``(table, None)`` or ``(pe, index)``.

        Without an index the table broadcasts against the input: ``(s, d)``, ``(s, 1, d)``
        sequence-first, or the input's own shape (per-token positions computed on the fly).
        With one, the input gets ``pe[index]`` (``index`` of shape ``shape[:-1]``).
        """
        seq_first = len(shape) == 3 and not self.batch_first
        seq_len = shape[0 if (seq_first or len(shape) == 2) else 1]
        if positions is None:
            table = self._rows(offset, offset + seq_len, dtype, device, adopt=True)
            index = None
        else:
            pos = self._positions(positions, offset, shape, device)
            per_token = len(shape) == 3 and pos.dim() == 2
            batch_dim = (1 if seq_first else 0) if per_token else None
            table, index = self._lookup(pos, batch_dim, dtype, device)
        if index is None and table.dim() == 2 and seq_first:
            table = table.unsqueeze(1)  # (s, 1, d) against (s, b, d)
        return table, index

    def _check_out(self, out: Any, x: torch.Tensor) -> None:
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
        if any(st == 0 and n > 1 for st, n in zip(out.stride(), out.shape, strict=True)):
            raise ValueError("out must not be a broadcast (expanded) tensor")
        if (
            out.device.type != "meta"
            and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            and (out.data_ptr(), out.stride()) != (x.data_ptr(), x.stride())
        ):
            raise ValueError("out must be x itself or memory that does not overlap x")

    # -- API --------------------------------------------------------------------------------

    def encoding(
        self,
        length_or_positions: Any,
        *,
        offset: int = 0,
        dtype: torch.dtype | None = None,
        device: Any = None,
    ) -> torch.Tensor:
        """The encoding itself (seed 004's behaviour), without adding it to anything.

        Args:
            length_or_positions: an int ``L`` (positions ``offset .. offset+L-1``) or positions
                of any shape ``S``, to which ``offset`` is added.
            offset: int >= 0.
            dtype, device: of the result; default those of the cached buffer ``pe``.

        Returns:
            ``(L, d)`` or ``(*S, d)`` tensor, no gradient.
        """
        offset = check_offset(offset)
        dtype = check_dtype("dtype", self.pe.dtype if dtype is None else dtype)
        device = self.pe.device if device is None else torch.device(device)
        if is_length(length_or_positions):
            length = check_int("length_or_positions", length_or_positions, minimum=0)
            return self._rows(offset, offset + length, dtype, device, adopt=False)
        pos = as_positions("length_or_positions", length_or_positions, device).to(device)
        return self._compute(add_offset(pos, offset), dtype)

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
        self._check_x(x)
        offset = check_offset(offset)
        if out is not None:
            self._check_out(out, x)
        table, index = self._table(tuple(x.shape), x.dtype, x.device, positions, offset)
        dropout = self.dropout
        stock = type(dropout) is nn.Dropout
        p = float(dropout.p) if stock and dropout.training else 0.0
        if (
            torch.compiler.is_compiling()
            or not stock
            or p == 1.0
            or table.requires_grad
            or x.device.type == "meta"
        ):
            # The plain expression: traced by torch.compile, or for a replaced dropout module.
            if index is not None:
                table = table[index]
            summed = x + table if out is None else torch.add(x, table, out=out)
            result: torch.Tensor = dropout(summed)
            if out is not None and result is not out:
                out.copy_(result)
                return out
            return result
        if out is None and p == 0.0:
            if index is None:
                return x + table
            if x.numel() * x.element_size() < _fused.FUSE_MIN_BYTES:  # in cache anyway
                return x + table[index]
        return _fused.add_dropout(x, table, p, index=index, out=out)

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
