"""``posenc demo`` prints every section and writes every figure, and shows its progress as it
goes, also through a pipe (where Python buffers standard output unless each line is flushed): a
learner never watches a silent terminal. One run of the real command checks both."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posenc.cli import _demo as demo

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_prints_each_section_and_figure_as_it_goes(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the figures need matplotlib")
    out_dir = tmp_path / "figs"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    command = [sys.executable, "-m", "posenc", "demo", "--out", str(out_dir)]
    start = time.monotonic()
    arrivals: list[tuple[float, str]] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as process:
        assert process.stdout is not None
        for line in process.stdout:
            arrivals.append((time.monotonic() - start, line.rstrip("\n")))
    end = time.monotonic() - start
    assert process.returncode == 0
    out = "\n".join(line for _, line in arrivals)
    assert "posenc.sinusoidal(10, 8)" in out
    assert "0.8415" in out  # sin(1)
    assert "-0.9111" in out  # cos(9)
    if "PyTorch is not installed" not in out:
        assert "for both sequences: True" in out
    assert "geometric progression" in out
    assert "M_k" in out
    assert "cosine similarity" in out
    assert "Distinct positions" in out
    assert "odd exponents" in out
    assert "odd-exponent cosine bug" in out  # identify recognised the bug
    for stem in demo.FIGURES:
        path = out_dir / f"{stem}.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
        assert str(path) in out
    # a line before each figure is drawn, and one when it is written
    announced = [t for t, line in arrivals if line.lstrip().startswith("[") and "..." in line]
    assert len(announced) == len(demo.FIGURES)
    # Lines arrive while the demo runs, not all at its end: the figures alone take seconds,
    # so at least the headings and the first figure's announcement come well before the end.
    # (A slow machine stretches every gap alike; only buffering bunches them at the exit.)
    early = [t for t, _ in arrivals if t < end - 0.25 * (end - arrivals[0][0])]
    assert len(early) >= 20, f"{len(early)} of {len(arrivals)} lines before the last quarter"
    assert announced[0] < end - 1.0


def test_each_figure_is_named_after_the_plot_that_draws_it() -> None:
    """``posenc plot KIND`` draws the demo's ``KIND.png``: one name for one figure."""
    for stem, (kind, _) in demo.FIGURES.items():
        assert stem == kind, f"the demo writes {stem}.png, which posenc plot {kind} draws"
