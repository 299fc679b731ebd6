"""Position ids built on the device from Python integers (no tensor is read, so nothing
synchronises the host with the device, and the functions trace with ``torch.compile``)."""

from __future__ import annotations

from typing import Any

import torch

from .._positions.sequence import compressed_windows
from ._checks import as_device

__all__ = ["compressed_positions"]


def compressed_positions(
    tokens: int, ratio: int, *, emitted: int = 0, device: Any = None
) -> torch.Tensor:
    """:func:`posenc.compressed_positions` as an int64 tensor on ``device``: the positions
    ``n·ratio`` of the entries a compressor emits (DeepSeek-V4's compressed attention) for
    the windows closed since ``emitted``.

    Args:
        tokens: the tokens seen so far (the cache's and the new ones), an int >= 0.
        ratio: tokens per window, an int >= 1.
        emitted: entries emitted before, an int in ``[0, tokens // ratio]``.
        device: where the positions are built (default: torch's default device).

    Returns:
        int64 ``(tokens // ratio − emitted,)``.

    >>> compressed_positions(17, 4, emitted=2)
    tensor([ 8, 12])
    """
    done, closed, every = compressed_windows(tokens, ratio, emitted)
    where = as_device(device)
    return torch.arange(done, closed, dtype=torch.int64, device=where) * every
