"""The Hugging Face drop-ins for absolute positions: Marian, fairseq/M2M100 and Whisper tables.

:class:`MarianPositions`, :func:`fairseq_positions`, :class:`M2M100Positions` and
:class:`WhisperEncoderPositions` take the calls of the modules they replace and compute their
tables from posenc's float64 core. They are exported by ``posenc.torch.hf``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..._checks import check_base, check_bool, check_int, sized_by
from ..._checks import check_offset as core_check_offset
from ..._conventions import ConventionName
from .._checks import (
    as_device,
    check_dtype,
    check_offset,
    check_size,
    check_token_ids,
    shape_length,
    token_differs,
)
from .._sinusoidal import SinusoidalPositionalEncoding

__all__ = [
    "M2M100Positions",
    "MarianPositions",
    "WhisperEncoderPositions",
    "cache_length_of",
    "check_same_table",
    "factory_of",
    "fairseq_positions",
]


# -- helpers ----------------------------------------------------------------------------------


def _table_of(module: Any, attribute: str, kind: str) -> torch.Tensor:
    """``module.<attribute>``: the 2-D table of the module to replace, or a TypeError."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module ({kind}), got {type(module).__name__}")
    table = getattr(module, attribute, None)
    if not isinstance(table, torch.Tensor) or table.dim() != 2:
        raise TypeError(
            f"module must be {kind} with a 2-D tensor attribute {attribute!r}, "
            f"got {type(module).__name__}"
        )
    return table


def check_same_table(
    kind: str, theirs: torch.Tensor, ours: torch.Tensor, skip_row: int | None = None
) -> None:
    """Raise ValueError unless ``theirs`` equals ``ours`` up to a float32 build's error.

    The tolerance, ``1e-6 + 2e-7 * rows`` plus one epsilon of the table's dtype, allows for a
    table computed in float32 (angle error ~1e-7 per unit of position) or stored in float16 /
    bfloat16, and is far below the O(1) differences of another convention or layout.
    """
    if theirs.device.type == "meta":  # nothing to compare (an empty, deferred model)
        return
    if theirs.numel() == 0:
        return
    error = (theirs.detach().cpu().double() - ours.detach().cpu().double()).abs()
    if skip_row is not None and 0 <= skip_row < error.shape[0]:
        error[skip_row] = 0.0  # compared separately by the caller
    atol = 1e-6 + 2e-7 * error.shape[0] + float(torch.finfo(theirs.dtype).eps)
    worst = float(error.max())
    if not worst <= atol:  # also catches NaN
        row = int(error.amax(dim=-1).argmax())
        raise ValueError(
            f"module's table is not the {kind} encoding: it differs from posenc's by {worst:.3g} "
            f"(row {row}), more than the {atol:.3g} a float32 build can explain; pass "
            "check=False to replace it anyway"
        )


def factory_of(table: torch.Tensor) -> dict[str, Any]:
    return {"device": table.device, "dtype": table.dtype}


def cache_length_of(past_key_values_length: Any, cache_length: Any) -> tuple[str, Any]:
    """``(name, value)`` of the tokens already in the cache, passed under either name:
    ``past_key_values_length`` (transformers 5.23) or ``cache_length`` (5.24 and later)."""
    if cache_length is None:
        return "past_key_values_length", past_key_values_length
    if not (type(past_key_values_length) is int and past_key_values_length == 0):
        raise TypeError(
            "pass the tokens already in the cache as past_key_values_length or as "
            f"cache_length, not both: got past_key_values_length={past_key_values_length!r} "
            f"and cache_length={cache_length!r}"
        )
    return "cache_length", cache_length


def _table_module(
    names: str, rows: int | None, dim: int, convention: ConventionName, options: dict[str, Any]
) -> SinusoidalPositionalEncoding:
    """The table of a drop-in, ``rows`` precomputed (None: none); ``options``: its ``base``,
    ``device`` and ``dtype``. A table too large for memory is refused by the drop-in's own
    argument ``names`` (those that decide ``rows``)."""
    device = as_device(options["device"], torch.get_default_device())
    dtype = options["dtype"]
    dtype = check_dtype("dtype", torch.get_default_dtype() if dtype is None else dtype)
    if rows is not None:
        check_size(f"{names} and embedding_dim", (rows, dim), dtype.itemsize, device)
    with sized_by(d_model="embedding_dim", max_len=names):  # the inner refusals, renamed
        return SinusoidalPositionalEncoding(
            dim,
            base=check_base("base", options["base"]),
            convention=convention,
            max_len=rows,
            device=device,
            dtype=dtype,
        )


