"""Draw the figures of docs/attention-biases.md from ``posenc.plot``.

Run from the repository root (matplotlib needed)::

    PYTHONPATH=src python tools/bias_figures.py            # writes docs/figures/bias-*.png

``bias-alibi.png``: ALiBi's bias per head against the relative position (8 heads,
``posenc plot bias --heads 8 --distance 32``). ``bias-t5-buckets.png`` and
``bias-deberta-buckets.png``: the bucket maps of T5 (32 buckets, max_distance 128) and
DeBERTa-v3 (256 buckets, max_position 512) with their exact and logarithmic regions
(``posenc plot buckets``). ``bias-slopes.png``: ALiBi's slopes per head for 32 heads, exact
and as BLOOM, MPT and Falcon compute them (``posenc plot slopes --heads 32``). The PNGs are
saved at 72 dpi, each under 100 KB; their metadata holds the figure's titles.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from posenc.plot import bias_plot, bucket_plot, slope_plot

OUT = Path(__file__).resolve().parents[1] / "docs" / "figures"
DPI = 72


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder (default docs/figures)")
    out = parser.parse_args().out
    figures = {
        "bias-alibi.png": bias_plot(8, distance=32),
        "bias-t5-buckets.png": bucket_plot("t5", distance=200),
        "bias-deberta-buckets.png": bucket_plot("deberta", distance=1000),
        "bias-slopes.png": slope_plot(32),
    }
    for name, fig in figures.items():
        titles = [fig.get_suptitle()] + [ax.get_title() for ax in fig.axes]
        described = " | ".join(" ".join(t.split()) for t in titles if t)
        fig.savefig(out / name, dpi=DPI, metadata={"Description": described})
        print(f"{out / name}: {(out / name).stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
