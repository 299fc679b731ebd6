"""What a newcomer meets first: the README's first example, the install line of each page that
needs more than posenc, and worked examples where a page points to one.

Each check reads the page as a newcomer does, top to bottom, and names the page and line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _pins(requirements: str) -> dict[str, str]:
    """``name -> version`` of the ``name==version`` lines of a requirements file."""
    text = (ROOT / requirements).read_text(encoding="utf-8")
    return {m[1].lower(): m[2] for m in re.finditer(r"(?m)^([\w.-]+)==([\w.]+)", text)}


def _section(page: str, heading: str) -> str:
    """The text of ``page`` from the heading ``heading`` to the next heading of its level."""
    text = (DOCS / page).read_text(encoding="utf-8")
    match = re.search(rf"(?m)^(#+) {re.escape(heading)}\s*$", text)
    assert match is not None, f"docs/{page} has no section {heading!r}"
    level = len(match[1])
    end = re.search(rf"(?m)^#{{1,{level}}} ", text[match.end() :])
    return text[match.end() : match.end() + end.start() if end else len(text)]


def test_the_readme_shows_python_within_its_first_45_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    first = next((n for n, line in enumerate(lines, 1) if line.startswith(">>> ")), None)
    assert first is not None, "README.md has no Python example"
    assert first <= 45, f"README.md's first Python example is at line {first}"


@pytest.mark.parametrize("package", ["onnx", "onnxscript", "onnxruntime"])
def test_the_onnx_section_says_what_to_install(package: str) -> None:
    """``torch.onnx.export`` needs onnxscript besides onnx: the page names both, and onnxruntime
    that runs the example, at the versions the tests use."""
    section = _section("deploying.md", "ONNX")
    lines = [line for line in section.splitlines() if "pip install" in line]
    assert lines, "docs/deploying.md's ONNX section has no pip install line"
    pin = f"{package}=={_pins('requirements-dev.txt')[package]}"
    assert any(re.search(rf"(?<![\w-]){re.escape(pin)}(?![\w.])", line) for line in lines), (
        f"docs/deploying.md's install line does not name {pin}: {lines}"
    )


def test_flex_attention_has_a_worked_example_in_the_docs() -> None:
    """A ``score_mod`` is only useful passed to ``flex_attention``: some page runs that call."""
    pages = [p for p in sorted(DOCS.glob("*.md")) if ">>> " in p.read_text(encoding="utf-8")]
    calls = [
        p.name
        for p in pages
        for line in p.read_text(encoding="utf-8").splitlines()
        if re.match(r"\s*(>>>|\.\.\.) .*\bflex_attention\(", line)
    ]
    assert calls, "no docs page runs flex_attention(...) in an example"


@pytest.mark.parametrize("model", ["Nemotron", "SeamlessM4T"])
def test_models_whose_table_posenc_reproduces_are_not_listed_as_not_covered(model: str) -> None:
    """``RelativeSinusoidPositions(d).table(L + cached_frames)`` is their table
    (tests/references/hf/test_bias.py): the page says how, instead of listing them as left out."""
    assert model not in _section("attention-biases.md", "Not covered yet")
    assert model in _section("attention-biases.md", "In Hugging Face models")


def test_no_page_computes_positions_from_a_mask_by_hand() -> None:
    """``cumsum(mask) - 1`` is what ``positions_from_mask`` does (left padding included)."""
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"\s*(>>>|\.\.\.) ", line):
                assert "cumsum(" not in line, f"{page.name}:{n}: use positions_from_mask: {line}"
