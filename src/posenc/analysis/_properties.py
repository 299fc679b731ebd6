"""Properties of sinusoidal tables: wavelengths, the shift matrix, similarity, distinct rows."""

from __future__ import annotations

import math
import numbers
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._checks import (
    as_float,
    check_allocation,
    check_base,
    check_int,
    check_position_magnitude,
    check_positions,
    is_integer,
)
from .._conventions import get_convention
from .._features import feature_slices, sin_cos_pairs
from .._frequencies import frequencies
from .._positions.sequence import positions_array
from .._sinusoidal import sinusoidal
from ._results import _F64, DistinctRows, Similarity, Wavelengths
from ._rounding import _ITEMSIZE, _dtype_name, _row_bits

_TWO_PI = 2.0 * math.pi


def _as_table(name: str, value: Any, *, finite: bool = False) -> _F64:
    """A 2-D numeric array as float64; TypeError/ValueError naming ``name`` otherwise.

    With ``finite``, a NaN or an infinity anywhere is refused too (a ``ValueError`` showing
    the first one and where it is).
    """
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
    table = array.astype(np.float64, copy=False)
    if finite and not np.all(np.isfinite(table)):
        row, col = (int(i) for i in np.argwhere(~np.isfinite(table))[0])
        raise ValueError(
            f"{name} must be finite, got {float(table[row, col])!r} at row {row}, column {col}"
        )
    return table


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


class _Pairs(NamedTuple):
    """Channel indices of a convention: (sin, cos) pairs, an unpaired sin, zero columns."""

    sin: npt.NDArray[np.intp]
    cos: npt.NDArray[np.intp]
    omega: _F64
    unpaired: npt.NDArray[np.intp]
    zero: npt.NDArray[np.intp]


def _pairs(d_model: int, base: float, convention: Any) -> _Pairs:
    layout = feature_slices(d_model, convention)
    pairs = sin_cos_pairs(layout, d_model)
    omega = frequencies(d_model, base=base, convention=convention)
    return _Pairs(pairs.sin, pairs.cos, omega[: layout.n_cos], pairs.unpaired, pairs.zero)


def _check_shift_amount(k: Any) -> float:
    """``k`` as a float: a finite real number (not a bool), |k| <= 2**53."""
    if not is_integer(k):  # ints stay exact for the limit's comparison
        k = as_float("k", k, "a real number (the shift in positions)")
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
    check_allocation("d_model", (d_model, d_model), 8)
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
    cosine does not share its sine's frequency (:func:`odd_exponent_table`) gives O(1). For
    an odd ``d_model`` with an unpaired sine column (paper, marian) that column is left out,
    since no exact linear map exists for it (see :func:`shift_matrix`).

    Args:
        table: 2-D array ``(L, d_model)`` of any real dtype, finite (a NaN or an infinity
            raises ``ValueError``: there is no shift to check).
        k: integer shift in rows, ``-L < k < L``.
        base, convention: those of the table.

    Returns:
        The max absolute difference, a Python float.

    >>> from posenc.analysis import odd_exponent_table
    >>> float(check_shift(odd_exponent_table(32, 8, dtype=np.float64), 1)) > 0.1
    True
    """
    array = _as_table("table", table, finite=True)
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


_MAX_SIMILARITY_POSITIONS = 4096


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
        # the rounded rows and the sorted copy np.unique makes of them
        check_allocation("table_or_length and d_model", (length, d), _ITEMSIZE[dtype_name], 2)
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
        array = _as_table("table_or_length", table_or_length, finite=True)
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
