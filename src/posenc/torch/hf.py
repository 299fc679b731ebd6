"""Drop-in replacements for the positional modules of Hugging Face ``transformers`` models.

Each class here takes the call signature of one ``transformers`` module, so it can be assigned
in place of that module on a built (or loaded) model, and returns the same values computed
by posenc: in float64, rounded once to the model's dtype, at any position (no table ceiling).

================================  ==============================================  ===============
posenc module                     replaces (``transformers``)                     convention
================================  ==============================================  ===============
:class:`MarianPositions`          ``MarianSinusoidalPositionalEmbedding``,        ``marian``
                                  ``PegasusSinusoidalPositionalEmbedding``
:class:`M2M100Positions`          ``M2M100SinusoidalPositionalEmbedding``         ``tensor2tensor``
                                  (M2M100, NLLB): fairseq numbering, zero
                                  vector at padding
:class:`WhisperEncoderPositions`  the Whisper encoder's fixed ``embed_positions``  ``tensor2tensor``
                                  (an ``nn.Embedding`` holding ``sinusoids``)
:class:`LlamaRotary`              ``LlamaRotaryEmbedding`` (cos/sin of RoPE, with  RoPE, ``half``
                                  the config's ``rope_parameters`` scaling)       pairs
================================  ==============================================  ===============

The two-line swap finds these modules, and the rotary modules of other models (interleaved
pairs, one column per pair, complex phasors, per-layer-type parameters), by what they compute,
verifies each against posenc's tables and returns a :class:`SwapReport`::

    from posenc.torch.hf import swap_positions
    print(swap_positions(model))   # what was replaced, and why anything positional was left

or, one module at a time (``like`` copies size, dtype and device from the module it replaces
and checks that the module's table really is that convention)::

    from posenc.torch.hf import MarianPositions
    model.model.encoder.embed_positions = MarianPositions.like(model.model.encoder.embed_positions)

This module never imports ``transformers``: the classes only mimic the call signatures. Data
checks follow the rule of ``posenc.torch`` (docs/architecture.md): CPU positions are checked
like the NumPy core's, accelerator tensors are not read in ``forward``.

Shape legend: ``b`` batch, ``s`` sequence, ``d`` = ``embedding_dim``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .._checks import check_base, check_bool, check_int, sized_by
from .._rope_plan import rope_plan
from .._rope_scaling import RopeScaling, rope_frequencies, rope_scaling
from .._rotary import resolve_rotary_dim
from ._checks import as_positions, check_dtype, check_offset
from ._functional import largest_position_seq_len
from ._kernels._table import rope_cos_sin
from ._sinusoidal import SinusoidalPositionalEncoding
from ._swap._report import SwapReport

__all__ = [
    "LlamaRotary",
    "M2M100Positions",
    "MarianPositions",
    "SwapReport",
    "WhisperEncoderPositions",
    "fairseq_positions",
    "swap_positions",
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


def _check_same_table(
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


def _factory(table: torch.Tensor) -> dict[str, Any]:
    return {"device": table.device, "dtype": table.dtype}


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
        - ``past_key_values_length``: int >= 0 (or a one-value integer tensor), tokens
          already in the cache.
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
        with sized_by(d_model="embedding_dim", max_len="num_positions"):
            self.sinusoidal = SinusoidalPositionalEncoding(
                self.embedding_dim,
                base=check_base("base", base),
                convention="marian",
                max_len=self.num_positions,
                device=device,
                dtype=None if dtype is None else check_dtype("dtype", dtype),
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
        new = cls(dim, num_positions=rows, **_factory(weight))
        if check_bool("check", check):
            _check_same_table("'marian'", weight, new.weight)
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
    ) -> torch.Tensor:
        """Rows at ``position_ids``, or at ``past_key_values_length + (0 .. s-1)``."""
        if position_ids is not None:
            return self.sinusoidal._encode("position_ids", position_ids)
        if len(input_ids_shape) < 2:
            raise ValueError(f"input_ids_shape must be (b, s), got {tuple(input_ids_shape)}")
        seq_len = int(input_ids_shape[1])
        offset = check_offset(past_key_values_length, seq_len, name="past_key_values_length")
        if isinstance(offset, torch.Tensor):  # unread: NaN rows where it cannot be valid
            steps = torch.arange(seq_len, device=offset.device)
            return self.sinusoidal._encode("past_key_values_length", steps, offset)
        return self.sinusoidal.encoding(seq_len, offset=offset)

    def extra_repr(self) -> str:
        return f"{self.embedding_dim}, num_positions={self.num_positions}, convention='marian'"


# -- M2M100 / NLLB (fairseq numbering) --------------------------------------------------------


def fairseq_positions(
    input_ids: torch.Tensor, padding_idx: int, past_key_values_length: Any = 0
) -> torch.Tensor:
    """:func:`posenc.positions_from_tokens` on a tensor, on its device (no host round trip).

    Real tokens get ``padding_idx + 1 + past_key_values_length + i``, where ``i`` is the
    number of real tokens before them in their row; padding tokens get ``padding_idx``.

    Args:
        input_ids: integer token ids ``(..., s)``, the sequence last (any integer dtype).
        padding_idx: the pad token id, an integer >= 0.
        past_key_values_length: tokens already in the cache, an int >= 0 (or a one-value
            integer tensor); the last position, ``padding_idx + past + s``, must be <= 2**53.

    Returns:
        int64 tensor of ``input_ids``'s shape. Where a tensor ``past_key_values_length`` is
        not read (an accelerator's, see ``posenc.torch.set_data_checks``) and cannot be
        valid, real tokens get positions beyond 2**53, which encode as NaN rows.

    >>> fairseq_positions(torch.tensor([[1, 1, 7, 8]]), padding_idx=1)
    tensor([[1, 1, 2, 3]])
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.is_floating_point():
        raise TypeError(f"input_ids must be an integer tensor of token ids, got {input_ids!r:.80}")
    if input_ids.dim() == 0:
        raise ValueError("input_ids must have a sequence dimension, got a 0-D tensor")
    padding_idx = check_int("padding_idx", padding_idx, minimum=0)
    past = check_offset(
        past_key_values_length,
        input_ids.shape[-1],
        name="past_key_values_length",
        first=padding_idx + 1,
    )
    real = input_ids.ne(padding_idx).to(torch.int64)
    positions: torch.Tensor = (torch.cumsum(real, dim=-1) + past) * real
    return positions + padding_idx


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
        - ``past_key_values_length``: int >= 0 (or a one-value integer tensor), tokens
          already in the cache; rows far beyond the cached table are computed on the fly.
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
        self.padding_idx = check_int("padding_idx", padding_idx, minimum=0)
        self.num_positions = (
            None if num_positions is None else check_int("num_positions", num_positions, minimum=0)
        )
        with sized_by(d_model="embedding_dim", max_len="padding_idx, num_positions"):
            self.sinusoidal = SinusoidalPositionalEncoding(
                self.embedding_dim,
                base=check_base("base", base),
                convention="tensor2tensor",
                max_len=None if num_positions is None else self.padding_idx + 1 + num_positions,
                device=device,
                dtype=None if dtype is None else check_dtype("dtype", dtype),
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
        new = cls(weights.shape[1], padding_idx, num_positions=num_positions, **_factory(weights))
        if check_bool("check", check):
            ours = new.sinusoidal.encoding(weights.shape[0], dtype=torch.float64)
            _check_same_table("'tensor2tensor'", weights, ours, skip_row=new.padding_idx)
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
    ) -> torch.Tensor:
        """The encoding of each token, zero at padding tokens: ``(b, s, d)``."""
        positions, past = self._positions(input_ids, inputs_embeds, past_key_values_length)
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
        self, input_ids: Any, inputs_embeds: Any, past_key_values_length: Any
    ) -> tuple[torch.Tensor, Any]:
        """fairseq positions ``(b, s)`` of the tokens, and the checked cache length."""
        if input_ids is not None:
            if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
                raise ValueError(f"input_ids must be a (b, s) tensor, got {input_ids!r:.80}")
            shape, device = tuple(input_ids.shape), input_ids.device
        elif inputs_embeds is not None:
            shape, device = tuple(inputs_embeds.shape[:2]), inputs_embeds.device
        else:
            raise ValueError("pass input_ids or inputs_embeds, got neither")
        start = self.padding_idx + 1
        past = check_offset(
            past_key_values_length, shape[1], name="past_key_values_length", first=start
        )
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
        with sized_by(d_model="embedding_dim", max_len="num_embeddings"):
            self.sinusoidal = SinusoidalPositionalEncoding(
                self.embedding_dim,
                base=check_base("base", base),
                convention="tensor2tensor",
                max_len=self.num_embeddings,
                device=device,
                dtype=None if dtype is None else check_dtype("dtype", dtype),
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
        new = cls(*weight.shape, **_factory(weight))
        if check_bool("check", check):
            _check_same_table("'tensor2tensor' (Whisper sinusoids)", weight, new.weight)
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


# -- Llama (RoPE) ----------------------------------------------------------------------------


def _config_value(config: Any, name: str) -> Any:
    value = getattr(config, name, None)
    if value is None:
        raise TypeError(
            f"config must have a {name!r} attribute (a transformers LlamaConfig or similar), "
            f"got {type(config).__name__} without one"
        )
    return value


class LlamaRotary(nn.Module):
    """Replaces ``LlamaRotaryEmbedding``: the RoPE cos/sin that Llama's attention rotates by.

    ``LlamaModel`` calls ``rotary_emb(hidden_states, position_ids)`` once per forward and
    hands ``(cos, sin)`` to every layer's ``apply_rotary_pos_emb`` (``pairs="half"``). This
    module returns the same tables from :func:`posenc.torch.rotary_cos_sin`: angles,
    cos/sin and the scaling's attention factor in float64, rounded once to ``x.dtype``. Every
    ``rope_type`` of :class:`posenc.RopeScaling` is supported (``default``,
    ``linear``, ``dynamic``, ``yarn``, ``llama3``, ``longrope``); ``dynamic`` and ``longrope``
    choose their frequencies by the largest position + 1 of each call, as Hugging Face does.

    Args:
        head_dim: channels per head (``config.head_dim``, or ``hidden_size //
            num_attention_heads``), an integer >= 2.
        base: ``rope_theta``, a finite number > 0.
        scaling: ``None``, a Hugging Face ``rope_parameters`` dict or a ``RopeScaling``.
        rotary_dim: rotated channels (even, <= ``head_dim``); default ``head_dim`` or the
            scaling's ``partial_rotary_factor``.

    Shapes (``forward``):
        - ``x``: any floating tensor; only its dtype and device are used.
        - ``position_ids``: integer tensor ``(b, s)`` (or any shape ``P``).
        - returns ``(cos, sin)``, each ``(b, s, r)`` (``(*P, r)``) in ``x.dtype``.

    >>> rope = LlamaRotary(8, base=10000.0)
    >>> cos, sin = rope(torch.zeros(1), torch.arange(5)[None])
    >>> cos.shape, bool(cos[0, 0].eq(1).all())
    (torch.Size([1, 5, 8]), True)
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        scaling: Any = None,
        rotary_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=2)
        self.base = check_base("base", base)
        self.scaling: RopeScaling | None = rope_scaling(scaling)
        self.rotary_dim = resolve_rotary_dim(self.head_dim, rotary_dim, self.scaling)
        # Validates the combination (e.g. rope_theta == base) once, here; plain CPU float64
        # frequencies, not a buffer: module casts must never touch them.
        omega, self._attention = rope_frequencies(
            self.rotary_dim, base=self.base, scaling=self.scaling
        )
        self._omega = torch.from_numpy(omega)

    @classmethod
    def from_config(cls, config: Any, *, layer_type: str | None = None) -> LlamaRotary:
        """The module for the layers of type ``layer_type`` of a model's config, read by
        :func:`posenc.rope_plan` (``rope_parameters`` or ``rope_scaling``, flat or per layer
        type, the head size, ``max_position_embeddings``, every spelling the plan reads).

        Args:
            config: a ``transformers`` config (``LlamaConfig``, ``Gemma3TextConfig``, ...) or
                a dict from ``config.json``.
            layer_type: the layer type (``"sliding_attention"``, ``"full_attention"``, ...)
                when layers differ; None when every rotating layer shares one RoPE (a
                ValueError names the layer types otherwise).

        The module returns the half-pair table that transformers' rotary modules return
        (``torch.cat((freqs, freqs))``); Cohere's return an interleaved one (:meth:`like`
        checks a module's table).
        """
        layer = rope_plan(config).layer(layer_type)
        if not layer.uses_positions:
            raise ValueError(
                f"layer_type {layer.layer_type!r} does not rotate ({'; '.join(layer.notes)}): "
                "it needs no rotary module"
            )
        if layer.multi_axis or layer.rope_type == "axial":
            raise ValueError(
                f"layer_type {layer.layer_type!r} is multi-axis (axes {', '.join(layer.axes)}): "
                "LlamaRotary builds 1-D RoPE"
            )
        keeps = layer.scaling is not None and layer.scaling.record.keeps_head_dim
        rotary_dim = None if keeps else layer.rotary_dim
        return cls(
            layer.head_dim, base=layer.base or 0.0, scaling=layer.scaling, rotary_dim=rotary_dim
        )

    @classmethod
    def like(cls, module: nn.Module, *, check: bool = True) -> LlamaRotary:
        """A replacement for ``module`` (``model.model.rotary_emb``), built from its config.

        Args:
            module: a ``LlamaRotaryEmbedding`` (anything with a ``config`` attribute and the
                call ``module(x, position_ids) -> (cos, sin)``).
            check: verify that ``module`` returns the same cos/sin for the positions below
                its original context length (at most 256), within a float32 build's error.
        """
        if not isinstance(module, nn.Module):
            raise TypeError(
                f"module must be a torch.nn.Module (LlamaRotaryEmbedding), got "
                f"{type(module).__name__}"
            )
        new = cls.from_config(_config_value(module, "config"))
        if check_bool("check", check):
            limit = getattr(module, "original_max_seq_len", None) or 256
            buffers = [b for b in module.buffers() if b.is_floating_point()]
            device = buffers[0].device if buffers else torch.device("cpu")
            if device.type != "meta":
                probe = torch.zeros(1, device=device)
                positions = torch.arange(min(int(limit), 256), device=device)[None]
                with torch.no_grad():
                    theirs = module(probe, positions)
                ours = new(probe.to(torch.float64), positions)
                for name, a, b in zip(("cos", "sin"), theirs, ours, strict=True):
                    if tuple(a.shape) != tuple(b.shape):
                        raise ValueError(
                            f"module's {name} has shape {tuple(a.shape)}, posenc's "
                            f"{tuple(b.shape)}: rotary_dim or head_dim differ; pass check=False "
                            "to replace it anyway"
                        )
                    _check_same_table(f"RoPE {name}", a[0], b[0])
        return new

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` for ``position_ids``, in ``x.dtype`` on ``x.device``."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        dtype = check_dtype("x.dtype", x.dtype)
        positions, checked = as_positions("position_ids", position_ids, x.device)
        positions = positions.to(x.device)
        omega, attention = self._omega, self._attention
        if self.scaling is not None and self.scaling.depends_on_length:
            seq_len = largest_position_seq_len(positions)
            omega_np, attention = rope_frequencies(
                self.rotary_dim, base=self.base, scaling=self.scaling, seq_len=seq_len
            )
            omega = torch.from_numpy(omega_np)
        return rope_cos_sin(positions, omega, attention, "half", dtype, checked=checked)

    def extra_repr(self) -> str:
        text = f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}"
        return text if self.scaling is None else f"{text}, scaling={self.scaling!r}"


# -- the whole model --------------------------------------------------------------------------


def swap_positions(model: nn.Module, *, strict: bool = False) -> SwapReport:
    """Replace, in place, every positional module of ``model`` that posenc reproduces.

    Modules are found by what they compute, never by their class name (``transformers`` is
    never imported). Each candidate is called on probe inputs (the first 256 positions and
    some far ones) and compared with posenc's float64 table before anything is replaced:

    - rotary modules, called ``module(x, position_ids)`` or ``module(x, position_ids,
      layer_type)``, returning ``(cos, sin)`` in the ``half`` layout (→ :class:`LlamaRotary`),
      with interleaved pairs or one column per pair, or complex phasors (``freqs_cis``); the
      frequencies come from the module's config (every rope type of :class:`posenc.RopeScaling`,
      partial rotation, per-layer-type parameters) or from its ``dim`` and ``base``;
    - fixed sinusoidal tables (a buffer, or a parameter that is not trained) in the
      ``marian``, ``tensor2tensor`` or ``paper`` convention, or with the halves swapped
      (``[cos | sin]``), read by shape (→ :class:`MarianPositions`), by fairseq numbering of
      token ids (→ :class:`M2M100Positions`), at the given positions (→
      :class:`WhisperEncoderPositions`) or by the input's length.

    A replacement returns what the module returned, in the same form, dtype and device; it
    never calls the module. Modules that look positional (by name, or by their call) but
    are not reproduced stay, and the report says why.

    Args:
        model: any ``nn.Module``, e.g. a ``LlamaForCausalLM`` or a ``MarianMTModel``.
        strict: raise ``ValueError`` listing the modules left in place (the model is then
            unchanged) instead of reporting them.

    Returns:
        a :class:`SwapReport`: ``replaced`` (name, kind, layout, detail, replacement),
        ``left`` (name, reason) and ``names`` (the replaced modules' names).

    >>> print(swap_positions(nn.Linear(2, 2)))
    SwapReport: no positional module found
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    from ._swap._swap import swap

    return swap(model, check_bool("strict", strict))
