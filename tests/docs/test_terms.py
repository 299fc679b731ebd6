"""Every term a learner meets is defined before it is used.

The texts a learner reads: the README, the tutorial, the RoPE page, what ``posenc demo``
prints and the explorer's panel titles and sentences. In each of them, read in order, the first
use of each term of :data:`GLOSSARY` must come at or after its definition. A use inside a
Markdown link (``[the float32 recipe](tutorial.md#...)``) counts as a pointer to the
definition, not as a use.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from posenc.cli import _demo, main

ROOT = Path(__file__).resolve().parents[2]

#: term -> (regex of a use, regex of its definition). Both run on the text with Markdown
#: emphasis and backticks removed and whitespace collapsed to single spaces; a definition says
#: what the term is in the same sentence.
GLOSSARY: dict[str, tuple[str, str]] = {
    "ulp": (
        r"\bulps?\b",
        r"units? in the last place \(ulp\)|\bulp( \(|: (one )?)units? in the last place",
    ),
    "float32 recipe": (
        r"\bfloat32 recipe\b",
        r"\bfloat32 recipe\b[,:]? ?(\(|is |means )?[^.]{0,80}?\bangles?\b[^.]{0,40}?\bin float32",
    ),
    "residual": (
        r"\bresiduals?\b",
        r"\bresidual\b[,:]? ?(\(|is )?[^.]{0,40}?\b(max|largest) ?\|",
    ),
    "rounded once": (
        r"\brounded once\b|\brounds? (each value )?once\b",
        r"\brounded once\b[,:]? ?\(?[^.]{0,40}?\b(a single|one|only one) rounding\b",
    ),
    "M_k": (
        r"\bM_k\b",
        r"\bM_k\b[,:]? ?(\(|is |, the )?[^.]{0,40}?\bmatri(x|ces)\b|\bmatrix M_k\b",
    ),
}

_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def _normalise(text: str) -> str:
    text = text.replace("**", "").replace("`", "")
    return re.sub(r"\s+", " ", text)


def _first_use(text: str, pattern: str) -> int | None:
    """Where ``pattern`` first occurs outside a Markdown link (its text and its target)."""
    linked = [m.span() for m in _LINK.finditer(text)]
    for match in re.finditer(pattern, text):
        if not any(a <= match.start() < b for a, b in linked):
            return match.start()
    return None


def undefined_uses(text: str) -> list[str]:
    """The terms of ``text`` used before their definition (or never defined), with context."""
    text = _normalise(text)
    found = []
    for term, (use, definition) in GLOSSARY.items():
        first = _first_use(text, use)
        if first is None:
            continue
        defined = re.search(definition, text)
        if defined is None or first < defined.start():
            where = text[max(0, first - 60) : first + 40]
            found.append(f"{term!r} used before it is defined: ...{where}...")
    return found


def _demo_output(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["demo", "--no-figures"]) == 0
    # the figure section comes last; its lines name each figure
    return capsys.readouterr().out + "\n" + "\n".join(_demo._ABOUT.values())


def _explorer_text() -> str:
    pytest.importorskip("posenc.explore")
    from posenc.explore import PANELS, STEPS

    steps = [f"{s.title}. {s.idea} {s.try_} {s.notice}" for s in STEPS]  # the page opens on them
    return "\n".join([*steps, *(f"{panel.title}. {panel.look}" for panel in PANELS)])


@pytest.mark.parametrize("page", ["README.md", "docs/tutorial.md", "docs/rope.md"])
def test_pages_define_each_term_before_using_it(page: str) -> None:
    path = ROOT / page
    assert path.exists(), page
    assert undefined_uses(path.read_text(encoding="utf-8")) == []


def test_the_demo_defines_each_term_before_using_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert undefined_uses(_demo_output(capsys)) == []


def test_the_explorer_panels_define_each_term_before_using_it() -> None:
    assert undefined_uses(_explorer_text()) == []


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("The float32 recipe is off. The float32 recipe computes the angles in float32.", True),
        (
            "The float32 recipe (the usual code, which computes the angles in float32) drifts.",
            False,
        ),
        ("Its ulp is small. One unit in the last place (ulp) is 2^-24.", True),
        ("One unit in the last place (ulp) is 2^-24; an ulp is small.", False),
        ("See [the residual](tutorial.md#residual). The residual is the max |a - b|.", False),
        ("The residual is 7e-8.", True),
        ("A table rounded once. Rounded once (a single rounding) means exact.", True),
        ("M_k, the matrix of rotations, moves PE[p] to PE[p+k] = M_k PE[p].", False),
        ("PE[p+k] = M_k PE[p]. Here M_k is the matrix of rotations.", True),
        ("Nothing to define here.", False),
    ],
)
def test_the_check_itself(text: str, bad: bool) -> None:
    assert bool(undefined_uses(text)) == bad
