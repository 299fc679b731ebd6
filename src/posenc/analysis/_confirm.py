"""The confirm step of :func:`identify`: the best candidates checked on the full table.

The search (:mod:`._search`) scored candidates on sample rows. Here the best of those that fit
and those that may tie with it are measured on every row, the preferred one is chosen, and
the candidates that fit equally well are kept as alternatives. The answer is an
:class:`Identification` with an ``outcome`` and the numbers behind it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._results import _F64, Candidate, Identification, Outcome
from ._search import Search, _sample_rows, _Scored

#: At most this many fitting candidates are measured on the full table.
_MAX_FITS = 8

#: At most this many candidates are reported in :attr:`Identification.candidates`.
_MAX_CANDIDATES = 6


def _ties(best: _Scored, other: _Scored) -> bool:
    """Whether ``other`` fits as well as ``best``: same kind of fit, base as round, residual."""
    return (
        other.key()[:2] == best.key()[:2]
        and other.rank <= best.rank
        and other.residual <= 2.0 * best.residual + other.exact_tol
    )


def _full_table_fits(table: _F64, scored: tuple[_Scored, ...]) -> list[_Scored]:
    """The candidates that fit on every row, best first (the best and those that may tie).

    Candidates that fit on the sample rows are visited in order of preference; one that
    cannot tie with the best found so far is skipped. Each is rebuilt on every row when the
    sample rows are not all of them (its residual is then over the full table).
    """
    length = table.shape[0]
    fits: list[_Scored] = []
    seen: set[tuple[Any, ...]] = set()
    for s in sorted((s for s in scored if s.fits), key=_Scored.key):
        ident = (s.hyp.convention, s.base, s.offset, s.hyp.bug)
        if ident in seen:
            continue
        seen.add(ident)
        if fits and not _ties(fits[0], s):
            continue
        if length > _sample_rows(length).shape[0]:
            start = 0 if s.offset is None else s.offset
            full = s.hyp.build(start + np.arange(length), s.base)
            s = s._replace(residual=float(np.abs(full - table).max()))
        if s.fits:
            fits.append(s)
            fits.sort(key=_Scored.key)
        if len(fits) >= _MAX_FITS:
            break
    return fits


def _closest_candidates(fits: list[_Scored], found: Search) -> tuple[Candidate, ...]:
    """The fits, then the other scored candidates, then the pruned ones, each kind closest
    first; every (convention, base, offset, bug) once, at most ``_MAX_CANDIDATES``."""
    ordered = [s.candidate() for s in fits]
    ordered += [s.candidate() for s in sorted(found.scored, key=lambda s: s.residual)]
    ordered += sorted(found.pruned, key=lambda c: c.residual)
    seen: set[tuple[Any, ...]] = set()
    out: list[Candidate] = []
    for c in ordered:
        ident = (c.convention, c.base, c.offset, c.bug)
        if ident not in seen:
            seen.add(ident)
            out.append(c)
    return tuple(out[:_MAX_CANDIDATES])


def _no_fit(table: _F64, found: Search, candidates: tuple[Candidate, ...]) -> Identification:
    """Nothing fits: the closest convention tried (or the closest layout), and why."""
    length, d_model = table.shape
    conventions = [s for s in found.scored if s.hyp.bug is None]
    unplaced = [c for c in found.unplaced if c.bug is None]
    if conventions:
        nearest = min(conventions, key=lambda s: s.residual)
        closest, tolerance = nearest.candidate(), nearest.loose_tol
        outcome: Outcome = "no_fit"
    elif unplaced:  # a layout fits, but no first position below max_offset does
        closest = min(unplaced, key=lambda c: c.residual)
        tolerance = found.loosest
        outcome = "no_offset"
    else:  # every convention's layout was ruled out by its lower bound
        closest = min((c for c in found.pruned if c.bug is None), key=lambda c: c.residual)
        tolerance = found.loosest
        outcome = "off_circle"
    zero_row = None
    zero_rows = np.nonzero(~np.any(table, axis=1))[0]
    if not np.any(table):
        outcome = "all_zero"
    elif zero_rows.size and zero_rows[-1] < length - 1:
        zero_row = int(zero_rows[-1])
    return Identification(
        matched=False,
        outcome=outcome,
        convention=None,
        base=None,
        offset=None,
        residual=closest.residual,
        bug=None,
        candidates=candidates,
        rows=length,
        d_model=d_model,
        closest=closest,
        tolerance=tolerance,
        zero_row=zero_row,
        max_offset=found.max_offset,
    )


def _choose(
    fits: list[_Scored], candidates: tuple[Candidate, ...], found: Search, rows: int, d_model: int
) -> Identification:
    """The answer among the fits: the preferred one, and the fields its ties agree on."""
    best = fits[0]
    alternatives = [s for s in fits if _ties(best, s)]
    convention = best.hyp.convention if len({s.hyp.convention for s in alternatives}) == 1 else None
    base = best.base if len({s.base for s in alternatives}) == 1 else None
    offset = best.offset if len({s.offset for s in alternatives}) == 1 else None
    exact = best.residual <= best.exact_tol
    is_bug = best.hyp.bug is not None
    outcome: Outcome = "bug" if is_bug else "ambiguous" if len(alternatives) > 1 else "match"
    return Identification(
        matched=not is_bug,
        outcome=outcome,
        convention=None if is_bug else convention,
        base=base,
        offset=offset,
        residual=best.residual,
        bug=best.hyp.bug,
        candidates=candidates,
        rows=rows,
        d_model=d_model,
        closest=best.candidate(),
        within="rounding" if exact else "float32",
        ambiguous=None in (convention, base, offset),
        alternatives=tuple(s.candidate() for s in alternatives),
        tolerance=best.exact_tol if exact else best.loose_tol,
        base_guessed=not is_bug and rows == 1 and base is not None and best.rank > 0,
        max_offset=found.max_offset,
    )


def confirm(table: _F64, found: Search) -> Identification:
    """Check the best candidates of ``found`` on the full ``table`` and choose the answer.

    >>> from posenc import sinusoidal
    >>> from posenc.analysis._search import search
    >>> table = sinusoidal(np.arange(3, 100), 16, dtype=np.float64)
    >>> r = confirm(table, search(table, 2.0**-53, [], None, 1000))
    >>> r.outcome, r.convention, r.base, r.offset
    ('match', 'paper', 10000.0, 3)
    """
    fits = _full_table_fits(table, found.scored)
    candidates = _closest_candidates(fits, found)
    if not fits:
        return _no_fit(table, found, candidates)
    rows, d_model = table.shape
    return _choose(fits, candidates, found, rows, d_model)
