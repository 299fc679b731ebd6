"""posenc: exact positional encodings for transformer models.

The NumPy core (this package) computes every table in float64 and rounds once to the output
dtype. ``import posenc`` imports NumPy only; the PyTorch front-end lives in ``posenc.torch``.

>>> import posenc
>>> posenc.sinusoidal(4, 6).shape
(4, 6)
"""

from __future__ import annotations

from . import analysis
from .conventions import CONVENTIONS
from .frequencies import frequencies
from .positions import (
    positions_from_cu_seqlens,
    positions_from_mask,
    positions_from_segments,
    positions_from_tokens,
)
from .sinusoidal import sinusoidal

__version__ = "0.1.0"

__all__ = [
    "CONVENTIONS",
    "__version__",
    "analysis",
    "frequencies",
    "positions_from_cu_seqlens",
    "positions_from_mask",
    "positions_from_segments",
    "positions_from_tokens",
    "sinusoidal",
]
