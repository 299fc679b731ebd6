"""Properties of sinusoidal tables, computed rather than quoted.

Each function turns one claim about the sinusoidal encoding into a number that can be checked:

- **Wavelengths in geometric progression** (:func:`wavelengths`). Column pair ``k`` oscillates
  with angular frequency ω_k = base^(-e_k) and wavelength λ_k = 2π/ω_k. The exponents e_k are
  evenly spaced, so neighbouring wavelengths differ by one common ratio: under the paper's
  schedule they run from 2π towards base·2π with ratio base^(2/d_model).
- **Relative positions are linear maps** (:func:`shift_matrix`, :func:`check_shift`). For a
  fixed shift ``k`` there is one matrix M_k with PE[p+k] = M_k PE[p] for every position p:
  each (sin, cos) pair is turned by the angle k·ω_k, a 2x2 rotation. M_k is orthogonal and
  M_j M_k = M_(j+k). A table whose cosine does not share its sine's frequency (seed 001's
  odd-exponent bug, :func:`seed001_table`) has no such map.
- **Nearby positions look alike** (:func:`similarity`). Since sin a·sin b + cos a·cos b =
  cos(a-b), the dot product of two rows is Σ_k cos((p-q)·ω_k) (plus one sin·sin term when
  an odd d_model leaves a sine unpaired): it depends only on the distance p-q, equals the
  number of pairs at distance 0 and falls off, with ripples, as the distance grows.
- **How many positions a dtype can tell apart** (:func:`distinct_rows`). Rounded to float16 or
  bfloat16, distinct positions eventually share identical rows; this counts them exactly.
- **How accurate a table is** (:func:`precision_report`). Max error against a wider-precision
  reference of posenc's table, of the usual float32 recipe (:func:`float32_recipe`) and of the
  recipe carried out entirely in a low-precision dtype.
- **Which convention produced a table** (:func:`identify`). Given a table, e.g. from a
  checkpoint, recover its convention, base and first position, or recognise seed 001's bug.

Everything is NumPy and float64 (the reference of :func:`precision_report` uses
``np.longdouble`` where it is wider). Results are small frozen dataclasses whose ``as_dict()``
returns plain Python values (JSON-ready).

>>> round(wavelengths(8).ratio, 12)
10.0
>>> bool(check_shift(sinusoidal(64, 16, dtype=np.float64), 5) < 1e-13)
True
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ._checks import (
    check_base,
    check_float_dtype,
    check_int,
    check_position_magnitude,
    check_positions,
)
from ._conventions import CONVENTIONS, ConventionName, get_convention
from ._features import feature_slices, fill_features
from ._frequencies import frequencies
from ._positions import positions_array
from ._sinusoidal import sinusoidal

__all__ = [
    "Candidate",
    "DistinctRows",
    "Identification",
    "MethodError",
    "PrecisionReport",
    "Similarity",
    "Wavelengths",
    "check_shift",
    "distinct_rows",
    "float32_recipe",
    "identify",
    "precision_report",
    "seed001_table",
    "shift_matrix",
    "similarity",
    "wavelengths",
]

_F64 = npt.NDArray[np.float64]
_TWO_PI = 2.0 * math.pi

#: The label :func:`identify` gives to seed 001's table.
SEED001_BUG = "seed-001 odd-exponent cosine"


def _jsonable(value: Any) -> Any:
    """Plain Python values (lists, floats, ints, str, None) for ``as_dict``."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if hasattr(value, "_asdict"):  # NamedTuple
            return _jsonable(value._asdict())
        return [_jsonable(v) for v in value]
    return value


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with every value made plain Python (for ``as_dict``)."""
    return {key: _jsonable(value) for key, value in data.items()}


def _conventions() -> tuple[ConventionName, ...]:
    """Every registered convention, in registry order."""
    return tuple(get_convention(name).name for name in CONVENTIONS)


def _exponents(d_model: int, convention: Any) -> tuple[npt.NDArray[np.int64], int]:
    """Exact exponents of a convention's schedule: ω_k = base^(-num_k / den).

    Read off the schedule itself (no schedule is hard-coded here): with base 2 the exponents
    are -log2(ω_k), small rationals that ``Fraction.limit_denominator`` recovers exactly. For
    the paper schedule this gives num_k/den = 2k/d, for tensor2tensor's k/(d//2 - 1).
    """
    nums, den = _exponents_cached(d_model, get_convention(convention).name)
    return nums.copy(), den


@functools.lru_cache(maxsize=64)
def _exponents_cached(d_model: int, name: str) -> tuple[npt.NDArray[np.int64], int]:
    omega2 = frequencies(d_model, base=2.0, convention=name)
    exps = -np.log2(omega2)
    limit = 4 * d_model + 4
    # usually the smallest positive exponent is 1/den: try that denominator first
    positive = exps[exps > 0]
    den = (
        Fraction(float(positive.min())).limit_denominator(limit).denominator if positive.size else 1
    )
    if not np.allclose(exps * den, np.rint(exps * den), rtol=0, atol=1e-6):
        fracs = [Fraction(float(e)).limit_denominator(limit) for e in exps]
        den = math.lcm(*(f.denominator for f in fracs)) if fracs else 1
    nums = np.rint(exps * den).astype(np.int64)
    exact = np.power(2.0, -nums.astype(np.float64) / den)
    if not np.allclose(exact, omega2, rtol=1e-13, atol=0):  # pragma: no cover - future schedules
        raise ValueError(
            f"convention {name!r}: its frequencies are not of the form base^(-rational), "
            "which posenc.analysis needs"
        )
    return nums, den


def _dtype_name(name: str, value: Any) -> str:
    """'float16' | 'float32' | 'float64' | 'bfloat16' from a string or NumPy dtype."""
    if isinstance(value, str) and value.lower() in ("bfloat16", "bf16"):
        return "bfloat16"
    if getattr(value, "__name__", None) == "bfloat16" or str(value) in (
        "bfloat16",
        "torch.bfloat16",
    ):
        return "bfloat16"
    try:
        return str(check_float_dtype(name, value).name)
    except TypeError:
        raise TypeError(
            f"{name} must be one of 'float16', 'float32', 'float64', 'bfloat16' "
            f"(or the NumPy dtype), got {value!r}"
        ) from None


def _round_bfloat16(values: Any) -> _F64:
    """Round to the nearest bfloat16 value, ties to even, in one step; float64 out.

    bfloat16 has float32's 8-bit exponent and 7 stored mantissa bits. Each finite value is
    scaled by the power of two that makes its bfloat16 spacing 1 (2^(e-7) for normal values
    in [2^e, 2^(e+1)), 2^-133 below 2^-126, where bfloat16 is subnormal), rounded with
    ``np.rint`` (round half to even) and scaled back; scaling by a power of two is exact in
    float64, so the float64 input is rounded once. Results of magnitude 2^128 or more overflow
    to ±inf, as in IEEE arithmetic. The output is float64 holding exact bfloat16 values.

    >>> _round_bfloat16([1.0 + 2**-8, 1.0 + 3 * 2**-8, 1 / 3]).tolist()
    [1.0, 1.015625, 0.333984375]
    """
    x = np.array(values, dtype=np.float64, copy=True)
    finite = np.isfinite(x)
    xf = x[finite]
    _, exp = np.frexp(xf)  # xf = m * 2**exp, 0.5 <= |m| < 1
    step = np.maximum(exp - 8, -133)  # bfloat16 spacing is 2**step
    rounded = np.ldexp(np.rint(np.ldexp(xf, -step)), step)
    rounded = np.where(np.abs(rounded) >= 2.0**128, np.copysign(np.inf, rounded), rounded)
    x[finite] = rounded
    return x


def _round_to(values: Any, dtype_name: str) -> npt.NDArray[Any]:
    """Round float values once to ``dtype_name``; bfloat16 comes back as float64."""
    if dtype_name == "bfloat16":
        return _round_bfloat16(values)
    return np.asarray(values).astype(dtype_name)


def _as_table(name: str, value: Any) -> _F64:
    """A 2-D numeric array as float64; TypeError/ValueError naming ``name`` otherwise."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(
            f"{name} must be a 2-D array of numbers, got {type(value).__name__}"
        ) from exc
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a 2-D array of real numbers, got dtype {array.dtype}")
    if array.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (positions, d_model), got {array.ndim}-D shape {array.shape}"
        )
    if 0 in array.shape:
        raise ValueError(f"{name} must not be empty, got shape {array.shape}")
    return array.astype(np.float64, copy=False)


# ---------------------------------------------------------------------------------------------
# Seed 001
# ---------------------------------------------------------------------------------------------


