"""``posenc demo``: the sinusoidal encoding computed exactly, its properties checked, and figures.

In about ten seconds it prints a 10 x 8 table, runs the PyTorch module on a toy batch, states each
property of the encoding and verifies it with a number (:mod:`posenc.analysis`), shows what the
odd-exponent cosine bug of a common tutorial implementation does, and writes the figures of
:mod:`posenc.plot` to ``--out`` (default ``./posenc-demo``). Without PyTorch or matplotlib the
corresponding part is skipped with a note saying what to install.

The folder and its figure files are checked before anything is computed: figures already there
are replaced only with ``--force``, and each is written whole or not at all. Every line is
flushed as soon as it is printed, and each figure is announced before it is drawn, so a pipe or
a log shows the progress as it happens.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

import numpy as np

from .. import analysis
from .._describe import describe
from .._sinusoidal import sinusoidal
from ._common import add_force_option, add_subcommand
from ._output import Output

HELP = "a small table, a toy batch and every property of the encoding, checked; figures"

#: The d_model of the properties printed and of most figures: the paper's base model.
D_MODEL = 512

#: The figures written by the demo, in the order the tutorial shows them: file stem → (plot
#: kind, keyword arguments). Each file is named after the kind, so ``posenc plot KIND`` draws
#: the demo's ``KIND.png``. The heatmap has 128 channels so that each column stays wider than a
#: pixel at the README's width; the rotation figure is the tutorial's example (pair 1 of
#: d_model = 8, moved from position 5 to 8).
FIGURES: dict[str, tuple[str, dict[str, Any]]] = {
    "heatmap": ("heatmap", {"length": 100, "d_model": 128}),
    "sinusoids": ("sinusoids", {"length": 200, "d_model": D_MODEL}),
    "wavelengths": ("wavelengths", {"d_model": D_MODEL}),
    "rotation": ("rotation", {"p": 5, "k": 3, "d_model": 8, "pair": 1}),
    "similarity": ("similarity", {"length": 200, "d_model": D_MODEL, "metric": "cosine"}),
    "shift": ("shift", {"max_position": 10**7, "d_model": D_MODEL}),
    "precision": ("precision", {"max_position": 10**7, "d_model": D_MODEL}),
}

#: One line each, printed before the figure is drawn.
_ABOUT = {
    "heatmap": "the table as an image, 100 positions x 128 channels",
    "sinusoids": "sine and cosine channels of three frequencies over 200 positions",
    "wavelengths": "the wavelength of each of the 256 pairs",
    "rotation": "one pair turning on the unit circle from position 5 to 8, and its block of M_3",
    "similarity": "cosine similarity of every two of 200 positions",
    "shift": "how exactly PE[p+k] = M_k PE[p] holds, up to position 10^7 (a few seconds)",
    "precision": "accuracy against position, up to 10^7",
}

#: ``print`` that flushes each line: the demo's progress shows in a pipe or a log as it happens.
say = functools.partial(print, flush=True)


def add_parser(sub: Any) -> None:
    parser = add_subcommand(sub, "demo", HELP, __doc__)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("posenc-demo"),
        metavar="DIR",
        help="folder for the figures (default ./posenc-demo; created if missing)",
    )
    parser.add_argument("--no-figures", action="store_true", help="skip the figures")
    add_force_option(parser)
    parser.set_defaults(run=run)


# Suffixes of files, not folders: ``--out pe.npy`` is a mistake, not a folder name.
_FILE_SUFFIXES = (".npy", ".npz", ".csv", ".json", ".txt", ".png", ".svg", ".pdf")


def run(args: argparse.Namespace) -> int:
    outputs = {} if args.no_figures else _figure_outputs(args.out, args.force)
    with np.printoptions(precision=4, suppress=True, linewidth=100):
        _table()
        _toy_batch()
        _properties()
        _odd_exponent_bug()
    if outputs:
        _figures(args.out, outputs)
    return 0


def _figure_outputs(folder: Path, force: bool) -> dict[str, Output]:
    """The figure files, by stem, each checked (the folder may still have to be created)."""
    if folder.suffix.lower() in _FILE_SUFFIXES:
        raise ValueError(
            f"--out names the folder for the figures, got {str(folder)!r}, a file name "
            f"(the demo writes {', '.join(f'{stem}.png' for stem in FIGURES)} into it)"
        )
    outputs = {}
    for stem in FIGURES:
        outputs[stem] = Output(folder / f"{stem}.png", force=force, make_folder=True)
        outputs[stem].check()
    return outputs


def _heading(text: str) -> None:
    say(f"\n== {text} ".ljust(78, "="))


def _table() -> None:
    _heading("1. The table (10 positions x 8 channels)")
    say(
        "Row p is the position p; channels 2i and 2i+1 hold sin(p*w_i) and cos(p*w_i), with\n"
        "w_i = 10000^(-2i/8). posenc computes every angle and value in float64, and each value\n"
        "is rounded once (a single rounding, from float64 to the dtype asked for).\n"
        "posenc.sinusoidal(10, 8)  # paper convention, base 10000, float32"
    )
    say(sinusoidal(10, 8))


def _toy_batch() -> None:
    _heading("2. A toy batch through the PyTorch module")
    try:
        import torch

        from ..torch import SinusoidalPositionalEncoding
    except ImportError:
        say("PyTorch is not installed: skipping the module demo (pip install torch).")
        return
    x = torch.arange(1, 49, dtype=torch.float32).reshape(2, 4, 6)
    module = SinusoidalPositionalEncoding(6, dropout=0.1).eval()
    say("x = arange(1, 49).reshape(2, 4, 6), batch-first (b, s, d)")
    say(module)
    with torch.no_grad():
        out = module(x)
        expected = x + module.encoding(4)
    say("module(x) (eval mode, so no dropout):")
    say(out.numpy())
    same = bool(torch.equal(out, expected))
    say(f"module(x) == x + module.encoding(4) for both sequences: {same}")


def _properties() -> None:
    d = D_MODEL
    _heading(f"3. The properties of the encoding, checked (d_model = {d}, base 10000)")
    w = analysis.wavelengths(d)
    ratio = w.ratio if w.ratio is not None else float("nan")  # None only when d_model < 4
    say(
        "Wavelengths form a geometric progression from 2*pi towards "
        f"base*2*pi = {2e4 * np.pi:.0f}:\n"
        f"  {len(w.wavelengths)} pairs, from {w.shortest:.4f} to {w.longest:.1f} positions, "
        f"each {ratio:.6f} times the previous\n"
        f"  (largest deviation from that ratio: {np.max(np.abs(w.ratios / ratio - 1)):.1e})"
    )

    say(
        "Shifting by k positions turns each (sin, cos) pair by the angle k*w_i, whatever p is.\n"
        "M_k, the matrix of those 2x2 rotations, one per pair, maps every row to the row k\n"
        "positions later: PE[p+k] = M_k PE[p]. The residual, max |PE[p+k] - M_k PE[p]| over\n"
        "1024 positions from p0, is rounding in the table. The float32 recipe is the usual code,\n"
        "which computes the angles in float32 (the PyTorch tutorial's):"
    )
    for start in (0, 10**6):
        positions = np.arange(start, start + 1024)
        tables = {
            "float64 table": sinusoidal(positions, d, dtype=np.float64),
            "float32 table": sinusoidal(positions, d),
            "float32 recipe": analysis.float32_recipe(positions, d),
        }
        for k in (1, 100):
            say(
                f"  p0 = {start:>9,}, k = {k:>3}: "
                + ", ".join(f"{analysis.check_shift(t, k):.1e} ({n})" for n, t in tables.items())
            )

    sim = analysis.similarity(200, d, metric="cosine")
    at = {k: float(sim.profile[k]) for k in (0, 1, 2, 5, 10, 50, 100)}
    say("Nearby positions look alike: cosine similarity of PE[p] and PE[p+k]:")
    say("  " + "   ".join(f"k={k}: {v:.3f}" for k, v in at.items()))

    say("Distinct positions: how many positions keep distinct rows once rounded to a dtype:")
    for dim, length in ((512, 10**4), (4, 10**5), (2, 10**5)):
        counts = [
            analysis.distinct_rows(length, dt, d_model=dim)
            for dt in ("float32", "bfloat16", "float16")
        ]
        say(
            f"  d_model = {dim:>3}, positions 0 .. {length - 1:,}: "
            + ", ".join(f"{c.dtype} {c.distinct:,}" for c in counts)
        )

    report = analysis.precision_report(10**6, d)
    errors = {m.name: m.max_error for m in report.methods}
    say(
        "Accuracy below position 1,000,000 (max |table - exact|, float32; one unit in the last "
        "place (ulp) of float32 is 6e-8 just below 1): "
        + ", ".join(f"{name} {err:.1e}" for name, err in errors.items())
    )


def _odd_exponent_bug() -> None:
    _heading("4. The odd-exponent cosine bug")
    buggy = analysis.odd_exponent_table(10, 8, dtype=np.float64)
    correct = sinusoidal(10, 8, dtype=np.float64)
    worst = float(np.max(np.abs(buggy - correct)))
    say(
        "A common tutorial implementation computes its cosine with odd exponents "
        "10000^((2i+1)/d):\n"
        f"its 10 x 8 table is off by up to {worst:.3f} (its sine columns are right), and PE[p+1]\n"
        "is no longer a fixed linear map of PE[p] "
        f"(residual {analysis.check_shift(buggy, 1):.2f}; the correct table's is "
        f"{analysis.check_shift(correct, 1):.0e})."
    )
    found = analysis.identify(analysis.odd_exponent_table(64, 8))
    say(f"posenc.analysis.identify on its table: {describe(found)}")


def _figures(folder: Path, outputs: dict[str, Output]) -> None:
    _heading("5. Figures")
    try:
        from .. import plot
    except ImportError as exc:
        say(f"{exc}: skipping the figures.")
        return
    say(f"{len(FIGURES)} figures, written to {folder}/ (choose the folder with --out DIR):")
    for n, (stem, (kind, kwargs)) in enumerate(FIGURES.items(), 1):
        say(f"  [{n}/{len(FIGURES)}] {stem}.png: {_ABOUT[stem]} ...")
        with outputs[stem].writing() as temp:
            plot.PLOTS[kind](**kwargs, path=temp)
        say(f"        wrote {outputs[stem].path}")
