"""Multi-axis RoPE in PyTorch: tables of tokens with several coordinates, from float64.

The maths is the NumPy core's (:func:`posenc.multi_axis_cos_sin`): pair ``k`` turns by
``θ_k = Σ_a p[a]·F[a, k]``, with ``F`` the float64 frequency matrix ``(n_axes, n_pairs)``
of :func:`posenc.multi_axis_frequencies`. This module holds what the PyTorch front-end needs
on top: the frequency matrix as CPU float64 tensors (:class:`AxisFrequencies`), the
configuration a module keeps (:class:`MultiAxisSpec`), the shape check of coordinates, the
functional :func:`multi_axis_cos_sin`, and the multimodal ``(t, h, w)`` ids of
:func:`posenc.multimodal_positions` as tensors.

Canonical positions are ``(..., n_axes)``: one coordinate per axis, last. Hugging Face's
M-RoPE ``position_ids`` are ``(n_axes, b, s)``; ``position_ids.permute(1, 2, 0)`` turns them
into ``(b, s, n_axes)``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from .._checks import check_int
from .._features import PairLayout, check_pairs
from .._positions.multimodal import multimodal_positions as _multimodal_positions
from .._rope.multi_axis import (
    AxisOrder,
    AxisSchedule,
    _count_axes,
    _Request,
    _resolve,
)
from .._rope.scaling import RopeScaling, rope_scaling
from ._checks import as_device, as_positions, check_dtype
from ._functional import largest_position_seq_len
from ._kernels._table import multi_axis_cos_sin as _tables

__all__ = [
    "AxisFrequencies",
    "MultiAxisSpec",
    "check_coordinates",
    "multi_axis_cos_sin",
    "multi_axis_spec",
    "multimodal_positions",
]


class AxisFrequencies(NamedTuple):
    """The float64 frequencies of a multi-axis RoPE, as CPU tensors (never cast with a module).

    ``table``: the matrix ``F`` ``(n_axes, n)``; ``attention``: the scaling's factor, float64
    ``(n,)``, None for 1; ``axes``: the axes with a non-zero frequency. The same methods as
    1-D frequencies (``posenc.torch._rotary``), so a module serves both alike.
    """

    table: torch.Tensor
    attention: torch.Tensor | None
    axes: tuple[int, ...]

    def cos_sin(
        self, positions: torch.Tensor, pairs: str, dtype: torch.dtype, checked: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin ``(*S, 2n)`` of coordinates ``(*S, n_axes)``."""
        return _tables(
            positions, self.table, self.attention, self.axes, pairs, dtype, checked=checked
        )

    def text_positions(self, start: int, stop: int, device: torch.device) -> torch.Tensor:
        """Positions ``start .. stop-1`` as coordinates, the same value on every axis (text
        tokens of a multimodal sequence): what a module's cache holds."""
        positions = torch.arange(start, stop, device=device)
        return positions.unsqueeze(-1).expand(-1, self.table.shape[0])


@dataclass(frozen=True)
class MultiAxisSpec:
    """A module's multi-axis configuration: the request of :func:`posenc.multi_axis_cos_sin`
    (checked once), its number of axes and its rotated channels."""

    request: _Request
    n_axes: int
    head_dim: int
    rotary_dim: int
    scaling: RopeScaling | None

    def frequencies(self, seq_len: int | None) -> AxisFrequencies:
        """The frequencies for ``seq_len`` (what ``dynamic`` and ``longrope`` select by)."""
        freqs, _ = _resolve(self.request, self.head_dim, self.rotary_dim, None, seq_len)
        matrix, attention = freqs
        axes = tuple(a for a in range(matrix.shape[0]) if np.any(matrix[a]))
        factor = None if np.all(attention == 1.0) else torch.from_numpy(attention)
        return AxisFrequencies(torch.from_numpy(matrix), factor, axes)

    def describe(self) -> str:
        """The configuration, for ``extra_repr``."""
        r = self.request
        if r.frequencies is not None:
            return f"frequencies of shape ({self.n_axes}, {self.rotary_dim // 2})"
        parts = [f"sections={list(r.sections)}"]
        parts += [f"{k}={getattr(r, k)!r}" for k in ("order", "schedule") if getattr(r, k)]
        return ", ".join(parts)


