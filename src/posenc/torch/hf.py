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
:class:`MultiAxisRotary`          ``Qwen2VLRotaryEmbedding`` and the M-RoPE       M-RoPE, ``half``
                                  modules of Qwen2.5-VL, Qwen3-VL, Qwen3.5, ...:  pairs
                                  ``position_ids`` ``(3, b, s)`` or ``(b, s)``
================================  ==============================================  ===============

The two-line swap finds these modules, and the rotary modules of other models (interleaved
pairs, one column per pair, complex phasors, per-layer-type parameters, multi-axis
``position_ids``), by what they compute,
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

from .._checks import check_base, check_bool, check_int
from .._rope_plan import rope_plan
from .._rope_scaling import RopeScaling, rope_frequencies, rope_scaling
from .._rotary import resolve_rotary_dim
from ._checks import as_positions, check_dtype
from ._functional import largest_position_seq_len
from ._hf_absolute import (
    M2M100Positions,
    MarianPositions,
    WhisperEncoderPositions,
    check_same_table,
    fairseq_positions,
)
from ._hf_multi_axis import MultiAxisRotary
from ._kernels._table import rope_cos_sin
from ._swap._report import SwapReport

__all__ = [
    "LlamaRotary",
    "M2M100Positions",
    "MarianPositions",
    "MultiAxisRotary",
    "SwapReport",
    "WhisperEncoderPositions",
    "fairseq_positions",
    "swap_positions",
]


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
                    check_same_table(f"RoPE {name}", a[0], b[0])
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
    - multi-axis rotary modules (M-RoPE), called ``module(x, position_ids)`` with ids
      ``(n_axes, b, s)`` (language models: Qwen2-VL, Qwen3-VL, ...) or ``(N, n_axes)``
      (vision towers: Qwen2-VL's, Pixtral's) (→ :class:`MultiAxisRotary`); the sections and
      their order come from the config's rope plan and are verified on ids that differ
      between the axes;
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
