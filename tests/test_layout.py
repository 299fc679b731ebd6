"""The tree as a map of the design: a small explicit surface, and modules of readable size.

- The public modules are exactly ``posenc``, ``posenc.analysis``, ``posenc.torch``,
  ``posenc.torch.hf``, ``posenc.plot`` and ``posenc.cli``; every other module is private
  (a leading underscore), so no public function hides a module.
- ``__all__`` holds the design's public API, every name README/docs use and the types public
  functions return; README, docs, examples and benchmarks use public names only.
- Size limits: no file under ``src/posenc`` over 700 lines (``wc -l``), no function over 80
  and no class over 200 code lines (docstrings, comments and blank lines not counted), and a
  module's ``forward`` about 25 code lines (at most 30): check the input, get the rows, call
  one kernel.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import typing
from pathlib import Path
from types import ModuleType

import pytest

import posenc

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "posenc"
PUBLIC = {
    "posenc",
    "posenc.analysis",
    "posenc.torch",
    "posenc.torch.hf",
    "posenc.plot",
    "posenc.cli",
}
OPTIONAL = {"posenc.torch": "torch", "posenc.torch.hf": "torch", "posenc.plot": "matplotlib"}

#: The public API of the design document, by module.
DESIGN = {
    "posenc": [
        "sinusoidal",
        "frequencies",
        "CONVENTIONS",
        "positions_from_mask",
        "positions_from_segments",
        "positions_from_cu_seqlens",
        "positions_from_tokens",
        "rotary_cos_sin",
        "apply_rotary",
        "sinusoidal_grid",
        "timestep_embedding",
        "analysis",
    ],
    "posenc.analysis": [
        "wavelengths",
        "shift_matrix",
        "similarity",
        "distinct_rows",
        "precision_report",
        "identify",
    ],
    "posenc.torch": [
        "SinusoidalPositionalEncoding",
        "TransformerEmbedding",
        "RotaryEmbedding",
        "SinusoidalGridEncoding",
        "TimestepEmbedding",
    ],
}

MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 200
MAX_FORWARD_LINES = 30


def _importable(name: str) -> ModuleType | None:
    needs = OPTIONAL.get(name)
    if needs is not None and importlib.util.find_spec(needs) is None:
        return None
    return importlib.import_module(name)


def _all_modules() -> list[str]:
    """Every module of the package, from its files (nothing is imported)."""
    names = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] != "__main__":
            names.append(".".join(parts))
    return names


# -- the public surface ---------------------------------------------------------------------


def test_public_modules_are_exactly_the_six() -> None:
    public = {
        name for name in _all_modules() if not any(part.startswith("_") for part in name.split("."))
    }
    assert public == PUBLIC


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_all_names_import_and_no_public_attribute_is_a_private_module(name: str) -> None:
    module = _importable(name)
    if module is None:
        pytest.skip(f"{OPTIONAL[name]} is not installed")
    exported = module.__all__
    assert len(set(exported)) == len(exported)
    for attr in exported:
        assert getattr(module, attr) is not None, attr
    for attr in dir(module):
        value = getattr(module, attr)
        if isinstance(value, ModuleType) and not attr.startswith("_"):
            assert value.__name__ in PUBLIC or not value.__name__.startswith("posenc"), attr


@pytest.mark.parametrize("name", sorted(DESIGN))
def test_the_design_api_is_exported(name: str) -> None:
    module = _importable(name)
    if module is None:
        pytest.skip(f"{OPTIONAL[name]} is not installed")
    assert set(DESIGN[name]) <= set(module.__all__)


def _exported_types() -> set[type]:
    found: set[type] = set()
    for name in PUBLIC:
        module = _importable(name)
        if module is None:
            continue
        found |= {v for v in (getattr(module, a) for a in module.__all__) if isinstance(v, type)}
    return found


def _return_classes(function: object) -> set[type]:
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # annotations naming optional packages' types
        return set()
    found: set[type] = set()
    stack = [hints.get("return")]
    while stack:
        hint = stack.pop()
        if isinstance(hint, type) and hint.__module__.startswith("posenc"):
            found.add(hint)
        stack.extend(typing.get_args(hint))
    return found


def test_types_public_functions_return_are_exported() -> None:
    exported = _exported_types()
    missing = set()
    for name in PUBLIC:
        module = _importable(name)
        if module is None:
            continue
        for attr in module.__all__:
            value = getattr(module, attr)
            if inspect.isfunction(value):
                missing |= {t.__qualname__ for t in _return_classes(value) - exported}
    assert not missing


# -- README, docs, examples and benchmarks use public names only ------------------------------

_FROM = re.compile(r"from\s+(posenc[\w.]*)\s+import\s+(\([^)]*\)|[^\n#]+)")
_CHAIN = re.compile(r"(?<![\w./-])posenc(?:\.\w+)+")


def _check_chain(chain: str) -> str | None:
    """None if the dotted ``chain`` (``posenc.torch.hf.LlamaRotary``) names public things."""
    parts = chain.split(".")
    module_name = parts[0]
    for part in parts[1:]:
        if part.startswith("__") and part.endswith("__"):
            return None  # __version__, __file__, ...
        if part.startswith("_"):
            return f"{chain}: {part} is private"
        if f"{module_name}.{part}" in PUBLIC:
            module_name = f"{module_name}.{part}"
            continue
        module = _importable(module_name)
        if module is not None and part not in module.__all__:
            return f"{chain}: {part} is not in {module_name}.__all__"
        return None  # an exported name; what follows are its own attributes
    return None


def _problems(text: str) -> list[str]:
    problems = []
    for module_name, names in _FROM.findall(text):
        for item in names.strip("()").split(","):
            name = item.split(" as ")[0].strip()
            if name:
                problems.append(_check_chain(f"{module_name}.{name}"))
    for chain in _CHAIN.findall(text):
        problems.append(_check_chain(chain))
    return [p for p in problems if p]


_PATTERNS = ("docs/*.md", "examples/*.py", "benchmarks/*.py")
USER_FILES = sorted([ROOT / "README.md", *(f for p in _PATTERNS for f in ROOT.glob(p))])


@pytest.mark.parametrize("path", USER_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_facing_files_use_public_names_only(path: Path) -> None:
    assert _problems(path.read_text()) == []


def test_the_public_name_check_can_fail() -> None:
    assert _problems("from posenc._checks import check_int")
    assert _problems(">>> posenc.analysis._round_bfloat16(1.0)")
    assert _problems("from posenc import sinusoidal, not_a_name")
    assert not _problems("from posenc.analysis import identify\nposenc.torch.hf.LlamaRotary")


# -- size limits ----------------------------------------------------------------------------------


def _code_lines(source: list[str], node: ast.AST) -> int:
    """Lines of ``node`` that are code: no docstring, comment or blank line."""
    lines = set(range(node.lineno, node.end_lineno + 1))  # type: ignore[attr-defined]
    for inner in ast.walk(node):
        body = getattr(inner, "body", None)
        if (
            isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            lines -= set(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(
        1 for n in lines if source[n - 1].strip() and not source[n - 1].strip().startswith("#")
    )


def _oversized() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        source = text.splitlines()
        where = path.relative_to(SRC.parent)
        if len(source) > MAX_FILE_LINES:
            found.append(f"{where}: {len(source)} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                limit = MAX_FORWARD_LINES if node.name == "forward" else MAX_FUNCTION_LINES
                count = _code_lines(source, node)
                if count > limit:
                    found.append(f"{where}: function {node.name} has {count} code lines")
            elif isinstance(node, ast.ClassDef):
                count = _code_lines(source, node)
                if count > MAX_CLASS_LINES:
                    found.append(f"{where}: class {node.name} has {count} code lines")
    return found


def test_files_functions_and_classes_stay_small() -> None:
    assert _oversized() == []


def test_code_line_count_ignores_docstrings_comments_and_blanks() -> None:
    source = 'def f():\n    """Doc\n    string."""\n    # comment\n\n    x = 1\n    return x\n'
    node = ast.parse(source).body[0]
    assert _code_lines(source.splitlines(), node) == 3


def test_import_posenc_keeps_the_private_modules_private() -> None:
    hidden = [name for name in posenc.__all__ if isinstance(getattr(posenc, name), ModuleType)]
    assert hidden == ["analysis"]