def multi_axis_spec(head_dim: int, rotary_dim: Any, request: _Request) -> MultiAxisSpec | None:
    """The checked multi-axis configuration of ``request`` (sections, order, schedule, base,
    scaling, frequencies), or None for 1-D RoPE (no ``sections`` and no ``frequencies``)."""
    if request.sections is None and request.frequencies is None:
        given = [name for name in ("order", "schedule") if getattr(request, name) is not None]
        if given:
            raise TypeError(
                f"{' and '.join(given)} need sections= (rotary pairs per axis) or "
                "frequencies=: they configure multi-axis RoPE"
            )
        return None
    n_axes = _count_axes(request)
    _, dim = _resolve(request, head_dim, rotary_dim, None, None)
    return MultiAxisSpec(request, n_axes, head_dim, dim, rope_scaling(request.scaling))


def hf_hint(shape: tuple[int, ...], n_axes: int) -> str:
    """The hint for positions given in Hugging Face's ``(n_axes, b, s)`` layout."""
    if len(shape) == 3 and shape[0] == n_axes:
        return (
            f" (Hugging Face's M-RoPE position_ids have shape ({n_axes}, b, s): pass "
            "position_ids.permute(1, 2, 0))"
        )
    return ""


def check_coordinates(positions: torch.Tensor, n_axes: int) -> None:
    """Coordinates must have shape ``(..., n_axes)`` (metadata only, always checked)."""
    shape = tuple(positions.shape)
    if not shape or shape[-1] != n_axes:
        raise ValueError(
            f"positions must have shape (..., {n_axes}): one coordinate per axis of the "
            f"{n_axes} axes, got shape {shape}" + hf_hint(shape, n_axes)
        )


