"""The Quickstart's two commands refuse any Python but the one the pins need, at once, with
one line, installing nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _other_python() -> str:
    """A Python that is not 3.11 (3.10 from pyenv when there is one), else a non-Python."""
    prefix = (
        subprocess.run(["pyenv", "prefix", "3.10"], capture_output=True, text=True, check=False)
        if shutil.which("pyenv")
        else None
    )
    if prefix is not None and prefix.returncode == 0:
        candidate = Path(prefix.stdout.strip()) / "bin" / "python3.10"
        if candidate.exists():
            return str(candidate)
    return sys.executable + "-not-a-python"


@pytest.mark.parametrize("goal", ["demo", "test"])
def test_another_python_stops_with_one_line(goal: str, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    result = subprocess.run(
        ["make", "-C", str(ROOT), goal, f"PYTHON={_other_python()}", f"VENV={venv}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "needs Python 3.11" in lines[0]
    assert not venv.exists()
