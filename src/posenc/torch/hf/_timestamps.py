"""The drop-in for MusicFlamingo's rotary time embedding: cos/sin from audio timestamps.

:class:`TimestampRotary` takes the call of transformers' ``MusicFlamingoRotaryEmbedding``,
``forward(timestamps, seq_len)``, and returns its ``(cos, sin)`` from posenc's float64
coordinates (:func:`posenc.timestamp_positions`) and per-axis frequencies, rounded once.
:func:`examine_timestamps` recognises such a module by its call and config and verifies it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from ..._checks import as_float, check_int, check_positive
from ..._positions.timestamps import timestamp_positions
from ..._rope.multi_axis import multi_axis_frequencies
from .._checks import as_positions, check_dtype
from .._kernels._cast import cast_exact
from ._probe import forward_parameters, probing
from ._report import Replaced

__all__ = ["TimestampRotary", "examine_timestamps"]

#: frames of the audio encoder's input per frame of its output (MusicFlamingo's conv stride
#: and pooling: ``audio_frame_step * 4`` seconds between output frames)
DOWNSAMPLING = 4


class TimestampRotary(nn.Module):
    """Replaces MusicFlamingo's ``MusicFlamingoRotaryEmbedding``: rotary tables of audio frames
    whose angles come from their timestamps in seconds, not from integer ids.

    The window axis and the time axis take ``rotary_dim / 2`` pairs each, both on the schedule
    ``ω_k = base^(-2k/rotary_dim)``; pair ``k`` turns by ``p·ω_k`` with the real coordinates
    of :func:`posenc.timestamp_positions` (``−2π·τ·w/M`` for the window axis, ``−2π·τ·2π·t/M``
    for the time axis). Pairs are neighbours (``2j, 2j+1``: MusicFlamingo's
    ``apply_rotary_time_emb``), the window pairs first. Coordinates, angles and cos/sin are
    float64, rounded once to :attr:`dtype`.

    Args:
        rotary_dim: the rotary dimension of the config (``head_dim · partial_rotary_factor``,
            even, >= 2): each axis takes ``rotary_dim / 2`` pairs, and the table is
            ``2·rotary_dim`` wide.
        base: ``rope_theta``, a positive finite number.
        frame_seconds: seconds between the frames of a window (``audio_frame_step · 4``).
        max_positions: ``M`` (``max_position_embeddings``, which the config sets to
            ``rope_theta``).
        dtype: the dtype of the tables (transformers': its ``inv_freq``'s, float32).

    Shapes (``forward``):
        - ``timestamps``: ``(N, S)`` seconds, one row per window, ``S == seq_len``.
        - ``seq_len``: the frames per window, an int >= 1.
        - returns ``(cos, sin)``, each ``(N, S, 2·rotary_dim)`` in :attr:`dtype`.

    >>> rope = TimestampRotary(8, base=1200.0, frame_seconds=0.04, max_positions=1200.0)
    >>> tau = torch.tensor([[0.0, 0.04, 0.08], [0.12, 0.16, 0.2]])
    >>> cos, sin = rope(tau, seq_len=3)
    >>> cos.shape, cos.dtype
    (torch.Size([2, 3, 16]), torch.float32)
    """

    def __init__(
        self,
        rotary_dim: int,
        *,
        base: float,
        frame_seconds: float,
        max_positions: float,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        dim = check_int("rotary_dim", rotary_dim, minimum=2)
        if dim % 2:
            raise ValueError(f"rotary_dim must be even (pairs of channels), got {dim}")
        self.rotary_dim = dim
        self.frame_seconds = check_positive("frame_seconds", frame_seconds)
        self.max_positions = check_positive("max_positions", max_positions)
        self.dtype = check_dtype("dtype", dtype)
        n = dim // 2
        # each axis its own schedule over 2n channels: base^(-2k/rotary_dim); CPU float64
        matrix = multi_axis_frequencies((n, n), schedule="per_axis", base=base).frequencies
        self.base = float(base)
        self._omega = torch.from_numpy(np.ascontiguousarray(matrix[0, :n]))

    @classmethod
    def from_config(cls, config: Any) -> TimestampRotary:
        """The module of a MusicFlamingo config: ``rope_parameters`` (``rope_theta``,
        ``partial_rotary_factor``; rope type ``default`` only), ``head_dim`` (or
        ``hidden_size // num_attention_heads``), ``max_position_embeddings`` and
        ``audio_frame_step`` (times 4: the encoder's downsampling)."""
        params = dict(getattr(config, "rope_parameters", None) or {})
        rope_type = params.get("rope_type", params.get("type", "default"))
        if rope_type != "default":
            raise ValueError(
                f"config.rope_parameters has rope_type {rope_type!r}: the rotary time "
                "embedding is built for rope_type 'default' only"
            )
        head_dim = getattr(config, "head_dim", None)
        if head_dim is None:
            head_dim = config.hidden_size // config.num_attention_heads
        partial = as_float(
            "partial_rotary_factor", params.get("partial_rotary_factor", 1.0), "a number"
        )
        step = check_positive("config.audio_frame_step", getattr(config, "audio_frame_step", None))
        return cls(
            int(int(head_dim) * partial),
            base=params.get("rope_theta", 10000.0),
            frame_seconds=step * DOWNSAMPLING,
            max_positions=check_positive(
                "config.max_position_embeddings", getattr(config, "max_position_embeddings", None)
            ),
        )

    def coordinates(self, timestamps: Any, seq_len: Any) -> torch.Tensor:
        """float64 ``(N, S, 2)`` coordinates (window, time) of ``timestamps`` ``(N, S)``."""
        frames = check_int("seq_len", seq_len, minimum=1)
        tau, _ = as_positions("timestamps", timestamps)
        if tau.dim() != 2 or tau.shape[-1] != frames:
            raise ValueError(
                f"timestamps must have shape (N, seq_len) = (N, {frames}): one row of frame "
                f"times per window, got shape {tuple(tau.shape)}"
            )
        if tau.device.type == "cpu" and not torch.compiler.is_compiling():
            # the NumPy core's checks and coordinates (traced: the same operations in torch)
            coords = timestamp_positions(
                tau.detach().double().numpy(),
                frame_seconds=self.frame_seconds,
                max_positions=self.max_positions,
            )
            return torch.from_numpy(coords)
        return _coordinates(tau.double(), self.frame_seconds, self.max_positions)

    def angles(self, timestamps: Any, seq_len: Any) -> torch.Tensor:
        """float64 ``(N, S, rotary_dim)``: one angle per pair, the window pairs first."""
        coords = self.coordinates(timestamps, seq_len)
        omega = self._omega.to(coords.device)
        return torch.cat([coords[..., :1] * omega, coords[..., 1:] * omega], dim=-1)

    def forward(self, timestamps: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` of ``timestamps``, ``(N, S, 2·rotary_dim)`` in :attr:`dtype`."""
        theta = self.angles(timestamps, seq_len).repeat_interleave(2, dim=-1)
        return cast_exact(theta.cos(), self.dtype), cast_exact(theta.sin(), self.dtype)

    def extra_repr(self) -> str:
        return (
            f"rotary_dim={self.rotary_dim}, base={self.base}, frame_seconds="
            f"{self.frame_seconds}, max_positions={self.max_positions}, dtype={self.dtype}"
        )


def _coordinates(tau: torch.Tensor, step: float, scale: float) -> torch.Tensor:
    """:func:`posenc.timestamp_positions` of float64 ``tau`` ``(N, S)`` on its device (the
    same operations, without reading the data)."""
    frames = tau.shape[-1]
    window = torch.round(tau[:, :1] / (step * frames)) / scale
    time = 2.0 * math.pi * torch.arange(frames, device=tau.device, dtype=torch.float64) / scale
    return torch.stack([-2.0 * math.pi * tau * window, -2.0 * math.pi * tau * time], dim=-1)


# -- recognising and verifying -------------------------------------------------------------------

#: The probe: windows 0, 1, 2, 0 and 9 of 50 frames (the first row repeated: a second sample).
_WINDOWS = torch.tensor([0, 1, 2, 0, 9])
_FRAMES = 50


def _probe_timestamps(frame_seconds: float) -> torch.Tensor:
    """float32 ``(5, 50)`` timestamps, built as MusicFlamingo builds them."""
    frames = torch.arange(_FRAMES, dtype=torch.float32) * frame_seconds
    return _WINDOWS[:, None] * _FRAMES * frame_seconds + frames


def examine_timestamps(module: nn.Module) -> tuple[Replaced, nn.Module] | str | None:
    """``(record, replacement)`` for a module called ``forward(timestamps, seq_len)`` whose
    tables are posenc's, the reason it stays, or None for a module with another call."""
    params = forward_parameters(module)
    if [p.name for p in params or ()][:2] != ["timestamps", "seq_len"]:
        return None
    try:
        ours = TimestampRotary.from_config(module.config)
    except Exception as exc:  # a foreign config may raise anything: it is the reason
        return f"its config cannot be read as a rotary time embedding: {type(exc).__name__}: {exc}"
    tau = _probe_timestamps(ours.frame_seconds)
    with probing(module) as call:
        try:
            output = call(tau, seq_len=_FRAMES)
        except Exception as exc:  # any failure of a foreign module is a reason
            return f"calling it as forward(timestamps, seq_len) failed: {type(exc).__name__}: {exc}"
    if not (isinstance(output, tuple | list) and len(output) == 2):
        return "forward(timestamps, seq_len) returns no (cos, sin) pair"
    theta = ours.angles(tau, _FRAMES).repeat_interleave(2, dim=-1)
    reach = theta.abs().clamp(min=1.0)
    for name, theirs, exact in zip(("cos", "sin"), output, (theta.cos(), theta.sin()), strict=True):
        if not isinstance(theirs, torch.Tensor) or theirs.shape != exact.shape:
            shape = tuple(theirs.shape) if isinstance(theirs, torch.Tensor) else theirs
            return f"its {name} has shape {shape}; posenc's is {tuple(exact.shape)}"
        dtype = theirs.dtype
        eps = float(torch.finfo(dtype).eps) if dtype.is_floating_point else 1.0
        tolerance = 4 * float(torch.finfo(torch.float32).eps) * reach + eps
        error = (theirs.detach().cpu().double() - exact).abs()
        if not bool((error <= tolerance).all()):
            return (
                f"its {name} differs from posenc's rotary time embedding by "
                f"{float(error.max()):.3g} (tables in {str(dtype).removeprefix('torch.')})"
            )
    ours.dtype = output[0].dtype
    detail = f"timestamps, r={2 * ours.rotary_dim}, base={ours.base:g}"
    return Replaced("", "rotary", "interleaved", detail, type(ours).__name__), ours
