"""docs/support.md cannot drift: it lists every public module and every exit code the CLI
defines, and pyproject.toml's lower bounds are the versions the test runs pin."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from posenc import cli
from tests.repo.test_layout import PUBLIC

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "docs" / "support.md"


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _first_column(section: str) -> set[str]:
    """The first cell of every row of the markdown tables in ``section`` (headers dropped)."""
    cells = re.findall(r"^\| *([^|]+?) *\|", section, flags=re.MULTILINE)
    return {c.strip("`") for c in cells if not set(c) <= set("-: ")} - {"Module", "Code"}


def cli_exit_codes() -> set[int]:
    """Every exit code the CLI's sources define: ``return N`` (either branch of ``a if c else
    b`` too), ``code = N`` and ``code, line = N, ...``, and the signal and pipe codes."""
    codes = {code for code, _ in cli._SIGNALS.values()} | {cli._BROKEN_PIPE}
    for path in (ROOT / "src" / "posenc" / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            values: list[ast.expr] = []
            if isinstance(node, ast.Return) and node.value is not None:
                values = [node.value]
                if isinstance(node.value, ast.IfExp):
                    values = [node.value.body, node.value.orelse]
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                    target, value = target.elts[0], value.elts[0]
                if isinstance(target, ast.Name) and target.id == "code":
                    values = [value]
            codes |= {
                v.value
                for v in values
                if isinstance(v, ast.Constant) and type(v.value) is int  # not bools
            }
    return codes


def test_the_cli_defines_the_codes_its_docstring_lists() -> None:
    """The scan above finds what it should (a scan that finds nothing would pass below)."""
    assert cli_exit_codes() == {0, 1, 2, 70, 129, 130, 141, 143}


def test_support_lists_every_exit_code() -> None:
    section = _section(SUPPORT.read_text(encoding="utf-8"), "The command line")
    assert {int(c) for c in _first_column(section)} == cli_exit_codes()


def test_support_lists_every_public_module() -> None:
    section = _section(SUPPORT.read_text(encoding="utf-8"), "What is public")
    assert _first_column(section) == PUBLIC


def test_support_is_in_the_site_navigation() -> None:
    assert re.search(r"^ +- Support: support\.md$", (ROOT / "mkdocs.yml").read_text(), re.M)


def _pin(requirements: str, package: str) -> str:
    text = (ROOT / requirements).read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(package)}==([\w.+]+)$", text, flags=re.MULTILINE)
    assert found, f"{requirements} pins no {package}"
    return found[1].split("+")[0]


def _lower_bounds() -> dict[str, list[str]]:
    """Every ``name>=X`` in pyproject.toml's dependencies and extras, by name."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = text.split("[project]", 1)[1].split("\n[project.scripts]", 1)[0]
    bounds: dict[str, list[str]] = {}
    for name, version in re.findall(r'"([\w-]+)>=([\d.]+)', project):
        bounds.setdefault(name, []).append(version)
    return bounds


@pytest.mark.parametrize(
    ("package", "requirements", "digits"),
    [
        ("numpy", "requirements-py310.txt", 3),  # the oldest NumPy tested: the Python 3.10 run
        ("torch", "requirements-demo.txt", 2),
        ("transformers", "requirements-dev.txt", 2),
        ("matplotlib", "requirements-demo.txt", 2),
        ("flask", "requirements-demo.txt", 2),
        ("jax", "requirements-dev.txt", 3),
        ("flax", "requirements-dev.txt", 3),
    ],
)
def test_lower_bounds_are_tested_versions(package: str, requirements: str, digits: int) -> None:
    tested = ".".join(_pin(requirements, package).split(".")[:digits])
    bounds = _lower_bounds()
    assert bounds.get(package), f"pyproject.toml declares no lower bound for {package}"
    assert set(bounds[package]) == {tested}, (package, bounds[package], tested)
    assert f"`>={tested}" in SUPPORT.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("package", "requirements"),
    [
        ("torch", "requirements-demo.txt"),
        ("numpy", "requirements-demo.txt"),
        ("pytest", "requirements-dev.txt"),
        ("hypothesis", "requirements-dev.txt"),
        ("mpmath", "requirements-dev.txt"),
    ],
)
def test_the_compat_constraints_hold_the_pins(package: str, requirements: str) -> None:
    """make test-compat unpins transformers only: everything else stays at the pins."""
    assert _pin("constraints-compat.txt", package) == _pin(requirements, package)
    text = (ROOT / "constraints-compat.txt").read_text(encoding="utf-8")
    assert not re.search(r"^transformers", text, flags=re.MULTILINE)
