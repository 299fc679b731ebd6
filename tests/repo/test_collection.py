"""A bare ``pytest`` collects without errors when an optional reference library is missing.

Test modules that need ``transformers`` (or torch) skip with a reason instead of breaking the
collection, so a contributor without the reference stack still runs everything else. The
library is hidden in a subprocess by a ``sitecustomize`` that sets
``sys.modules[name] = None``: ``import name`` then raises ``ModuleNotFoundError`` and
``importlib.util.find_spec(name)`` returns None, as for a library that is not installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _collect(hidden: str, tmp_path: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nsys.modules[{hidden!r}] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src")])}
    env.pop("CI", None)  # under CI a missing reference fails on purpose; this is collection
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_a_bare_pytest_without_transformers_collects_with_no_error(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="without torch the transformers tests skip anyway")
    result = _collect("transformers", tmp_path, "tests")
    tail = result.stdout[-3000:] + result.stderr[-2000:]
    assert result.returncode == 0, tail
    assert not re.search(r"\d+ errors?\b", result.stdout), tail
    assert " collected" in result.stdout or "tests collected" in result.stdout, tail


def test_hiding_a_library_makes_it_missing(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['json'] = None\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    code = "import importlib.util as u, sys; print(u.find_spec('json')); import json"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "None"
    assert "ModuleNotFoundError" in result.stderr
