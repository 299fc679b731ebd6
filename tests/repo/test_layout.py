"""The tree as a map of the design: a small explicit surface, imports that run down the tree,
and tests in the package's shape.

- The public modules are exactly ``posenc``, ``posenc.analysis``, ``posenc.torch``,
  ``posenc.torch.hf``, ``posenc.jax``, ``posenc.plot``, ``posenc.cli`` and ``posenc.explore``;
  every other
  module is private (a leading underscore), so no public function hides a module.
- ``__all__`` holds the design's public API, every name README/docs use and the types public
  functions return; README, docs, examples and benchmarks use public names only.
- The faces that only re-export (``posenc``, ``posenc.analysis``, ``posenc.torch``,
  ``posenc.torch.hf``, ``posenc.jax``) expose nothing beyond their ``__all__`` (and their public
  subpackages); ``posenc.torch.hf`` is a package whose ``__init__`` only re-exports.
- The faces define no code: their ``__init__`` holds a docstring, imports and ``__all__``.
- Imports run down the tree: no import cycle (imports inside functions included), no loop
  between packages (seen from the package that holds them, a subpackage and its sibling
  modules and subpackages import each other one way only: ``posenc.cli`` imports
  ``posenc.explore``, never the reverse), and a private module imports no public face: not the
  package it belongs to, and no other (only the edges, ``posenc.cli``, use the public faces of
  other packages).
- ``tests/`` mirrors the package: a folder per package (``tests/rope`` for ``posenc/_rope``,
  ``tests/core`` for the root modules), plus ``references``, ``fuzz``, ``docs`` and ``repo``.

Sizes are a report, not a test: ``python tools/sizes.py`` prints the code lines of every
module, the largest functions and classes, the private modules at the root and the walks of
``tools/walk.py``, beside the guides of docs/architecture.md (a module at most 450 code lines,
a function 80, a class 200, a module's ``forward`` 30, at most 16 private modules at the
root).
"""

from __future__ import annotations

import ast
import functools
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
    "posenc.audit",
    "posenc.torch",
    "posenc.torch.hf",
    "posenc.jax",
    "posenc.plot",
    "posenc.cli",
    "posenc.explore",
}
OPTIONAL = {
    "posenc.torch": "torch",
    "posenc.torch.hf": "torch",
    "posenc.jax": "jax",
    "posenc.plot": "matplotlib",
}

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
FACES = (
    "posenc",
    "posenc.analysis",
    "posenc.audit",
    "posenc.torch",
    "posenc.torch.hf",
    "posenc.jax",
)
#: The edges: public packages whose private modules use the public faces of others.
EDGES = ("posenc.cli",)


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


@functools.cache
def _graph() -> dict[str, list[tuple[str, int]]]:
    """Every module's imports (:func:`_imports`), read once for the tests that use them."""
    return {name: _imports(name) for name in _all_modules()}


def _packages() -> list[str]:
    return [name for name in _all_modules() if (SRC.parent / Path(*name.split("."))).is_dir()]


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


def _part(package: str, name: str) -> str:
    """The part of ``package`` that holds module ``name`` (in ``package``): the package itself
    (its ``__init__``), one of its modules, or one of its subpackages with all it holds."""
    if name == package:
        return name
    return f"{package}.{name[len(package) + 1 :].split('.')[0]}"


def _package_loops(graph: dict[str, list[tuple[str, int]]], packages: list[str]) -> list[str]:
    """The loops between the parts of each package (:func:`_part`: a subpackage is one part,
    seen from outside), each with the import lines that make it."""
    loops = []
    for package in packages:
        edges: dict[str, dict[str, list[str]]] = {}
        for name, targets in graph.items():
            for target, line in targets:
                if not all(n == package or n.startswith(package + ".") for n in (name, target)):
                    continue
                a, b = _part(package, name), _part(package, target)
                where = f"{name}:{line} imports {target}"
                if a != b and where not in edges.setdefault(a, {}).setdefault(b, []):
                    edges[a][b].append(where)
        for loop in _cycles({a: list(b) for a, b in edges.items()}):
            made = [x for a in loop for b, lines in edges[a].items() if b in loop for x in lines]
            loops.append(f"{', '.join(loop)} import each other: {'; '.join(made)}")
    return loops


def test_no_import_loop_between_packages() -> None:
    """Seen from the package that holds them, a subpackage and its siblings (modules and
    subpackages) import each other one way only, imports inside functions included.

    The parts of a package are its face (``__init__``), each of its modules and each of its
    subpackages (one part, whatever it holds): ``posenc._rope`` may use ``posenc._checks``
    while the face ``posenc`` re-exports ``posenc._rope``, and ``posenc.torch._kernels`` may use
    ``posenc.torch._checks`` as long as ``posenc.torch._checks`` does not use the kernels.
    """
    loops = _package_loops(_graph(), _packages())
    assert not loops, "\n".join(loops)


