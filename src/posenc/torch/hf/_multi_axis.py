"""The drop-in for Hugging Face's multi-axis (M-RoPE) rotary modules: cos/sin of (t, h, w) ids.

:class:`MultiAxisRotary` takes the call of ``Qwen2VLRotaryEmbedding`` and its relatives
(Qwen2.5-VL, Qwen3-VL, Qwen3.5, GLM-4V, Qwen-Omni): ``forward(x, position_ids)`` with
``position_ids`` of shape ``(n_axes, b, s)`` (one row of ids per axis, as ``get_rope_index``
builds them) or ``(b, s)`` (text only: the same position on every axis), and returns the
``(cos, sin)`` that the model's attention rotates by, from posenc's float64 multi-axis tables
(:func:`posenc.torch.multi_axis_cos_sin`). With ``axes_dim=-1`` it takes the call of the vision
towers' 2-D rotary modules instead (``Qwen2VLVisionRotaryEmbedding`` and its relatives):
``position_ids`` of shape ``(..., n_axes)``, the ``(h, w)`` of each patch last. It is exported by
``posenc.torch.hf``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..._features import check_pairs
from ..._rope.multi_axis import AxisOrder, AxisSchedule, _Request
from ..._rope.plan import RopeLayer, table_plan
from .._checks import as_positions, check_dtype
from .._functional import largest_position_seq_len
from .._multi_axis import AxisFrequencies, multi_axis_spec
from ._rotary import compile_advice

__all__ = ["MultiAxisRotary"]


class MultiAxisRotary(nn.Module):
    """Replaces the M-RoPE rotary module of a multimodal language model (``Qwen2VLRotaryEmbedding``,
    ``Qwen2_5_VLRotaryEmbedding``, ``Qwen3VLTextRotaryEmbedding``, ...).

    The model calls ``rotary_emb(hidden_states, position_ids)`` with the ``(t, h, w)`` ids of
    every token and hands ``(cos, sin)`` to its attention (``pairs="half"``). Pair ``k`` turns
    by ``θ_k = p[a_k]·ω_k``: the axis ``a_k`` that owns it (``sections`` pairs per axis,
    ``"sectioned"`` as Qwen2-VL's ``mrope_section`` or ``"interleaved"`` T, H, W, T, ... as
    Qwen3-VL's), the frequency ``ω_k`` of one RoPE schedule over all pairs (``"shared"``).
    Angles, cos/sin and the scaling's attention factor are float64, rounded once to ``x.dtype``.

    Args:
        head_dim: channels per head, an integer >= 2.
        sections: rotary pairs per axis (``mrope_section``), positive integers summing to
            ``rotary_dim / 2``.
        order: ``"sectioned"`` (default), ``"interleaved"`` or ``"turns_then_last"`` (ERNIE 4.5
            VL); see :func:`posenc.multi_axis_frequencies`.
        schedule: ``"shared"`` (default, M-RoPE), ``"dealt"`` or ``"per_axis"``.
        base: ``rope_theta``, a finite number > 0.
        scaling: ``None``, a Hugging Face ``rope_parameters`` dict or a
            :class:`posenc.RopeScaling`; ``dynamic`` and ``longrope`` select their frequencies
            by the largest position + 1 of each call, as Hugging Face does.
        rotary_dim: rotated channels (even, <= ``head_dim``); default ``head_dim`` or the
            scaling's ``partial_rotary_factor``.
        axes_dim: where ``position_ids`` holds the axes: ``0`` (default, the language
            models' ``(n_axes, b, s)``) or ``-1`` (the vision towers' ``(..., n_axes)``).
        pairs: how the attention pairs channels: ``"half"`` (default, ``rotate_half``: the
            table is ``[θ_0 .. θ_{n-1}, θ_0 .. θ_{n-1}]``) or ``"interleaved"`` (pairs
            ``2k, 2k+1``: ``[θ_0, θ_0, θ_1, θ_1, ...]``, as GLM-4V's text model).

    Attributes:
        axis_names: the axes' names in the order of ``position_ids`` (from a config: the
            plan's ``axes``, e.g. ``("temporal", "height", "width")``; else ``"axis 0"``,
            ...), which the swap's reasons use.

    Shapes (``forward``):
        - ``x``: any floating tensor; only its dtype and device are used.
        - ``position_ids``: integer ``(n_axes, b, s)`` (``(1, b, s)`` and ``(b, s)`` are
          broadcast to every axis, as Hugging Face's ``expand(3, -1, -1)`` does); with
          ``axes_dim=-1``, ``(*P, n_axes)``.
        - returns ``(cos, sin)``, each ``(b, s, rotary_dim)`` (``(*P, rotary_dim)``) in
          ``x.dtype``.

    >>> rope = MultiAxisRotary(16, sections=[2, 3, 3], base=1e6)
    >>> ids = torch.tensor([[[0, 1, 2, 2]], [[0, 1, 2, 3]], [[0, 1, 2, 2]]])   # (3, b, s)
    >>> cos, sin = rope(torch.zeros(1), ids)
    >>> cos.shape
    torch.Size([1, 4, 16])
    >>> text = rope(torch.zeros(1), torch.arange(3)[None])[0]   # (b, s): text tokens
    >>> torch.equal(text, cos[:, :3])
    True
    """

    def __init__(
        self,
        head_dim: int,
        *,
        sections: Any,
        order: AxisOrder = "sectioned",
        schedule: AxisSchedule = "shared",
        base: float = 10000.0,
        scaling: Any = None,
        rotary_dim: int | None = None,
        axes_dim: int = 0,
        pairs: str = "half",
    ) -> None:
        super().__init__()
        self.pairs = check_pairs(pairs)
        if axes_dim not in (0, -1) or isinstance(axes_dim, bool):
            raise ValueError(f"axes_dim must be 0 or -1, got {axes_dim!r}")
        self.axes_dim = axes_dim
        request = _Request(sections, order, schedule, base, scaling, None)
        spec = None if sections is None else multi_axis_spec(head_dim, rotary_dim, request)
        if spec is None:
            raise TypeError("sections must be the rotary pairs of each axis, e.g. [16, 24, 24]")
        self._spec = spec
        self.head_dim, self.rotary_dim, self.n_axes = spec.head_dim, spec.rotary_dim, spec.n_axes
        self.scaling = spec.scaling
        self.slot_order = tuple(range(self.n_axes))
        #: the axes' names, in the order of position_ids (the plan's, from a config)
        self.axis_names: tuple[str, ...] = tuple(f"axis {a}" for a in range(self.n_axes))
        # plain CPU float64, not a buffer: module casts must never touch them
        self._fixed = self._frequencies(None)
        self._omega = self._fixed.table.abs().amax(dim=0)

    @classmethod
    def from_config(
        cls, config: Any, *, layer_type: str | None = None, axes_dim: int = 0
    ) -> MultiAxisRotary:
        """The module of a model's config (its text config), read by :func:`posenc.rope_plan`:
        ``mrope_section``, ``mrope_interleaved``, ``rope_theta``, the scaling and partial
        rotation, in every spelling the plan reads, and the pair layout (:attr:`pairs`: the
        plan's ``pairs``, ``"interleaved"`` for GLM-4V's text model, whose table it then
        returns).

        Args:
            config: a ``transformers`` config (``Qwen2VLTextConfig``, ``Qwen3VLConfig``,
                ``Qwen2VLVisionConfig``, ...) or a dict from ``config.json``.
            layer_type: the layer type when the config's layers differ, else None.
            axes_dim: as in the constructor.

        Raises ``ValueError`` for a config whose RoPE is 1-D (use ``LlamaRotary``), whose
        axis layout posenc builds no table for (the reason is the plan's), or whose axes each
        rotate a block of channels of their own (``RopeLayer.pairs_per_axis``, Gemma 4's
        vision tower: its plan's ``cos_sin`` gives that table).
        """
        layer = table_plan(config).layer(layer_type)
        return cls._from_layer(layer, axes_dim=axes_dim, pairs=layer.pairs)

    @classmethod
    def _from_layer(
        cls, layer: RopeLayer, *, axes_dim: int = 0, pairs: str = "half"
    ) -> MultiAxisRotary:
        """The module of one multi-axis layer of a rope plan, its table laid out in
        ``pairs`` (the swap compares ``half`` tables and lays them out itself)."""
        if not layer.uses_positions or not layer.multi_axis:
            raise ValueError(
                f"layer_type {layer.layer_type!r} has one position axis (or none): "
                "MultiAxisRotary builds multi-axis RoPE; use LlamaRotary"
            )
        if layer.unsupported:
            raise ValueError(f"layer_type {layer.layer_type!r}: {layer.unsupported}")
        if layer.pairs_per_axis:
            raise ValueError(
                f"layer_type {layer.layer_type!r}: each axis rotates its own block of channels "
                f"({layer.pairs_source}): MultiAxisRotary builds one table over all rotated "
                "channels, in one pair layout"
            )
        slots = layer.slot_order or tuple(range(len(layer.axes)))
        keeps = layer.scaling is not None and layer.scaling.record.keeps_head_dim
        new = cls(
            layer.head_dim,
            sections=[layer.sections[a] for a in slots],
            order=layer.order or ("interleaved" if layer.interleaved_sections else "sectioned"),
            schedule=layer.schedule or "shared",
            base=layer.base or 0.0,
            scaling=layer.scaling,
            rotary_dim=None if keeps else layer.rotary_dim,
            axes_dim=axes_dim,
            pairs=pairs,
        )
        new.slot_order = tuple(slots)
        new.axis_names = tuple(layer.axes)
        new._fixed = new._frequencies(None)
        return new

    def _frequencies(self, seq_len: int | None) -> AxisFrequencies:
        """The frequency matrix, rows in the order of the axes of ``position_ids``."""
        made = self._spec.frequencies(seq_len)
        if self.slot_order == tuple(range(self.n_axes)):
            return made
        table = torch.empty_like(made.table)
        table[list(self.slot_order)] = made.table
        axes = tuple(a for a in range(self.n_axes) if bool(table[a].any()))
        return AxisFrequencies(table, made.attention, axes)

    def coordinates(self, position_ids: Any, device: torch.device) -> tuple[torch.Tensor, bool]:
        """``(b, s, n_axes)`` (or ``(*P, n_axes)``) coordinates of Hugging Face's
        ``position_ids``, and whether their values were checked (see
        ``posenc.torch.set_data_checks``)."""
        positions, checked = as_positions("position_ids", position_ids, device)
        shape, n = tuple(positions.shape), self.n_axes
        if self.axes_dim == -1:
            if not shape or shape[-1] != n:
                raise ValueError(
                    f"position_ids must have shape (..., {n}) (one coordinate per axis, last), "
                    f"got shape {shape}"
                )
            return positions.to(device), checked
        if len(shape) == 2:
            positions = positions.unsqueeze(0)
        elif len(shape) != 3 or shape[0] not in (1, n):
            raise ValueError(
                f"position_ids must have shape ({n}, b, s) (one row of ids per axis) or "
                f"(b, s) (text: every axis alike), got shape {shape}"
            )
        return positions.to(device).expand(n, -1, -1).permute(1, 2, 0), checked

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` of ``position_ids``, ``(b, s, rotary_dim)`` in ``x.dtype``."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        dtype = check_dtype("x.dtype", x.dtype)
        positions, checked = self.coordinates(position_ids, x.device)
        frequencies = self._fixed
        if self.scaling is not None and self.scaling.depends_on_length:
            advice = compile_advice("MultiAxisRotary", "multi_axis_cos_sin")
            frequencies = self._frequencies(largest_position_seq_len(positions, advice))
        return frequencies.cos_sin(positions, self.pairs, dtype, checked)

    def describe(self) -> str:
        """Sections, order, schedule and where the axes are, as the report and ``repr`` show
        them."""
        text = self._spec.describe()
        if self.slot_order != tuple(range(self.n_axes)):
            text += f", slot_order={list(self.slot_order)}"
        text += ", axes_dim=-1" if self.axes_dim == -1 else ""
        return text + (", pairs='interleaved'" if self.pairs == "interleaved" else "")

    def extra_repr(self) -> str:
        text = f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, {self.describe()}"
        text += f", base={self._spec.request.base}"
        return text if self.scaling is None else f"{text}, scaling={self.scaling!r}"
