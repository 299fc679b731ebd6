"""posenc.describe: the English for each analysis result, composed outside posenc.analysis.

Each sentence is the one posenc printed before the results lost their ``message``/``note``
fields (the odd-exponent bug's is reworded): the sentences are pinned here, from hand-built
results (every outcome, every optional clause) and from real identifications.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import posenc
from posenc import analysis, describe
from posenc.analysis import Candidate, Identification, identify, odd_exponent_table

s = posenc.sinusoidal


def _result(outcome: str, **fields: object) -> Identification:
    """An Identification with the given fields (the rest as identify would leave them)."""
    base: dict[str, object] = {
        "matched": outcome in ("match", "ambiguous"),
        "outcome": outcome,
        "convention": None,
        "base": None,
        "offset": None,
        "residual": 0.5,
        "bug": None,
        "candidates": (),
        "rows": 10,
        "d_model": 8,
    }
    return Identification(**(base | fields))  # type: ignore[arg-type]


def _zero_row(table: np.ndarray, row: int) -> np.ndarray:
    """``table`` with one row zeroed, as fairseq zeroes its padding row."""
    table = table.copy()
    table[row] = 0
    return table


PAPER = Candidate("paper", 10000.0, 2, 3e-8)

HAND_BUILT = [
    (
        _result(
            "match", convention="paper", base=10000.0, offset=2, residual=3e-8, closest=PAPER,
            within="rounding", alternatives=(PAPER,),
        ),
        "a paper (base 10000, positions 2..11) table (max residual 3e-08, within the table's "
        "rounding).",
    ),
    (
        _result(
            "match", convention="marian", residual=1e-3, rows=1,
            closest=Candidate("marian", None, None, 1e-3), within="float32",
        ),
        "a marian (any base, any positions) table (max residual 0.001, within the error of a "
        "table computed in float32); the base has no effect on it; the positions have no effect "
        "on it.",
    ),
    (
        _result(
            "match", convention="paper", base=100.0, offset=7, residual=0.0, rows=1,
            closest=Candidate("paper", 100.0, 7, 0.0), within="rounding", base_guessed=True,
        ),
        "a paper (base 100, position 7) table (max residual 0, within the table's rounding); "
        "from a single row, the base was chosen among a few common ones.",
    ),
    (
        _result(
            "ambiguous", offset=2, closest=PAPER, within="rounding",
            alternatives=(PAPER, PAPER._replace(convention="marian", base=None)),
        ),
        "ambiguous: 2 answers fit equally well (paper (base 10000, positions 2..11); marian (any "
        "base, positions 2..11)); the fields on which they differ are None.",
    ),
    (
        _result(
            "ambiguous", closest=PAPER, within="rounding", base_guessed=True, rows=1,
            alternatives=tuple(PAPER._replace(offset=k) for k in range(6)),
        ),
        "ambiguous: 6 answers fit equally well (paper (base 10000, position 0); paper (base "
        "10000, position 1); paper (base 10000, position 2); paper (base 10000, position 3) and "
        "2 more); the fields on which they differ are None; from a single row, the base was "
        "chosen among a few common ones.",
    ),
    (
        _result(
            "bug", bug="odd-exponent cosine", base=500.0, offset=0, residual=2.8e-8,
            closest=Candidate("paper", 500.0, 0, 2.8e-8, "odd-exponent cosine"),
            within="float32",
        ),
        "no convention fits: this is a table with the odd-exponent cosine bug (a bug found in "
        "tutorial code): the sine columns match the paper table (base 500, positions 0..9) but "
        "the cosine columns use base^((2i+1)/d) instead of base^(2i/d) (max residual 2.8e-08, "
        "within the error of a table computed in float32).",
    ),
    (
        _result(
            "no_fit", residual=1.9991, tolerance=0.0078125,
            closest=Candidate("marian", 1000.0, 403401, 1.9991),
        ),
        "no convention fits: the closest candidate, marian (base 1000, positions "
        "403401..403410), is off by 2 > tolerance 0.00781.",
    ),
    (
        _result(
            "no_fit", residual=0.25, tolerance=0.001, zero_row=0,
            closest=Candidate("tensor2tensor", 2.5, 1, 0.25),
        ),
        "no convention fits: the closest candidate, tensor2tensor (base 2.5, positions 1..10), "
        "is off by 0.25 > tolerance 0.001; row 0 is all zeros, as in fairseq-style tables that "
        "zero the padding row: skip the rows up to it (posenc identify --skip-rows 1; table[1:] "
        "in Python).",
    ),
    (
        _result("off_circle", residual=0.7071, closest=Candidate("paper", None, None, 0.7071)),
        "no convention fits: under every convention's layout the (sin, cos) column pairs are off "
        "the unit circle (by >= 0.707): not (sin, cos) pairs, as a RoPE cos or sin table alone, "
        "a table times a factor, or noise.",
    ),
    (
        _result(
            "off_circle", residual=0.5, zero_row=3, closest=Candidate("paper", None, None, 0.5)
        ),
        "no convention fits: under every convention's layout the (sin, cos) column pairs are off "
        "the unit circle (by >= 0.5): not (sin, cos) pairs, as a RoPE cos or sin table alone, a "
        "table times a factor, or noise; row 3 is all zeros, as in fairseq-style tables that "
        "zero the padding row: skip the rows up to it (posenc identify --skip-rows 4; table[4:] "
        "in Python).",
    ),
    (
        _result(
            "no_offset", residual=3e-08, max_offset=100,
            closest=Candidate("tensor2tensor", None, None, 3e-08),
        ),
        "no convention fits with a first position below max_offset = 100: the columns look "
        "like tensor2tensor's sines and cosines, but no first position in range fits their "
        "phases, so the first position may be max_offset = 100 or more (identify searches up "
        "to max_offset = 2**24).",
    ),
    (
        _result("all_zero", d_model=6, closest=Candidate("paper", None, None, 0.7)),
        "no convention fits: the table is all zeros (only tensor2tensor and musicgen with "
        "d_model=1 are), got "
        "d_model=6.",
    ),
    (
        _result("non_finite", residual=math.inf),
        "no convention fits: the table contains NaN or infinity.",
    ),
    (
        _result(
            "match", convention="paper", base=10000.0, offset=2, residual=3e-8, closest=PAPER,
            within="rounding", alternatives=(PAPER,), transposed=True,
        ),
        "the table looks transposed, (d_model, L); as table.T it is a paper (base 10000, "
        "positions 2..11) table (max residual 3e-08, within the table's rounding).",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("result", "sentence"), HAND_BUILT)
def test_describe_every_outcome_and_clause(result: Identification, sentence: str) -> None:
    assert describe(result) == sentence


def test_every_outcome_is_described() -> None:
    outcomes = {result.outcome for result, _ in HAND_BUILT}
    assert outcomes == {
        "match", "ambiguous", "bug", "no_fit", "no_offset", "off_circle", "all_zero",
        "non_finite",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("make", "outcome", "sentence"),
    [
        (
            lambda: s(np.arange(2, 50), 16, convention="tensor2tensor"),
            "match",
            "a tensor2tensor (base 10000, positions 2..49) table (max residual 3e-08, within the "
            "table's rounding).",
        ),
        (
            lambda: np.zeros((8, 1)),
            "ambiguous",
            "ambiguous: 2 answers fit equally well (tensor2tensor (any base, any positions); "
            "musicgen (any base, any positions)); the fields on which they differ are None.",
        ),
        (
            lambda: s([1000], 64),
            "match",
            "a paper (base 10000, position 1000) table (max residual 2.9e-08, within the table's "
            "rounding); from a single row, the base was chosen among a few common ones.",
        ),
        (
            lambda: s(np.arange(3, 40), 4, base=100.0, convention="tensor2tensor"),
            "ambiguous",
            "ambiguous: 2 answers fit equally well (tensor2tensor (base 100, positions 3..39); "
            "marian (base 10000, positions 3..39)); the fields on which they differ are None.",
        ),
        (
            lambda: s(1, 16),
            "ambiguous",
            "ambiguous: 7 answers fit equally well (paper (base 10000, position 0); paper (base "
            "100, position 0); paper (base 1000, position 0); paper (base 100000, position 0) "
            "and 3 more); the fields on which they differ are None.",
        ),
        (
            lambda: odd_exponent_table(64, 8),
            "bug",
            "no convention fits: this is a table with the odd-exponent cosine bug (a bug found in "
            "tutorial code): the sine columns match the paper table (base 10000, positions "
            "0..63) but the cosine columns use base^((2i+1)/d) instead of base^(2i/d) (max "
            "residual 3e-08, within the table's rounding).",
        ),
        (
            lambda: 2 * s(20, 8),
            "off_circle",
            "no convention fits: under every convention's layout the (sin, cos) column pairs are "
            "off the unit circle (by >= 0.707): not (sin, cos) pairs, as a RoPE cos or sin table "
            "alone, a table times a factor, or noise.",
        ),
        (
            lambda: _zero_row(s(40, 16, convention="tensor2tensor"), 1),
            "off_circle",
            "no convention fits: under every convention's layout the (sin, cos) column pairs are "
            "off the unit circle (by >= 0.707): not (sin, cos) pairs, as a RoPE cos or sin table "
            "alone, a table times a factor, or noise; row 1 is all zeros, as in fairseq-style "
            "tables that zero the padding row: skip the rows up to it (posenc identify "
            "--skip-rows 2; table[2:] in Python).",
        ),
        (
            lambda: np.zeros((8, 6)),
            "all_zero",
            "no convention fits: the table is all zeros (only tensor2tensor and musicgen with "
            "d_model=1 are), got d_model=6.",
        ),
        (
            lambda: np.full((4, 8), np.inf),
            "non_finite",
            "no convention fits: the table contains NaN or infinity.",
        ),
        (
            lambda: s(np.arange(3, 300), 64).T,
            "match",
            "the table looks transposed, (d_model, L); as table.T it is a paper (base 10000, "
            "positions 3..299) table (max residual 3e-08, within the table's rounding).",
        ),
    ],
)  # fmt: skip
def test_describe_identifications(make: object, outcome: str, sentence: str) -> None:
    r = identify(make())  # type: ignore[operator]
    assert r.outcome == outcome
    assert describe(r) == sentence


def test_describe_no_fit_and_float32_tables() -> None:
    r = identify(s(np.arange(2, 50), 16)[::-1].copy())  # rows in the wrong order
    assert r.outcome == "no_fit"
    assert r.closest is not None
    assert r.residual == r.closest.residual > r.tolerance
    assert describe(r).startswith("no convention fits: the closest candidate, paper (base ")
    assert describe(r).endswith(
        f"is off by {r.residual:.3g} > tolerance {r.tolerance:.3g} (first positions searched: "
        "0..1048575)."
    )
    r = identify(analysis.float32_recipe(np.arange(2, 3000), 256, convention="tensor2tensor"))
    assert (r.outcome, r.within) == ("match", "float32")
    assert describe(r).startswith("a tensor2tensor (base 10000, positions 2..2999) table")
    assert describe(r).endswith(", within the error of a table computed in float32).")


def test_describe_precision_reports() -> None:
    report = analysis.precision_report(1000, 8)
    assert report.merged == (("recipe in float32", "float32 recipe"),)
    expected = "the recipe carried out in float32 is the float32 recipe itself (listed once)"
    assert describe(report) == expected
    for dtype in ("bfloat16", "float16", "float64"):
        report = analysis.precision_report(1000, 8, dtype)
        assert report.merged == ()
        assert describe(report) == ""


def test_describe_rejects_other_results() -> None:
    accepted = (
        r"result must be an Identification \(from posenc.analysis.identify\) or a "
        r"PrecisionReport \(from posenc.analysis.precision_report\), got "
    )
    with pytest.raises(TypeError, match=accepted + r"Wavelengths\(.* \(Wavelengths\)"):
        describe(analysis.wavelengths(8))
    with pytest.raises(TypeError, match=accepted + r"'a paper table' \(str\)"):
        describe("a paper table")
    with pytest.raises(TypeError, match=accepted + r"None \(NoneType\)"):
        describe(None)
    assert "describe" in posenc.__all__
