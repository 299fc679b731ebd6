"""``LlamaRotary``: the drop-in for ``LlamaRotaryEmbedding`` and the rotary modules that return
its cos/sin, computed from float64 frequencies read once from a model's rope plan."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..._checks import check_base, check_bool, check_int
from ..._rope.plan import RopeLayer, table_plan
from ..._rope.rotary import resolve_rotary_dim
from ..._rope.scaling import RopeScaling, rope_base, rope_frequencies, rope_scaling
from .._checks import as_positions, check_dtype
from .._functional import largest_position_seq_len
from .._kernels._table import rope_cos_sin
from ._absolute import check_same_table

__all__ = ["LlamaRotary", "compile_advice"]


def compile_advice(module: str, function: str) -> str:
    """What to do under ``torch.compile(fullgraph=True)`` when ``module``'s ``forward`` (which
    takes no ``seq_len``) must read the largest position id, as Hugging Face's does."""
    return (
        f"{module} reads it from position_ids, as Hugging Face's module does, and "
        "torch.compile(fullgraph=True) cannot trace that read: compile without "
        f"fullgraph=True (the read becomes a graph break), or build the tables with "
        f"posenc.torch.{function}(..., seq_len=)"
    )


def _config_value(module: Any, name: str) -> Any:
    value = getattr(module, name, None)
    if value is None:
        raise TypeError(
            f"module must have a {name!r} attribute (a transformers LlamaConfig or similar), "
            f"got {type(module).__name__} without one"
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
        base: ``rope_theta``, a finite number > 0; default the scaling's ``rope_theta``, else
            10000.0.
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
        base: float | None = None,
        scaling: Any = None,
        rotary_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=2)
        self.scaling: RopeScaling | None = rope_scaling(scaling)
        self.base = check_base("base", rope_base(base, self.scaling))
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
        A model whose tables are posenc's while the rotation it applies to them is refused by
        the plan (NanoChat rotates by -θ) gets its tables too: the module returns tables only.

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
        return cls._from_layer(table_plan(config).layer(layer_type))

    @classmethod
    def _from_layer(cls, layer: RopeLayer) -> LlamaRotary:
        """The module of one layer of a rope plan, from the float64 frequencies the plan
        computed (nothing is read or computed twice)."""
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
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.head_dim, new.rotary_dim = layer.head_dim, layer.rotary_dim
        new.base, new.scaling = layer.base or 0.0, layer.scaling
        new._omega, new._attention = torch.tensor(layer.frequencies), layer.attention_factor
        return new

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
            advice = compile_advice("LlamaRotary", "rotary_cos_sin")
            seq_len = largest_position_seq_len(positions, advice)
            omega_np, attention = rope_frequencies(
                self.rotary_dim, base=self.base, scaling=self.scaling, seq_len=seq_len
            )
            omega = torch.from_numpy(omega_np)
        return rope_cos_sin(positions, omega, attention, "half", dtype, checked=checked)

    def extra_repr(self) -> str:
        text = f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}"
        return text if self.scaling is None else f"{text}, scaling={self.scaling!r}"
