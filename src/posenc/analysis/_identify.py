"""Which convention, base and first position produced a table: :func:`identify`.

The work is done in two steps, each returning a result object: the search (:func:`search`,
candidates scored on sample rows) and the confirm step (:func:`confirm`, the best of them on
the full table, the choice and its alternatives).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import as_float, check_int
from .._frequencies import check_schedule_base
from ._confirm import confirm
from ._phases import MAX_OFFSET_LIMIT
from ._properties import _as_table
from ._results import _F64, Identification
from ._search import _unit_roundoff, search

#: Offsets searched by :func:`identify` by default: 0 .. 2**20 - 1.
MAX_OFFSET = 2**20


def _table_argument(table: Any) -> tuple[npt.NDArray[Any], _F64]:
    """``table`` as given (for its dtype) and as a float64 2-D array; errors name ``table``."""
    try:
        raw = np.asarray(table)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(
            f"table must be a 2-D array of numbers, got {type(table).__name__}"
        ) from exc
    return raw, _as_table("table", raw)


def _options(bases: Any, tolerance: Any, max_offset: Any) -> tuple[list[float], float | None, int]:
    """The checked ``bases`` (a list), ``tolerance`` (float or None) and ``max_offset``."""
    if bases is not None and not isinstance(bases, Iterable):
        raise TypeError(f"bases must be an iterable of numbers (e.g. [10000.0]), got {bases!r}")
    given = [] if bases is None else [check_schedule_base("bases", b) for b in bases]
    if tolerance is not None:
        tolerance = as_float("tolerance", tolerance, "a positive finite number or None")
        if not tolerance > 0 or not math.isfinite(tolerance):
            raise ValueError(f"tolerance must be a positive finite number, got {tolerance!r}")
    max_offset = check_int("max_offset", max_offset, minimum=1)
    if max_offset > MAX_OFFSET_LIMIT:
        raise ValueError(
            "max_offset must be an integer in [1, 2**24] (up to 2**24 the offset search tries "
            "every first position, so a table found has its exact base and offset; beyond, "
            f"it could not), got {max_offset}"
        )
    return given, tolerance, max_offset


def _identify(
    table: _F64, unit: float, given: list[float], tolerance: float | None, max_offset: int
) -> Identification:
    """Search, then confirm, on ``table`` as it is."""
    return confirm(table, search(table, unit, given, tolerance, max_offset))


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
    Every first position in that range is searched, so the base and offset reported are the
    exact ones (or the table is ``ambiguous``); ``max_offset`` is at most
    :data:`MAX_OFFSET_LIMIT` = 2^24 for that reason.
    The base does not need to be known. For each registered convention (and, only when none
    fits, for the odd-exponent cosine bug of :func:`odd_exponent_table`):

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

    Not matched: a table with the odd-exponent cosine bug (then ``bug`` names it, and
    ``base`` and ``offset`` are those of its sine columns), a table whose first position is
    ``max_offset`` or more (``"no_offset"`` when its phases fit no first position in range;
    ``"no_fit"`` otherwise, or a float32-accurate fit elsewhere), a scaled table (it is not a
    sinusoidal table), noise, an all-zero table (except tensor2tensor and musicgen with
    d_model = 1, which are all zeros: an ambiguous match), a table with NaN or inf. A table
    given transposed, ``(d_model, L)``, is tried as ``table.T`` when it does not match as
    given (``transposed`` is then True).
    bfloat16 tables (not a NumPy dtype) should be passed as float32 with a ``tolerance`` of
    about 2^-8. ``outcome`` says which case it is, and :func:`posenc.describe` says it in a
    sentence.

    Args:
        table: 2-D array ``(L, d_model)`` of real numbers, any dtype (float16 too).
        bases: extra bases to try, preferred over the others when they fit.
        tolerance: the largest residual that counts as a fit. Default, for the last position
            p: u + p·2^-50 for a table rounded once (u = 2^-11 for float16, 2^-24 for
            float32, 2^-53 for float64: twice the largest rounding error of values in
            [-1, 1]), plus min((p + 1)·2^-21, 2^-7) for tables computed in float32
            arithmetic, as many checkpoints hold.
        max_offset: offsets ``0 .. max_offset - 1`` are searched (default 2^20, at most
            :data:`MAX_OFFSET_LIMIT` = 2^24).

    Returns:
        :class:`Identification`.

    Raises:
        ValueError: ``table`` is not 2-D or is empty, or ``max_offset`` is out of range.
        TypeError: ``table`` is not numeric.

    >>> from posenc import sinusoidal
    >>> from posenc.analysis import odd_exponent_table
    >>> r = identify(sinusoidal(np.arange(2, 50), 16, convention="tensor2tensor"))
    >>> r.matched, r.outcome, r.convention, r.base, r.offset, r.bug
    (True, 'match', 'tensor2tensor', 10000.0, 2, None)
    >>> r = identify(odd_exponent_table(10, 8))
    >>> r.matched, r.outcome, r.bug, r.base, r.offset
    (False, 'bug', 'odd-exponent cosine', 10000.0, 0)
    >>> r = identify(2 * sinusoidal(20, 8))
    >>> r.matched, r.outcome
    (False, 'off_circle')
    """
    raw, array = _table_argument(table)
    given, tolerance, max_offset = _options(bases, tolerance, max_offset)
    if not np.all(np.isfinite(array)):
        return Identification(
            matched=False,
            outcome="non_finite",
            convention=None,
            base=None,
            offset=None,
            residual=math.inf,
            bug=None,
            candidates=(),
            rows=array.shape[0],
            d_model=array.shape[1],
        )
    unit = _unit_roundoff(raw.dtype)
    result = _identify(array, unit, given, tolerance, max_offset)
    if not result.matched and result.bug is None and array.shape[0] != 1:
        flipped = _identify(array.T, unit, given, tolerance, max_offset)
        if flipped.matched:
            return dataclasses.replace(flipped, transposed=True)
    return result
