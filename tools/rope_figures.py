"""Draw the figures of docs/rope.md ("RoPE, the idea") from posenc's NumPy API.

Run from the repository root (matplotlib needed)::

    PYTHONPATH=src python tools/rope_figures.py            # writes docs/figures/rope-*.png

``rope-rotation.png``: one pair of a query and of a key, rotated by their positions, for two
placements at the same distance: the angle between them is the same, so is their dot product.
``rope-scalings.png``: the wavelength of each rotary pair without scaling and with three of
the Hugging Face scalings. Small PNGs (100 dpi), each under 100 KB.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import posenc

OUT = Path(__file__).resolve().parents[1] / "docs" / "figures"

#: The scalings of rope-scalings.png: label -> (base, scaling config).
SCALINGS = {
    "no scaling": None,
    "linear, factor 4": {"rope_type": "linear", "factor": 4.0},
    "llama3, factor 8": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "yarn, factor 4": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def rotation_figure(path: Path) -> None:
    """Pair 0 of a query and a key (head_dim 8) at positions (2, 5) and (6, 9)."""
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=8), rng.normal(size=8)
    fig = _figure(8.0, 4.0)
    ring = np.linspace(0.0, 2.0 * np.pi, 361)
    for ax, (p, m) in zip(fig.subplots(1, 2), ((2, 5), (6, 9)), strict=True):
        cos, sin = posenc.rotary_cos_sin([p, m], 8, dtype=np.float64)
        q_rot = posenc.apply_rotary(q[None], cos[:1], sin[:1])[0]
        k_rot = posenc.apply_rotary(k[None], cos[1:], sin[1:])[0]
        ax.plot(np.cos(ring), np.sin(ring), color="tab:gray", lw=0.6)
        for vector, colour, label in ((q_rot, "tab:blue", f"query at {p}"),
                                      (k_rot, "tab:orange", f"key at {m}")):  # fmt: skip
            x, y = (
                vector[0] / np.hypot(vector[0], vector[4]),
                vector[4] / np.hypot(vector[0], vector[4]),
            )
            ax.annotate("", xy=(x, y), xytext=(0, 0), arrowprops={"color": colour, "width": 1.5})
            ax.plot([x], [y], "o", color=colour, label=label)
        score = float(q_rot @ k_rot)
        ax.set(xlim=(-1.2, 1.2), ylim=(-1.2, 1.2), aspect="equal")
        ax.set(xlabel="channel 0 (first half)", ylabel="channel 4 (second half)")
        ax.set_title(f"positions {p} and {m}: q·k = {score:.4f}", fontsize="medium")
        ax.legend(loc="lower left", fontsize="small")
    fig.suptitle(
        "Pair 0 of a query and a key, turned by p·ω: same distance, same angle, same score"
    )
    fig.savefig(path, dpi=100)


def scalings_figure(path: Path) -> None:
    """Wavelength 2π/ω of each of the 64 pairs of head_dim 128 (base 500000)."""
    fig = _figure(7.0, 4.2)
    ax = fig.add_subplot()
    for label, scaling in SCALINGS.items():
        omega, _ = posenc.rope_frequencies(128, base=500000.0, scaling=scaling)
        ax.plot(2 * np.pi / omega, label=label, lw=1.5)
    ax.axhline(8192, color="tab:gray", ls=":", lw=1)
    ax.annotate("8192: the trained context", xy=(0.0, 8192), xytext=(0, 3),
                textcoords="offset points", fontsize="small", color="tab:gray")  # fmt: skip
    ax.set_yscale("log")
    ax.set(xlabel="pair index i", ylabel="wavelength 2π/ω_i (positions, log scale)")
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize="small")
    ax.set_title("What a scaling changes: the frequencies (head_dim 128, base 500000)")
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"folder (default {OUT})")
    out = parser.parse_args().out
    rotation_figure(out / "rope-rotation.png")
    scalings_figure(out / "rope-scalings.png")
    print(f"wrote {out / 'rope-rotation.png'} and {out / 'rope-scalings.png'}")


if __name__ == "__main__":
    main()
