"""The documentation site builds in strict mode and its API reference covers the public API.

The site (mkdocs.yml) is built once into a temporary folder, offline; each public module must
have a reference page (docs/reference/*.md, one ``::: module`` each) on which every name of its
``__all__`` has an entry (an HTML anchor ``id="module.name"``). tools/griffe_rst.py, which
turns the docstrings' RST markup into Markdown for the site, is checked on one docstring. Skips
without the docs tools.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("mkdocs", reason="the docs site needs mkdocs (requirements-dev.txt)")
pytest.importorskip("material", reason="the docs site needs mkdocs-material")
pytest.importorskip("mkdocstrings_handlers.python", reason="the docs site needs mkdocstrings")

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_MODULES = (
    "posenc",
    "posenc.analysis",
    "posenc.audit",
    "posenc.torch",
    "posenc.torch.hf",
    "posenc.jax",
    "posenc.plot",
    "posenc.cli",
)
# The packages a public module needs to import (to read its __all__).
NEEDS = {
    "posenc.torch": "torch",
    "posenc.torch.hf": "torch",
    "posenc.jax": "jax",
    "posenc.plot": "matplotlib",
}


def public_names(module: ModuleType) -> list[str]:
    """``__all__``, or for a module without one its own public functions and classes."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and callable(value)
        and getattr(value, "__module__", None) == module.__name__
    )


def reference_pages() -> dict[str, Path]:
    """Module name → the docs/reference page that renders it (``::: module``)."""
    pages = {}
    for page in sorted((ROOT / "docs" / "reference").glob("*.md")):
        for module in re.findall(r"^::: *([\w.]+) *$", page.read_text(), flags=re.MULTILINE):
            pages[module] = page
    return pages


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        # not --quiet: it drops the warnings before --strict counts them
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}"
    return out


def built_page(site: Path, page: Path) -> str:
    return (site / page.relative_to(ROOT / "docs").with_suffix(".html")).read_text()


def test_every_public_module_has_a_reference_page() -> None:
    pages = reference_pages()
    assert sorted(pages) == sorted(PUBLIC_MODULES)


@pytest.mark.slow
@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_reference_lists_every_public_name(site: Path, name: str) -> None:
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    module = importlib.import_module(name)
    pages = reference_pages()
    html = built_page(site, pages[name])
    missing = []
    for attr in public_names(module):
        value = getattr(module, attr)
        if isinstance(value, ModuleType):  # a public submodule: its own page
            if value.__name__ not in pages:
                missing.append(attr)
        elif f'id="{name}.{attr}"' not in html:
            missing.append(attr)
    assert not missing, f"{name}: not in its reference page: {missing}"
    assert public_names(module), name


def load_griffe_rst() -> ModuleType:
    spec = importlib.util.spec_from_file_location("griffe_rst", ROOT / "tools" / "griffe_rst.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docstring_markup_becomes_markdown() -> None:
    griffe = pytest.importorskip("griffe")
    rst = load_griffe_rst()
    docstring = "\n".join(
        [
            "See :func:`~pkg.mod.f` and :class:`Thing`::",
            "",
            "    code()",
            "",
            "Args:",
            "    a, b: both numbers.",
            "        Positive.",
            "",
            "Shapes:",
            "    - ``x``: ``(b, s)``",
            "",
            "=====  =====",
            "name   value",
            "=====  =====",
            "one    1",
            "       more",
            "=====  =====",
            "",
            ">>> x[1][0]",
            "2",
        ]
    )
    markdown = rst.to_markdown(docstring, griffe.Module("pkg"))
    assert markdown.split("\n") == [
        'See <autoref identifier="pkg.mod.f" optional><code>f()</code></autoref> and '
        '<autoref identifier="pkg.Thing" optional><code>Thing</code></autoref>:',
        "",
        "    code()",
        "",
        "Args:",
        "    a: both numbers.",
        "        Positive.",
        "    b: both numbers.",
        "        Positive.",
        "",
        "Shapes:",
        "",
        "- ``x``: ``(b, s)``",
        "",
        "| name | value |",
        "|---|---|",
        "| one | 1 more |",
        "",
        "```pycon",
        ">>> x[1][0]",
        "2",
        "```",
    ]
