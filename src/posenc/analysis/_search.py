"""The search step of :func:`identify`: every table family, base and offset, on sample rows.

For each hypothesis (:mod:`._hypotheses`) not ruled out by a cheap lower bound on its
residual, the bases and first positions its phases allow (:mod:`._phases`) are scored by
their max difference from the table on up to 64 sample rows. The result, a
:class:`Search`, lists the scored candidates, the pruned hypotheses and those for which no
first position below ``max_offset`` fits the phases; the confirm step (:mod:`._confirm`)
checks the best of them on the full table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ._hypotheses import _hypotheses, _Hypothesis
from ._phases import (
    _best_offsets,
    _candidate_bases,
    _estimate_log_base,
    _observations,
    _offset_candidates,
    _single_row_offsets,
)
from ._results import _F64, Candidate, _Result


def _unit_roundoff(dtype: np.dtype[Any]) -> float:
    """Twice the largest rounding error of values in [-1, 1] in ``dtype`` (2^-53 at least)."""
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
    """One (hypothesis, base, offset) tried: its residual on the sample rows, its tolerances
    (``exact_tol`` for a table rounded once, ``loose_tol`` for one computed in float32) and
    ``rank``, the preference of its base (0 for a given base, else its significant digits)."""

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
            # no phase to read (a single row of lone columns): the offsets depend on the base
            ident = b"".join(x.tobytes() for x in obs) or repr(base).encode()
            if ident not in searched:  # bases that leave the same phases share the search
                if obs[0].size:
                    searched[ident] = _offset_candidates(*obs, max_offset)
                else:  # lone columns of a single row: try every offset
                    loose = _tolerances(unit, max_offset)[1] if tolerance is None else tolerance
                    searched[ident] = _single_row_offsets(table[0], hyp, base, max_offset, loose)
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


@dataclass(frozen=True, eq=False)
class Search(_Result):
    """What the search step found (see :func:`search`).

    Attributes:
        scored: every (hypothesis, base, offset) tried, with its residual on the sample rows
            and its tolerances, in the order tried.
        pruned: the hypotheses ruled out before any base or offset was tried, each as a
            :class:`Candidate` whose ``residual`` is the lower bound that ruled it out.
        loosest: the tolerance the lower bounds were compared with (``tolerance`` when given,
            else the loose tolerance of a far position).
        unplaced: the hypotheses not ruled out whose phases no first position in
            ``0 .. max_offset - 1`` fits, for any base (a :class:`Candidate` with no base or
            offset, and the lower bound as ``residual``).
        max_offset: the first positions searched were ``0 .. max_offset - 1``.
    """

    scored: tuple[_Scored, ...]
    pruned: tuple[Candidate, ...]
    loosest: float
    unplaced: tuple[Candidate, ...] = ()
    max_offset: int | None = None


def search(
    table: _F64, unit: float, given: list[float], tolerance: float | None, max_offset: int
) -> Search:
    """Score every registered convention on ``table``; the odd-exponent bug only if none fits.

    ``unit`` is the rounding unit of the table's dtype (:func:`_unit_roundoff`), ``given``
    the bases to prefer, ``tolerance`` the residual allowed (None: :func:`_tolerances`) and
    offsets ``0 .. max_offset - 1`` are searched.

    >>> from posenc import sinusoidal
    >>> found = search(sinusoidal(8, 4, dtype=np.float64), 2.0**-53, [], None, 100)
    >>> best = min(found.scored, key=_Scored.key)
    >>> best.hyp.convention, best.base, best.offset, best.fits
    ('paper', 10000.0, 0, True)
    """
    length, d_model = table.shape
    sample = table[_sample_rows(length)]
    conventions, bug = _hypotheses(d_model)
    loosest = tolerance if tolerance is not None else _tolerances(unit, 1 << 30)[1]
    scored: list[_Scored] = []
    pruned: list[Candidate] = []
    unplaced: list[Candidate] = []
    for stage in (conventions, [bug]):
        for hyp in stage:
            bound = _lower_bound(table, sample, hyp)
            if bound > 2.0 * loosest + 1e-6:
                pruned.append(Candidate(hyp.convention, None, None, bound, hyp.bug))
                continue
            tried = _score_hypothesis(table, hyp, given, tolerance, unit, max_offset)
            if not tried:
                unplaced.append(Candidate(hyp.convention, None, None, bound, hyp.bug))
            scored += tried
        if any(s.fits for s in scored):
            break  # a convention fits: the odd-exponent bug is only considered when none does
    return Search(tuple(scored), tuple(pruned), loosest, tuple(unplaced), max_offset)
