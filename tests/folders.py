"""Markers set by folder: a ``conftest.py`` names the markers of every test below it.

    # tests/torch/hf/conftest.py
    pytest_collection_modifyitems = marks_below(__file__, "compat", "kernel_sets")

A new test file in that folder carries them with no other edit, and the make targets select by
marker (``make test-compat`` runs ``-m compat``, ``make test-kernels`` runs ``-m kernel_sets``).
The markers are listed, with what selects them, in ``pyproject.toml``.

``python -m tests.folders NAME`` prints the folders whose ``conftest.py`` sets ``NAME``: a run
of ``-m kernel_sets`` (only tests of those folders carry it) collects just them, instead of
importing every test module to deselect most of them.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest


def marks_below(conftest: str, *names: str) -> Callable[[list[pytest.Item]], None]:
    """A ``pytest_collection_modifyitems`` hook that adds the markers ``names`` to every item
    collected from the folder of ``conftest`` (subfolders included). It runs before ``-m``
    selects (``tryfirst``), so ``-m NAME`` sees the markers."""
    folder = str(Path(conftest).resolve().parent) + os.sep

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
        for item in items:
            if str(item.path).startswith(folder):  # pytest's paths are absolute and resolved
                for name in names:
                    item.add_marker(name)

    return pytest_collection_modifyitems


def folders_marked(name: str, root: Path | None = None) -> list[str]:
    """The folders below ``root`` (default: this tests folder) whose ``conftest.py`` sets the
    marker ``name`` with :func:`marks_below`, relative to the repository root, outermost only
    (a subfolder's tests are collected with its parent's)."""
    tests = Path(__file__).resolve().parent if root is None else root
    call = re.compile(r"marks_below\(__file__,([^)]*)\)")
    found = sorted(
        conftest.parent
        for conftest in tests.rglob("conftest.py")
        if any(f'"{name}"' in args for args in call.findall(conftest.read_text("utf-8")))
    )
    outermost = [f for f in found if not any(o in f.parents for o in found)]
    return [f.relative_to(tests.parent).as_posix() for f in outermost]


if __name__ == "__main__":
    print(" ".join(folders_marked(sys.argv[1])))
