"""The Quickstart's two commands refuse any Python but the one the pins need, at once, with
one line, installing nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

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


@pytest.mark.parametrize("goal", ["demo", "test", "test-compat"])
def test_each_install_step_is_announced_first(goal: str, tmp_path: Path) -> None:
    """pip runs quietly for a minute or more: a line saying what it installs comes first."""
    if not sys.version.startswith("3.11."):
        pytest.skip("the Makefile's goals need Python 3.11")
    result = subprocess.run(
        ["make", "-n", "-C", str(ROOT), goal, f"PYTHON={sys.executable}", f"VENV={tmp_path}/v"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    text = result.stdout.replace("\\\n", " ")  # a recipe line continued with a backslash
    steps = [s.strip() for line in text.splitlines() for s in line.split("&&")]
    installs = [i for i, step in enumerate(steps) if " -m pip install" in step]
    assert installs, result.stdout
    for i in installs:
        before = steps[i - 1]
        assert before.startswith("echo"), (steps[i], before)
        assert "install" in before, (steps[i], before)
    runs = [i for i, step in enumerate(steps) if "posenc demo" in step and "echo" not in step]
    for i in runs:
        assert steps[i - 1].startswith("echo"), steps[i]


def _dry_run(goal: str, tmp_path: Path) -> str:
    result = subprocess.run(
        ["make", "-n", "-C", str(ROOT), goal, f"PYTHON={sys.executable}", f"VENV={tmp_path}/v"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.replace("\\\n", " ")  # a recipe line continued with a backslash


@pytest.mark.parametrize(
    ("goal", "selects"),
    [("test-kernels", "-m kernel_sets"), ("test-compat", "-m compat"), ("test-sweep", "-m sweep")],
)
def test_targets_choose_their_tests_by_marker(goal: str, selects: str, tmp_path: Path) -> None:
    """What a target runs is chosen by a marker that folders set, never by a list of files."""
    if not sys.version.startswith("3.11."):
        pytest.skip("the Makefile's goals need Python 3.11")
    runs = [line for line in _dry_run(goal, tmp_path).splitlines() if " -m pytest " in line]
    assert runs, goal
    for line in runs:
        assert selects in line, line
        assert "tests/" not in line, line


def test_the_makefile_names_no_test_file() -> None:
    recipes = [line for line in (ROOT / "Makefile").read_text().splitlines() if line[:1] == "\t"]
    assert [line for line in recipes if "tests/" in line] == []


def test_make_test_runs_each_kernel_set_in_its_own_process(tmp_path: Path) -> None:
    """``make test-kernels`` (part of ``make test``): torch reads ``ATEN_CPU_CAPABILITY`` once,
    so each kernel set is its own pytest run."""
    if not sys.version.startswith("3.11."):
        pytest.skip("the Makefile's goals need Python 3.11")
    text = _dry_run("test", tmp_path)
    loop = next(line for line in text.splitlines() if "ATEN_CPU_CAPABILITY=$set" in line)
    assert "for set in default avx2;" in loop, loop
    assert "-m kernel_sets" in loop, loop


def test_make_demo_prints_its_own_lines_and_no_recipe(tmp_path: Path) -> None:
    """A newcomer's first command: make echoes no raw recipe (hundreds of characters of shell)
    before the demo's messages. Run with a shell that runs nothing, make shows only what it
    echoes itself."""
    if not sys.version.startswith("3.11."):
        pytest.skip("the Makefile's goals need Python 3.11")
    shell = tmp_path / "sh"
    shell.write_text(  # $(shell ...) queries (the Python's version, file hashes) still run
        '#!/bin/sh\ncase "$2" in *"import platform"*|*sha256sum*) exec /bin/sh "$@";; esac\n'
    )
    shell.chmod(0o755)
    result = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "demo", f"SHELL={shell}",
         f"PYTHON={sys.executable}", f"VENV={tmp_path}/v"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert result.stdout == "", result.stdout
