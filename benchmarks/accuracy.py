"""Max error of posenc's float32 table vs the exact value (mpmath), next to the usual recipe.

Run from the repository root::

    python -m benchmarks.accuracy            # lengths 10^4, 10^6, 10^7, d_model = 512

For each length L it samples the last 32 positions below L and 32 random ones, evaluates all
``d_model`` channels exactly (mpmath, 40 digits) and reports the max absolute error of

- posenc: ``posenc.sinusoidal(..., dtype=float32)`` (float64 angles, one rounding);
- the PyTorch tutorial recipe, angles in float32 (``exp(arange * -log(10000)/d)``),
  evaluated in NumPy float32 (:func:`posenc.analysis.float32_recipe`).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import posenc
from posenc.analysis import float32_recipe
from tests.exact import exact_paper_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--lengths", type=int, nargs="+", default=[10**4, 10**6, 10**7])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"d_model = {args.d_model}; max |table - exact| over all channels of 64 positions < L")
    print(f"{'L':>10}  {'posenc float32':>15}  {'float32 recipe':>15}  {'seconds':>8}")
    for length in args.lengths:
        start = time.perf_counter()
        positions = np.unique(
            np.concatenate([np.arange(length - 32, length), rng.integers(0, length, 32)])
        )
        exact = exact_paper_table(positions, args.d_model)
        ours = np.abs(posenc.sinusoidal(positions, args.d_model) - exact).max()
        recipe = np.abs(float32_recipe(positions, args.d_model) - exact).max()
        took = time.perf_counter() - start
        print(f"{length:>10}  {ours:>15.2e}  {recipe:>15.2e}  {took:>8.1f}")


if __name__ == "__main__":
    main()
