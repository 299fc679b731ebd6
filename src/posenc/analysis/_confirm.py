"""The confirm step of :func:`identify`: the best candidates checked on the full table.

The search (:mod:`._search`) scored candidates on sample rows. Here the best of those that fit
and those that may tie with it are measured on every row, the preferred one is chosen, and
the candidates that fit equally well are kept as alternatives. The answer is an
:class:`Identification`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._results import _F64, Candidate, Identification
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


def _no_fit(table: _F64, found: Search, candidates: tuple[Candidate, ...]) -> Identification:
    """Nothing fits: the closest convention tried (or the closest layout), and why."""
    length, d_model = table.shape
    conventions = [s for s in found.scored if s.hyp.bug is None]
    if conventions:
        closest = min(conventions, key=lambda s: s.residual)
        message = (
            "no convention fits: the closest candidate, "
            f"{_describe(closest.candidate(), length)}, is off by {closest.residual:.3g} "
            f"> tolerance {closest.loose_tol:.3g}"
        )
        residual, tol = closest.residual, closest.loose_tol
    else:  # every convention's layout was ruled out by its lower bound
        residual = min(c.residual for c in found.pruned if c.bug is None)
        tol = found.loosest
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


def _message(
    best: _Scored, alternatives: list[_Scored], base: float | None, offset: int | None, length: int
) -> str:
    """One sentence on the answer."""
    answer = best.candidate()
    within = (
        "within the table's rounding"
        if best.residual <= best.exact_tol
        else "within the error of a table computed in float32"
    )
    if best.hyp.bug is not None:
        where = _describe(answer._replace(bug=None), length)[len("paper (") : -1]
        message = (
            f"no convention fits: this is a table with the {best.hyp.bug} bug (a bug found in "
            "tutorial code): the sine columns match the paper table "
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
    return message + "."


def _choose(fits: list[_Scored], candidates: tuple[Candidate, ...], length: int) -> Identification:
    """The answer among the fits: the preferred one, and the fields its ties agree on."""
    best = fits[0]
    alternatives = [s for s in fits if _ties(best, s)]
    convention = best.hyp.convention if len({s.hyp.convention for s in alternatives}) == 1 else None
    base = best.base if len({s.base for s in alternatives}) == 1 else None
    offset = best.offset if len({s.offset for s in alternatives}) == 1 else None
    is_bug = best.hyp.bug is not None
    return Identification(
        matched=not is_bug,
        convention=None if is_bug else convention,
        base=base,
        offset=offset,
        residual=best.residual,
        bug=best.hyp.bug,
        message=_message(best, alternatives, base, offset, length),
        candidates=candidates,
        ambiguous=None in (convention, base, offset),
        alternatives=tuple(s.candidate() for s in alternatives),
        tolerance=best.exact_tol if best.residual <= best.exact_tol else best.loose_tol,
    )


def confirm(table: _F64, found: Search) -> Identification:
    """Check the best candidates of ``found`` on the full ``table`` and choose the answer.

    >>> from posenc import sinusoidal
    >>> from posenc.analysis._search import search
    >>> table = sinusoidal(np.arange(3, 100), 16, dtype=np.float64)
    >>> r = confirm(table, search(table, 2.0**-53, [], None, 1000))
    >>> r.matched, r.convention, r.base, r.offset
    (True, 'paper', 10000.0, 3)
    """
    fits = _full_table_fits(table, found.scored)
    candidates = _closest_candidates(fits, found)
    if not fits:
        return _no_fit(table, found, candidates)
    return _choose(fits, candidates, table.shape[0])
