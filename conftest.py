"""Runs without the optional packages (torch, matplotlib, flask) skip what needs them; under CI a
missing reference library fails instead.

``make test-py310`` runs the whole suite with NumPy only: the tests that need torch, flask or
matplotlib skip themselves, and this file leaves out the docstring examples of the modules that
cannot be imported without them (``--doctest-modules`` would report an import error) and the
README's examples (they use torch). With the full development environment nothing is left out.

Under the environment variable ``CI`` every ``pytest.importorskip`` of a missing module fails
the run instead of skipping (as ``require`` of ``tests/references/__init__.py`` does): CI
installs the whole test stack, so a missing reference is a broken environment, never a quiet
skip. The one exception is a reference that does not install cleanly on CPU and is not in the
stack (:data:`OUTSIDE_THE_STACK`). ``make test-py310`` clears ``CI``: its environment leaves
out everything beyond NumPy on purpose.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import pytest

#: the sweeps' terminal summaries (loaded here: a pytest-xdist controller loads no deeper conftest)
pytest_plugins = ("tests.summaries",)

OPTIONAL = frozenset({"torch", "matplotlib", "flask", "werkzeug", "jax", "jaxlib", "flax"})
_ROOT = Path(__file__).parent
_SRC = _ROOT / "src"
_TORCH_TESTS = _ROOT / "tests" / "torch"
# file at the repository root → the optional packages its examples import
_NEEDS = {"README.md": ("torch",)}
# module that imports without an optional package but whose examples need it
_EXAMPLES_NEED = {
    _SRC / "posenc" / "explore" / "__init__.py": ("flask",),
    _SRC / "posenc" / "explore" / "_server.py": ("flask",),
}


#: references the test stack leaves out, and why: they may skip even under CI (none today:
#: keras-hub, which requires TensorFlow through tensorflow-text, is installed without its
#: dependencies, requirements-nodeps.txt)
OUTSIDE_THE_STACK: dict[str, str] = {}

_importorskip = pytest.importorskip


def importorskip_or_fail(
    modname: str,
    minversion: str | None = None,
    reason: str | None = None,
    *,
    exc_type: type[ImportError] | None = None,
) -> Any:
    """``pytest.importorskip``, except that under ``CI`` a missing module fails the run."""
    try:
        return _importorskip(modname, minversion, reason, exc_type=exc_type)
    except pytest.skip.Exception as exc:
        if os.environ.get("CI") and modname.partition(".")[0] not in OUTSIDE_THE_STACK:
            pytest.fail(
                f"{exc.msg}; under CI every reference library must be installed "
                "(pip install -r requirements-dev.txt)",
                pytrace=False,
            )
        raise


pytest.importorskip = importorskip_or_fail


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


#: a doc page's examples that use transformers: ``make test-compat`` runs the page (``-m compat``)
_USES_TRANSFORMERS = re.compile(r"^\s*>>> .*(?:transformers|posenc\.torch\.hf)", re.MULTILINE)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    pages: dict[Path, bool] = {}
    for item in items:
        if item.path.suffix == ".md":
            if item.path not in pages:
                pages[item.path] = bool(_USES_TRANSFORMERS.search(item.path.read_text("utf-8")))
            if pages[item.path]:
                item.add_marker("compat")
        if item.path in _EXAMPLES_NEED:
            needs = _EXAMPLES_NEED[item.path]
        elif item.path.parent == _ROOT:
            needs = _NEEDS.get(item.path.name, ())
        else:
            continue
        missing = [name for name in needs if importlib.util.find_spec(name) is None]
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(missing)}"))
