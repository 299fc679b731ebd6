"""Runs without the optional packages (torch, matplotlib) skip what needs them.

``make test-py310`` runs the whole suite with NumPy only: the tests that need torch or
matplotlib skip themselves, and this file leaves out the docstring examples of the modules that
cannot be imported without them (``--doctest-modules`` would report an import error) and the
README's examples (they use torch). With the full development environment nothing is left out.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

OPTIONAL = frozenset({"torch", "matplotlib"})
_ROOT = Path(__file__).parent
_SRC = _ROOT / "src"
_TORCH_TESTS = _ROOT / "tests" / "torch"
# file at the repository root → the optional packages its examples import
_NEEDS = {"README.md": ("torch",)}


def _missing_optional(exc: BaseException | None) -> str | None:
    """The optional package whose absence caused ``exc`` (or its causes), if any."""
    while exc is not None:
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            top = exc.name.partition(".")[0]
            if top in OPTIONAL:
                return top
        exc = exc.__cause__ or exc.__context__
    return None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if _TORCH_TESTS in collection_path.parents and importlib.util.find_spec("torch") is None:
        return True  # tests/torch/ needs torch (helper modules too, which no test skips)
    if (
        not config.option.doctestmodules
        or collection_path.suffix != ".py"
        or collection_path.name == "__main__.py"  # never collected: importing it runs it
        or _SRC not in collection_path.parents
    ):
        return None
    parts = collection_path.relative_to(_SRC).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    try:
        importlib.import_module(".".join(parts))
    except ImportError as exc:
        if _missing_optional(exc) is not None:
            return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent != _ROOT:
            continue
        missing = [
            name
            for name in _NEEDS.get(item.path.name, ())
            if importlib.util.find_spec(name) is None
        ]
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(missing)}"))
