"""Report the sizes of posenc's source: where it is large, largest first. A report, not a gate.

    python tools/sizes.py                          # every section, the 10 largest of each list
    python tools/sizes.py --top 25                 # the 25 largest (--top 0: all)
    PYTHONPATH=src python tools/sizes.py           # the walks need posenc, torch, transformers
    python tools/sizes.py --no-walks               # without the walks

Sizes are code lines: docstrings, comments and blank lines are not counted. Sections:

- ``modules``: code lines per module of ``src/posenc``;
- ``functions``: the largest functions and methods (``Class.method``);
- ``classes``: the largest classes;
- ``root``: the private modules and folders at the root of ``src/posenc``;
- ``walks``: what ``tools/walk.py`` counts for each walk (files opened, changes of file);
  a walk whose libraries are missing is skipped with a note.

The guides of docs/architecture.md (a module at most 450 code lines, a function 80, a class
200, a module's ``forward`` 30, at most 16 private entries at the root) are printed beside
each list, and an entry past its guide is marked ``over``: it is a place to split by
concept. The exit status is 0 whatever the sizes.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import itertools
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "posenc"

#: The guides of docs/architecture.md, in code lines (entries at the root for ``root``).
GUIDES = {"module": 450, "function": 80, "forward": 30, "class": 200, "root": 16}


class Sized(NamedTuple):
    lines: int  # code lines
    where: str  # the file, relative to src/
    name: str  # "" for a module, else the qualified name of the function or class
    guide: int


_DEFINITION = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _statements(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """The module and every statement in it, each with the qualified name of the functions and
    classes around it (``"Class.method."``). Expressions are not entered: no ``def`` is in one."""
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, prefix = stack.pop()
        yield node, prefix
        if isinstance(node, _DEFINITION):
            prefix = f"{prefix}{node.name}."
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
                stack.append((child, prefix))


def code_lines(source: list[str], tree: ast.Module) -> list[int]:
    """Running counts of code lines: ``counts[n]`` is the number of code lines among lines
    ``1..n`` of ``source`` (a line is code unless blank, a comment or part of a docstring)."""
    docstrings: set[int] = set()
    for node, _ in _statements(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | _DEFINITION)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            docstrings.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    code = (
        n not in docstrings and bool(line.strip()) and not line.strip().startswith("#")
        for n, line in enumerate(source, start=1)
    )
    return [0, *itertools.accumulate(code)]


def sizes(src: Path = SRC) -> tuple[list[Sized], list[Sized], list[Sized]]:
    """The modules, the functions and the classes under ``src``, each with its code lines."""
    modules, functions, classes = [], [], []
    for path in sorted(src.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        counts = code_lines(text.splitlines(), tree)
        where = str(path.relative_to(src.parent))
        modules.append(Sized(counts[-1], where, "", GUIDES["module"]))
        for node, prefix in _statements(tree):
            if not isinstance(node, _DEFINITION):
                continue
            lines = counts[node.end_lineno or node.lineno] - counts[node.lineno - 1]
            if isinstance(node, ast.ClassDef):
                classes.append(Sized(lines, where, prefix + node.name, GUIDES["class"]))
            else:
                guide = GUIDES["forward" if node.name == "forward" else "function"]
                functions.append(Sized(lines, where, prefix + node.name, guide))
    return modules, functions, classes


def _largest(title: str, found: list[Sized], top: int, guide: str) -> list[str]:
    ranked = sorted(found, key=lambda s: (-s.lines, s.where, s.name))
    shown = ranked[:top] if top else ranked
    total = sum(s.lines for s in found)
    over = sum(s.lines > s.guide for s in found)
    lines = [
        f"{title}: {len(found):,}, {total:,} code lines; {over} over the guide ({guide}); "
        f"the {len(shown)} largest:"
    ]
    for s in shown:
        mark = "  over" if s.lines > s.guide else ""
        lines.append(f"  {s.lines:5d}  {s.where}{'  ' + s.name if s.name else ''}{mark}")
    return lines


def _root(src: Path) -> list[str]:
    private = sorted(
        p.name for p in src.iterdir() if p.name.startswith("_") and not p.name.startswith("__")
    )
    mark = "  over" if len(private) > GUIDES["root"] else ""
    return [
        f"root: {len(private)} private modules and folders in {_shown(src)} "
        f"(guide: at most {GUIDES['root']}){mark}",
        "  " + ", ".join(private),
    ]


def _walk_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "posenc_walk", Path(__file__).with_name("walk.py")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _walks() -> list[str]:
    lines = ["walks (tools/walk.py; a change of file is a call into another posenc file):"]
    try:
        walk = _walk_tool()
    except ImportError as error:
        return [*lines, f"  skipped: {error}"]
    found = []
    for name, make in walk.WALKS.items():
        try:
            found.append((name, walk.summary(walk.trace(make()))))
        except ImportError as error:
            lines.append(f"  {name:10s} skipped: {error}")
    for name, w in sorted(found, key=lambda item: -item[1].changes):
        lines.append(
            f"  {name:10s} files opened {len(w.files):3d}, changes of file {w.changes:4d} "
            f"({w.back} back into a file seen), calls {w.calls}"
        )
    return lines


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def report(top: int = 10, walks: bool = True, src: Path = SRC) -> str:
    """The report: modules, functions, classes, root and walks, each a section."""
    modules, functions, classes = sizes(src)
    g = GUIDES
    sections = [
        [f"sizes in code lines (no docstrings, comments or blank lines) of {_shown(src)}"],
        _largest("modules", modules, top, f"at most {g['module']}"),
        _largest("functions", functions, top, f"at most {g['function']}, a forward {g['forward']}"),
        _largest("classes", classes, top, f"at most {g['class']}"),
        _root(src),
        _walks() if walks else ["walks: left out (--no-walks)"],
    ]
    return "\n\n".join("\n".join(section) for section in sections)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--top", type=int, default=10, metavar="N", help="the N largest of each list (0: all)"
    )
    parser.add_argument(
        "--no-walks", action="store_true", help="leave out the walks (they import torch)"
    )
    args = parser.parse_args(argv)
    print(report(max(args.top, 0), walks=not args.no_walks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
