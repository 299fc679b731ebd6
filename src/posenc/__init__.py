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
from ._bias.alibi import AlibiConvention, AlibiForm, alibi_bias, alibi_slopes
from ._bias.buckets import BucketConvention, deberta_buckets, t5_buckets
from ._bias.conventions import BIAS_CONVENTIONS
from ._bias.dense import t5_bias
from ._bias.distance import KerpleKind, fire_distance, kerple_bias, sandwich_bias
from ._bias.positions import relative_positions
from ._bias.relative import relative_sinusoid_table
from ._bias.relative_terms import (
    RelativeSign,
    deberta_relative_positions,
    disentangled_index,
    relative_key_index,
    relative_logits,
    relative_shift_index,
)
from ._bias.xpos import xpos_scales
from ._conventions import CONVENTIONS, ConventionName
from ._describe import describe
from ._features import PairLayout
from ._frequencies import frequencies
from ._grid import GRID_CONVENTIONS, GridConventionName, sinusoidal_grid
from ._positions.grid import grid_positions
from ._positions.multimodal import MultimodalPositions, multimodal_positions
from ._positions.sequence import (
    compressed_positions,
    positions_from_cu_seqlens,
    positions_from_mask,
    positions_from_segments,
    positions_from_tokens,
)
from ._positions.timestamps import timestamp_positions
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
from ._rope.temperature import AttentionTemperature, TemperatureKind, attention_temperature
from ._sinusoidal import sinusoidal
from ._switches import set_fast_paths
from ._timestep import timestep_embedding

__version__ = "0.1.0"

__all__ = [
    "BIAS_CONVENTIONS",
    "CONVENTIONS",
    "GRID_CONVENTIONS",
    "ROPE_TYPES",
    "AlibiConvention",
    "AlibiForm",
    "AttentionTemperature",
    "AxisOrder",
    "AxisSchedule",
    "BucketConvention",
    "ConventionName",
    "GridConventionName",
    "KerpleKind",
    "MultiAxisFrequencies",
    "MultimodalPositions",
    "PairLayout",
    "RelativeSign",
    "RopeLayer",
    "RopePlan",
    "RopeScaling",
    "TemperatureKind",
    "__version__",
    "alibi_bias",
    "alibi_slopes",
    "analysis",
    "apply_rotary",
    "attention_temperature",
    "compressed_positions",
    "deberta_buckets",
    "deberta_relative_positions",
    "describe",
    "disentangled_index",
    "fire_distance",
    "frequencies",
    "grid_positions",
    "kerple_bias",
    "multi_axis_cos_sin",
    "multi_axis_frequencies",
    "multimodal_positions",
    "positions_from_cu_seqlens",
    "positions_from_mask",
    "positions_from_segments",
    "positions_from_tokens",
    "relative_key_index",
    "relative_logits",
    "relative_positions",
    "relative_shift_index",
    "relative_sinusoid_table",
    "rope_frequencies",
    "rope_plan",
    "rope_scaling",
    "rotary_cos_sin",
    "sandwich_bias",
    "set_fast_paths",
    "sinusoidal",
    "sinusoidal_grid",
    "t5_bias",
    "t5_buckets",
    "timestamp_positions",
    "timestep_embedding",
    "xpos_scales",
]
