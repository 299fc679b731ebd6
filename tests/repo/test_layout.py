"""The tree as a map of the design: a small explicit surface, and modules of readable size.

- The public modules are exactly ``posenc``, ``posenc.analysis``, ``posenc.torch``,
  ``posenc.torch.hf``, ``posenc.plot``, ``posenc.cli`` and ``posenc.explore``; every other
  module is private (a leading underscore), so no public function hides a module.
- ``__all__`` holds the design's public API, every name README/docs use and the types public
  functions return; README, docs, examples and benchmarks use public names only.
- The faces that only re-export (``posenc``, ``posenc.analysis``, ``posenc.torch``,
  ``posenc.torch.hf``) expose nothing beyond their ``__all__`` (and their public
  subpackages); ``posenc.torch.hf`` is a package whose ``__init__`` only re-exports.
- Imports run down the tree: no import cycle (imports inside functions included), and a
  private module imports no public face: not the package it belongs to, and no other (only
  the edges, ``posenc.cli``, use the public faces of other packages). At most 16 private modules
  at the root of ``src/posenc``: families live in folders (``_rope/``, ``_positions/``...).
- Size limits, in code lines (docstrings, comments and blank lines not counted): no module
  over 450, no function over 80, no class over 200, and a module's ``forward`` about 25 (at
  most 30): check the input, get the rows, call one kernel.
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

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "posenc"
PUBLIC = {
    "posenc",
    "posenc.analysis",
    "posenc.torch",
    "posenc.torch.hf",
    "posenc.plot",
    "posenc.cli",
    "posenc.explore",
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

MAX_MODULE_LINES = 450
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


def test_public_modules_are_exactly_these() -> None:
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


# -- the faces re-export, imports run down the tree -----------------------------------------------

#: Public modules that only re-export: nothing public in them but ``__all__``.
FACES = ("posenc", "posenc.analysis", "posenc.torch", "posenc.torch.hf")
#: The edges: public packages whose private modules use the public faces of others.
EDGES = ("posenc.cli",)
MAX_ROOT_PRIVATE = 16


def _is_private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split("."))


def _module_file(name: str) -> Path | None:
    relative = Path(*name.split("."))
    for path in (SRC.parent / relative / "__init__.py", SRC.parent / relative.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _imports(name: str) -> list[tuple[str, int]]:
    """Every posenc module that module ``name`` imports, anywhere in its file (inside
    functions too), with the line: ``(module, line)``."""
    path = _module_file(name)
    assert path is not None, name
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("posenc")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("posenc"):
                continue
            for alias in node.names:  # ``from pkg import submodule`` imports the submodule
                inner = f"{target}.{alias.name}"
                found.append((inner if _module_file(inner) else target, node.lineno))
    return [(t, line) for t, line in found if t != name]


def _graph() -> dict[str, list[tuple[str, int]]]:
    return {name: _imports(name) for name in _all_modules()}


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    break
                if nxt in stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycles() -> None:
    graph = {name: [t for t, _ in targets] for name, targets in _graph().items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_can_fail() -> None:
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert _cycles({"a": ["b"], "b": []}) == []


def test_imports_run_down_the_tree() -> None:
    """A private module imports no public face: not its own package's, and no other (the
    edges excepted)."""
    upward = []
    for name, targets in _graph().items():
        edge = any(name == e or name.startswith(e + ".") for e in EDGES)
        for target, line in targets:
            if not _is_private(name) or _is_private(target):
                continue
            if name.startswith(target + "."):
                upward.append(f"{name}:{line} imports its own package's face {target}")
            elif not edge:
                upward.append(f"{name}:{line} imports the public face {target}")
    assert upward == []


def test_the_root_holds_at_most_16_private_modules() -> None:
    private = sorted(
        p.name for p in SRC.iterdir() if p.name.startswith("_") and not p.name.startswith("__")
    )
    assert len(private) <= MAX_ROOT_PRIVATE, private


@pytest.mark.parametrize("name", FACES)
def test_faces_expose_nothing_beyond_all(name: str) -> None:
    module = _importable(name)
    if module is None:
        pytest.skip(f"{OPTIONAL[name]} is not installed")
    extra = []
    for attr in dir(module):
        value = getattr(module, attr)
        public_module = isinstance(value, ModuleType) and value.__name__ in PUBLIC
        if not attr.startswith("_") and attr not in module.__all__ and not public_module:
            extra.append(attr)
    assert extra == []


def test_hf_is_a_package_whose_init_only_reexports() -> None:
    init = SRC / "torch" / "hf" / "__init__.py"
    assert init.is_file(), "posenc.torch.hf must be a package (src/posenc/torch/hf/)"
    source = init.read_text()
    tree = ast.parse(source)
    assert _code_lines(source.splitlines(), tree) < 60
    for statement in tree.body[1:]:  # after the docstring
        reexport = isinstance(statement, ast.ImportFrom) and statement.level == 1
        listing = isinstance(statement, ast.Assign) and ast.unparse(statement).startswith("__all__")
        assert reexport or listing, ast.unparse(statement)


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
    """Lines of ``node`` (a module, class or function) that are code: no docstring, comment or
    blank line."""
    if isinstance(node, ast.Module):
        lines = set(range(1, len(source) + 1))
    else:
        lines = set(range(node.lineno, node.end_lineno + 1))  # type: ignore[attr-defined]
    for inner in ast.walk(node):
        body = getattr(inner, "body", None)
        if (
            isinstance(inner, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
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
        tree = ast.parse(text)
        count = _code_lines(source, tree)
        if count > MAX_MODULE_LINES:
            found.append(f"{where}: {count} code lines")
        for node in ast.walk(tree):
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
    module = '"""Module\ndocstring."""\n\nimport os  # why\n' + source
    assert _code_lines(module.splitlines(), ast.parse(module)) == 4


def test_import_posenc_keeps_the_private_modules_private() -> None:
    hidden = [name for name in posenc.__all__ if isinstance(getattr(posenc, name), ModuleType)]
    assert hidden == ["analysis"]