def test_the_package_loop_finder_can_fail() -> None:
    graph = {"p": [], "p.a": [("p.b.x", 3)], "p.b": [], "p.b.x": [("p.a", 7)], "q": [("p", 1)]}
    assert _package_loops(graph, ["p", "p.b"]) == [
        "p.a, p.b import each other: p.a:3 imports p.b.x; p.b.x:7 imports p.a"
    ]
    graph["p.b.x"] = [("p.c", 2)]  # a subpackage may use a module of its parent
    graph["p.c"] = []
    assert _package_loops(graph, ["p", "p.b"]) == []


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
    assert _face_code(init.read_text()) == []


def _face_code(source: str) -> list[str]:
    """The statements of a face's source that are not a re-export: after the docstring, only
    relative imports, ``__all__`` and ``__version__``, and a ``try: import torch`` whose
    failure raises the install hint."""
    found = []
    for statement in ast.parse(source).body[1:]:  # after the docstring
        text = ast.unparse(statement)
        reexport = isinstance(statement, ast.ImportFrom) and statement.level >= 1
        listing = isinstance(statement, ast.Assign) and text.startswith(("__all__", "__version__"))
        guard = (
            isinstance(statement, ast.Try)
            and all(isinstance(s, ast.Import) for s in statement.body)
            and all(isinstance(s, ast.Raise) for h in statement.handlers for s in h.body)
            and not (statement.orelse or statement.finalbody)
        )
        if not (reexport or listing or guard):
            found.append(text.splitlines()[0])
    return found


@pytest.mark.parametrize("name", FACES)
def test_faces_define_no_code(name: str) -> None:
    path = _module_file(name)
    assert path is not None
    assert path.name == "__init__.py", f"{name} must be a package"
    assert _face_code(path.read_text()) == []


def test_the_face_check_can_fail() -> None:
    face = '"""Doc."""\nfrom ._a import f\n__all__ = ["f"]\n'
    assert _face_code(face) == []
    assert _face_code(face + "def g():\n    return 1\n") == ["def g():"]
    assert _face_code(face + "class C:\n    pass\n") == ["class C:"]
    assert _face_code(face + "import numpy as np\n") == ["import numpy as np"]
    assert _face_code(face + "f.__doc__ = 'patched'\n") == ["f.__doc__ = 'patched'"]


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


def test_import_posenc_keeps_the_private_modules_private() -> None:
    hidden = [name for name in posenc.__all__ if isinstance(getattr(posenc, name), ModuleType)]
    assert hidden == ["analysis"]


# -- tests/ mirrors the package -------------------------------------------------------------------

TESTS = ROOT / "tests"
#: test folders that are not one package: comparisons with the real libraries, the fuzz suite,
#: the docs and the repository itself (packaging, layout, Makefile)
NOT_A_PACKAGE = {"references", "fuzz", "docs", "repo"}


def _test_folders(src: Path) -> set[str]:
    """The tests/ folder of each package under ``src``: its path with the leading underscores
    dropped (``_rope`` -> ``rope``, ``torch/_kernels`` -> ``torch/kernels``), ``core`` for the
    root."""
    return {
        "/".join(part.lstrip("_") for part in p.parent.relative_to(src).parts) or "core"
        for p in src.rglob("__init__.py")
    }


def _unmirrored(tests: Path, src: Path) -> list[str]:
    """Test folders that are no package's (a subfolder of a package's folder is allowed), and
    packages without a test folder."""
    packages = _test_folders(src)
    found = {f"tests/{p}: no test folder for its package" for p in packages}
    for folder in {p.parent for p in tests.rglob("test_*.py")}:
        relative = folder.relative_to(tests).as_posix()
        parts = relative.split("/")
        found -= {f"tests/{'/'.join(parts[:n])}: no test folder for its package" for n in (1, 2, 3)}
        if relative == ".":
            found.add("tests/: a test file outside the package's folders")
        elif parts[0] not in NOT_A_PACKAGE and not any(
            "/".join(parts[:n]) in packages for n in range(len(parts), 0, -1)
        ):
            found.add(f"tests/{relative}: no package src/posenc/.../{relative}")
    return sorted(found)


def test_tests_mirror_the_package() -> None:
    """Every test file lives in the folder of a package (``tests/rope`` for ``posenc/_rope``,
    ``tests/core`` for the root modules; a subfolder of it, like ``explore/browser``) or in one
    of ``NOT_A_PACKAGE``, and every package has a test folder."""
    assert _unmirrored(TESTS, SRC) == []


def test_the_mirror_check_can_fail(tmp_path: Path) -> None:
    src = tmp_path / "src" / "posenc"
    for package in ("", "_rope", "_bias", "torch/_kernels"):
        (src / package).mkdir(parents=True, exist_ok=True)
        (src / package / "__init__.py").write_text("")
    tests = tmp_path / "tests"
    for path in ("test_a.py", "core/test_b.py", "rope/x/test_b.py", "torch/kernels/test_c.py"):
        (tests / path).parent.mkdir(parents=True, exist_ok=True)
        (tests / path).write_text("")
    (tests / "ropes").mkdir()
    (tests / "ropes" / "test_d.py").write_text("")
    assert _unmirrored(tests, src) == [
        "tests/: a test file outside the package's folders",
        "tests/bias: no test folder for its package",
        "tests/ropes: no package src/posenc/.../ropes",
    ]
