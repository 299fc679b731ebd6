"""Properties of sinusoidal tables, computed rather than quoted.

Each function turns one claim about the sinusoidal encoding into a number that can be checked:

- **Wavelengths in geometric progression** (:func:`wavelengths`). Column pair ``k`` oscillates
  with angular frequency ω_k = base^(-e_k) and wavelength λ_k = 2π/ω_k. The exponents e_k are
  evenly spaced, so neighbouring wavelengths differ by one common ratio: under the paper's
  schedule they run from 2π towards base·2π with ratio base^(2/d_model).
- **Relative positions are linear maps** (:func:`shift_matrix`, :func:`check_shift`). For a
  fixed shift ``k`` there is one matrix M_k with PE[p+k] = M_k PE[p] for every position p:
  each (sin, cos) pair is turned by the angle k·ω_k, a 2x2 rotation. M_k is orthogonal and
  M_j M_k = M_(j+k). A table whose cosine does not share its sine's frequency (the
  odd-exponent cosine bug found in tutorial code, :func:`odd_exponent_table`) has no such map.
- **Nearby positions look alike** (:func:`similarity`). Since sin a·sin b + cos a·cos b =
  cos(a-b), the dot product of two rows is Σ_k cos((p-q)·ω_k) (plus one sin·sin term when
  an odd d_model leaves a sine unpaired): it depends only on the distance p-q, equals the
  number of pairs at distance 0 and falls off, with ripples, as the distance grows.
- **How many positions a dtype can tell apart** (:func:`distinct_rows`). Rounded to float16 or
  bfloat16, distinct positions eventually share identical rows; this counts them exactly.
- **How accurate a table is** (:func:`precision_report`). Max error against a wider-precision
  reference of posenc's table, of the PyTorch tutorial recipe (angles in float32,
  :func:`float32_recipe`) and of the recipe carried out entirely in a low-precision dtype.
- **What an attention bias adds** (:func:`bias_profile`, :func:`bucket_map`,
  :func:`slope_table`). Per head against the relative position (ALiBi's slopes, a learned T5
  table), the T5 and DeBERTa bucket of each relative position with its exact and logarithmic
  regions, and ALiBi's slopes per head, exact and as BLOOM, MPT and Falcon round them.
- **Which convention produced a table** (:func:`identify`). Given a table, e.g. from a
  checkpoint, recover its convention, base and first position, or recognise the odd-exponent
  cosine bug.

Everything is NumPy and float64 (the reference of :func:`precision_report` uses
``np.longdouble`` where it is wider). Results are small frozen dataclasses of numbers, arrays
and short identifiers, whose ``as_dict()`` returns plain Python values (JSON-ready);
:func:`posenc.describe` turns an :class:`Identification` or a :class:`PrecisionReport` into
English.

>>> import numpy as np
>>> from posenc import sinusoidal
>>> round(wavelengths(8).ratio, 12)
10.0
>>> bool(check_shift(sinusoidal(64, 16, dtype=np.float64), 5) < 1e-13)
True
"""

from ._bias import bias_profile, bucket_map, slope_table
from ._identify import MAX_OFFSET, identify
from ._phases import DEFAULT_BASES, MAX_OFFSET_LIMIT
from ._precision import precision_report
from ._properties import check_shift, distinct_rows, shift_matrix, similarity, wavelengths
from ._recipes import ODD_EXPONENT_BUG, float32_recipe, odd_exponent_table
from ._results import (
    BiasProfile,
    BucketMap,
    Candidate,
    DistinctRows,
    Identification,
    MethodError,
    PrecisionReport,
    Similarity,
    SlopeTable,
    Wavelengths,
)

__all__ = [
    "DEFAULT_BASES",
    "MAX_OFFSET",
    "MAX_OFFSET_LIMIT",
    "ODD_EXPONENT_BUG",
    "BiasProfile",
    "BucketMap",
    "Candidate",
    "DistinctRows",
    "Identification",
    "MethodError",
    "PrecisionReport",
    "Similarity",
    "SlopeTable",
    "Wavelengths",
    "bias_profile",
    "bucket_map",
    "check_shift",
    "distinct_rows",
    "float32_recipe",
    "identify",
    "odd_exponent_table",
    "precision_report",
    "shift_matrix",
    "similarity",
    "slope_table",
    "wavelengths",
]
