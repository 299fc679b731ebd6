"""``TransformerEmbedding``: token embedding × sqrt(d) + positional encoding (+ segments).

Shape legend: ``b`` batch, ``s`` sequence, ``d`` = ``d_model``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from .._checks import check_bool, check_int, check_probability
from .._conventions import ConventionName
from ._checks import as_device, check_table_size, check_token_ids, data_checked
from ._kernels._add import embed
from ._sinusoidal import SinusoidalPositionalEncoding

__all__ = ["TransformerEmbedding"]


def _check_ids(name: str, ids: Any, upper: int, like: torch.Tensor | None = None) -> torch.Tensor:
    """``ids`` as int32/int64 (any integer dtype converts exactly), checked where the rule
    allows: in ``[0, upper)``."""
    check_token_ids(name, ids, "token ids" if like is None else "segment ids")
    if like is not None and ids.shape != like.shape:
        raise ValueError(
            f"{name} must have the shape of tokens {tuple(like.shape)}, got {tuple(ids.shape)}"
        )
    if ids.dim() not in (1, 2):
        raise ValueError(f"{name} must have shape (b, s), (s, b) or (s,), got {tuple(ids.shape)}")
    checked, unsigned = data_checked(ids), ids.dtype == torch.uint64
    result: torch.Tensor = ids
    if unsigned:  # from 2**63 up: negative, out of any vocabulary
        result = ids.view(torch.int64)
    elif ids.dtype not in (torch.int32, torch.int64):
        result = ids.to(torch.int64)  # what embedding lookups take
    if result.numel() and checked:
        low, high = (int(v) for v in torch.aminmax(result))
        if low < 0 or high >= upper:
            shown = "a value >= 2**63" if unsigned and low < 0 else f"values from {low} to {high}"
            raise ValueError(f"{name} must lie in [0, {upper - 1}], got {shown}")
    return result


class TransformerEmbedding(nn.Module):
    """Token embedding scaled by sqrt(d_model), plus the sinusoidal encoding, then dropout.

    ``forward(tokens)`` = ``dropout(E[tokens] * sqrt(d) + PE + S[segments])``, the input layer
    of "Attention Is All You Need" (section 3.4) with BERT-style segment embeddings when
    ``num_segments > 0`` (as BERT does).

    Args:
        vocab_size: number of token ids, an integer >= 1.
        d_model: embedding width ``d``, an integer >= 1.
        padding_idx: token id whose embedding is zero and gets no gradient (``nn.Embedding``).
            Positions are not changed by it; pass
            ``positions=posenc.positions_from_tokens(...)`` for fairseq numbering.
        num_segments: size of the segment (token type) vocabulary; 0 for none.
        dropout: dropout probability after the sum, in [0, 1].
        scale: multiply the token embedding by sqrt(d_model) (True, the paper) or not.
        convention, base, batch_first, max_len: passed to :class:`SinusoidalPositionalEncoding`.
        device, dtype: factory kwargs for the embeddings and the cached table.

    Shapes:
        ``tokens`` and ``segments``: ``(b, s)`` (``(s, b)`` if not ``batch_first``) or ``(s,)``,
        integer; output ``(*tokens.shape, d)`` in the embedding dtype.

    Data checks (docs/architecture.md): ids of any integer dtype, unsigned included, are
    converted exactly; token and segment ids on the CPU must lie in their vocabulary
    (``ValueError`` otherwise); ids on an accelerator are not read (the embedding lookup
    itself fails on a bad id there); positions as in ``SinusoidalPositionalEncoding``.

    Speed: when no gradient is recorded (``torch.no_grad()``, ``torch.inference_mode()`` or
    frozen weights) and outside ``torch.compile``, the gather, the scaling and the additions
    run fused, block by block, into the output: one pass over memory instead of four, with
    bit-identical results (same operations in the same order). It keeps no state, so there
    is nothing to invalidate when the weights change; training is untouched.

    >>> emb = TransformerEmbedding(100, 8, num_segments=2, dropout=0.0)
    >>> tokens = torch.tensor([[5, 6, 7], [8, 9, 0]])
    >>> emb(tokens, segments=torch.tensor([[0, 0, 1], [0, 1, 1]])).shape
    torch.Size([2, 3, 8])
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        *,
        padding_idx: int | None = None,
        num_segments: int = 0,
        dropout: float = 0.1,
        scale: bool = True,
        convention: ConventionName = "paper",
        base: float = 10000.0,
        batch_first: bool = True,
        max_len: int | None = None,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.vocab_size = check_int("vocab_size", vocab_size, minimum=1)
        self.d_model = check_int("d_model", d_model, minimum=1)
        if padding_idx is not None:
            padding_idx = check_int("padding_idx", padding_idx, minimum=0)
            if padding_idx >= self.vocab_size:
                raise ValueError(
                    f"padding_idx must be in [0, {self.vocab_size - 1}], got {padding_idx}"
                )
        self.padding_idx = padding_idx
        self.num_segments = check_int("num_segments", num_segments, minimum=0)
        self.scale = check_bool("scale", scale)
        factory: dict[str, Any] = {"device": as_device(device), "dtype": dtype}
        for name, rows in (("vocab_size", self.vocab_size), ("num_segments", self.num_segments)):
            check_table_size(f"{name} and d_model", (rows, self.d_model), dtype, factory["device"])
        self.token = nn.Embedding(self.vocab_size, self.d_model, padding_idx=padding_idx, **factory)
        self.segment = (
            nn.Embedding(self.num_segments, self.d_model, **factory) if self.num_segments else None
        )
        self.position = SinusoidalPositionalEncoding(
            self.d_model,
            base=base,
            convention=convention,
            batch_first=batch_first,
            max_len=max_len,
            **factory,
        )
        self.dropout = nn.Dropout(check_probability("dropout", dropout))

    def forward(
        self,
        tokens: torch.Tensor,
        *,
        segments: torch.Tensor | None = None,
        positions: Any = None,
        offset: int = 0,
    ) -> torch.Tensor:
        """Embed ``tokens`` (and ``segments``; all zeros when omitted and ``num_segments > 0``).

        ``positions`` and ``offset`` are passed to :class:`SinusoidalPositionalEncoding`.
        """
        tokens, segments = self._check_ids(tokens, segments)
        weight = self.token.weight
        shape = (*tokens.shape, self.d_model)
        table, index = self.position._rows_for(
            shape, weight.dtype, weight.device, positions, offset
        )
        scale = math.sqrt(self.d_model) if self.scale else None
        return embed(
            tokens,
            self.token,
            scale,
            table,
            index,
            self.position.dropout,
            self.segment,
            segments,
            self.dropout,
        )

    def _check_ids(self, tokens: Any, segments: Any) -> tuple[torch.Tensor, Any]:
        """Checked ``tokens`` and ``segments`` (int32/int64; see ``_check_ids``)."""
        ids = _check_ids("tokens", tokens, self.vocab_size)
        if self.segment is None:
            if segments is not None:
                raise ValueError("segments were given but num_segments is 0; set num_segments")
        elif segments is not None:
            segments = _check_ids("segments", segments, self.num_segments, like=tokens)
        return ids, segments

    def extra_repr(self) -> str:
        return f"scale={self.scale}"
