"""The Hugging Face drop-ins for attention biases that are modules.

:class:`RelativeSinusoidPositions` takes the call of Wav2Vec2-Conformer's
``Wav2Vec2ConformerRelPositionalEmbedding``, FastSpeech2-Conformer's
``FastSpeech2ConformerRelPositionalEncoding`` or Parakeet's
``ParakeetEncoderRelPositionalEncoding`` and returns the same table, computed by posenc's
float64 core and rounded once (see :func:`posenc.relative_sinusoid_table`).

:class:`RelativeLogitsPositions` and :class:`RelativeBiasPositions` take over the positional
part of Inkling's content-conditioned relative logits (which distance each query and key pair
reads, and the cut-off past the extent: :func:`posenc.torch.relative_logits`), keeping the
model's own parameters and projections (``swap_positions`` builds them; they share the
replaced module's parameters, under the same names, so checkpoints load as before).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from torch import nn

from ..._checks import check_base, check_int
from .._bias.relative_terms import logits_at_distances, relative_logits
from .._checks import check_dtype
from .._sinusoidal import SinusoidalPositionalEncoding

__all__ = [
    "RelativeBiasPositions",
    "RelativeLogitsPositions",
    "RelativeOutput",
    "RelativeSinusoidPositions",
]

RelativeOutput = Literal["shared", "batched", "scaled"]
_OUTPUTS = ("shared", "batched", "scaled")


class RelativeSinusoidPositions(nn.Module):
    """Replaces the relative positional modules of Conformer speech encoders.

    Row ``r`` of the ``(2L − 1, d)`` table of an input of length ``L`` is the paper's
    interleaved sinusoid ``[sin0, cos0, sin1, cos1, ...]`` of the relative position
    ``L − 1 − r`` (query − key: ``+(L − 1)`` first). The rows of positions ``0 .. L − 1`` come
    from a cached :class:`~posenc.torch.SinusoidalPositionalEncoding` (float64, rounded once to
    the input's dtype); the negative positions are the same rows with the sines negated, which
    is exact. No length ceiling.

    Args:
        embedding_dim: ``d``, the model's ``hidden_size``, an even integer >= 2.
        output: the call it takes, each ``forward(x)`` with ``x`` of shape ``(b, L, *)``:

            - ``"shared"`` (Wav2Vec2-Conformer): returns ``(1, 2L − 1, d)``;
            - ``"batched"`` (Parakeet): returns ``(b, 2L − 1, d)``;
            - ``"scaled"`` (FastSpeech2-Conformer): returns the pair
              ``(dropout(x·√d), dropout(table))`` with the table ``(1, 2L − 1, d)``.
        dropout: the dropout probability of ``"scaled"`` (the module's ``positional_dropout_rate``).
        base: the wavelength base (10000 in every model above).

    The table has ``x``'s dtype and device, without gradient.

    >>> pe = RelativeSinusoidPositions(4)
    >>> pe(torch.zeros(1, 2, 4))
    tensor([[[ 0.8415,  0.5403,  0.0100,  0.9999],
             [ 0.0000,  1.0000,  0.0000,  1.0000],
             [-0.8415,  0.5403, -0.0100,  0.9999]]])
    """

    def __init__(
        self,
        embedding_dim: int,
        *,
        output: RelativeOutput = "shared",
        dropout: float = 0.0,
        base: float = 10000.0,
    ) -> None:
        super().__init__()
        dim = check_int("embedding_dim", embedding_dim, minimum=2)
        if dim % 2:
            raise ValueError(f"embedding_dim must be even (sin/cos pairs), got {dim}")
        if output not in _OUTPUTS:
            raise ValueError(f"output must be one of {_OUTPUTS}, got {output!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, int | float):
            raise TypeError(f"dropout must be a number in [0, 1], got {type(dropout).__name__}")
        if not 0.0 <= float(dropout) <= 1.0:
            raise ValueError(f"dropout must be in [0, 1], got {dropout!r}")
        self.embedding_dim, self.output = dim, output
        self.input_scale = math.sqrt(dim)
        self.dropout = nn.Dropout(float(dropout))
        self.rows = SinusoidalPositionalEncoding(dim, base=check_base("base", base))
        signs = torch.ones(dim, dtype=torch.float64)
        signs[0::2] = -1.0
        self.register_buffer("signs", signs, persistent=False)

    def table(self, length: int, *, dtype: Any = None, device: Any = None) -> torch.Tensor:
        """The ``(2·length − 1, d)`` table in ``dtype`` (default float32) on ``device``."""
        size = check_int("length", length, minimum=1)
        out = check_dtype("dtype", torch.float32 if dtype is None else dtype)
        rows = self.rows.encoding(size, dtype=out, device=device)
        signs: Any = self.signs
        negative = rows[1:] * signs.to(device=rows.device, dtype=out)  # exact: a sign
        return torch.cat([rows.flip(0), negative])

    def forward(self, x: torch.Tensor) -> Any:
        if not isinstance(x, torch.Tensor) or x.dim() < 2:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise TypeError(f"x must be a tensor (b, L, ...), got {got}")
        if x.shape[1] < 1:
            raise ValueError(f"x must hold at least one position (b, L >= 1, ...), got {x.shape}")
        dtype = x.dtype if x.is_floating_point() else torch.float32
        table = self.table(int(x.shape[1]), dtype=dtype, device=x.device)[None]
        if self.output == "batched":
            return table.expand(x.shape[0], -1, -1)
        if self.output == "scaled":
            return self.dropout(x * self.input_scale), self.dropout(table)
        return table

    def extra_repr(self) -> str:
        return f"embedding_dim={self.embedding_dim}, output={self.output!r}"


class RelativeLogitsPositions(nn.Module):
    """Replaces the relative-logits modules of Inkling and Inkling2 (transformers'
    ``InklingRelativeLogits``, ``Inkling2RelativeLogits``).

    ``forward(relative_states, query_positions, key_positions)``: ``relative_states`` ``(b, q,
    heads, d_rel)`` mix the bank ``proj`` ``(d_rel, extent)`` into one profile per query and
    head; :func:`posenc.torch.relative_logits` reads each pair's distance from it, 0 outside
    ``0 <= query − key < extent``. Returns ``(b, heads, q, k)`` in the states' dtype.

    Args:
        proj: the model's bank (the parameter itself, shared), registered as ``name``.
        name: the parameter's name in the replaced module (``"proj"``).
    """

    def __init__(self, proj: nn.Parameter, name: str = "proj") -> None:
        super().__init__()
        self.register_parameter(name, proj)
        self._bank = name

    def forward(
        self, relative_states: torch.Tensor, query_positions: Any, key_positions: Any
    ) -> torch.Tensor:
        curves = (relative_states @ getattr(self, self._bank)).transpose(1, 2)
        return relative_logits(curves, query_positions, key_positions)

    def extra_repr(self) -> str:
        d_rel, extent = getattr(self, self._bank).shape
        return f"d_rel={d_rel}, extent={extent}"


class RelativeBiasPositions(nn.Module):
    """Replaces Inkling2-loop's relative position bias (transformers 5.25's
    ``Inkling2LoopRelativePositionBias``), keeping its projection ``linear``, its norm ``norm``
    (with the model's log scaling of the states) and its bank ``proj``.

    ``forward(hidden_states, relative_distance, position_ids)``: per-head states from
    ``linear`` and ``norm``, mixed by ``proj`` into one profile per query and head, read at the
    given ``(q, k)`` distances (query − key) as :func:`posenc.torch.relative_logits` reads
    them, 0 outside ``0 <= distance < extent``. Returns ``(b, heads, q, k)``.

    Args:
        module: the module replaced; its ``linear``, ``norm`` and ``num_heads`` are taken
            (shared, under the same names).
        proj: its bank (the parameter itself, shared), registered as ``name``.
        name: the bank's name in the replaced module (``"proj"``).
    """

    def __init__(self, module: nn.Module, proj: nn.Parameter, name: str = "proj") -> None:
        super().__init__()
        self.num_heads = int(module.num_heads)  # type: ignore[arg-type]
        self.linear: nn.Module = module.linear  # type: ignore[assignment]
        self.norm: nn.Module = module.norm  # type: ignore[assignment]
        self.register_parameter(name, proj)
        self._bank = name

    def forward(
        self, hidden_states: torch.Tensor, relative_distance: torch.Tensor, position_ids: Any
    ) -> torch.Tensor:
        states = self.linear(hidden_states)
        states = self.norm(states.view(*hidden_states.shape[:-1], self.num_heads, -1), position_ids)
        curves = (states @ getattr(self, self._bank)).transpose(1, 2)
        return logits_at_distances(curves, relative_distance.to(torch.int64))

    def extra_repr(self) -> str:
        d_rel, extent = getattr(self, self._bank).shape
        return f"num_heads={self.num_heads}, d_rel={d_rel}, extent={extent}"
