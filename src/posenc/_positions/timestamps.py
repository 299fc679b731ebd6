"""Rotary coordinates from audio timestamps: the angles of a rotary time embedding.

MusicFlamingo (``MusicFlamingoRotaryEmbedding`` in transformers) rotates its audio encoder's
output by angles made of the frames' timestamps in seconds, not of integer ids. An audio
sample is cut into windows of ``S`` encoder frames, ``frame_seconds`` apart; frame ``t`` of a
window starting at ``t_0`` seconds has the timestamp ``τ = t_0 + t·frame_seconds``. Its rotary
pairs form two axes of ``n`` pairs each, both on the schedule ``ω_k = base^(-k/n)``: pair
``k`` of the window axis turns by ``(w/M)·ω_k·(−2π·τ)``, with ``w = round(t_0 /
(frame_seconds·S))`` the window's index and ``M`` the config's ``max_position_embeddings``,
and pair ``k`` of the time axis by ``(2π·t/M)·ω_k·(−2π·τ)``.

So each is a coordinate times a frequency, with real coordinates::

    window:  −2π·τ·w / M          time:  −2π·τ·2π·t / M

:func:`timestamp_positions` gives them (float64), and the tables are those of
:func:`posenc.multi_axis_cos_sin` with ``sections=(n, n)``, ``schedule="per_axis"`` (each axis
its own schedule over ``2n`` channels) and ``pairs="interleaved"``, over ``4n`` channels.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import check_allocation, check_positions, check_positive

__all__ = ["timestamp_positions"]


def timestamp_positions(
    timestamps: Any, *, frame_seconds: float, max_positions: float
) -> npt.NDArray[np.float64]:
    """The rotary coordinates ``(window, time)`` of audio frames from their timestamps.

    Args:
        timestamps: seconds of each frame, ``(..., S)``: one row per window of ``S`` frames,
            its first entry the window's start (MusicFlamingo's ``_build_audio_timestamps``),
            finite real numbers.
        frame_seconds: seconds between frames (MusicFlamingo: ``audio_frame_step · 4``), a
            positive finite number; a window lasts ``frame_seconds · S``.
        max_positions: the scale ``M`` the window index and the frame index are divided by
            (MusicFlamingo: ``max_position_embeddings``, which its config sets to
            ``rope_theta``), a positive finite number.

    Returns:
        float64 ``(..., S, 2)``: ``−2π·τ·w/M`` (``w = round(row[0] / (frame_seconds·S))``, the
        window's index, rounded half to even) and ``−2π·τ·2π·t/M`` for frame ``t`` of the row.
        With ``posenc.multi_axis_cos_sin(coords, 4 * n, sections=(n, n), schedule="per_axis",
        base=base, pairs="interleaved")`` they give MusicFlamingo's tables (``n`` pairs per
        axis, ``2n`` the rotary dimension of its config).

    >>> step = 0.04                                  # seconds per encoder frame
    >>> tau = np.array([[0.0, 0.04, 0.08], [0.12, 0.16, 0.2]])   # windows 0 and 1
    >>> coords = timestamp_positions(tau, frame_seconds=step, max_positions=1200.0)
    >>> coords.shape
    (2, 3, 2)
    >>> coords[0, :, 0]                              # window 0: its window angle is 0
    array([-0., -0., -0.])
    >>> bool(np.isclose(coords[1, 1, 1], -2 * np.pi * 0.16 * 2 * np.pi * 1 / 1200))
    True
    """
    tau = check_positions("timestamps", timestamps).astype(np.float64, copy=False)
    if tau.ndim == 0:
        raise ValueError(
            "timestamps must have shape (..., S): the frames of each window in a row, got a "
            "single number"
        )
    step = check_positive("frame_seconds", frame_seconds)
    scale = check_positive("max_positions", max_positions)
    check_allocation("timestamps", (*tau.shape, 2), 8, 2)
    frames = tau.shape[-1]
    out = np.empty((*tau.shape, 2), dtype=np.float64)
    if tau.size == 0:
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        window = np.round(tau[..., :1] / (step * frames)) / scale
        out[..., 0] = -2.0 * math.pi * tau * window
        out[..., 1] = -2.0 * math.pi * tau * (2.0 * math.pi * np.arange(frames) / scale)
    if not np.all(np.isfinite(out)):
        raise ValueError(
            "timestamps, frame_seconds and max_positions give coordinates beyond float64's "
            f"range (largest |timestamp| {float(np.abs(tau).max())!r}, frame_seconds {step!r}, "
            f"max_positions {scale!r})"
        )
    return out
