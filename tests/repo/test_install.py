"""posenc installs as users install it: a wheel built from the tree, installed into an empty
virtual environment with NumPy and nothing else, then imported and run.

The wheel is built with pip's build isolation (pip fetches the build backend named in
pyproject.toml from the configured index, as for any user); NumPy comes from the same index at
the version the project pins for this Python (under Python 3.10 that is pyproject.toml's lower
bound, 2.2.6). A machine without an index skips; under the environment variable ``CI`` it
fails instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

from tests.tolerance import assert_close_ulp

REPO = Path(__file__).resolve().parents[2]
PIP_FLAGS = ["--quiet", "--disable-pip-version-check", "--no-input"]
#: pip 22.3 and later install into another environment (``pip --python``): the new one then needs
#: no pip of its own (ensurepip costs seconds); an older pip gets one.
PIP_TARGETS = tuple(int(part) for part in version("pip").split(".")[:2]) >= (22, 3)

pytestmark = pytest.mark.slow


def _numpy_pin() -> str:
    """``numpy==X`` as the requirements of this Python pin it: requirements-demo.txt, or under
    Python 3.10 requirements-py310.txt (whose NumPy is pyproject.toml's lower bound)."""
    name = "requirements-py310.txt" if sys.version_info < (3, 11) else "requirements-demo.txt"
    for line in (REPO / name).read_text(encoding="utf-8").splitlines():
        if line.startswith("numpy=="):
            return line.strip()
    raise AssertionError(f"{name} pins no numpy")


def _run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=cwd)


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the install test cannot run under CI: {why}", pytrace=False)
    pytest.skip(why)


@pytest.mark.skipif(sys.platform == "win32", reason="venv layout of POSIX")
def test_wheel_installs_into_an_empty_venv_and_runs(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    pip_wheel = [sys.executable, "-m", "pip", "wheel", *PIP_FLAGS, "--no-deps"]
    built = _run([*pip_wheel, "-w", str(wheels), str(REPO)])
    if built.returncode != 0:
        _unavailable(f"pip wheel failed (no index with the build backend?): {built.stderr[-400:]}")
    (wheel,) = wheels.glob("posenc-*.whl")
    with zipfile.ZipFile(wheel) as archive:  # the explorer's vendored charting library
        names = set(archive.namelist())
    vendored = "posenc/explore/static/vendor/echarts-6.1.0/"
    assert {vendored + n for n in ("echarts.min.js", "LICENSE", "NOTICE", "README.md")} <= names
    tutorial = {f"posenc/explore/docs/{n}.md" for n in ("tutorial", "rope", "attention-biases")}
    assert tutorial <= names  # the pages the explorer's guided path links to

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=not PIP_TARGETS, clear=True)
    python = str(env_dir / "bin" / "python")
    pip = [python, "-m", "pip"]
    if PIP_TARGETS:
        pip = [sys.executable, "-m", "pip", "--python", python]
    numpy = _run([*pip, "install", *PIP_FLAGS, _numpy_pin()])
    if numpy.returncode != 0:
        _unavailable(f"cannot install {_numpy_pin()}: {numpy.stderr[-400:]}")
    installed = _run([*pip, "install", *PIP_FLAGS, "--no-deps", str(wheel)])
    assert installed.returncode == 0, installed.stderr

    outside = tmp_path  # not the repository: the installed copy is imported
    code = (
        "import posenc, sys\n"
        "print(posenc.__file__, 'torch' in sys.modules)\n"
        "try:\n"
        "    import torch\n"
        "except ImportError:\n"
        "    print('no-torch')\n"
    )
    imported = _run([python, "-c", code], outside)
    assert imported.returncode == 0, imported.stderr
    where, torch_loaded, no_torch = imported.stdout.split()
    assert Path(where).is_relative_to(env_dir)
    assert torch_loaded == "False"
    assert no_torch == "no-torch"  # really no torch

    posenc = str(env_dir / "bin" / "posenc")
    helped = _run([posenc, "--help"], outside)
    assert helped.returncode == 0, helped.stderr
    assert "table" in helped.stdout

    explore = _run([posenc, "explore", "--no-browser"], outside)  # no flask: a hint, exit 2
    assert explore.returncode == 2, explore.stderr
    assert "pip install flask" in explore.stderr

    table = _run([posenc, "table", "--length", "5", "--d-model", "4", "--out", "t.npy"], outside)
    assert table.returncode == 0, table.stderr
    got = np.load(tmp_path / "t.npy")
    positions = np.arange(5)[:, None]
    expected = np.empty((5, 4))
    expected[:, 0::2] = np.sin(positions * 10000.0 ** (-np.arange(0, 4, 2) / 4))
    expected[:, 1::2] = np.cos(positions * 10000.0 ** (-np.arange(0, 4, 2) / 4))
    assert_close_ulp(got, expected, ulps=1)  # the float64 value rounded once to float32