def multi_axis_cos_sin(
    positions: Any,
    head_dim: int,
    *,
    sections: Any = None,
    order: AxisOrder | None = None,
    schedule: AxisSchedule | None = None,
    base: Any = None,
    scaling: Any = None,
    frequencies: Any = None,
    rotary_dim: int | None = None,
    pairs: PairLayout = "half",
    dtype: torch.dtype | None = None,
    device: Any = None,
    seq_len: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`posenc.multi_axis_cos_sin` as tensors, in any float dtype including bfloat16.

    Args:
        positions: coordinates of shape ``(..., n_axes)``, a tensor, array or list, integer or
            real (e.g. ``(b, s, 3)`` for the ``(t, h, w)`` ids of Qwen2-VL; Hugging Face's
            ``(3, b, s)`` ``position_ids`` need ``.permute(1, 2, 0)``).
        head_dim: channels per attention head, an integer >= 2.
        sections: rotary pairs per axis; with ``order``, ``schedule``, ``base``, ``scaling``,
            ``frequencies``, ``rotary_dim``, ``pairs`` and ``seq_len`` as in
            :func:`posenc.multi_axis_cos_sin`.
        dtype: float16, bfloat16, float32 or float64; default ``torch.get_default_dtype()``.
        device: where the result lives; default the positions' device.

    Returns:
        ``(cos, sin)`` of shape ``(..., rotary_dim)``: the angles ``Σ_a p[a]·F[a, k]`` in
        float64, cos and sin (times the scaling's attention factor) in float64, rounded once.
        Apply them with :func:`posenc.torch.apply_rotary` (same ``pairs``).

    Data checks: as for :func:`posenc.torch.rotary_cos_sin` (CPU positions raise the NumPy
    core's errors; accelerator positions are not read, an unencodable coordinate gives a NaN
    row).

    >>> ids = torch.tensor([[[0, 0, 0], [1, 1, 1], [2, 2, 2], [2, 2, 3]]])   # (b, s, 3)
    >>> cos, sin = multi_axis_cos_sin(ids, 16, sections=[2, 3, 3], base=1e6)
    >>> cos.shape
    torch.Size([1, 4, 16])
    >>> from posenc.torch import rotary_cos_sin      # text tokens (t = h = w): 1-D RoPE
    >>> torch.equal(cos[0, :3], rotary_cos_sin(3, 16, base=1e6)[0])
    True
    """
    pairs = check_pairs(pairs)
    dtype = check_dtype("dtype", torch.get_default_dtype() if dtype is None else dtype)
    device = as_device(device)
    head_dim = check_int("head_dim", head_dim, minimum=2)
    request = _Request(sections, order, schedule, base, scaling, frequencies)
    spec = multi_axis_spec(head_dim, rotary_dim, request)
    if spec is None:
        raise TypeError(
            "multi_axis_cos_sin needs sections (rotary pairs per axis, e.g. [16, 24, 24]) "
            "or a frequencies matrix"
        )
    if isinstance(positions, numbers.Number):
        raise TypeError(
            f"positions must be an array of shape (..., {spec.n_axes}) (one coordinate per "
            f"axis), got the number {positions!r}"
        )
    pos, checked = as_positions("positions", positions, device, against="device")
    pos = pos if device is None else pos.to(device)
    check_coordinates(pos, spec.n_axes)
    if seq_len is None and spec.scaling is not None and spec.scaling.depends_on_length:
        seq_len = largest_position_seq_len(pos)
    return spec.frequencies(seq_len).cos_sin(pos, pairs, dtype, checked)


def _host(name: str, value: Any) -> Any:
    """A tensor as a NumPy array on the host (reading it); anything else unchanged. A meta
    tensor, which has no values to read, is refused by ``name``."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.device.type == "meta":
        raise ValueError(
            f"{name} is on the meta device, which holds shapes but no values: "
            "multimodal_positions reads the values of its arguments (the ids depend on the "
            "token types and grids), so pass them on the CPU or an accelerator"
        )
    return value.detach().cpu().numpy()


def multimodal_positions(
    token_types: Any,
    *,
    image_grids: Any = None,
    video_grids: Any = None,
    spatial_merge: int = 1,
    attention_mask: Any = None,
    tokens_per_second: float | None = None,
    seconds_per_grid: Any = None,
    split_frames: bool = False,
    segment_ids: Any = None,
    shard: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`posenc.multimodal_positions` for tensors: ``(positions, deltas)``, int64.

    Arguments as in :func:`posenc.multimodal_positions` (tensors, arrays or lists).
    ``positions`` ``(..., s, 3)`` and ``deltas`` ``(...)`` are on ``token_types``' device (CPU
    for arrays and lists); Hugging Face's ``(3, b, s)`` layout is ``positions.permute(2, 0, 1)``.
    The ids depend on the token types, which are read: on an accelerator that is a host
    synchronisation (transformers' ``get_rope_index`` reads them too), so compute the ids where
    the batch is assembled, once per batch, not in a model's ``forward``.

    >>> types = torch.tensor([[0, 0, 1, 1, 1, 1, 0]])
    >>> ids, deltas = multimodal_positions(
    ...     types, image_grids=torch.tensor([[1, 4, 4]]), spatial_merge=2)
    >>> ids[0, :, 1].tolist(), deltas.tolist()
    ([0, 1, 2, 2, 3, 3, 4], [-2])
    """
    device = token_types.device if isinstance(token_types, torch.Tensor) else None
    seconds = _host("seconds_per_grid", seconds_per_grid)
    result = _multimodal_positions(
        _host("token_types", token_types),
        image_grids=_host("image_grids", image_grids),
        video_grids=_host("video_grids", video_grids),
        spatial_merge=spatial_merge,
        attention_mask=_host("attention_mask", attention_mask),
        tokens_per_second=tokens_per_second,
        seconds_per_grid=None if seconds is None else np.asarray(seconds).tolist(),
        split_frames=split_frames,
        segment_ids=_host("segment_ids", segment_ids),
        shard=shard,
    )
    return (
        torch.from_numpy(result.positions).to(device),
        torch.from_numpy(result.deltas).to(device),
    )