def seed001_table(
    positions: Any, d_model: int, *, base: float = 10000.0, dtype: Any = np.float32
) -> npt.NDArray[Any]:
    """Seed 001's table, with its odd-exponent cosine bug, computed in float64.

    The sine columns are the paper's, ``PE[p, 2i] = sin(p / base^(2i/d))``, but the cosine
    columns use the *odd* exponent, ``PE[p, 2i+1] = cos(p / base^((2i+1)/d))``, instead of the
    paper's ``base^(2i/d)``. It is a bug, not a convention: the cosine of a pair no longer
    shares the frequency of its sine, so no rotation maps ``PE[p]`` to ``PE[p+k]``.

    Args:
        positions: an int ``L`` (positions ``0 .. L-1``) or an array-like of positions of any
            shape ``S``, as in :func:`posenc.sinusoidal`.
        d_model: number of channels, an integer >= 1.
        base: wavelength base, a finite number > 0.
        dtype: output dtype: float32 (default), float16 or float64 (rounded once).

    Returns:
        ``np.ndarray`` of shape ``(L, d_model)`` or ``(*S, d_model)`` and the given dtype.

    >>> seed001_table(2, 4, dtype=np.float64)[1].round(4)
    array([0.8415, 0.995 , 0.01  , 1.    ])
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    out_dtype = check_float_dtype("dtype", dtype)
    pos = positions_array(positions)
    flat = pos.reshape(-1)
    # channel j uses exponent j/d: even j is the paper's 2i/d, odd j the buggy (2i+1)/d
    omega = np.power(base, -np.arange(d_model, dtype=np.float64) / d_model)
    out = np.empty((flat.shape[0], d_model), dtype=out_dtype)
    rows = max(1, (1 << 18) // d_model)  # float64 temporaries of about 2 MiB
    for start in range(0, flat.shape[0], rows):
        chunk = flat[start : start + rows].astype(np.float64)
        out[start : start + rows, 0::2] = np.sin(np.multiply.outer(chunk, omega[0::2]))
        out[start : start + rows, 1::2] = np.cos(np.multiply.outer(chunk, omega[1::2]))
    return out.reshape(*pos.shape, d_model)


# ---------------------------------------------------------------------------------------------
# 1. Wavelengths
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Wavelengths:
    """The frequencies and wavelengths of one convention (see :func:`wavelengths`).

    Attributes:
        d_model, base, convention: what was asked for.
        frequencies: ω_k, float64 ``(n,)``.
        wavelengths: λ_k = 2π/ω_k in positions, float64 ``(n,)``.
        ratios: λ_(k+1)/λ_k, float64 ``(n-1,)``.
        shortest, longest: the smallest and largest wavelength (NaN when there is none:
            tensor2tensor with d_model = 1).
        ratio: the common ratio of the progression (None when n < 2 or when the neighbour
            ratios differ, which no current schedule does).
    """

    d_model: int
    base: float
    convention: str
    frequencies: _F64
    wavelengths: _F64
    ratios: _F64
    shortest: float
    longest: float
    ratio: float | None

    def as_dict(self) -> dict[str, Any]:
        """Plain Python values, ready for ``json.dumps``."""
        return _plain(
            {
                "d_model": self.d_model,
                "base": self.base,
                "convention": self.convention,
                "frequencies": self.frequencies,
                "wavelengths": self.wavelengths,
                "ratios": self.ratios,
                "shortest": self.shortest,
                "longest": self.longest,
                "ratio": self.ratio,
            }
        )


def wavelengths(d_model: int, *, base: float = 10000.0, convention: Any = "paper") -> Wavelengths:
    """Frequencies ω_k, wavelengths 2π/ω_k and their common ratio for one convention.

    Args:
        d_model: number of channels, an integer >= 1.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.

    Returns:
        :class:`Wavelengths`. Under the paper schedule the wavelengths run from 2π (k = 0)
        towards base·2π with ratio base^(2/d_model); under tensor2tensor's they reach exactly
        base·2π with ratio base^(1/(d_model//2 - 1)).

    >>> w = wavelengths(8)
    >>> w.frequencies
    array([1.   , 0.1  , 0.01 , 0.001])
    >>> (w.wavelengths / (2 * np.pi)).round(6)
    array([   1.,   10.,  100., 1000.])
    >>> round(w.shortest, 4), round(w.longest, 2), round(w.ratio, 12)
    (6.2832, 6283.19, 10.0)
    >>> round(wavelengths(8, convention="tensor2tensor").longest / (2 * np.pi), 6)
    10000.0
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    name = get_convention(convention).name
    omega = frequencies(d_model, base=base, convention=name)
    lam = _TWO_PI / omega
    ratios = lam[1:] / lam[:-1]
    ratio: float | None = None
    if lam.shape[0] >= 2 and np.allclose(ratios, ratios[0], rtol=1e-9, atol=0):
        ratio = float((lam[-1] / lam[0]) ** (1.0 / (lam.shape[0] - 1)))
    return Wavelengths(
        d_model=d_model,
        base=base,
        convention=name,
        frequencies=omega,
        wavelengths=lam,
        ratios=ratios,
        shortest=float(lam.min()) if lam.size else math.nan,
        longest=float(lam.max()) if lam.size else math.nan,
        ratio=ratio,
    )


# ---------------------------------------------------------------------------------------------
# 2. The shift matrix M_k
# ---------------------------------------------------------------------------------------------


class _Pairs(NamedTuple):
    """Channel indices of a convention: (sin, cos) pairs, an unpaired sin, zero columns."""

    sin: npt.NDArray[np.intp]
    cos: npt.NDArray[np.intp]
    omega: _F64
    unpaired: npt.NDArray[np.intp]
    zero: npt.NDArray[np.intp]


def _pairs(d_model: int, base: float, convention: Any) -> _Pairs:
    layout = feature_slices(d_model, convention)
    channels = np.arange(d_model)
    sin_idx, cos_idx = channels[layout.sin], channels[layout.cos]
    omega = frequencies(d_model, base=base, convention=convention)
    return _Pairs(
        sin=sin_idx[: layout.n_cos],
        cos=cos_idx,
        omega=omega[: layout.n_cos],
        unpaired=sin_idx[layout.n_cos :],
        zero=channels[layout.zero],
    )


def _check_shift_amount(k: Any) -> float:
    """``k`` as a float: a finite real number (not a bool), |k| <= 2**53."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Real):
        raise TypeError(f"k must be a real number (the shift in positions), got {k!r}")
    value = check_positions("k", k).item()
    check_position_magnitude("k", value, value)
    return float(value)


def shift_matrix(
    k: Any,
    d_model: int,
    *,
    base: float = 10000.0,
    convention: Any = "paper",
    unpaired: str = "raise",
) -> _F64:
    """The matrix M_k with ``PE[p + k] = M_k @ PE[p]`` for every position p.

    Each (sin, cos) pair with frequency ω gets the rotation block
    ``[[cos kω, sin kω], [-sin kω, cos kω]]`` on its two channels (adjacent channels for the
    interleaved paper layout, channel j and its partner j + n for the split layouts); rows of
    zero-padded channels are 0. M_k is orthogonal on the paired channels, M_0 is the identity
    there and M_j @ M_k = M_(j+k).

    An odd ``d_model`` under a convention with one more sin than cos column (paper, marian)
    leaves one sine without a cosine partner: sin((p+k)ω) is not a linear function of
    sin(pω) alone, so no exact M_k exists. That case raises ``ValueError`` unless
    ``unpaired="drop"``, which returns M_k for the paired channels with a zero row and column
    for the unpaired one (so that channel of ``M_k @ PE[p]`` is 0, not PE[p+k]).

    Args:
        k: the shift, any finite real number (negative and fractional allowed).
        d_model: number of channels, an integer >= 1.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.
        unpaired: ``"raise"`` (default) or ``"drop"``, see above.

    Returns:
        float64 array of shape ``(d_model, d_model)``.

    >>> m = shift_matrix(3, 4)
    >>> pe = sinusoidal([10, 13], 4, dtype=np.float64)
    >>> bool(np.allclose(m @ pe[0], pe[1], rtol=0, atol=1e-14))
    True
    >>> shift_matrix(1, 2).round(4)
    array([[ 0.5403,  0.8415],
           [-0.8415,  0.5403]])
    >>> shift_matrix(1, 5)
    Traceback (most recent call last):
    ...
    ValueError: shift_matrix: d_model=5 under convention 'paper' has an unpaired sine column ...
    """
    shift = _check_shift_amount(k)
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    name = get_convention(convention).name
    if unpaired not in ("raise", "drop"):
        raise ValueError(f"unpaired must be 'raise' or 'drop', got {unpaired!r}")
    pairs = _pairs(d_model, base, name)
    if pairs.unpaired.size and unpaired == "raise":
        raise ValueError(
            f"shift_matrix: d_model={d_model} under convention {name!r} has an unpaired sine "
            f"column (channel {int(pairs.unpaired[0])}) with no cosine partner, so no exact "
            'linear map PE[p] -> PE[p+k] exists for it; pass unpaired="drop" for the map on '
            "the paired channels"
        )
    angle = shift * pairs.omega
    cos, sin = np.cos(angle), np.sin(angle)
    m = np.zeros((d_model, d_model))
    m[pairs.sin, pairs.sin] = cos
    m[pairs.sin, pairs.cos] = sin
    m[pairs.cos, pairs.sin] = -sin
    m[pairs.cos, pairs.cos] = cos
    return m


def check_shift(table: Any, k: int, *, base: float = 10000.0, convention: Any = "paper") -> float:
    """``max |table[p + k] - M_k @ table[p]|`` over all rows where both exist.

    Rows of ``table`` are consecutive positions (any offset). A correct table gives the
    rounding level of its dtype (about 1e-7 for float32, 1e-15 for float64); a table whose
    cosine does not share its sine's frequency (:func:`seed001_table`) gives O(1). For an odd
    ``d_model`` with an unpaired sine column (paper, marian) that column is left out, since
    no exact linear map exists for it (see :func:`shift_matrix`).

    Args:
        table: 2-D array ``(L, d_model)`` of any real dtype.
        k: integer shift in rows, ``-L < k < L``.
        base, convention: those of the table.

    Returns:
        The max absolute difference, a Python float.

    >>> float(check_shift(seed001_table(32, 8, dtype=np.float64), 1)) > 0.1
    True
    """
    array = _as_table("table", table)
    length, d_model = array.shape
    k = check_int("k", k)
    if abs(k) >= length:
        raise ValueError(
            f"k must satisfy -{length} < k < {length} (table has {length} rows), got {k}"
        )
    m = shift_matrix(k, d_model, base=base, convention=convention, unpaired="drop")
    before, after = (
        (array[: length - k], array[k:]) if k >= 0 else (array[-k:], array[: length + k])
    )
    keep = np.ones(d_model, dtype=bool)
    keep[_pairs(d_model, check_base("base", base), convention).unpaired] = False
    diff = after[:, keep] - (before @ m.T)[:, keep]
    return float(np.max(np.abs(diff))) if diff.size else 0.0


# ---------------------------------------------------------------------------------------------
# 3. Similarity versus distance
# ---------------------------------------------------------------------------------------------

_MAX_SIMILARITY_POSITIONS = 4096


@dataclass(frozen=True, eq=False)
class Similarity:
    """Pairwise similarity of encodings (see :func:`similarity`).

    Attributes:
        positions: the positions, 1-D (int64 or float64).
        matrix: ``(n, n)`` float64 similarity of every pair of rows.
        distances: the distinct |p - q| values, ascending (``0 .. n-1`` for ``L`` positions).
        profile: the mean similarity over the pairs at each distance.
        metric, d_model, base, convention: what was asked for.
    """

    positions: npt.NDArray[Any]
    matrix: _F64
    distances: npt.NDArray[Any]
    profile: _F64
    metric: str
    d_model: int
    base: float
    convention: str

    def as_dict(self) -> dict[str, Any]:
        """Plain Python values, ready for ``json.dumps``."""
        return _plain(
            {
                "positions": self.positions,
                "matrix": self.matrix,
                "distances": self.distances,
                "profile": self.profile,
                "metric": self.metric,
                "d_model": self.d_model,
                "base": self.base,
                "convention": self.convention,
            }
        )


def similarity(
    positions: Any,
    d_model: int,
    *,
    base: float = 10000.0,
    convention: Any = "paper",
    metric: str = "dot",
) -> Similarity:
    """Similarity of every pair of encodings, and its mean at each distance.

    With ``metric="dot"``, ``matrix[i, j] = PE[p_i] · PE[p_j]``. For every pair of channels
    that holds sin and cos of one frequency this is ``cos((p_i - p_j)·ω_k)``, so whenever each
    sine has its cosine partner (even ``d_model``, or tensor2tensor, whose padding column is 0)
    the dot product is ``Σ_k cos((p - q)·ω_k)`` and depends only on the distance ``p - q``;
    it is largest (the number of pairs) at distance 0. The unpaired sine of an odd
    ``d_model`` under paper or marian adds ``sin(p·ω)·sin(q·ω)``, which does not. With
    ``metric="cosine"`` each dot product is divided by both norms (NaN where a row is all
    zero, e.g. d_model = 1 at position 0).

    Args:
        positions: an int ``L`` (positions ``0 .. L-1``) or a 1-D array-like of at most
            4096 integer or real positions.
        d_model: number of channels, an integer >= 1.
        base, convention: as in :func:`posenc.sinusoidal`.
        metric: ``"dot"`` (default) or ``"cosine"``.

    Returns:
        :class:`Similarity`; ``distances`` are grouped exactly (integer positions give
        integer distances).

    >>> s = similarity(6, 8)
    >>> s.distances
    array([0, 1, 2, 3, 4, 5])
    >>> s.profile.round(3)
    array([4.   , 3.535, 2.564, 1.965, 2.267, 3.16 ])
    >>> bool(np.isclose(s.matrix[1, 3], s.matrix[2, 4]))
    True
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    name = get_convention(convention).name
    if metric not in ("dot", "cosine"):
        raise ValueError(f"metric must be 'dot' or 'cosine', got {metric!r}")
    pos = positions_array(positions)
    if pos.ndim != 1:
        raise ValueError(f"positions must be an int L or 1-D, got shape {pos.shape}")
    if pos.shape[0] > _MAX_SIMILARITY_POSITIONS:
        raise ValueError(
            f"positions must hold at most {_MAX_SIMILARITY_POSITIONS} positions (the matrix is "
            f"n x n float64), got {pos.shape[0]}"
        )
    table = sinusoidal(pos, d_model, base=base, convention=name, dtype=np.float64)
    matrix = table @ table.T
    if metric == "cosine":
        norms = np.sqrt(np.einsum("ij,ij->i", table, table))
        with np.errstate(invalid="ignore", divide="ignore"):
            matrix = matrix / np.outer(norms, norms)
    dist = np.abs(pos[:, None] - pos[None, :])
    if pos.dtype.kind == "i" and pos.size and int(dist.max()) <= 16 * pos.size**2:
        counts = np.bincount(dist.ravel())
        sums = np.bincount(dist.ravel(), weights=matrix.ravel())
        distances = np.nonzero(counts)[0]
        profile = sums[distances] / counts[distances]
    else:
        distances, inverse = np.unique(dist.ravel(), return_inverse=True)
        profile = np.bincount(inverse, weights=matrix.ravel()) / np.bincount(inverse)
    return Similarity(pos, matrix, distances, profile, metric, d_model, base, name)


# ---------------------------------------------------------------------------------------------
# 4. Distinct rows after rounding
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DistinctRows:
    """How many rows of a table stay distinct after rounding (see :func:`distinct_rows`).

    Attributes:
        rows: number of rows (positions) examined.
        distinct: number of distinct rounded rows.
        first_duplicate: ``(p, q)``, p < q, for the smallest q whose rounded row equals an
            earlier row p; None when all rows are distinct.
        dtype: the dtype rows were rounded to (``"float16"``, ``"bfloat16"``, ...).
        d_model: number of channels.
    """

    rows: int
    distinct: int
    first_duplicate: tuple[int, int] | None
    dtype: str
    d_model: int

    def as_dict(self) -> dict[str, Any]:
        """Plain Python values, ready for ``json.dumps``."""
        return _plain(
            {
                "rows": self.rows,
                "distinct": self.distinct,
                "first_duplicate": self.first_duplicate,
                "dtype": self.dtype,
                "d_model": self.d_model,
            }
        )


def _row_bits(values: Any, dtype_name: str) -> npt.NDArray[Any]:
    """Rounded rows as unsigned integers (one per element), -0.0 folded into +0.0."""
    rounded = _round_to(values, dtype_name) + 0.0  # + 0.0 turns -0.0 into 0.0
    if dtype_name == "bfloat16":  # exact in float32; its upper 16 bits are the bfloat16
        return (rounded.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bits = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}[dtype_name]
    return np.asarray(rounded).view(bits)


def distinct_rows(
    table_or_length: Any,
    dtype: Any = "float32",
    *,
    d_model: int | None = None,
    base: float = 10000.0,
    convention: Any = "paper",
) -> DistinctRows:
    """Count the distinct rows of a table after rounding it to ``dtype``.

    Two positions whose rounded rows are identical are indistinguishable to a model that
    stores the table in that dtype. Rows are compared bit for bit after rounding (with -0.0
    counted as 0.0) by ``np.unique`` on one opaque key per row.

    Args:
        table_or_length: a 2-D array ``(L, d)`` of real numbers (rounded to ``dtype`` from its
            own values), or an int ``L``: then positions ``0 .. L-1`` of the ``convention``
            table are computed exactly, in chunks of about 2 MiB of float64, and each chunk
            is rounded once; only the rounded rows are kept (``L * d`` elements of ``dtype``).
        dtype: ``"float32"`` (default), ``"float16"``, ``"bfloat16"`` or ``"float64"``, or the
            NumPy dtype. bfloat16 is rounded from float64 with :func:`_round_bfloat16` (to
            nearest, ties to even, one rounding).
        d_model: the number of channels; required with an int length, checked against the
            table's width otherwise.
        base, convention: of the table computed for an int length.

    Returns:
        :class:`DistinctRows`.

    >>> distinct_rows(100_000, "float16", d_model=2).first_duplicate  # 710 ≈ 113·2π
    (2, 712)
    >>> r = distinct_rows(10_000, "float32", d_model=64)
    >>> r.rows == r.distinct, r.first_duplicate
    (True, None)
    """
    dtype_name = _dtype_name("dtype", dtype)
    if isinstance(table_or_length, numbers.Integral) and not isinstance(
        table_or_length, (bool, np.bool_)
    ):
        length = check_int("table_or_length", table_or_length, minimum=1)
        if d_model is None:
            raise ValueError("d_model is required when table_or_length is a length, got None")
        d = check_int("d_model", d_model, minimum=1)
        base = check_base("base", base)
        name = get_convention(convention).name
        check_position_magnitude("table_or_length", 0, length - 1)
        rows_per_chunk = max(1, (1 << 18) // d)
        bits: npt.NDArray[Any] | None = None
        for start in range(0, length, rows_per_chunk):
            stop = min(length, start + rows_per_chunk)
            chunk = sinusoidal(
                np.arange(start, stop), d, base=base, convention=name, dtype=np.float64
            )
            chunk_bits = _row_bits(chunk, dtype_name)
            if bits is None:
                bits = np.empty((length, d), dtype=chunk_bits.dtype)
            bits[start:stop] = chunk_bits
        assert bits is not None
    else:
        array = _as_table("table_or_length", table_or_length)
        if not np.all(np.isfinite(array)):
            raise ValueError("table_or_length must be finite, got NaN or infinity among its values")
        length, d = array.shape
        if d_model is not None and check_int("d_model", d_model, minimum=1) != d:
            raise ValueError(f"d_model must match the table's width {d}, got {d_model}")
        bits = _row_bits(array, dtype_name)
    keys = np.ascontiguousarray(bits).view(np.dtype((np.void, bits.dtype.itemsize * d))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    first_of_row = first[inverse.ravel()]
    repeats = np.nonzero(first_of_row < np.arange(length))[0]
    duplicate = None
    if repeats.size:
        q = int(repeats[0])
        duplicate = (int(first_of_row[q]), q)
    return DistinctRows(length, int(first.shape[0]), duplicate, dtype_name, d)


# ---------------------------------------------------------------------------------------------
# 5. Precision report
# ---------------------------------------------------------------------------------------------


def _recipe(
    positions: npt.NDArray[Any], d_model: int, base: float, convention: str, dtype_name: str
) -> npt.NDArray[Any]:
    """The usual table recipe, every operation in ``dtype_name``.

    ``div = exp(steps * -(log(base)/den))``, ``angles = pos * div``, then sin/cos, where
    ``steps/den`` are the schedule's exponents (``arange(0, d, 2)/d`` for the paper schedule,
    as in the PyTorch tutorial; ``arange(h)/(h-1)`` for tensor2tensor, as in fairseq). For
    bfloat16, which NumPy lacks, each operation is done in float64 and rounded with
    :func:`_round_bfloat16`.
    """
    nums, den = _exponents(d_model, convention)
    if dtype_name == "bfloat16":
        work: Any = np.float64

        def cast(x: Any) -> npt.NDArray[Any]:
            return _round_bfloat16(x)

    else:
        work = np.dtype(dtype_name)

        def cast(x: Any) -> npt.NDArray[Any]:
            return np.asarray(x, dtype=work)

    with np.errstate(over="ignore", invalid="ignore"):
        scale = cast(-math.log(base) / den)
        div = cast(np.exp(cast(cast(nums) * scale)))
        angles = cast(cast(positions)[..., None] * div)
        out = np.zeros((*positions.shape, d_model), dtype=work)
        fill_features(
            out,
            angles,
            feature_slices(d_model, convention),
            lambda a: cast(np.sin(a)),
            lambda a: cast(np.cos(a)),
        )
    return out


def float32_recipe(
    positions: Any, d_model: int, *, base: float = 10000.0, convention: Any = "paper"
) -> npt.NDArray[np.float32]:
    """The table as the PyTorch tutorial (and seed 000) builds it: everything in float32.

    ``div = exp(arange(0, d, 2) * -(log(base)/d))`` and ``angles = float32(pos) * div`` are
    float32, then ``sin``/``cos`` in float32 (fairseq's ``arange(h) * -(log(base)/(h-1))`` for
    the tensor2tensor convention). The angle loses the fractional digits of ``pos * ω`` as
    positions grow: errors reach ~1e-3 near position 10^4 and ~0.1 near 10^6.

    Args:
        positions: an int ``L`` or an array-like of positions of any shape ``S``.
        d_model: number of channels, an integer >= 1.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.

    Returns:
        float32 array ``(L, d_model)`` or ``(*S, d_model)``.

    >>> t = float32_recipe([100_000], 4)
    >>> bool(np.abs(t - sinusoidal([100_000], 4, dtype=np.float64)).max() > 1e-4)
    True
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    name = get_convention(convention).name
    pos = positions_array(positions)
    return _recipe(pos, d_model, base, name, "float32").astype(np.float32, copy=False)


_LONGDOUBLE_WIDER = bool(np.finfo(np.longdouble).eps < np.finfo(np.float64).eps)


def _reference_table(
    positions: npt.NDArray[Any], d_model: int, base: float, convention: str
) -> _F64:
    """The table in ``np.longdouble`` (exponents exact rationals), returned as float64."""
    nums, den = _exponents(d_model, convention)
    ld = np.longdouble
    omega = np.power(ld(base), -(nums.astype(ld) / ld(den)))
    angles = np.multiply.outer(np.asarray(positions).astype(ld), omega)
    out = np.empty((*np.shape(positions), d_model), dtype=ld)
    fill_features(out, angles, feature_slices(d_model, convention), np.sin, np.cos)
    return out.astype(np.float64)


class MethodError(NamedTuple):
    """One row of a :class:`PrecisionReport`: a method and its max absolute error."""

    name: str
    max_error: float
    worst_position: int
    worst_channel: int


@dataclass(frozen=True)
class PrecisionReport:
    """Max errors of ways to build a table (see :func:`precision_report`).

    Attributes:
        max_position, d_model, dtype, base, convention, seed: what was asked for.
        positions: the sampled positions (sorted, distinct).
        methods: one :class:`MethodError` per method.
        reference: how the reference was computed (``"longdouble"`` or ``"float64"``).
        reference_error: an upper estimate of the reference's own error.
        note: remarks (e.g. that two methods coincide for float32).
    """

    max_position: int
    d_model: int
    dtype: str
    base: float
    convention: str
    seed: int
    positions: tuple[int, ...]
    methods: tuple[MethodError, ...]
    reference: str
    reference_error: float
    note: str = ""

    def method(self, name: str) -> MethodError:
        """The row called ``name`` (KeyError if absent)."""
        for row in self.methods:
            if row.name == name:
                return row
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        """Plain Python values, ready for ``json.dumps`` (an infinite error stays ``inf``)."""
        return _plain(
            {
                "max_position": self.max_position,
                "d_model": self.d_model,
                "dtype": self.dtype,
                "base": self.base,
                "convention": self.convention,
                "seed": self.seed,
                "positions": list(self.positions),
                "methods": [row._asdict() for row in self.methods],
                "reference": self.reference,
                "reference_error": self.reference_error,
                "note": self.note,
            }
        )


def _max_error(name: str, table: Any, exact: _F64, positions: npt.NDArray[Any]) -> MethodError:
    values = np.asarray(table, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(values - exact)
    err = np.where(np.isfinite(err), err, np.inf)
    row, col = np.unravel_index(int(np.argmax(err)), err.shape)
    return MethodError(name, float(err[row, col]), int(positions[row]), int(col))


def precision_report(
    max_position: int,
    d_model: int,
    dtype: Any = "float32",
    *,
    base: float = 10000.0,
    convention: Any = "paper",
    samples: int = 64,
    seed: int = 0,
) -> PrecisionReport:
    """Measure the max error of three ways to build a table, at positions below ``max_position``.

    Positions: the last ``samples // 2`` positions below ``max_position`` and ``samples // 2``
    random ones (``np.random.default_rng(seed)``), all channels. Methods:

    - ``"posenc"``: :func:`posenc.sinusoidal` in ``dtype`` (float64 angles, one rounding;
      bfloat16 is the float64 table rounded once with :func:`_round_bfloat16`);
    - ``"float32 recipe"``: :func:`float32_recipe`, then rounded to ``dtype``;
    - ``"recipe in <dtype>"``: the same recipe with every operation in ``dtype`` (bfloat16
      emulated by rounding after each operation). For float32 it *is* the float32 recipe, so
      it is not repeated. A result that overflows (float16 positions above 65504 become inf)
      has error ``inf``.

    The reference evaluates the angle p·base^(-num/den) and its sin/cos in ``np.longdouble``
    when that is wider than float64 (x86: 64-bit mantissa), with the schedule's exact rational
    exponent. Its error is then about (p·ω + 1)·2^-63 before the final rounding to float64,
    ~2e-12 at p = 10^7 (``reference_error`` reports the bound used), far below float32's
    3e-8. Where long double is float64, the reference is float64 and its error grows like
    p·2^-52, ~3e-9 at 10^7: still 10x below float32 rounding there.

    Args:
        max_position: positions are drawn from ``0 .. max_position - 1``; 1 <= it <= 2**53.
        d_model: number of channels, an integer >= 1.
        dtype: ``"float32"`` (default), ``"float16"``, ``"bfloat16"`` or ``"float64"``.
        base, convention: as in :func:`posenc.sinusoidal`.
        samples: number of positions, an even count is used (>= 2).
        seed: seed of the random positions.

    Returns:
        :class:`PrecisionReport`.

    >>> r = precision_report(10**6, 64)
    >>> [row.name for row in r.methods]
    ['posenc', 'float32 recipe']
    >>> r.method("posenc").max_error < 6e-8 < 1e-3 < r.method("float32 recipe").max_error
    True
    """
    max_position = check_int("max_position", max_position, minimum=1)
    check_position_magnitude("max_position", 0, max_position)
    d_model = check_int("d_model", d_model, minimum=1)
    dtype_name = _dtype_name("dtype", dtype)
    base = check_base("base", base)
    name = get_convention(convention).name
    samples = check_int("samples", samples, minimum=2)
    seed = check_int("seed", seed, minimum=0)
    half = samples // 2
    rng = np.random.default_rng(seed)
    positions = np.unique(
        np.concatenate(
            [
                np.arange(max(0, max_position - half), max_position, dtype=np.int64),
                rng.integers(0, max_position, half, dtype=np.int64),
            ]
        )
    )
    omega = frequencies(d_model, base=base, convention=name)
    if omega.size == 0:
        raise ValueError(
            f"d_model must be >= 2 under convention {name!r} for a precision report, got "
            f"{d_model} (its table is a single zero column: there is nothing to measure)"
        )
    exact = _reference_table(positions, d_model, base, name)
    largest_angle = float(positions.max()) * float(omega.max())
    eps = float(np.finfo(np.longdouble if _LONGDOUBLE_WIDER else np.float64).eps)
    reference_error = 4.0 * (largest_angle + 1.0) * eps + 2.0**-53

    if dtype_name == "bfloat16":
        ours: Any = _round_bfloat16(
            sinusoidal(positions, d_model, base=base, convention=name, dtype=np.float64)
        )
    else:
        ours = sinusoidal(positions, d_model, base=base, convention=name, dtype=dtype_name)
    recipe32 = _recipe(positions, d_model, base, name, "float32")
    methods = [
        _max_error("posenc", ours, exact, positions),
        _max_error("float32 recipe", _round_to(recipe32, dtype_name), exact, positions),
    ]
    note = ""
    if dtype_name == "float32":
        note = "the recipe carried out in float32 is the float32 recipe itself (listed once)"
    else:
        in_dtype = _recipe(positions, d_model, base, name, dtype_name)
        methods.append(_max_error(f"recipe in {dtype_name}", in_dtype, exact, positions))
    return PrecisionReport(
        max_position=max_position,
        d_model=d_model,
        dtype=dtype_name,
        base=base,
        convention=name,
        seed=seed,
        positions=tuple(int(p) for p in positions),
        methods=tuple(methods),
        reference="longdouble" if _LONGDOUBLE_WIDER else "float64",
        reference_error=reference_error,
        note=note,
    )


# ---------------------------------------------------------------------------------------------
# 6. Identify a table
# ---------------------------------------------------------------------------------------------

#: Bases tried when the table cannot tell the base by itself (e.g. a single row).
DEFAULT_BASES = (10000.0, 100.0, 1000.0, 100000.0, 500000.0, 1000000.0, 10000000.0)

#: Offsets searched by :func:`identify` by default: 0 .. 2**20 - 1.
MAX_OFFSET = 2**20


class Candidate(NamedTuple):
    """One hypothesis scored by :func:`identify`.

    ``base`` is None when the base has no effect on such a table (d_model <= 2, or
    tensor2tensor with d_model = 3), ``offset`` is None when nothing depends on it (an all-zero
    table); ``bug`` names a known bug (seed 001) instead of a convention's table.
    """

    convention: str
    base: float | None
    offset: int | None
    residual: float
    bug: str | None = None


@dataclass(frozen=True)
class Identification:
    """What :func:`identify` found.

    Attributes:
        matched: True when a convention's table fits within ``tolerance``. False for a
            recognised bug (``bug`` is set): no convention reproduces such a table.
        convention, base, offset: the answer; a field is None when the fitting answers
            disagree on it (``ambiguous``) or when it has no effect on the table. For a
            recognised bug, ``convention`` is None and ``base``/``offset`` describe the buggy
            table.
        residual: max |table - candidate| of the answer (of the closest candidate otherwise).
        bug: ``"seed-001 odd-exponent cosine"`` when the table is seed 001's, else None.
        message: one sentence saying what was found.
        candidates: the closest hypotheses tried (at most 6), best first.
        ambiguous: several answers fit equally well, or a field could not be determined.
        alternatives: the answers that fit equally well (the answer itself first).
        tolerance: the residual allowed for the answer.
        transposed: the table was given as ``(d_model, L)``; the answer is for ``table.T``.
    """

    matched: bool
    convention: str | None
    base: float | None
    offset: int | None
    residual: float
    bug: str | None
    message: str
    candidates: tuple[Candidate, ...]
    ambiguous: bool = False
    alternatives: tuple[Candidate, ...] = ()
    tolerance: float = math.nan
    transposed: bool = False

    def as_dict(self) -> dict[str, Any]:
        """Plain Python values, ready for ``json.dumps``."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["candidates"] = [c._asdict() for c in self.candidates]
        data["alternatives"] = [c._asdict() for c in self.alternatives]
        return _plain(data)


@dataclass(frozen=True, eq=False)
class _Hypothesis:
    """A table family: which channels hold sin/cos of which exponent e (ω = base^-e)."""

    convention: ConventionName
    bug: str | None
    d_model: int
    pair_sin: npt.NDArray[np.intp]
    pair_cos: npt.NDArray[np.intp]
    pair_exp: _F64
    lone: npt.NDArray[np.intp]
    lone_is_cos: npt.NDArray[np.bool_]
    lone_exp: _F64
    zero: npt.NDArray[np.intp]

    @property
    def base_matters(self) -> bool:
        return bool(np.any(self.pair_exp > 0) or np.any(self.lone_exp > 0))

    @property
    def informative(self) -> bool:
        return bool(self.pair_sin.size or self.lone.size)

    def build(self, positions: npt.NDArray[Any], base: float | None) -> _F64:
        b = 10000.0 if base is None else base
        if self.bug is not None:
            return seed001_table(positions, self.d_model, base=b, dtype=np.float64)
        return sinusoidal(
            positions, self.d_model, base=b, convention=self.convention, dtype=np.float64
        )


def _hypotheses(d_model: int) -> tuple[list[_Hypothesis], _Hypothesis]:
    """One hypothesis per registered convention, and seed 001's bug."""
    channels = np.arange(d_model)
    out = []
    for name in _conventions():
        nums, den = _exponents(d_model, name)
        exps = nums.astype(np.float64) / den
        layout = feature_slices(d_model, name)
        sin_idx, cos_idx = channels[layout.sin], channels[layout.cos]
        out.append(
            _Hypothesis(
                convention=name,
                bug=None,
                d_model=d_model,
                pair_sin=sin_idx[: layout.n_cos],
                pair_cos=cos_idx,
                pair_exp=exps[: layout.n_cos],
                lone=sin_idx[layout.n_cos :],
                lone_is_cos=np.zeros(layout.n_sin - layout.n_cos, dtype=bool),
                lone_exp=exps[layout.n_cos : layout.n_sin],
                zero=channels[layout.zero],
            )
        )
    empty = np.zeros(0, dtype=np.intp)
    bug = _Hypothesis(
        convention="paper",
        bug=SEED001_BUG,
        d_model=d_model,
        pair_sin=empty,
        pair_cos=empty,
        pair_exp=np.zeros(0),
        lone=channels,
        lone_is_cos=channels % 2 == 1,
        lone_exp=channels / d_model,
        zero=empty,
    )
    return out, bug


def _wrap(x: Any) -> Any:
    """Angles to [-π, π)."""
    return (np.asarray(x) + math.pi) % _TWO_PI - math.pi


def _weighted_median(values: _F64, weights: _F64) -> float | None:
    ok = np.isfinite(values) & np.isfinite(weights) & (weights > 0)
    if not np.any(ok):
        return None
    order = np.argsort(values[ok])
    v, w = values[ok][order], weights[ok][order]
    cum = np.cumsum(w)
    return float(v[int(np.searchsorted(cum, 0.5 * cum[-1]))])


def _estimate_log_base(table: _F64, hyp: _Hypothesis) -> float | None:
    """ln(base) from the frequencies seen in the table (None when they cannot be seen).

    Pairs: the angle atan2(sin, cos) advances by ω per row; it is unwrapped over rows
    0, 1, 2, 4, 8, ... so ω is known to ~ε/L from O(log L) rows. Lone columns (no partner):
    v[r-1] + v[r+1] = 2 cos(ω) v[r] for any sinusoid, solved by least squares. Each
    column gives ln(base) = -ln(ω)/e; the weighted median of those is returned.
    """
    length = table.shape[0]
    sel = hyp.pair_exp > 0
    if length >= 2 and np.any(sel):
        rows = sorted({0, 1, *(2**i for i in range(1, 64) if 2**i < length), length - 1})
        sub = table[rows]
        theta = np.arctan2(sub[:, hyp.pair_sin[sel]], sub[:, hyp.pair_cos[sel]])
        omega = _wrap(theta[1] - theta[0])
        for i, r in enumerate(rows[2:], 2):
            predicted = theta[0] + r * omega
            omega = (predicted + _wrap(theta[i] - predicted) - theta[0]) / r
        exps = hyp.pair_exp[sel]
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma = -np.log(omega) / exps
        return _weighted_median(gamma, np.where(omega > 0, (omega * exps) ** 2, 0.0))
    sel = hyp.lone_exp > 0
    if length >= 3 and np.any(sel):
        v = table[:, hyp.lone[sel]]
        num = np.sum(v[1:-1] * (v[:-2] + v[2:]), axis=0)
        den = 2.0 * np.sum(v[1:-1] ** 2, axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            omega = np.arccos(np.clip(num / den, -1.0, 1.0))
            gamma = -np.log(omega) / hyp.lone_exp[sel]
        weights = np.where(den > 0, (hyp.lone_exp[sel] * omega * np.sin(omega)) ** 2 * den, 0.0)
        return _weighted_median(gamma, weights)
    return None


def _roundness(value: float) -> int:
    """Significant digits needed to write ``value`` (1 for 1e4 or 5e5, 17 at most)."""
    for digits in range(1, 17):
        if float(f"{value:.{digits - 1}e}") == value:
            return digits
    return 17


def _candidate_bases(log_base: float | None, given: list[float]) -> list[tuple[float, int]]:
    """(base, rank) pairs to try; rank orders preference (given bases 0, then roundness)."""
    out: dict[float, int] = {b: 0 for b in given}
    for b in DEFAULT_BASES:
        out.setdefault(b, _roundness(b))
    if log_base is not None and math.isfinite(log_base) and abs(log_base) < 700:
        raw = math.exp(log_base)
        for digits in range(1, 7):
            snapped = float(f"{raw:.{digits - 1}e}")
            out.setdefault(snapped, _roundness(snapped))
        out.setdefault(raw, _roundness(raw))
    return list(out.items())


def _observations(
    table: _F64, hyp: _Hypothesis, base: float | None, eps: float
) -> tuple[_F64, _F64, _F64]:
    """(ω_j, φ_j, δφ_j): the phase p0·ω_j (mod 2π) of row 0 for each usable column/pair."""
    b = 10000.0 if base is None else base
    length = table.shape[0]
    omegas, phases, errors = [], [], []
    if hyp.pair_sin.size:
        s0, c0 = table[0, hyp.pair_sin], table[0, hyp.pair_cos]
        omegas.append(np.power(b, -hyp.pair_exp))
        phases.append(np.arctan2(s0, c0) % _TWO_PI)
        errors.append(4.0 * eps / np.maximum(np.hypot(s0, c0), 1e-6))
    if hyp.lone.size and length >= 2:
        omega = np.power(b, -hyp.lone_exp)
        # the second row r in 1..L-1 where sin(r*omega) is largest conditions the phase best
        guess = np.clip(np.rint(math.pi / 2 / np.maximum(omega, 1e-300)), 1, length - 1)
        tries = np.clip(guess[None, :] + np.array([[-1], [0], [1]]), 1, length - 1)
        r = tries[np.argmax(np.abs(np.sin(tries * omega)), axis=0), np.arange(omega.shape[0])]
        s, c = np.sin(r * omega), np.cos(r * omega)
        v0, vr = table[0, hyp.lone], table[r.astype(np.intp), hyp.lone]
        with np.errstate(divide="ignore", invalid="ignore"):
            other = np.where(hyp.lone_is_cos, (v0 * c - vr) / s, (vr - v0 * c) / s)
        sin_phi = np.where(hyp.lone_is_cos, other, v0)
        cos_phi = np.where(hyp.lone_is_cos, v0, other)
        omegas.append(omega)
        phases.append(np.arctan2(sin_phi, cos_phi) % _TWO_PI)
        errors.append(4.0 * eps * (1.0 + 2.0 / np.maximum(np.abs(s), 1e-300)))
    if not omegas:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    omega_all, phase_all, error_all = (np.concatenate(x) for x in (omegas, phases, errors))
    ok = np.isfinite(phase_all) & (error_all < 1.0) & (omega_all > 0)
    return omega_all[ok], phase_all[ok], error_all[ok]


def _offset_candidates(
    omega: _F64, phase: _F64, error: _F64, max_offset: int
) -> tuple[npt.NDArray[np.float64], _F64]:
    """Integer offsets p0 in [0, max_offset) whose phases p0·ω_j match the observed ones.

    Coarse to fine: the lowest frequency gives p0 modulo its wavelength, each more precise
    one refines it (keeping every branch its uncertainty allows). Returns the integer
    candidates (as float64) and their worst phase mismatch in units of the phase error.
    """
    empty = np.zeros(0)
    if omega.size == 0:
        return empty, empty
    order = np.argsort(omega, kind="stable")
    omega, phase, error = omega[order], phase[order], error[order]
    count = math.ceil(max_offset * omega[0] / _TWO_PI) + 1
    spread = float(error[0] / omega[0])
    # from m = -1: a phase just below 2π may belong to an offset just above 0
    cands = (phase[0] + _TWO_PI * np.arange(-1, min(count, 1 << 18))) / omega[0]
    cands = cands[(cands > -spread - 1.0) & (cands < max_offset + spread + 1.0)]
    precision = error / omega  # the offset error each column alone would leave
    used = 0
    while True:
        better = np.nonzero((precision < 0.5 * spread) & (np.arange(omega.shape[0]) > used))[0]
        if better.size == 0:
            break
        # the most precise column whose wraps stay unambiguous, else the next better one
        safe = better[2.0 * spread * omega[better] + error[better] < 1.0]
        j = int(safe[np.argmin(precision[safe])]) if safe.size else int(better[0])
        w, phi, err = omega[j], phase[j], error[j]
        margin = 2.0 * spread * w + err
        lo = np.ceil((cands * w - phi - margin) / _TWO_PI)
        hi = np.floor((cands * w - phi + margin) / _TWO_PI)
        counts = np.maximum(hi - lo + 1, 0).astype(np.int64)
        start = np.repeat(lo, counts)
        step = np.arange(start.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
        cands = (phi + _TWO_PI * (start + step)) / w
        spread, used = float(precision[j]), j
        if cands.shape[0] > 1 << 17:  # not narrowing down: the phases are inconsistent
            return empty, empty
        if cands.shape[0] == 0:
            return empty, empty
    if spread < 0.5:
        ints = np.unique(np.rint(cands))
    else:  # every integer within the uncertainty
        width = int(min(math.ceil(spread), 64))
        ints = np.unique(np.rint(cands)[:, None] + np.arange(-width, width + 1)[None, :])
    ints = ints[(ints >= 0) & (ints < max_offset)]
    score = np.zeros(ints.shape[0])
    for first in range(0, omega.shape[0], 64):
        part = slice(first, first + 64)
        w, phi, err = omega[part], phase[part], error[part]
        mismatch = np.abs(_wrap(np.multiply.outer(ints, w) - phi)) / err
        score = np.maximum(score, mismatch.max(axis=1))
    return ints, score


def _best_offsets(
    table: _F64,
    hyp: _Hypothesis,
    base: float | None,
    ints: _F64,
    score: _F64,
    keep: int,
    threshold: float,
) -> list[int]:
    """The ``keep`` offsets whose rows 0, L/2 and L-1 are closest to the table's.

    The closest first, then the smallest offsets within ``threshold`` of the table (when
    several fit, as in a table with d_model <= 2, small offsets are the likely ones).
    """
    if ints.shape[0] == 0:
        return []
    length, d_model = table.shape
    check = np.unique(np.array([0, length // 2, length - 1]))
    budget = max(keep, min(8192, (1 << 20) // (check.shape[0] * d_model)))
    if ints.shape[0] > budget:
        ints = ints[np.argpartition(score, budget - 1)[:budget]]
    positions = (ints[:, None] + check[None, :]).astype(np.int64).ravel()
    rows = hyp.build(positions, base).reshape(ints.shape[0], check.shape[0], d_model)
    mismatch = np.abs(rows - table[check][None]).max(axis=(1, 2))
    # the closest one, then the smallest offsets among those within rounding (ties)
    closest = int(np.argmin(mismatch))
    tied = np.nonzero(mismatch <= max(threshold, mismatch[closest]))[0]
    smallest = tied[np.argsort(ints[tied], kind="stable")[:keep]]
    nearest = np.argsort(mismatch, kind="stable")[:keep]
    chosen = dict.fromkeys([closest, *smallest.tolist(), *nearest.tolist()])
    return [int(ints[i]) for i in chosen][:keep]


def _unit_roundoff(dtype: np.dtype[Any]) -> float:
    if dtype.kind == "f":
        return max(float(np.finfo(dtype).eps) / 2.0, 2.0**-53)
    return 2.0**-53


def _tolerances(unit: float, last_position: int) -> tuple[float, float]:
    """(exact, loose): what a table rounded once may be off by, and a float32-built one.

    ``exact`` is one unit of the table dtype's rounding (twice its largest rounding error
    for values of magnitude <= 1) plus the float64 angle error of position p, p·2^-50.
    ``loose`` adds the angle error of a table computed in float32 arithmetic, as many
    checkpoints hold (e.g. fairseq's ``get_embedding``): ~p·2^-22, allowed as
    min(2^-21·(p + 1), 2^-7).
    """
    exact = unit + 2.0**-50 * (last_position + 1)
    return exact, exact + min(2.0**-21 * (last_position + 1), 2.0**-7)


class _Scored(NamedTuple):
    hyp: _Hypothesis
    base: float | None
    rank: int
    offset: int | None
    residual: float
    exact_tol: float
    loose_tol: float

    @property
    def fits(self) -> bool:
        return self.residual <= self.loose_tol

    def key(self) -> tuple[bool, bool, int, float]:
        """Preference: a fit within rounding, a convention, a given/rounder base, residual."""
        return (self.residual > self.exact_tol, self.hyp.bug is not None, self.rank, self.residual)

    def candidate(self) -> Candidate:
        return Candidate(self.hyp.convention, self.base, self.offset, self.residual, self.hyp.bug)


def _describe(c: Candidate, length: int) -> str:
    base = "any base" if c.base is None else f"base {c.base:.15g}"
    if c.offset is None:
        where = "any positions"
    elif length == 1:
        where = f"position {c.offset}"
    else:
        where = f"positions {c.offset}..{c.offset + length - 1}"
    name = c.convention if c.bug is None else f"{c.convention} with the {c.bug} bug"
    return f"{name} ({base}, {where})"


def _sample_rows(length: int) -> npt.NDArray[np.intp]:
    if length <= 64:
        return np.arange(length)
    return np.unique(
        np.concatenate(
            [
                np.arange(16),
                np.arange(length - 16, length),
                np.linspace(0, length - 1, 32).astype(np.intp),
            ]
        )
    )


def _score_hypothesis(
    table: _F64,
    hyp: _Hypothesis,
    given: list[float],
    tolerance: float | None,
    unit: float,
    max_offset: int,
) -> list[_Scored]:
    """Every (base, offset) tried for one hypothesis, with its residual on sample rows."""
    length = table.shape[0]
    rows = _sample_rows(length)
    sample = table[rows]
    if not hyp.base_matters:
        bases: list[tuple[float | None, int]] = [(None, 0)]
    else:
        bases = list(_candidate_bases(_estimate_log_base(table, hyp), given))
    eps = 4.0 * unit + 1e-4
    out = []
    searched: dict[bytes, tuple[_F64, _F64]] = {}
    for base, rank in bases:
        offsets: list[int | None] = [None]
        if hyp.informative:
            obs = _observations(table, hyp, base, eps)
            ident = b"".join(x.tobytes() for x in obs)
            if ident not in searched:  # bases that leave the same phases share the search
                if obs[0].size:
                    searched[ident] = _offset_candidates(*obs, max_offset)
                else:  # lone columns of a single row: try the first offsets one by one
                    ints = np.arange(min(max_offset, 1 << 16), dtype=np.float64)
                    searched[ident] = ints, np.zeros_like(ints)
            ints, score = searched[ident]
            offsets = [*_best_offsets(table, hyp, base, ints, score, 4, unit)]
        for offset in offsets:
            start = 0 if offset is None else offset
            residual = float(np.abs(hyp.build(start + rows, base) - sample).max())
            exact, loose = _tolerances(unit, start + length - 1)
            if tolerance is not None:
                exact = loose = tolerance
            out.append(_Scored(hyp, base, rank, offset, residual, exact, loose))
    return out


def _lower_bound(table: _F64, sample: _F64, hyp: _Hypothesis) -> float:
    """A cheap lower bound on the residual of every table of the hypothesis.

    Zero columns must be 0; a (sin, cos) pair at distance a from the unit circle is off by
    at least a/sqrt(2); a lone column must stay within [-1, 1] and, over consecutive rows,
    follow v[r-1] + v[r+1] = 2 cos(ω) v[r] (an error e in the values leaves at most 4e there).
    """
    bound = float(np.abs(sample[:, hyp.zero]).max()) if hyp.zero.size else 0.0
    if hyp.pair_sin.size:
        amp = np.hypot(sample[:, hyp.pair_sin], sample[:, hyp.pair_cos])
        bound = max(bound, float(np.abs(amp - 1.0).max()) / math.sqrt(2))
    if hyp.lone.size:
        bound = max(bound, float(np.abs(sample[:, hyp.lone]).max()) - 1.0)
        v = table[:64, hyp.lone]
        if v.shape[0] >= 3:
            twice = v[:-2] + v[2:]
            den = np.sum(v[1:-1] ** 2, axis=0)
            c = np.divide(
                np.sum(v[1:-1] * twice, axis=0), 2.0 * den, out=np.zeros_like(den), where=den > 0
            )
            c = np.clip(c, -1.0, 1.0)
            bound = max(bound, float(np.abs(twice - 2.0 * c * v[1:-1]).max()) / 4.0)
    return bound


def _identify(
    table: _F64, unit: float, given: list[float], tolerance: float | None, max_offset: int
) -> Identification:
    length, d_model = table.shape
    sample = table[_sample_rows(length)]
    conventions, bug = _hypotheses(d_model)
    loosest = tolerance if tolerance is not None else _tolerances(unit, 1 << 30)[1]
    scored: list[_Scored] = []
    pruned: list[Candidate] = []
    for stage in (conventions, [bug]):
        for hyp in stage:
            bound = _lower_bound(table, sample, hyp)
            if bound > 2.0 * loosest + 1e-6:
                pruned.append(Candidate(hyp.convention, None, None, bound, hyp.bug))
                continue
            scored += _score_hypothesis(table, hyp, given, tolerance, unit, max_offset)
        if any(s.fits for s in scored):
            break  # a convention fits: seed 001's bug is only considered when none does

    # The full table decides, for the best fit on the sample rows and those that may tie.
    fits: list[_Scored] = []
    seen: set[tuple[Any, ...]] = set()
    for s in sorted((s for s in scored if s.fits), key=_Scored.key):
        ident = (s.hyp.convention, s.base, s.offset, s.hyp.bug)
        if ident in seen:
            continue
        seen.add(ident)
        if fits:
            first = fits[0]
            if (
                s.key()[:2] != first.key()[:2]
                or s.rank > first.rank
                or s.residual > 2.0 * first.residual + s.exact_tol
            ):
                continue
        if length > _sample_rows(length).shape[0]:
            start = 0 if s.offset is None else s.offset
            full = s.hyp.build(start + np.arange(length), s.base)
            s = s._replace(residual=float(np.abs(full - table).max()))
        if s.fits:
            fits.append(s)
            fits.sort(key=_Scored.key)
        if len(fits) >= 8:
            break

    seen_candidates: set[tuple[Any, ...]] = set()
    candidates_list: list[Candidate] = []
    ordered = [s.candidate() for s in fits]
    ordered += [s.candidate() for s in sorted(scored, key=lambda s: s.residual)]
    ordered += sorted(pruned, key=lambda c: c.residual)
    for c in ordered:
        key = (c.convention, c.base, c.offset, c.bug)
        if key not in seen_candidates:
            seen_candidates.add(key)
            candidates_list.append(c)
    candidates = tuple(candidates_list[:6])

    if not fits:
        if any(s.hyp.bug is None for s in scored):
            closest = min((s for s in scored if s.hyp.bug is None), key=lambda s: s.residual)
            message = (
                "no convention fits: the closest candidate, "
                f"{_describe(closest.candidate(), length)}, is off by {closest.residual:.3g} "
                f"> tolerance {closest.loose_tol:.3g}"
            )
            residual, tol = closest.residual, closest.loose_tol
        else:
            residual = min(c.residual for c in pruned if c.bug is None)
            tol = loosest
            message = (
                "no convention fits: under every convention's layout the (sin, cos) column "
                f"pairs are off the unit circle (by >= {residual:.3g}; a scaled table?)"
            )
        zero_rows = np.nonzero(~np.any(table, axis=1))[0]
        if not np.any(table):
            message = (
                "no convention fits: the table is all zeros (only tensor2tensor with "
                f"d_model=1 is), got d_model={d_model}"
            )
        elif zero_rows.size and zero_rows[-1] < length - 1:
            last = int(zero_rows[-1])
            message += (
                f"; row {last} is all zeros, as in fairseq-style tables that zero the "
                f"padding row: try table[{last + 1}:]"
            )
        return Identification(
            matched=False,
            convention=None,
            base=None,
            offset=None,
            residual=residual,
            bug=None,
            message=message + ".",
            candidates=candidates,
            tolerance=tol,
        )

    best = fits[0]
    alternatives = [
        s
        for s in fits
        if s.key()[:2] == best.key()[:2]
        and s.rank <= best.rank
        and s.residual <= 2.0 * best.residual + s.exact_tol
    ]
    convention = best.hyp.convention if len({s.hyp.convention for s in alternatives}) == 1 else None
    base = best.base if len({s.base for s in alternatives}) == 1 else None
    offset = best.offset if len({s.offset for s in alternatives}) == 1 else None
    ambiguous = None in (convention, base, offset)
    answer = best.candidate()
    tol = best.exact_tol if best.residual <= best.exact_tol else best.loose_tol
    within = (
        "within the table's rounding"
        if best.residual <= best.exact_tol
        else "within the error of a table computed in float32"
    )
    if best.hyp.bug is not None:
        where = _describe(answer._replace(bug=None), length)[len("paper (") : -1]
        message = (
            f"no convention fits: this is seed 001's table ({SEED001_BUG} bug): "
            f"the sine columns match the paper table "
            f"({where}) but the cosine columns use base^((2i+1)/d) instead of base^(2i/d) "
            f"(max residual {best.residual:.2g}, {within})"
        )
    elif len(alternatives) > 1:
        shown = "; ".join(_describe(s.candidate(), length) for s in alternatives[:4])
        more = f" and {len(alternatives) - 4} more" if len(alternatives) > 4 else ""
        message = (
            f"ambiguous: {len(alternatives)} answers fit equally well ({shown}{more}); "
            "the fields on which they differ are None"
        )
    else:
        message = (
            f"a {_describe(answer, length)} table (max residual {best.residual:.2g}, {within})"
        )
        if base is None:
            message += "; the base has no effect on it"
        if offset is None:
            message += "; the positions have no effect on it"
    if best.hyp.bug is None and length == 1 and base is not None and best.rank > 0:
        message += "; from a single row, the base was chosen among a few common ones"
    is_bug = best.hyp.bug is not None
    return Identification(
        matched=not is_bug,
        convention=None if is_bug else convention,
        base=base,
        offset=offset,
        residual=best.residual,
        bug=best.hyp.bug,
        message=message + ".",
        candidates=candidates,
        ambiguous=ambiguous,
        alternatives=tuple(s.candidate() for s in alternatives),
        tolerance=tol,
    )


def identify(
    table: Any,
    *,
    bases: Iterable[float] | None = None,
    tolerance: float | None = None,
    max_offset: int = MAX_OFFSET,
) -> Identification:
    """Find the convention, base and first position that produced a table, or say none fits.

    The rows of ``table`` must be consecutive integer positions ``p0, p0+1, ...`` with
    ``0 <= p0 < max_offset`` (e.g. 2 for fairseq-style tables whose first rows are padding).
    The base does not need to be known. For each registered convention (and, only when none
    fits, for seed 001's odd-exponent cosine bug):

    1. the base is estimated from the data: the angle atan2(sin, cos) of each column pair
       advances by ω_k = base^(-e_k) per row (lone columns: v[r-1] + v[r+1] = 2cos(ω)v[r]);
    2. that estimate, the same rounded to 1..6 significant digits, the ``bases`` given and
       a few common bases (:data:`DEFAULT_BASES`) are tried;
    3. for each, the offset comes from the phases p0·ω_k of row 0, coarse to fine (lowest
       frequency first, ω_0 = 1 last), then from the values of rows 0, L/2 and L-1;
    4. each candidate table is built with :func:`posenc.sinusoidal` in float64 and its max
       absolute difference from ``table`` (the residual) is measured.

    Preference among the candidates that fit: within the table dtype's rounding before
    within a float32 recipe's error (see ``tolerance``), a convention before the bug, a
    given base before a rounder one (fewer significant digits) before a less round one,
    then the smaller residual.

    Some tables fit several answers, and then ``ambiguous`` is True, ``alternatives`` holds
    them and the fields on which they differ are None (a field is also None when it has no
    effect on the table): with ``d_model <= 2`` all conventions agree and the base has no
    effect, and offsets are only known up to near-multiples of 2π (710 ≈ 113·2π); a single
    row at position 0 fits any base; for even ``d_model`` a tensor2tensor table with base b
    *is* the marian table with base b^(h/(h-1)), h = d_model // 2, so the rounder of the
    two bases decides and equally round ones are ambiguous (d_model = 4: tensor2tensor 100 =
    marian 10^4); a float16 table with few channels may not separate nearby bases.

    Not matched: seed 001's table (then ``bug`` names it, and ``base`` and ``offset`` are
    those of its sine columns), a scaled table (it is not a sinusoidal table), noise, an
    all-zero table (except tensor2tensor with d_model = 1, which is all zeros), a table with
    NaN or inf. A table given transposed, ``(d_model, L)``, is tried as ``table.T`` when it
    does not match as given (``transposed`` is then True). bfloat16 tables (not a NumPy
    dtype) should be passed as float32 with a ``tolerance`` of about 2^-8.

    Args:
        table: 2-D array ``(L, d_model)`` of real numbers, any dtype (float16 too).
        bases: extra bases to try, preferred over the others when they fit.
        tolerance: the largest residual that counts as a fit. Default, for the last position
            p: u + p·2^-50 for a table rounded once (u = 2^-11 for float16, 2^-24 for
            float32, 2^-53 for float64: twice the largest rounding error of values in
            [-1, 1]), plus min((p + 1)·2^-21, 2^-7) for tables computed in float32
            arithmetic, as many checkpoints hold.
        max_offset: offsets ``0 .. max_offset - 1`` are searched (default 2^20).

    Returns:
        :class:`Identification`.

    Raises:
        ValueError: ``table`` is not 2-D or is empty. TypeError: it is not numeric.

    >>> r = identify(sinusoidal(np.arange(2, 50), 16, convention="tensor2tensor"))
    >>> r.matched, r.convention, r.base, r.offset, r.bug
    (True, 'tensor2tensor', 10000.0, 2, None)
    >>> r = identify(seed001_table(10, 8))
    >>> r.matched, r.bug, r.base, r.offset
    (False, 'seed-001 odd-exponent cosine', 10000.0, 0)
    >>> identify(2 * sinusoidal(20, 8)).matched
    False
    """
    try:
        raw = np.asarray(table)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(
            f"table must be a 2-D array of numbers, got {type(table).__name__}"
        ) from exc
    array = _as_table("table", raw)
    if bases is not None and not isinstance(bases, Iterable):
        raise TypeError(f"bases must be an iterable of numbers (e.g. [10000.0]), got {bases!r}")
    given = [] if bases is None else [check_base("bases", b) for b in bases]
    if tolerance is not None:
        if isinstance(tolerance, (bool, np.bool_)) or not isinstance(tolerance, numbers.Real):
            raise TypeError(f"tolerance must be a positive number or None, got {tolerance!r}")
        tolerance = float(tolerance)
        if not tolerance > 0 or not math.isfinite(tolerance):
            raise ValueError(f"tolerance must be a positive finite number, got {tolerance!r}")
    max_offset = check_int("max_offset", max_offset, minimum=1)
    if not np.all(np.isfinite(array)):
        return Identification(
            matched=False,
            convention=None,
            base=None,
            offset=None,
            residual=math.inf,
            bug=None,
            message="no convention fits: the table contains NaN or infinity.",
            candidates=(),
        )
    unit = _unit_roundoff(raw.dtype)
    result = _identify(array, unit, given, tolerance, max_offset)
    if not result.matched and result.bug is None and array.shape[0] != 1:
        flipped = _identify(array.T, unit, given, tolerance, max_offset)
        if flipped.matched:
            message = (
                "the table looks transposed, (d_model, L); as table.T it is " + flipped.message
            )
            return dataclasses.replace(flipped, message=message, transposed=True)
    return result
