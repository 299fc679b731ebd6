"""``posenc demo``: the encoding of the seeds, computed exactly, in a few seconds."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from ..sinusoidal import sinusoidal

HELP = "print the seed-sized table (10 x 8) and run the PyTorch module on the seed-000 batch"


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("demo", help=HELP, description=HELP)
    parser.set_defaults(run=run)


def _buggy_cosine_table(length: int, d_model: int) -> np.ndarray:
    """Seed 001's table: its cosine uses odd exponents 10000^((2i+1)/d) (a bug)."""
    pos = np.arange(length, dtype=np.float64)[:, None]
    table = np.empty((length, d_model))
    table[:, 0::2] = np.sin(pos / 10000.0 ** (np.arange(0, d_model, 2) / d_model))
    table[:, 1::2] = np.cos(pos / 10000.0 ** (np.arange(1, d_model, 2) / d_model))
    return table


def run(args: argparse.Namespace) -> int:
    with np.printoptions(precision=4, suppress=True, linewidth=100):
        return _demo()


def _demo() -> int:
    table = sinusoidal(10, 8)
    print("posenc.sinusoidal(10, 8)  # paper convention, float64 rounded once to float32")
    print(table)

    buggy = _buggy_cosine_table(10, 8)
    worst = float(np.max(np.abs(buggy - sinusoidal(10, 8, dtype=np.float64))))
    print(
        "\nSeed 001 computes its cosine with odd exponents 10000^((2i+1)/d): "
        f"its 10 x 8 table is off by up to {worst:.3f} (its sine columns are right)."
    )

    try:
        import torch

        from ..torch import SinusoidalPositionalEncoding
    except ImportError:
        print("\nPyTorch is not installed: skipping the module demo (pip install 'posenc[torch]').")
        return 0

    x = torch.arange(1, 49, dtype=torch.float32).reshape(2, 4, 6)
    module = SinusoidalPositionalEncoding(6, dropout=0.1).eval()
    print("\nSeed 000's toy batch: x = arange(1, 49).reshape(2, 4, 6), batch-first (b, s, d)")
    print(module)
    with torch.no_grad():
        out = module(x)
        expected = x + module.encoding(4)
    print("module(x) (eval mode, so no dropout):")
    print(out.numpy())
    same = bool(torch.equal(out, expected))
    print(f"module(x) == x + module.encoding(4) for both sequences: {same}")
    return 0
