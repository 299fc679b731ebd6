"""Markers set by folder: a ``conftest.py`` names the markers of every test below it.

    # tests/torch/hf/conftest.py
    pytest_collection_modifyitems = marks_below(__file__, "compat", "kernel_sets")

A new test file in that folder carries them with no other edit, and the make targets select by
marker (``make test-compat`` runs ``-m compat``, ``make test-kernels`` runs ``-m kernel_sets``).
The markers are listed, with what selects them, in ``pyproject.toml``.
"""

from __future__ import annotations

import os
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
