"""``posenc inspect``: the properties of one configuration, computed, as a readable report.

Four sections, each from :mod:`posenc.analysis`:

- wavelengths λ_k = 2π/ω_k per channel pair and their common ratio;
- the relative-shift check: max |PE[p+k] - M_k PE[p]| over positions 0 .. L-1, for the
  float64 and float32 tables;
- how many of the positions 0 .. L-1 stay distinct in float32, bfloat16 and float16;
- the precision report: max error below ``--max-position`` of posenc, of the usual float32
  recipe and of that recipe carried out in bfloat16.

``--json`` prints the same numbers as one JSON object.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .._checks import check_base, check_int
from ._common import add_encoding_options, add_subcommand

HELP = "wavelengths, shift check, distinct rows and precision report of a configuration"


def add_parser(sub: Any) -> None:
    parser = add_subcommand(sub, "inspect", HELP, __doc__)
    add_encoding_options(parser, d_model=512)
    parser.add_argument(
        "--length",
        type=int,
        default=4096,
        metavar="L",
        help="positions 0 .. L-1 for the shift check and distinct rows (default 4096)",
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
    from .._sinusoidal import sinusoidal

    d_model = check_int("--d-model", args.d_model, minimum=1)
    base = check_base("--base", args.base)
    length = check_int("--length", args.length, minimum=2)
    max_position = check_int("--max-position", args.max_position, minimum=1)
    conv = args.convention
    setting = {"d_model": d_model, "base": base, "convention": conv}
    for k in args.shift:
        if not 0 < abs(k) < length:
            raise ValueError(f"--shift must satisfy 0 < |k| < --length ({length}), got {k}")

    tables = {
        dt: sinusoidal(length, d_model, base=base, convention=conv, dtype=dt)
        for dt in ("float64", "float32")
    }
    shifts = [
        {"k": k}
        | {dt: analysis.check_shift(t, k, base=base, convention=conv) for dt, t in tables.items()}
        for k in args.shift
    ]
    distinct = [
        analysis.distinct_rows(tables["float64"], dt).as_dict()
        for dt in ("float32", "bfloat16", "float16")
    ]
    reports = [
        analysis.precision_report(max_position, d_model, dt, base=base, convention=conv)
        for dt in ("float32", "bfloat16")
    ]
    precision = [r.as_dict() | {"note": describe(r)} for r in reports]
    waves = analysis.wavelengths(d_model, base=base, convention=conv).as_dict()
    return {
        "setting": setting,
        "length": length,
        "wavelengths": waves,
        "shift": shifts,
        "distinct_rows": distinct,
        "precision": precision,
    }


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

    lines += [
        "",
        f"Relative shift: max |PE[p+k] - M_k PE[p]| over positions 0 .. {length - 1}",
        f"  {'k':>5}  {'float64 table':>14}  {'float32 table':>14}",
    ]
    for row in report["shift"]:
        lines.append(f"  {row['k']:>5}  {row['float64']:>14.2e}  {row['float32']:>14.2e}")

    lines += ["", f"Distinct rows among positions 0 .. {length - 1}"]
    for row in report["distinct_rows"]:
        dup = row["first_duplicate"]
        first = "" if dup is None else f"  (first repeat: rows {dup[0]} and {dup[1]})"
        lines.append(f"  {row['dtype']:>9}  {row['distinct']:>9} of {row['rows']}{first}")

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
