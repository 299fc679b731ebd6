"""English for the results of :mod:`posenc.analysis`: :func:`describe`.

The analysis results hold numbers and short identifiers only (an :class:`Identification`'s
``outcome``, ``within``, ``closest``, ...); every sentence about them is composed here, from
those fields, so that the command line, the demo and any other caller say the same thing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._checks import _show
from .analysis._results import Candidate, Identification, PrecisionReport

__all__ = ["describe", "describe_for_cli"]

_WITHIN = {
    "rounding": "within the table's rounding",
    "float32": "within the error of a table computed in float32",
}


def describe(result: Any) -> str:
    """One sentence saying what an analysis result found.

    Args:
        result: an :class:`~posenc.analysis.Identification` (from
            :func:`posenc.analysis.identify`): what was found, with the residual and the
            tolerance it fits; or a :class:`~posenc.analysis.PrecisionReport` (from
            :func:`posenc.analysis.precision_report`): its remarks, ``""`` when it has none.

    Returns:
        The sentence, a ``str``.

    Raises:
        TypeError: ``result`` is of another type.

    >>> from posenc import analysis, sinusoidal
    >>> print(describe(analysis.identify(sinusoidal(10, 8))))
    a paper (base 10000, positions 0..9) table (max residual 3e-08, within the table's rounding).
    >>> describe(analysis.precision_report(1000, 8))
    'the recipe carried out in float32 is the float32 recipe itself (listed once)'
    """
    if isinstance(result, Identification):
        return _identification(result)
    if isinstance(result, PrecisionReport):
        return _precision_report(result)
    raise TypeError(
        "result must be an Identification (from posenc.analysis.identify) or a "
        "PrecisionReport (from posenc.analysis.precision_report), got "
        f"{_show(result)} ({type(result).__name__})"
    )


def _candidate(c: Candidate, length: int) -> str:
    """``"paper (base 10000, positions 2..49)"``: a candidate for a table of ``length`` rows."""
    name = c.convention if c.bug is None else f"{c.convention} with the {c.bug} bug"
    return f"{name} ({_where(c, length)})"


def _where(c: Candidate, length: int) -> str:
    """``"base 10000, positions 2..49"``: the base and the positions of a candidate."""
    base = "any base" if c.base is None else f"base {c.base:.15g}"
    if c.offset is None:
        positions = "any positions"
    elif length == 1:
        positions = f"position {c.offset}"
    else:
        positions = f"positions {c.offset}..{c.offset + length - 1}"
    return f"{base}, {positions}"


def describe_for_cli(r: Identification) -> str:
    """:func:`describe` for ``posenc identify``: its hints name the command's options
    (``--skip-rows``, ``--max-offset``) instead of Python slices and arguments."""
    return _identification(r, cli=True)


def _identification(r: Identification, cli: bool = False) -> str:
    if r.transposed:
        as_given = dataclasses.replace(r, transposed=False)
        return "the table looks transposed, (d_model, L); as table.T it is " + _identification(
            as_given, cli
        )
    length, d_model = r.rows, r.d_model
    if r.outcome == "non_finite":
        return "no convention fits: the table contains NaN or infinity."
    if r.outcome == "all_zero":
        return (
            "no convention fits: the table is all zeros (only tensor2tensor and musicgen "
            f"with d_model=1 are), got d_model={d_model}."
        )
    closest = r.closest
    if closest is None:  # only "non_finite" has no closest candidate
        raise ValueError(f"an Identification with outcome {r.outcome!r} needs a closest candidate")
    if r.outcome in ("no_fit", "no_offset", "off_circle"):
        return _no_fit(r, closest, length, cli)
    within = _WITHIN[r.within or "rounding"]
    if r.outcome == "bug":
        return (
            f"no convention fits: this is a table with the {r.bug} bug (a bug found in tutorial "
            f"code): the sine columns match the paper table ({_where(closest, length)}) but the "
            "cosine columns use base^((2i+1)/d) instead of base^(2i/d) "
            f"(max residual {r.residual:.2g}, {within})."
        )
    if r.outcome == "ambiguous":
        shown = "; ".join(_candidate(c, length) for c in r.alternatives[:4])
        more = f" and {len(r.alternatives) - 4} more" if len(r.alternatives) > 4 else ""
        text = (
            f"ambiguous: {len(r.alternatives)} answers fit equally well ({shown}{more}); "
            "the fields on which they differ are None"
        )
    else:
        text = f"a {_candidate(closest, length)} table (max residual {r.residual:.2g}, {within})"
        if r.base is None:
            text += "; the base has no effect on it"
        if r.offset is None:
            text += "; the positions have no effect on it"
    if r.base_guessed:
        text += "; from a single row, the base was chosen among a few common ones"
    return text + "."


def _beyond(max_offset: int | None, cli: bool = False) -> str:
    """``"max_offset = 1048576"`` (``"1048576 (--max-offset)"`` for the command), or the
    bare name when it is not known."""
    if cli:
        return "--max-offset" if max_offset is None else f"{max_offset} (--max-offset)"
    return "max_offset" if max_offset is None else f"max_offset = {max_offset}"


def _no_fit(r: Identification, closest: Candidate, length: int, cli: bool) -> str:
    if r.outcome == "no_fit":
        text = (
            f"no convention fits: the closest candidate, {_candidate(closest, length)}, is off "
            f"by {r.residual:.3g} > tolerance {r.tolerance:.3g}"
        )
        if r.max_offset is not None:
            further = "; --max-offset searches further" if cli and r.max_offset < 2**24 else ""
            text += f" (first positions searched: 0..{r.max_offset - 1}{further})"
    elif r.outcome == "no_offset":
        text = (
            f"no convention fits with a first position below {_beyond(r.max_offset, cli)}: the "
            f"columns look like {closest.convention}'s sines and cosines, but no first "
            "position in range fits their phases, so the first position may be "
            f"{_beyond(r.max_offset, cli)} or more "
            + (
                "(--max-offset searches further, up to 2**24)"
                if cli
                else "(identify searches up to max_offset = 2**24)"
            )
        )
    else:
        text = (
            "no convention fits: under every convention's layout the (sin, cos) column "
            f"pairs are off the unit circle (by >= {r.residual:.3g}): not (sin, cos) pairs, "
            "as a RoPE cos or sin table alone, a table times a factor, or noise"
        )
    if r.zero_row is not None:
        skip = r.zero_row + 1
        text += (
            f"; row {r.zero_row} is all zeros, as in fairseq-style tables that zero the "
            "padding row: skip the rows up to it "
            + (
                f"(--skip-rows {skip})"
                if cli
                else f"(posenc identify --skip-rows {skip}; table[{skip}:] in Python)"
            )
        )
    return text + "."


def _precision_report(report: PrecisionReport) -> str:
    remarks = [
        f"the {name.replace('recipe in', 'recipe carried out in')} is the {same} itself "
        "(listed once)"
        for name, same in report.merged
    ]
    return "; ".join(remarks)
