"""posenc: exact positional encodings for transformer models.

The NumPy core (this package) computes every table in float64 and rounds once to the output
dtype. ``import posenc`` imports NumPy only; the PyTorch front-end lives in ``posenc.torch``,
the figures in ``posenc.plot``, the properties and diagnostics in ``posenc.analysis`` and the
command line in ``posenc.cli``.

>>> import posenc
>>> posenc.sinusoidal(4, 6).shape
(4, 6)
"""

from . import analysis
from ._conventions import CONVENTIONS, ConventionName
from ._describe import describe
from ._features import PairLayout
from ._frequencies import frequencies
from ._grid import GRID_CONVENTIONS, GridConventionName, sinusoidal_grid
from ._positions.grid import grid_positions
from ._positions.multimodal import MultimodalPositions, multimodal_positions
from ._positions.sequence import (
    positions_from_cu_seqlens,
    positions_from_mask,
    positions_from_segments,
    positions_from_tokens,
)
from ._rope.multi_axis import (
    AxisOrder,
    AxisSchedule,
    MultiAxisFrequencies,
    multi_axis_cos_sin,
    multi_axis_frequencies,
)
from ._rope.plan import RopeLayer, RopePlan, rope_plan
from ._rope.rotary import apply_rotary, rotary_cos_sin
from ._rope.scaling import ROPE_TYPES, RopeScaling, rope_frequencies, rope_scaling
from ._sinusoidal import sinusoidal
from ._switches import set_fast_paths
from ._timestep import timestep_embedding

__version__ = "0.1.0"

__all__ = [
    "CONVENTIONS",
    "GRID_CONVENTIONS",
    "ROPE_TYPES",
    "AxisOrder",
    "AxisSchedule",
    "ConventionName",
    "GridConventionName",
    "MultiAxisFrequencies",
    "MultimodalPositions",
    "PairLayout",
    "RopeLayer",
    "RopePlan",
    "RopeScaling",
    "__version__",
    "analysis",
    "apply_rotary",
    "describe",
    "frequencies",
    "grid_positions",
    "multi_axis_cos_sin",
    "multi_axis_frequencies",
    "multimodal_positions",
    "positions_from_cu_seqlens",
    "positions_from_mask",
    "positions_from_segments",
    "positions_from_tokens",
    "rope_frequencies",
    "rope_plan",
    "rope_scaling",
    "rotary_cos_sin",
    "set_fast_paths",
    "sinusoidal",
    "sinusoidal_grid",
    "timestep_embedding",
]
