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
    stays within twice the longest contiguous range ever requested. Anything else (a far
    jump in ``offset``, explicit ``positions``, ``encoding`` in a dtype/device other than the
    buffer's, or a call traced by ``torch.compile``) is computed on the fly from the float64
    frequencies, with identical values. ``forward`` on an input of another dtype or device
    rebuilds the buffer there (the cache follows the input; inputs that alternate dtypes
    pay a rebuild each time). ``.to(dtype/device)``, ``.half()`` and
    ``to_empty`` rebuild the buffer from float64 instead of casting it.

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

    def _seq_dim(self, x: torch.Tensor) -> int:
        return 1 if (self.batch_first and x.dim() == 3) else 0

    def _positions(self, positions: Any, offset: int, x: torch.Tensor) -> torch.Tensor:
        pos = as_positions("positions", positions, x.device)
        seq_len = x.shape[self._seq_dim(x)]
        if tuple(pos.shape) not in ((seq_len,), tuple(x.shape[:-1])):
            per_token = "(b, s)" if self.batch_first else "(s, b)"
            raise ValueError(
                f"positions must have shape (s,) = ({seq_len},) or {per_token} = "
                f"{tuple(x.shape[:-1])} for x of shape {tuple(x.shape)}, got {tuple(pos.shape)}"
            )
        return add_offset(pos.to(x.device), offset)

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

    def forward(self, x: torch.Tensor, *, positions: Any = None, offset: int = 0) -> torch.Tensor:
        """``dropout(x + PE)``; see the class docstring for shapes.

        Args:
            x: embeddings ``(b, s, d)`` / ``(s, b, d)`` / ``(s, d)``, floating point.
            positions: optional explicit positions ``(s,)`` or ``x.shape[:-1]``.
            offset: int >= 0 added to the positions (default positions are ``0 .. s-1``).

        Returns:
            tensor of ``x``'s shape and dtype.
        """
        self._check_x(x)
        offset = check_offset(offset)
        seq_dim = self._seq_dim(x)
        if positions is None:
            pe = self._rows(offset, offset + x.shape[seq_dim], x.dtype, x.device, adopt=True)
        else:
            pe = self._compute(self._positions(positions, offset, x), x.dtype)
        if pe.dim() == 2 and x.dim() == 3 and seq_dim == 0:
            pe = pe.unsqueeze(1)  # (s, 1, d) against (s, b, d)
        out: torch.Tensor = self.dropout(x + pe)
        return out

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, convention={self.convention!r}, base={self.base}, "
            f"batch_first={self.batch_first}, max_len={self.max_len}"
        )
