"""The result types of :mod:`posenc.analysis`, and the one serialiser they share.

Every result is a small frozen dataclass (or a NamedTuple row of one) holding numbers, arrays
and short identifiers, never sentences: :func:`posenc.describe` composes the English.
``as_dict()`` on any of them returns :func:`plain` of it, plain Python values ready for
``json.dumps``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

_F64 = npt.NDArray[np.float64]

#: What :func:`identify` concluded, see :class:`Identification`.
Outcome = Literal[
    "match", "ambiguous", "bug", "no_fit", "no_offset", "off_circle", "all_zero", "non_finite"
]


def plain(value: Any) -> Any:
    """``value`` as plain Python values (dicts, lists, floats, ints, str, bool, None).

    The one serialiser of :mod:`posenc.analysis`: a result dataclass becomes a dict of its
    fields in order, a NamedTuple row a dict of its fields, arrays and tuples lists, NumPy
    scalars Python numbers; everything inside is converted the same way. Non-finite floats
    stay ``nan``/``inf`` (``json.dumps`` writes them as ``NaN``/``Infinity``).

    >>> plain(MethodError("posenc", np.float64(0.5), 3, 1))
    {'name': 'posenc', 'max_error': 0.5, 'worst_position': 3, 'worst_channel': 1}
    """
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # NamedTuple
        return {key: plain(item) for key, item in value._asdict().items()}
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


class _Result:
    """Base of the result dataclasses: ``as_dict()`` through :func:`plain`."""

    def as_dict(self) -> dict[str, Any]:
        """Plain Python values, ready for ``json.dumps`` (an infinite number stays ``inf``)."""
        data: dict[str, Any] = plain(self)
        return data


@dataclass(frozen=True, eq=False)
class Wavelengths(_Result):
    """The frequencies and wavelengths of one convention (see :func:`wavelengths`).

    Attributes:
        d_model, base, convention: what was asked for.
        frequencies: ω_k, float64 ``(n,)``.
        wavelengths: λ_k = 2π/ω_k in positions, float64 ``(n,)``.
        ratios: λ_(k+1)/λ_k, float64 ``(n-1,)``.
        shortest, longest: the smallest and largest wavelength (NaN when there is none:
            tensor2tensor or musicgen with d_model = 1).
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


@dataclass(frozen=True, eq=False)
class Similarity(_Result):
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


@dataclass(frozen=True)
class DistinctRows(_Result):
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


class MethodError(NamedTuple):
    """One row of a :class:`PrecisionReport`: a method and its max absolute error."""

    name: str
    max_error: float
    worst_position: int
    worst_channel: int

    def as_dict(self) -> dict[str, Any]:
        """Plain Python values, ready for ``json.dumps``."""
        data: dict[str, Any] = plain(self)
        return data


@dataclass(frozen=True)
class PrecisionReport(_Result):
    """Max errors of ways to build a table (see :func:`precision_report`).

    Attributes:
        max_position, d_model, dtype, base, convention, seed: what was asked for.
        positions: the sampled positions (sorted, distinct).
        methods: one :class:`MethodError` per method.
        reference: how the reference was computed (``"longdouble"`` or ``"float64"``).
        reference_error: an upper estimate of the reference's own error.
        merged: ``(method, same as)`` pairs: a method that is the same computation as a
            listed one and is therefore not listed again. For float32,
            ``(("recipe in float32", "float32 recipe"),)``; empty otherwise.
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
    merged: tuple[tuple[str, str], ...] = ()

    def method(self, name: str) -> MethodError:
        """The row called ``name`` (KeyError if absent)."""
        for row in self.methods:
            if row.name == name:
                return row
        raise KeyError(name)


class Candidate(NamedTuple):
    """One hypothesis scored by :func:`identify`.

    ``base`` is None when the base has no effect on such a table (d_model <= 2, or
    tensor2tensor with d_model = 3), ``offset`` is None when nothing depends on it (an all-zero
    table); ``bug`` names a known bug (:data:`ODD_EXPONENT_BUG`) instead of a convention's
    table.
    """

    convention: str
    base: float | None
    offset: int | None
    residual: float
    bug: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain Python values, ready for ``json.dumps``."""
        data: dict[str, Any] = plain(self)
        return data


