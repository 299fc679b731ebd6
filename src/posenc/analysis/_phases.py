"""Base and first position from the phases of a table, for :func:`identify`.

Each (sin, cos) column pair of a sinusoidal table turns by ω_k = base^(-e_k) per row: the
angles give the base (:func:`_estimate_log_base`), and the phases p0·ω_k (mod 2π) of row 0
give the first position p0 (:func:`_observations`, :func:`_offset_candidates`), checked on a
few rows (:func:`_best_offsets`).

The offset search is exhaustive: the lowest frequency ω of a table leaves ceil(max_offset·ω/2π)
candidate positions, every one of which is followed to the end. With ω_0 = 1 in every table
that is at most max_offset/2π + 2 branches, which :data:`MAX_OFFSET_LIMIT` bounds (about 2.7
million at the limit, 2**24); :func:`posenc.analysis.identify` refuses a larger ``max_offset``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from .._frequencies import MIN_BASE
from ._hypotheses import _Hypothesis
from ._results import _F64

_TWO_PI = 2.0 * math.pi

#: The largest ``max_offset`` :func:`posenc.analysis.identify` accepts: up to it the offset
#: search follows every candidate, so a table found has its exact base and first position.
MAX_OFFSET_LIMIT = 2**24

#: The most branches the offset search keeps: every wrap of a frequency <= 1 below the limit.
_MAX_BRANCHES = math.ceil(MAX_OFFSET_LIMIT / _TWO_PI) + 2

#: Candidate offsets whose phase mismatch is measured at once (bounds the memory used).
_SCORE_ROWS = 1 << 16

#: Bases tried when the table cannot tell the base by itself (e.g. a single row).
DEFAULT_BASES = (10000.0, 100.0, 1000.0, 100000.0, 500000.0, 1000000.0, 10000000.0)


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
    """(base, rank) pairs to try; rank orders preference (given bases 0, then roundness).

    Estimates below the smallest base a table can have (``MIN_BASE``) are left out.
    """
    out: dict[float, int] = {b: 0 for b in given}
    for b in DEFAULT_BASES:
        out.setdefault(b, _roundness(b))
    if log_base is not None and math.isfinite(log_base) and abs(log_base) < 700:
        raw = math.exp(log_base)
        for digits in range(1, 7):
            snapped = float(f"{raw:.{digits - 1}e}")
            out.setdefault(snapped, _roundness(snapped))
        out.setdefault(raw, _roundness(raw))
    return [(b, rank) for b, rank in out.items() if b >= MIN_BASE]


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
    one refines it (keeping every branch its uncertainty allows). Every branch is kept (at most
    ``_MAX_BRANCHES``; a search that would need more, or whose phases do not narrow it down,
    finds nothing rather than part of the answer). Returns the integer candidates (as float64)
    and their worst phase mismatch in units of the phase error.
    """
    empty = np.zeros(0)
    if omega.size == 0:
        return empty, empty
    order = np.argsort(omega, kind="stable")
    omega, phase, error = omega[order], phase[order], error[order]
    count = math.ceil(max_offset * omega[0] / _TWO_PI) + 1
    if count > _MAX_BRANCHES:  # only frequencies above 1 (a base below 1) get here
        return empty, empty
    spread = float(error[0] / omega[0])
    # from m = -1: a phase just below 2π may belong to an offset just above 0
    cands = (phase[0] + _TWO_PI * np.arange(-1, count)) / omega[0]
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
        if cands.shape[0] > _MAX_BRANCHES:  # not narrowing down: the phases are inconsistent
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
    for begin in range(0, ints.shape[0], _SCORE_ROWS):
        rows = slice(begin, begin + _SCORE_ROWS)
        for first in range(0, omega.shape[0], 64):
            part = slice(first, first + 64)
            w, phi, err = omega[part], phase[part], error[part]
            mismatch = np.abs(_wrap(np.multiply.outer(ints[rows], w) - phi)) / err
            score[rows] = np.maximum(score[rows], mismatch.max(axis=1))
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
    several fit, as in a table with d_model <= 2, small offsets are the likely ones). When
    more than ``keep`` tie on those rows, the tied ones are measured on every row, so that
    an offset the table does not pin down always comes with another that fits as well (the
    answer is then ambiguous, never one of them at random).
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
    if tied.shape[0] > keep and length > check.shape[0]:
        room = max(keep, (1 << 20) // (length * d_model))
        tied = tied[np.argsort(mismatch[tied], kind="stable")[:room]]
        positions = (ints[tied, None] + np.arange(length)[None, :]).astype(np.int64).ravel()
        full = hyp.build(positions, base).reshape(tied.shape[0], length, d_model)
        mismatch[tied] = np.abs(full - table[None]).max(axis=(1, 2))
        closest = int(tied[np.argmin(mismatch[tied])])
        tied = tied[mismatch[tied] <= max(threshold, mismatch[closest])]
    smallest = tied[np.argsort(ints[tied], kind="stable")[:keep]]
    nearest = np.argsort(mismatch, kind="stable")[:keep]
    chosen = dict.fromkeys([closest, *smallest.tolist(), *nearest.tolist()])
    return [int(ints[i]) for i in chosen][:keep]


def _single_row_offsets(
    row: _F64, hyp: _Hypothesis, base: float | None, max_offset: int, tolerance: float
) -> tuple[_F64, _F64]:
    """Every first position ``0 .. max_offset - 1`` of a single row of lone columns.

    Such a row has no phase to read (a lone sine or cosine, one value), so every position is
    tried on its fastest column, in chunks (:func:`_best_offsets` then checks every column).
    Returns the positions whose value is within ``tolerance`` (at most 8192, the closest), and
    their mismatch in units of it.
    """
    omega = np.power(10000.0 if base is None else base, -hyp.lone_exp)
    j = int(np.argmax(omega))
    fn, value = (np.cos if hyp.lone_is_cos[j] else np.sin), row[hyp.lone[j]]
    ints, score = np.zeros(0), np.zeros(0)
    for start in range(0, max_offset, 1 << 20):
        p = np.arange(start, min(start + (1 << 20), max_offset), dtype=np.float64)
        mismatch = np.abs(fn(p * omega[j]) - value) / tolerance
        near = mismatch <= 1.0
        ints, score = np.concatenate([ints, p[near]]), np.concatenate([score, mismatch[near]])
        if ints.shape[0] > 8192:
            best = np.argpartition(score, 8191)[:8192]
            ints, score = ints[best], score[best]
    return ints, score
