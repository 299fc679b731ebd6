"""The benchmark suite in one run: ``python -m benchmarks [--quick] [--only SECTION ...]``.

Run from the repository root with the package importable (``PYTHONPATH=src:.`` or installed)::

    python -m benchmarks                 # the full run (issue shapes, >= 7 repeats)
    python -m benchmarks --quick         # small shapes, 3 repeats (< 1 minute)
    python -m benchmarks --smoke         # --quick, printing one line per section: does it run?
    python -m benchmarks --only tables memory
    python -m benchmarks --busy          # the fast paths quiet and beside one busy core

Prints the machine (CPU, cores, versions, threads), runs each section, then prints one combined
table of timings with their ratios to the references measured in the same run, followed by the
sections' notes (e.g. the memory report). Sections: ``tables`` (table build), ``add`` (adding
the encoding: eval, in-place, train with dropout, embedding), ``rope`` (rotary apply),
``memory`` (peak memory and the module's cache), ``plan`` (``posenc plan`` on configs of
2^12 to 2^16 layers), ``bias`` (ALiBi attention: FlexAttention ``score_mod`` against SDPA
with a materialised bias and transformers' BLOOM path, time and peak memory), ``audit``
(``posenc audit`` on a GGUF file of at least 1 GiB, from a cold process, without torch) and
``jax`` (posenc.jax's jitted RoPE against a jnp recipe and a copy, and its table build). A section
whose module is missing or whose dependencies are not installed is skipped with the reason; a
section that fails is reported and makes the exit status 1 once the others have run.
``--busy`` runs ``benchmarks/busy.py`` instead: the fast paths' ratios to clone on a quiet
machine and beside one busy core, with default threads and with one (not run by ``--smoke``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import sys
import time
import traceback

from benchmarks.harness import Table, environment

SECTIONS = ("tables", "add", "rope", "memory", "plan", "bias", "audit", "jax")


def run_section(name: str, table: Table, *, quick: bool) -> str:
    """Run one section into ``table``; return ``"ok"``, ``"skipped: ..."`` or ``"failed"``."""
    if importlib.util.find_spec(f"benchmarks.{name}") is None:
        return f"skipped: benchmarks/{name}.py is not present"
    try:
        module = importlib.import_module(f"benchmarks.{name}")
    except ImportError as exc:  # a dependency of the section (torch, a peer) is missing
        return f"skipped: {exc}"
    try:
        module.run(table, quick=quick)
    except Exception:
        traceback.print_exc()
        return "failed"
    return "ok"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="small shapes, 3 repeats")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="--quick, but print only whether each section ran (what make test runs)",
    )
    parser.add_argument(
        "--busy",
        action="store_true",
        help="the fast paths quiet and beside a process keeping one core busy (not in --smoke)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=SECTIONS,
        metavar="SECTION",
        help=f"run only these sections (from {', '.join(SECTIONS)})",
    )
    args = parser.parse_args(argv)
    quick = args.quick or args.smoke
    if args.busy:
        if args.smoke or args.only:
            parser.error("--busy runs alone: without --smoke or --only")
        from benchmarks import busy

        print(environment({"mode": ("quick" if quick else "full") + ", busy"}))
        print()
        print(busy.run(quick=quick))
        return 0
    if not args.smoke:
        print(environment({"mode": "quick" if quick else "full"}))
        print()
    table = Table()
    outcomes = {}
    started = time.perf_counter()
    for name in args.only or SECTIONS:
        if name in outcomes:
            continue
        if not args.smoke:
            print(f"[{name}] running ...", flush=True)
        section_start = time.perf_counter()
        if args.smoke:  # the sections' own progress lines are not wanted here
            with contextlib.redirect_stdout(io.StringIO()):
                outcomes[name] = run_section(name, table, quick=True)
        else:
            outcomes[name] = run_section(name, table, quick=quick)
        took = time.perf_counter() - section_start
        print(f"[{name}] {outcomes[name]} ({took:.1f} s)", flush=True)
    if args.smoke:
        rows = len(table.rows)
        print(
            f"benchmark smoke run: {rows} timings in {time.perf_counter() - started:.1f} s "
            "(numbers not checked here; the full table: python -m benchmarks)"
        )
        return 1 if "failed" in outcomes.values() else 0
    print()
    if table.rows:
        print(table.render())
    notes = table.render_notes()
    if notes:
        print()
        print(notes)
    print()
    print(f"sections: {', '.join(f'{k} {v}' for k, v in outcomes.items())}")
    print(f"total {time.perf_counter() - started:.1f} s")
    return 1 if "failed" in outcomes.values() else 0


if __name__ == "__main__":
    sys.exit(main())
