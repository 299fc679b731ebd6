"""``posenc inspect``: the properties of one configuration, computed, as a readable report.

Four sections, each from :mod:`posenc.analysis`:

- wavelengths λ_k = 2π/ω_k per channel pair and their common ratio;
- the relative-shift check: max |PE[p+k] - M_k PE[p]| over positions 0 .. L-1, for the
  float64 and float32 tables;
- how many of the positions 0 .. L-1 stay distinct in float32, bfloat16 and float16;
- the precision report: max error below ``--max-position`` of posenc, of the usual float32
  recipe and of that recipe carried out in bfloat16.

Lengths up to 8192 are checked at every position. Longer ones, up to 2**53 + 1, are checked
at 8192 sampled positions (the first 2048, the last 2048 and 4096 evenly spaced between), so
time and memory stay bounded at any length; the report then says which sections were sampled.

``--json`` prints the same numbers as one JSON object.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import MAX_EXACT_POSITION, check_int, sized_by
from .._features import feature_slices, sin_cos_pairs
from .._frequencies import check_schedule_base
from .._sinusoidal import sinusoidal
from ._common import add_encoding_options, add_subcommand, check_d_model, check_length_option

HELP = "wavelengths, shift check, distinct rows and precision report of a configuration"

#: Most positions a section evaluates: lengths up to this are checked at every position,
#: longer ones at this many sampled positions (see :func:`sample_positions`).
MAX_ROWS = 8192
_EDGE = MAX_ROWS // 4  # consecutive positions sampled at each end


def add_parser(sub: Any) -> None:
    parser = add_subcommand(sub, "inspect", HELP, __doc__)
    add_encoding_options(parser, d_model=512)
    parser.add_argument(
        "--length",
        type=int,
        default=4096,
        metavar="L",
        help="positions 0 .. L-1 for the shift check and distinct rows (default 4096; "
        f"above {MAX_ROWS}, {MAX_ROWS} sampled positions)",
    )
    parser.add_argument(
        "--shift",
        type=int,
        nargs="+",
        default=[1, 10, 100],
        metavar="K",
        help="shifts k to check (default 1 10 100)",
    )
    parser.add_argument(
        "--max-position",
        type=int,
        default=10**6,
        metavar="P",
        help="precision report over positions below P (default 1000000)",
    )
    parser.add_argument(
        "--all", action="store_true", help="list every wavelength (default: first and last 4)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with sized_by(positions="--length", d_model="--d-model"):  # sizes named as options
        report = build_report(args)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report, show_all=args.all))
    return 0


def build_report(args: argparse.Namespace) -> dict[str, Any]:
    """Every number of the report, as plain Python values (what ``--json`` prints)."""
    from .. import analysis
    from .._describe import describe

    d_model = check_d_model(args.d_model)
    base = check_schedule_base("--base", args.base)
    length = check_length_option(args.length, minimum=2)
    max_position = check_int("--max-position", args.max_position, minimum=1)
    if max_position > MAX_EXACT_POSITION:
        raise ValueError(
            "--max-position must be at most 2**53 (float64 holds positions exactly up to "
            f"there), got {max_position}"
        )
    conv = args.convention
    setting = {"d_model": d_model, "base": base, "convention": conv}
    for k in args.shift:
        if not 0 < abs(k) < length:
            raise ValueError(f"--shift must satisfy 0 < |k| < --length ({length}), got {k}")

    if length <= MAX_ROWS:
        shifts, distinct = _every_position(length, args.shift, d_model, base, conv)
        sample = None
    else:
        shifts, distinct = _sampled(length, args.shift, d_model, base, conv)
        sample = {"positions": MAX_ROWS, "first": _EDGE, "last": _EDGE}
    reports = [
        analysis.precision_report(max_position, d_model, dt, base=base, convention=conv)
        for dt in ("float32", "bfloat16")
    ]
    precision = [r.as_dict() | {"note": describe(r)} for r in reports]
    waves = analysis.wavelengths(d_model, base=base, convention=conv).as_dict()
    return {
        "setting": setting,
        "length": length,
        "sample": sample,
        "wavelengths": waves,
        "shift": shifts,
        "distinct_rows": distinct,
        "precision": precision,
    }


_Sections = tuple[list[dict[str, Any]], list[dict[str, Any]]]
_DTYPES = ("float32", "bfloat16", "float16")


def _every_position(length: int, ks: list[int], d_model: int, base: float, conv: Any) -> _Sections:
    """The shift check and distinct rows over every position ``0 .. length-1``."""
    from .. import analysis

    tables = {
        dt: sinusoidal(length, d_model, base=base, convention=conv, dtype=dt)
        for dt in ("float64", "float32")
    }
    shifts = [
        {"k": k}
        | {dt: analysis.check_shift(t, k, base=base, convention=conv) for dt, t in tables.items()}
        for k in ks
    ]
    distinct = [analysis.distinct_rows(tables["float64"], dt).as_dict() for dt in _DTYPES]
    return shifts, distinct


def _sampled(length: int, ks: list[int], d_model: int, base: float, conv: Any) -> _Sections:
    """The same sections at most :data:`MAX_ROWS` positions each (``length > MAX_ROWS``)."""
    from .. import analysis

    shifts = []
    for k in ks:
        starts = sample_positions(max(0, -k), length - max(0, k))  # p and p + k in range
        row: dict[str, Any] = {"k": k}
        for dt in ("float64", "float32"):
            row[dt] = shift_residual(starts, k, d_model, base, conv, dt)
        shifts.append(row)
    positions = sample_positions(0, length)
    table = sinusoidal(positions, d_model, base=base, convention=conv, dtype=np.float64)
    distinct = []
    for dt in _DTYPES:
        found = analysis.distinct_rows(table, dt).as_dict()
        if found["first_duplicate"] is not None:  # rows of the sample -> positions
            found["first_duplicate"] = [int(positions[i]) for i in found["first_duplicate"]]
        distinct.append(found)
    return shifts, distinct


def sample_positions(start: int, stop: int) -> npt.NDArray[np.int64]:
    """At most :data:`MAX_ROWS` sorted positions of ``start .. stop-1``: all of them when they
    are few enough, else the first and last ``MAX_ROWS // 4`` and ``MAX_ROWS // 2`` evenly
    spaced between.

    >>> sample_positions(5, 9).tolist()
    [5, 6, 7, 8]
    >>> p = sample_positions(0, 10**9)
    >>> len(p), p[:2].tolist(), p[-2:].tolist()
    (8192, [0, 1], [999999998, 999999999])
    """
    if stop - start <= MAX_ROWS:
        return np.arange(start, stop, dtype=np.int64)
    low, high = start + _EDGE, stop - _EDGE - 1
    between = np.round(np.linspace(low, high, MAX_ROWS - 2 * _EDGE)).astype(np.int64)
    head = np.arange(start, low, dtype=np.int64)
    tail = np.arange(high + 1, stop, dtype=np.int64)
    return np.concatenate([head, np.clip(between, low, high), tail])


def shift_residual(
    starts: npt.NDArray[np.int64], k: int, d_model: int, base: float, conv: Any, dtype: str
) -> float:
    """``max |PE[p+k] - M_k PE[p]|`` over the positions ``p`` in ``starts``, in ``dtype``.

    What :func:`posenc.analysis.check_shift` computes for consecutive rows, for any positions:
    the rows ``p`` and ``p + k`` are built directly, and an unpaired sine column is left out.
    """
    from .. import analysis

    before = sinusoidal(starts, d_model, base=base, convention=conv, dtype=dtype)
    after = sinusoidal(starts + k, d_model, base=base, convention=conv, dtype=dtype)
    m = analysis.shift_matrix(k, d_model, base=base, convention=conv, unpaired="drop")
    keep = np.ones(d_model, dtype=bool)
    keep[sin_cos_pairs(feature_slices(d_model, conv), d_model).unpaired] = False
    predicted = before.astype(np.float64) @ m.T
    diff = after.astype(np.float64)[:, keep] - predicted[:, keep]
    return float(np.max(np.abs(diff))) if diff.size else 0.0


def format_report(report: dict[str, Any], *, show_all: bool = False) -> str:
    """The report as aligned text."""
    s = report["setting"]
    length = report["length"]
    w = report["wavelengths"]
    lines = [
        f"posenc inspect: convention={s['convention']} base={s['base']:g} d_model={s['d_model']}"
    ]

    n = len(w["wavelengths"])
    ratio = "" if w["ratio"] is None else f", common ratio {w['ratio']:.6g}"
    lines += [
        "",
        f"Wavelengths 2*pi/w_k (in positions): {n} pairs from {w['shortest']:.6g} "
        f"to {w['longest']:.6g}{ratio}",
        f"  {'k':>5}  {'w_k':>12}  {'wavelength':>12}",
    ]
    shown = range(n) if show_all or n <= 8 else [*range(4), None, *range(n - 4, n)]
    for k in shown:
        if k is None:
            lines.append(f"  {'...':>5}  (--all lists all {n})")
            continue
        lines.append(f"  {k:>5}  {w['frequencies'][k]:>12.6g}  {w['wavelengths'][k]:>12.6g}")

    sample = report.get("sample")
    note = [] if sample is None else [f"  (sampled: {_sample_note(sample)})"]
    wide = max([5, *(len(str(row["k"])) for row in report["shift"])])
    lines += [
        "",
        f"Relative shift: max |PE[p+k] - M_k PE[p]| over positions 0 .. {length - 1}",
        *note,
        f"  {'k':>{wide}}  {'float64 table':>14}  {'float32 table':>14}",
    ]
    for row in report["shift"]:
        lines.append(f"  {row['k']:>{wide}}  {row['float64']:>14.2e}  {row['float32']:>14.2e}")

    lines += ["", f"Distinct rows among positions 0 .. {length - 1}", *note]
    of = "" if sample is None else " sampled"
    for row in report["distinct_rows"]:
        dup = row["first_duplicate"]
        first = "" if dup is None else f"  (first repeat: rows {dup[0]} and {dup[1]})"
        lines.append(f"  {row['dtype']:>9}  {row['distinct']:>9} of {row['rows']}{of}{first}")

    for rep in report["precision"]:
        lines += [
            "",
            f"Precision ({rep['dtype']}): max |table - exact| over all channels of "
            f"{len(rep['positions'])} positions below {rep['max_position']:,}",
        ]
        for m in rep["methods"]:
            lines.append(
                f"  {m['name']:<34} {m['max_error']:>9.2e}  at position "
                f"{m['worst_position']:,}, channel {m['worst_channel']}"
            )
        if rep.get("note"):
            lines.append(f"  ({rep['note']})")
    return "\n".join(lines)


def _sample_note(sample: dict[str, int]) -> str:
    """``8,192 positions: the first 2,048, the last 2,048 and 4,096 evenly spaced between``."""
    between = sample["positions"] - sample["first"] - sample["last"]
    return (
        f"{sample['positions']:,} positions: the first {sample['first']:,}, the last "
        f"{sample['last']:,} and {between:,} evenly spaced between"
    )
