"""``posenc demo`` shows its progress as it goes, also through a pipe (where Python buffers
standard output unless each line is flushed): a learner never watches a silent terminal."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posenc.cli import _demo as demo

ROOT = Path(__file__).resolve().parents[2]


def test_demo_prints_each_step_as_it_goes(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the figures need matplotlib")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    command = [sys.executable, "-m", "posenc", "demo", "--out", str(tmp_path / "figs")]
    start = time.monotonic()
    arrivals: list[tuple[float, str]] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as process:
        assert process.stdout is not None
        for line in process.stdout:
            arrivals.append((time.monotonic() - start, line.rstrip("\n")))
    end = time.monotonic() - start
    assert process.returncode == 0
    # a line before each figure is drawn, and one when it is written
    announced = [t for t, line in arrivals if line.lstrip().startswith("[") and "..." in line]
    assert len(announced) == len(demo.FIGURES)
    # Lines arrive while the demo runs, not all at its end: the figures alone take seconds,
    # so at least the headings and the first figure's announcement come well before the end.
    # (A slow machine stretches every gap alike; only buffering bunches them at the exit.)
    early = [t for t, _ in arrivals if t < end - 0.25 * (end - arrivals[0][0])]
    assert len(early) >= 20, f"{len(early)} of {len(arrivals)} lines before the last quarter"
    assert announced[0] < end - 1.0
