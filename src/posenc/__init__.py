"""posenc: exact positional encodings for transformer models.

The NumPy core (this package) computes every table in float64 and rounds once to the output
dtype. ``import posenc`` imports NumPy only; the PyTorch front-end lives in ``posenc.torch``.

>>> import posenc
>>> posenc.sinusoidal(4, 6).shape
(4, 6)
"""

from __future__ import annotations

from . import analysis
from ._describe import describe
from .conventions import CONVENTIONS
from .frequencies import ROPE_TYPES, RopeScaling, frequencies, rope_frequencies, rope_scaling
from .grid import GRID_CONVENTIONS, sinusoidal_grid
from .positions import (
    positions_from_cu_seqlens,
    positions_from_mask,
    positions_from_segments,
    positions_from_tokens,
)
from .rotary import apply_rotary, rotary_cos_sin
from .sinusoidal import sinusoidal
from .timestep import timestep_embedding

__version__ = "0.1.0"

__all__ = [
    "CONVENTIONS",
    "GRID_CONVENTIONS",
    "ROPE_TYPES",
    "RopeScaling",
    "__version__",
    "analysis",
    "apply_rotary",
    "describe",
    "frequencies",
    "positions_from_cu_seqlens",
    "positions_from_mask",
    "positions_from_segments",
    "positions_from_tokens",
    "rope_frequencies",
    "rope_scaling",
    "rotary_cos_sin",
    "sinusoidal",
    "sinusoidal_grid",
    "timestep_embedding",
]
