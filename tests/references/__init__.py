"""Reference libraries in tests: skipped with a reason when missing, but under CI (the
environment variable ``CI`` set) a missing reference fails the run instead of skipping."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

__all__ = ["require"]


def require(module_name: str, reason: str | None = None) -> ModuleType:
    """Import ``module_name`` for a reference comparison: the module, or a skip (a failure
    under ``CI``) saying what is missing."""
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        message = reason or f"the reference library {module_name} is not installed ({exc})"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must have every reference library", pytrace=False)
        pytest.skip(message, allow_module_level=True)