# -- Marian / Pegasus -------------------------------------------------------------------------


class MarianPositions(nn.Module):
    """Replaces ``MarianSinusoidalPositionalEmbedding`` (Marian) and its Pegasus copy.

    Returns rows of the ``"marian"`` table ([sin | cos] halves, ω_k = base^(-2k/d)) for
    positions ``0, 1, ...`` shifted by the cache length, exactly as the module it replaces is
    called by ``MarianEncoder``/``MarianDecoder`` (and the Pegasus ones).

    Args:
        embedding_dim: ``d`` = the model's ``d_model``, an integer >= 1.
        num_positions: rows to precompute (the config's ``max_position_embeddings``); an
            optimisation, not a limit. ``None`` precomputes nothing.
        base: wavelength base, a finite number > 0 (10000 in Marian).
        device, dtype: where and in which dtype the table lives (default: torch's defaults).

    Shapes (``forward``):
        - ``input_ids_shape``: ``(b, s)`` (a ``torch.Size`` or tuple; only ``s`` is used).
        - ``past_key_values_length`` (or the keyword ``cache_length``, its name from
          transformers 5.24 on): int >= 0 (or a one-value integer tensor), tokens already in
          the cache.
        - ``position_ids`` (optional): integer tensor of any shape ``P``; overrides the above.
        - returns ``(s, d)`` (or ``(*P, d)``) in the module's dtype, without gradient.

    >>> pe = MarianPositions(4, num_positions=8)
    >>> pe((2, 3)).shape
    torch.Size([3, 4])
    >>> torch.equal(pe((1, 1), past_key_values_length=2)[0], pe((1, 3))[2])
    True
    """

    def __init__(
        self,
        embedding_dim: int,
        *,
        num_positions: int | None = None,
        base: float = 10000.0,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.embedding_dim = check_int("embedding_dim", embedding_dim, minimum=1)
        self.num_positions = (
            None if num_positions is None else check_int("num_positions", num_positions, minimum=0)
        )
        options = {"base": base, "device": device, "dtype": dtype}
        self.sinusoidal = _table_module(
            "num_positions", self.num_positions, self.embedding_dim, "marian", options
        )

    @classmethod
    def like(cls, module: nn.Module, *, check: bool = True) -> MarianPositions:
        """A replacement for ``module`` with its size, dtype and device.

        Args:
            module: a ``MarianSinusoidalPositionalEmbedding`` or
                ``PegasusSinusoidalPositionalEmbedding`` (anything with a 2-D ``weight``).
            check: verify that ``module.weight`` is the ``marian`` table (ValueError if not).

        Returns:
            a new :class:`MarianPositions` (``module`` is left untouched).
        """
        weight = _table_of(module, "weight", "a Marian-style sinusoidal embedding")
        rows, dim = weight.shape
        new = cls(dim, num_positions=rows, **factory_of(weight))
        if check_bool("check", check):
            check_same_table("'marian'", weight, new.weight)
        return new

    @property
    def weight(self) -> torch.Tensor:
        """The table for positions ``0 .. num_positions - 1``: ``(num_positions, d)``."""
        return self.sinusoidal.encoding(self.num_positions or 0)

    def forward(
        self,
        input_ids_shape: Any,
        past_key_values_length: Any = 0,
        position_ids: torch.Tensor | None = None,
        *,
        cache_length: Any = None,
    ) -> torch.Tensor:
        """Rows at ``position_ids``, or at ``past_key_values_length + (0 .. s-1)``."""
        seq_len = shape_length("input_ids_shape", input_ids_shape)  # checked, even if unused
        name, past = cache_length_of(past_key_values_length, cache_length)
        if position_ids is not None:
            return self.sinusoidal._encode("position_ids", position_ids)
        offset = check_offset(past, seq_len, name=name)
        table, shape = self.sinusoidal, (seq_len, self.embedding_dim)
        size, device = table._tables_dtype.itemsize, table._tables_device
        check_size("input_ids_shape and embedding_dim", shape, size, device)
        if isinstance(offset, torch.Tensor):  # unread: NaN rows where it cannot be valid
            steps = torch.arange(seq_len, device=offset.device)
            return self.sinusoidal._encode(name, steps, offset)
        return self.sinusoidal.encoding(seq_len, offset=offset)

    def extra_repr(self) -> str:
        return f"{self.embedding_dim}, num_positions={self.num_positions}, convention='marian'"


# -- M2M100 / NLLB (fairseq numbering) --------------------------------------------------------


def _fairseq_past(
    padding_idx: int, past: Any, length: Any, name: str = "past_key_values_length"
) -> Any:
    """The checked cache length ``past`` (argument ``name``) for fairseq numbering of
    ``length`` tokens: positions run up to ``padding_idx + past + length``, within 2**53;
    each argument is refused by its name."""
    core_check_offset("padding_idx", padding_idx, length)
    return check_offset(past, length, name=name, first=padding_idx + 1)


def fairseq_positions(
    input_ids: torch.Tensor, padding_idx: int, past_key_values_length: Any = 0
) -> torch.Tensor:
    """:func:`posenc.positions_from_tokens` on a tensor, on its device (no host round trip).

    Real tokens get ``padding_idx + 1 + past_key_values_length + i``, where ``i`` is the
    number of real tokens before them in their row; padding tokens get ``padding_idx``.

    Args:
        input_ids: integer token ids ``(..., s)``, the sequence last (any integer dtype,
            unsigned included; compared with ``padding_idx`` exactly: a ``padding_idx`` the
            dtype cannot hold, such as 257 for uint8 ids, matches no token).
        padding_idx: the pad token id, an integer >= 0; ``padding_idx + s`` must be <= 2**53.
        past_key_values_length: tokens already in the cache, an int >= 0 (or a one-value
            integer tensor); the last position, ``padding_idx + past + s``, must be <= 2**53.

    Returns:
        int64 tensor of ``input_ids``'s shape. Where a tensor ``past_key_values_length`` is
        not read (an accelerator's, see ``posenc.torch.set_data_checks``) and cannot be
        valid, real tokens get positions beyond 2**53, which encode as NaN rows.

    >>> fairseq_positions(torch.tensor([[1, 1, 7, 8]]), padding_idx=1)
    tensor([[1, 1, 2, 3]])
    """
    check_token_ids("input_ids", input_ids)
    if input_ids.dim() == 0:
        raise ValueError("input_ids must have a sequence dimension, got a 0-D tensor")
    padding_idx = check_int("padding_idx", padding_idx, minimum=0)
    past = _fairseq_past(padding_idx, past_key_values_length, input_ids.shape[-1])
    real = token_differs(input_ids, padding_idx).to(torch.int64)
    positions: torch.Tensor = (torch.cumsum(real, dim=-1) + past) * real
    return positions + padding_idx


def _check_embeds(inputs_embeds: Any, d: int) -> None:
    allowed = (
        f"inputs_embeds must be a floating-point tensor (b, s, d) with d = embedding_dim = {d}"
    )
    if not isinstance(inputs_embeds, torch.Tensor):
        raise TypeError(f"{allowed}, got {type(inputs_embeds).__name__}")
    if not inputs_embeds.is_floating_point():
        raise TypeError(f"{allowed}, got dtype {inputs_embeds.dtype}")
    if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != d:
        raise ValueError(f"{allowed}, got shape {tuple(inputs_embeds.shape)}")


class M2M100Positions(nn.Module):
    """Replaces ``M2M100SinusoidalPositionalEmbedding`` (M2M100 and NLLB models).

    The fairseq family numbers real tokens from ``padding_idx + 1`` (see
    :func:`posenc.positions_from_tokens`), gives padding tokens the position ``padding_idx``
    and returns a zero vector there. The table is the ``"tensor2tensor"`` one
    ([sin | cos] halves, ω_k = base^(-k/(d/2 - 1)), a zero column for odd ``d``).

    Args:
        embedding_dim: ``d`` = the model's ``d_model``, an integer >= 1.
        padding_idx: the pad token id (``config.pad_token_id``), an integer >= 0.
        num_positions: rows to precompute; an optimisation, not a limit. ``None``: none.
        base: wavelength base, a finite number > 0 (10000 in M2M100).
        device, dtype: where and in which dtype the table lives.

    Shapes (``forward``):
        - ``input_ids``: ``(b, s)`` integer token ids; positions follow the padding in them.
        - ``inputs_embeds``: ``(b, s, d)``, used (for its shape only) when ``input_ids`` is
          None: every token is then real, positions ``padding_idx + 1 + past + i``.
        - ``past_key_values_length`` (or the keyword ``cache_length``, its name from
          transformers 5.24 on): int >= 0 (or a one-value integer tensor), tokens already in
          the cache; rows far beyond the cached table are computed on the fly.
        - returns ``(b, s, d)`` in the module's dtype, without gradient.

    >>> pe = M2M100Positions(6, padding_idx=1)
    >>> out = pe(torch.tensor([[1, 1, 7, 8], [5, 6, 7, 8]]))
    >>> out.shape, bool(out[0, :2].eq(0).all()), torch.equal(out[0, 2], out[1, 0])
    (torch.Size([2, 4, 6]), True, True)
    """

    def __init__(
        self,
        embedding_dim: int,
        padding_idx: int,
        *,
        num_positions: int | None = None,
        base: float = 10000.0,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.embedding_dim = check_int("embedding_dim", embedding_dim, minimum=1)
        self.padding_idx = core_check_offset("padding_idx", padding_idx)  # int in [0, 2**53]
        self.num_positions = (
            None if num_positions is None else check_int("num_positions", num_positions, minimum=0)
        )
        rows = None if self.num_positions is None else self.padding_idx + 1 + self.num_positions
        options = {"base": base, "device": device, "dtype": dtype}
        self.sinusoidal = _table_module(
            "padding_idx, num_positions", rows, self.embedding_dim, "tensor2tensor", options
        )

    @classmethod
    def like(cls, module: nn.Module, *, check: bool = True) -> M2M100Positions:
        """A replacement for ``module`` with its size, padding index, dtype and device.

        Args:
            module: an ``M2M100SinusoidalPositionalEmbedding`` (or a copy of it: a module with a
                2-D ``weights`` buffer, ``padding_idx`` and ``num_positions``).
            check: verify that ``module.weights`` is the ``tensor2tensor`` table with a zero
                row at ``padding_idx`` (ValueError if not).
        """
        weights = _table_of(module, "weights", "an M2M100-style sinusoidal embedding")
        padding_idx = getattr(module, "padding_idx", None)
        if padding_idx is None:
            raise TypeError(
                "module must have an integer padding_idx (fairseq numbering starts after it), "
                f"got {type(module).__name__} without one"
            )
        num_positions = getattr(module, "num_positions", weights.shape[0])
        new = cls(weights.shape[1], padding_idx, num_positions=num_positions, **factory_of(weights))
        if check_bool("check", check):
            ours = new.sinusoidal.encoding(weights.shape[0], dtype=torch.float64)
            check_same_table("'tensor2tensor'", weights, ours, skip_row=new.padding_idx)
            if 0 <= new.padding_idx < weights.shape[0] and bool(weights[new.padding_idx].any()):
                raise ValueError(
                    f"module's row padding_idx = {new.padding_idx} is not zero; it is not the "
                    "fairseq/M2M100 embedding this class reproduces"
                )
        return new

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        past_key_values_length: Any = 0,
        *,
        cache_length: Any = None,
    ) -> torch.Tensor:
        """The encoding of each token, zero at padding tokens: ``(b, s, d)``."""
        given = cache_length_of(past_key_values_length, cache_length)
        positions, past = self._positions(input_ids, inputs_embeds, given)
        pad = positions.eq(self.padding_idx)
        if isinstance(past, torch.Tensor):  # unread (an accelerator's, or traced): on the fly
            table = self.sinusoidal._encode("positions", positions)
        else:
            # Real tokens sit at first .. first + s - 1: those rows alone, from the cache
            # (or on the fly far beyond it), gathered; never a table up to the offset.
            first = self.padding_idx + 1 + past
            rows = self.sinusoidal.encoding(positions.shape[-1], offset=first)
            table = rows[(positions - first).masked_fill(pad, 0).to(rows.device)]
        return table.masked_fill(pad.unsqueeze(-1).to(table.device), 0.0)

    def _positions(
        self, input_ids: Any, inputs_embeds: Any, given: tuple[str, Any]
    ) -> tuple[torch.Tensor, Any]:
        """fairseq positions ``(b, s)`` of the tokens, and the checked cache length
        (``given``: its name and value)."""
        if inputs_embeds is not None:
            _check_embeds(inputs_embeds, self.embedding_dim)
            shape, device = tuple(inputs_embeds.shape[:2]), inputs_embeds.device
        if input_ids is not None:
            if check_token_ids("input_ids", input_ids).dim() != 2:
                raise ValueError(f"input_ids must have shape (b, s), got {tuple(input_ids.shape)}")
            shape, device = tuple(input_ids.shape), input_ids.device
        elif inputs_embeds is None:
            raise ValueError("pass input_ids or inputs_embeds, got neither")
        start = self.padding_idx + 1
        past = _fairseq_past(self.padding_idx, given[1], shape[1], given[0])
        if input_ids is not None:
            return fairseq_positions(input_ids, self.padding_idx, past), past
        row = torch.arange(start, start + shape[1], device=device) + past
        return row.expand(*shape), past

    def extra_repr(self) -> str:
        return (
            f"{self.embedding_dim}, padding_idx={self.padding_idx}, "
            f"num_positions={self.num_positions}, convention='tensor2tensor'"
        )


# -- Whisper encoder --------------------------------------------------------------------------


class WhisperEncoderPositions(nn.Module):
    """Replaces the Whisper encoder's ``embed_positions`` (an ``nn.Embedding`` of sinusoids).

    ``WhisperEncoder`` calls it as an embedding on ``arange(num_embeddings)``; this module
    returns the ``"tensor2tensor"`` rows (Whisper's ``sinusoids``) for any positions. The
    Whisper *decoder*'s positions are learned and stay as they are.

    Args:
        num_embeddings: positions the encoder uses (``config.max_source_positions``), >= 0.
        embedding_dim: ``d`` = the model's ``d_model``, an integer >= 1.
        base: Whisper's ``max_timescale``, a finite number > 0 (10000).
        device, dtype: where and in which dtype the table lives.

    Shapes: ``forward(positions)``: integer tensor of any shape ``P`` → ``(*P, d)``.

    >>> pe = WhisperEncoderPositions(10, 4)
    >>> pe(torch.arange(pe.num_embeddings)).shape
    torch.Size([10, 4])
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        base: float = 10000.0,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.num_embeddings = check_int("num_embeddings", num_embeddings, minimum=0)
        self.embedding_dim = check_int("embedding_dim", embedding_dim, minimum=1)
        options = {"base": base, "device": device, "dtype": dtype}
        self.sinusoidal = _table_module(
            "num_embeddings", self.num_embeddings, self.embedding_dim, "tensor2tensor", options
        )

    @classmethod
    def like(cls, module: nn.Module, *, check: bool = True) -> WhisperEncoderPositions:
        """A replacement for the encoder's ``embed_positions`` with its size, dtype and device.

        Args:
            module: ``model.model.encoder.embed_positions`` of a Whisper model (an
                ``nn.Embedding``; anything with a 2-D ``weight``).
            check: verify that its weight is the ``tensor2tensor`` table (ValueError if not).
        """
        weight = _table_of(module, "weight", "the Whisper encoder's nn.Embedding")
        new = cls(*weight.shape, **factory_of(weight))
        if check_bool("check", check):
            check_same_table("'tensor2tensor' (Whisper sinusoids)", weight, new.weight)
        return new

    @property
    def weight(self) -> torch.Tensor:
        """The table for positions ``0 .. num_embeddings - 1``: ``(num_embeddings, d)``."""
        return self.sinusoidal.encoding(self.num_embeddings)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """The rows at ``positions`` (any shape ``P``): ``(*P, d)`` in the module's dtype."""
        return self.sinusoidal._encode("positions", positions)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, convention='tensor2tensor'"
