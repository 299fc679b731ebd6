"""``posenc demo``: the sinusoidal encoding computed exactly, its properties checked, and figures.

In a few seconds it prints a 10 x 8 table, runs the PyTorch module on a toy batch, states each
property of the encoding and verifies it with a number (:mod:`posenc.analysis`), shows what the
odd-exponent cosine bug of a common tutorial implementation does, and writes the figures of
:mod:`posenc.plot` to ``--out`` (default ``./posenc-demo``). Without PyTorch or matplotlib the
corresponding part is skipped with a note saying what to install.

The folder and its figure files are checked before anything is computed: figures already there
are replaced only with ``--force``, and each is written whole or not at all.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from .. import analysis
from .._describe import describe
from .._sinusoidal import sinusoidal
from ._common import add_force_option, add_subcommand
from ._output import Output

HELP = "a small table, a toy batch and every property of the encoding, checked; figures"

#: The one d_model of every figure (and of the properties printed): the paper's base model.
D_MODEL = 512

# The figures written by the demo: file stem → (plot kind, keyword arguments).
FIGURES: dict[str, tuple[str, dict[str, Any]]] = {
    "heatmap": ("heatmap", {"length": 200, "d_model": D_MODEL}),
    "sinusoids": ("sinusoids", {"length": 200, "d_model": D_MODEL}),
    "wavelengths": ("wavelengths", {"d_model": D_MODEL}),
    "shift": ("shift", {"max_position": 10**7, "d_model": D_MODEL}),
    "similarity": ("similarity", {"length": 200, "d_model": D_MODEL, "metric": "cosine"}),
    "precision": ("precision", {"max_position": 10**7, "d_model": D_MODEL}),
}


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
    print(f"\n== {text} ".ljust(78, "="))


def _table() -> None:
    _heading("1. The table (10 positions x 8 channels)")
    print(
        "posenc.sinusoidal(10, 8)  # paper convention, base 10000, float64 rounded once to float32"
    )
    print(sinusoidal(10, 8))


def _toy_batch() -> None:
    _heading("2. A toy batch through the PyTorch module")
    try:
        import torch

        from ..torch import SinusoidalPositionalEncoding
    except ImportError:
        print("PyTorch is not installed: skipping the module demo (pip install torch).")
        return
    x = torch.arange(1, 49, dtype=torch.float32).reshape(2, 4, 6)
    module = SinusoidalPositionalEncoding(6, dropout=0.1).eval()
    print("x = arange(1, 49).reshape(2, 4, 6), batch-first (b, s, d)")
    print(module)
    with torch.no_grad():
        out = module(x)
        expected = x + module.encoding(4)
    print("module(x) (eval mode, so no dropout):")
    print(out.numpy())
    same = bool(torch.equal(out, expected))
    print(f"module(x) == x + module.encoding(4) for both sequences: {same}")


def _properties() -> None:
    d = D_MODEL
    _heading(f"3. The properties of the encoding, checked (d_model = {d}, base 10000)")
    w = analysis.wavelengths(d)
    ratio = w.ratio if w.ratio is not None else float("nan")  # None only when d_model < 4
    print(
        "Wavelengths form a geometric progression from 2*pi towards "
        f"base*2*pi = {2e4 * np.pi:.0f}:\n"
        f"  {len(w.wavelengths)} pairs, from {w.shortest:.4f} to {w.longest:.1f} positions, "
        f"each {ratio:.6f} times the previous\n"
        f"  (largest deviation from that ratio: {np.max(np.abs(w.ratios / ratio - 1)):.1e})"
    )

    print(
        "PE[p+k] is a fixed linear map (rotation) M_k of PE[p]: max |PE[p+k] - M_k PE[p]| over "
        "1024 positions from p0:"
    )
    for start in (0, 10**6):
        positions = np.arange(start, start + 1024)
        tables = {
            "float64 table": sinusoidal(positions, d, dtype=np.float64),
            "float32 table": sinusoidal(positions, d),
            "float32 recipe": analysis.float32_recipe(positions, d),
        }
        for k in (1, 100):
            print(
                f"  p0 = {start:>9,}, k = {k:>3}: "
                + ", ".join(f"{analysis.check_shift(t, k):.1e} ({n})" for n, t in tables.items())
            )

    sim = analysis.similarity(200, d, metric="cosine")
    at = {k: float(sim.profile[k]) for k in (0, 1, 2, 5, 10, 50, 100)}
    print("Nearby positions look alike: cosine similarity of PE[p] and PE[p+k]:")
    print("  " + "   ".join(f"k={k}: {v:.3f}" for k, v in at.items()))

    print("Distinct positions: how many positions keep distinct rows once rounded to a dtype:")
    for dim, length in ((512, 10**4), (4, 10**5), (2, 10**5)):
        counts = [
            analysis.distinct_rows(length, dt, d_model=dim)
            for dt in ("float32", "bfloat16", "float16")
        ]
        print(
            f"  d_model = {dim:>3}, positions 0 .. {length - 1:,}: "
            + ", ".join(f"{c.dtype} {c.distinct:,}" for c in counts)
        )

    report = analysis.precision_report(10**6, d)
    errors = {m.name: m.max_error for m in report.methods}
    print(
        "Accuracy below position 1,000,000 (max |table - exact|, float32): "
        + ", ".join(f"{name} {err:.1e}" for name, err in errors.items())
    )


def _odd_exponent_bug() -> None:
    _heading("4. The odd-exponent cosine bug")
    buggy = analysis.odd_exponent_table(10, 8, dtype=np.float64)
    correct = sinusoidal(10, 8, dtype=np.float64)
    worst = float(np.max(np.abs(buggy - correct)))
    print(
        "A common tutorial implementation computes its cosine with odd exponents "
        "10000^((2i+1)/d):\n"
        f"its 10 x 8 table is off by up to {worst:.3f} (its sine columns are right), and PE[p+1]\n"
        "is no longer a fixed linear map of PE[p] "
        f"(residual {analysis.check_shift(buggy, 1):.2f}; the correct table's is "
        f"{analysis.check_shift(correct, 1):.0e})."
    )
    found = analysis.identify(analysis.odd_exponent_table(64, 8))
    print(f"posenc.analysis.identify on its table: {describe(found)}")


def _figures(folder: Path, outputs: dict[str, Output]) -> None:
    _heading("5. Figures")
    try:
        from .. import plot
    except ImportError as exc:
        print(f"{exc}: skipping the figures.")
        return
    print(f"written to {folder}/ (choose the folder with --out DIR):")
    for stem, (kind, kwargs) in FIGURES.items():
        with outputs[stem].writing() as temp:
            plot.PLOTS[kind](**kwargs, path=temp)
        print(f"  {outputs[stem].path}")