@dataclass(frozen=True)
class Identification(_Result):
    """What :func:`identify` found; :func:`posenc.describe` says it in one sentence.

    Attributes:
        matched: True when a convention's table fits within ``tolerance``. False for a
            recognised bug (``bug`` is set): no convention reproduces such a table.
        outcome: what was concluded, one of

            - ``"match"``: one answer fits (``matched``);
            - ``"ambiguous"``: several answers fit equally well (``matched``; they are in
              ``alternatives``);
            - ``"bug"``: the table has a known bug (``bug`` names it), not a convention;
            - ``"no_fit"``: no convention fits; ``closest`` is the closest one tried;
            - ``"no_offset"``: a convention's (sin, cos) column pairs lie on the unit circle,
              but no first position below ``max_offset`` fits their phases: the first
              position may be ``max_offset`` or more;
            - ``"off_circle"``: under every convention's layout the (sin, cos) column pairs
              are off the unit circle (a scaled table, noise), so none was tried;
            - ``"all_zero"``: the table is all zeros (only tensor2tensor and musicgen with
              d_model = 1 are, and that one is an ``"ambiguous"`` match);
            - ``"non_finite"``: the table holds NaN or infinity.
        convention, base, offset: the answer; a field is None when the fitting answers
            disagree on it (``ambiguous``) or when it has no effect on the table. For a
            recognised bug, ``convention`` is None and ``base``/``offset`` describe the buggy
            table.
        residual: max |table - candidate| of the answer (of the closest candidate otherwise).
        bug: :data:`ODD_EXPONENT_BUG` (``"odd-exponent cosine"``) when the table has that
            bug, else None.
        candidates: the closest hypotheses tried (at most 6), best first.
        closest: the candidate ``residual`` belongs to: the answer (the first of
            ``alternatives``), or when nothing fits the closest convention tried (for
            ``"off_circle"`` and ``"no_offset"`` the layout closest to the unit circle, with
            no base or offset); None for ``"non_finite"``.
        within: for an answer, which tolerance it fits: ``"rounding"`` (the table dtype's
            rounding) or ``"float32"`` (the error of a table computed in float32
            arithmetic); None when nothing fits.
        ambiguous: several answers fit equally well, or a field could not be determined.
        alternatives: the answers that fit equally well (the answer itself first).
        tolerance: the residual allowed for the answer.
        rows, d_model: the number of rows (positions) and channels of the table as analysed
            (of ``table.T`` when transposed).
        zero_row: when nothing fits and a row other than the last is all zeros (as in
            fairseq-style tables that zero the padding row), the last such row: try
            ``table[zero_row + 1:]``; None otherwise.
        base_guessed: a single row fixed the base only among a few common ones
            (:data:`DEFAULT_BASES`).
        transposed: the table was given as ``(d_model, L)``; the answer is for ``table.T``.
        max_offset: the first positions searched were ``0 .. max_offset - 1`` (None when no
            search ran: ``"non_finite"``).
    """

    matched: bool
    outcome: Outcome
    convention: str | None
    base: float | None
    offset: int | None
    residual: float
    bug: str | None
    candidates: tuple[Candidate, ...]
    rows: int
    d_model: int
    closest: Candidate | None = None
    within: Literal["rounding", "float32"] | None = None
    ambiguous: bool = False
    alternatives: tuple[Candidate, ...] = ()
    tolerance: float = math.nan
    zero_row: int | None = None
    base_guessed: bool = False
    transposed: bool = False
    max_offset: int | None = None


@dataclass(frozen=True)
class BiasProfile(_Result):
    """An attention bias against the relative position, per head (see :func:`bias_profile`).

    Attributes:
        method: ``"alibi"`` or ``"t5"``.
        relative: int64 ``(n,)`` relative positions ``key − query``, ascending.
        values: float64 ``(heads, n)``: the bias head ``h`` adds at each relative position.
        slopes: ALiBi: float64 ``(heads,)`` slopes; None for T5.
        buckets: T5: int64 ``(n,)`` bucket of each relative position; None for ALiBi.
    """

    method: str
    relative: npt.NDArray[np.int64]
    values: _F64
    slopes: _F64 | None
    buckets: npt.NDArray[np.int64] | None


@dataclass(frozen=True)
class BucketMap(_Result):
    """The bucket of every relative position, and its regions (see :func:`bucket_map`).

    Attributes:
        method: ``"t5"`` or ``"deberta"``.
        relative: int64 ``(n,)`` relative positions ``key − query``, ascending.
        buckets: int64 ``(n,)`` (DeBERTa's are signed, of ``query − key``).
        exact_limit: distances ``|r| <= exact_limit`` have a bucket of their own.
        max_distance: T5: distances from here on share the last bucket; DeBERTa:
            ``max_position``, where the log buckets reach ``bucket_size − 1``.
        num_buckets, bidirectional: what was asked for.
    """

    method: str
    relative: npt.NDArray[np.int64]
    buckets: npt.NDArray[np.int64]
    exact_limit: int
    max_distance: int
    num_buckets: int
    bidirectional: bool


@dataclass(frozen=True)
class SlopeTable(_Result):
    """ALiBi slopes per head in the exact rule and the frameworks' (see :func:`slope_table`).

    Attributes:
        heads, max_bias: what was asked for.
        exact: float64 ``(heads,)``, ``2^(−max_bias·k/n)`` within one float64 ulp.
        rules: rule name (``"bloom"``, ``"mpt"``, ``"falcon"``) -> float64 ``(heads,)``: the
            slopes the framework computes (float32, Falcon's bfloat16), as float64 numbers.
            BLOOM's and Falcon's rules exist for ``max_bias = 8`` only.
        ulps: rule name -> float64 ``(heads,)``: ``(rule − exact)`` in units of the float32
            spacing at the exact slope (``np.spacing(np.float32(exact))``).
    """

    heads: int
    max_bias: float
    exact: _F64
    rules: dict[str, _F64]
    ulps: dict[str, _F64]
