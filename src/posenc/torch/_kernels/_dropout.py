"""Kernel family **add**, its dropout mask: each element kept with probability exactly ``1 - p``.

Entry point :func:`keep_mask`. Each element compares a uniform random number ``U`` in [0, 1)
with ``p`` (the float64 value, whose binary expansion is finite) and is dropped when ``U < p``.
The digits of ``U`` are drawn only as far as the comparison needs: one random byte per element
decides it unless the byte equals the leading byte of ``p`` (probability 1/256); those ties
draw 32 more bits at a time (:func:`_refine`). The probability of dropping is therefore exactly
``p``, not ``p`` rounded to a grid of 2**-8 or 2**-32.

The mask is drawn in segments of ``SEGMENT`` elements, each from its own generator seeded by
one draw from the caller's generator and the segment's number: the segments are drawn by
several threads at once (:mod:`._workers`, one synchronisation per mask), and the mask depends
only on the caller's generator and the number of elements, not on threads or timing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from . import _workers

__all__ = ["SEGMENT", "keep_mask"]

#: Elements per segment of the mask: below ``GRAIN`` (and a multiple of 8, the bytes of one
#: random draw), so that the operations on a segment run on the thread drawing it.
SEGMENT = _workers.GRAIN - 8

#: Segments per task handed to a thread.
_TASK_SEGMENTS = 16

_MASK64 = (1 << 64) - 1


def _segment_seed(seed: int, segment: int) -> int:
    """The seed of a segment's generator: SplitMix64 of the call's seed and the segment, so
    that neighbouring segments start from unrelated Mersenne Twister states."""
    z = (seed + (segment + 1) * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _refine(count: int, rest: float, draw: Callable[[int], torch.Tensor]) -> torch.Tensor:
    """Keep decisions (uint8 0/1) for ``count`` draws whose leading byte tied with ``p``'s.

    ``rest`` in (0, 1) holds the remaining binary digits of ``p``; each round compares 32 more
    random bits (``draw(n)``: n int64 values uniform in [0, 2**32)) with the next 32 digits of
    ``p`` and leaves the ties (probability 2**-32) for the next round. A draw equal to every
    digit of ``p`` is not below ``p``: it is kept. ``p`` has finitely many binary digits, so
    this ends.
    """
    keep: torch.Tensor | None = None
    pending: torch.Tensor | None = None  # positions in ``keep`` still tied after a round
    while True:
        scaled = rest * 2.0**32  # exact: a power-of-two scaling
        level = math.floor(scaled)
        rest = scaled - level  # exact as well
        draws = draw(count)
        decided = ((draws >= level) if rest == 0.0 else (draws > level)).to(torch.uint8)
        if keep is None or pending is None:
            keep = decided
        else:
            keep[pending] = decided
        if rest == 0.0:
            return keep
        tied = (draws == level).nonzero().squeeze(1)
        if not tied.numel():
            return keep
        pending = tied if pending is None else pending[tied]
        count = tied.numel()


def keep_mask(
    numel: int, p: float, *, device: Any = None, generator: torch.Generator | None = None
) -> torch.Tensor:
    """A dropout keep-mask: ``numel`` uint8 values, each 1 with probability exactly ``1 - p``.

    Random bits come from PyTorch's generator for ``device``: one 64-bit draw from it
    (``torch.manual_seed`` or ``generator`` makes the mask reproducible) seeds the segments'
    generators, as the module docstring describes.

    Args:
        numel: number of elements, an int >= 0.
        p: drop probability in [0, 1).
        device: where the mask lives (default: the current default device).
        generator: optional ``torch.Generator`` (default: the global one of ``device``).

    Returns:
        uint8 tensor ``(numel,)`` of 0 (dropped) and 1 (kept).

    >>> _ = torch.manual_seed(0)
    >>> mask = keep_mask(1_000_000, 0.25)
    >>> mask.dtype, round(mask.double().mean().item(), 2)
    (torch.uint8, 0.75)
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be a number in [0, 1), got {p!r}")
    device = torch.get_default_device() if device is None else torch.device(device)
    mask = torch.empty(numel, dtype=torch.uint8, device=device)
    if numel == 0:
        return mask
    if p == 0.0:
        return mask.fill_(1)
    # The only read of the caller's generator (a host read: the fast paths run on the CPU).
    seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator)) & _MASK64
    scaled = p * 256.0
    lead = math.floor(scaled)  # U < lead/256: dropped; U >= (lead+1)/256: kept
    rest = scaled - lead
    segments = -(-numel // SEGMENT)
    own: dict[int, tuple[torch.Generator, torch.Tensor]] = {}  # per thread

    def task(index: int, slot: int) -> None:
        if slot not in own:
            words = torch.empty(SEGMENT // 8, dtype=torch.int64, device=device)
            own[slot] = (torch.Generator(device=device), words)
        segment_generator, words = own[slot]

        def draw(n: int) -> torch.Tensor:
            words = torch.empty(n, dtype=torch.int64, device=device)
            return words.random_(0, 2**32, generator=segment_generator)

        first = index * _TASK_SEGMENTS
        for segment in range(first, min(first + _TASK_SEGMENTS, segments)):
            segment_generator.manual_seed(_segment_seed(seed, segment))
            out = mask[segment * SEGMENT : (segment + 1) * SEGMENT]
            raw = words.random_(-(2**63), None, generator=segment_generator)
            raw = raw.view(torch.uint8)[: out.numel()]
            if rest == 0.0:  # p is a multiple of 1/256: the byte decides alone
                torch.ge(raw, lead, out=out)
                continue
            torch.gt(raw, lead, out=out)
            ties = (raw == lead).nonzero().squeeze(1)
            if ties.numel():
                out[ties] = _refine(ties.numel(), rest, draw)

    _workers.run(-(-segments // _TASK_SEGMENTS), task, tensor=mask)
    return mask
