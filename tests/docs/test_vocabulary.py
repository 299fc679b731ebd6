"""Words users know: tutorial references are named by what they are, never by a bare number.

The recipes posenc is compared with are called "the PyTorch tutorial recipe (angles in
float32)", "the odd-exponent cosine bug (cos uses base^((2i+1)/d))", "a common tutorial
implementation" and so on: a reader does not know what a numbered source document is. Random seeds
(``torch.manual_seed(0)``, ``--seed 2``, ``seed=0``) keep the word. This is the same search as

    grep -rniE "<PATTERN>" README.md docs src examples benchmarks tests

(``PATTERN`` below), run over every file under those paths except this one, and over what
users see when they run the ``posenc`` command: the demo's output and every ``--help``. The
pattern and the examples it must catch are spelled in pieces (``S`` is the word), so that this
file itself does not match the plain ``grep``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from posenc.cli import main

ROOT = Path(__file__).resolve().parents[2]

#: Where the search runs, relative to the repository root.
SEARCHED = ("README.md", "docs", "src", "examples", "benchmarks", "tests")

#: Bytecode compiled from the searched sources: it can outlive a rename, so it is not searched.
SKIPPED_DIRECTORIES = frozenset({"__pycache__"})

S = "se" + "ed"  # the word, in pieces (see the module docstring)

PATTERN = rf"{S}[ _-]?00[0-4]|{S}s [0-9, /and]*00[0-4]|the {S}s\b|{S}s'|{S} recipes?|shared/{S}s"

TEXT = re.compile(PATTERN, re.IGNORECASE)
BYTES = re.compile(PATTERN.encode("ascii"), re.IGNORECASE)

SUBCOMMANDS = ["", "demo", "table", "plot", "inspect", "identify", "plan"]


def searched_files() -> list[Path]:
    this = Path(__file__).resolve()
    files = []
    for name in SEARCHED:
        top = ROOT / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in candidates:
            if not path.is_file() or path.resolve() == this:
                continue
            if SKIPPED_DIRECTORIES.intersection(path.relative_to(ROOT).parts):
                continue
            files.append(path)
    return files


def matching_lines(data: bytes) -> list[str]:
    """``number: line`` for every line of ``data`` the pattern matches (like ``grep -n``)."""
    return [
        f"{number}: {line.decode('utf-8', 'replace').strip()}"
        for number, line in enumerate(data.splitlines(), start=1)
        if BYTES.search(line)
    ]


def test_the_search_covers_the_project() -> None:
    files = {path.relative_to(ROOT).as_posix() for path in searched_files()}
    assert "README.md" in files
    assert "examples/order_matters.py" in files
    assert "benchmarks/tables.py" in files
    assert "tests/references/test_tutorials.py" in files
    assert "docs/tutorial.md" in files
    assert "tests/docs/test_vocabulary.py" not in files
    assert len(files) > 50


def test_no_file_uses_internal_names_for_tutorial_references() -> None:
    found = {}
    for path in searched_files():
        lines = matching_lines(path.read_bytes())
        if lines:
            found[path.relative_to(ROOT).as_posix()] = lines
    assert not found, found


def test_the_demo_output_uses_no_internal_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--no-figures"]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "odd-exponent" in text  # the demo does talk about the tutorial bug
    assert not TEXT.findall(text), TEXT.findall(text)


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_uses_no_internal_names(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [command, "--help"] if command else ["--help"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert text.strip()
    assert not TEXT.findall(text), TEXT.findall(text)


@pytest.mark.parametrize(
    "text",
    [
        f"{S} 001's bug",
        f"{S.title()} 000 recipe",
        f"{S}-000 recipe",
        f"def test_{S}001_table():",
        f"{S}000_recipe(length, d_model, torch)",
        f"{S}_000_float32(stop, d_model)",
        f"{S}s 000, 002, 003, 004",
        f"{S}s 001 and 004",
        f"the {S}s use torch",
        f"the {S}s' recipes",
        f"the {S} recipe",
        f"/work/shared/{S}s/000_c98bfbb6cde76317.txt",
    ],
)
def test_the_pattern_catches_internal_names(text: str) -> None:
    assert TEXT.search(text)
    assert matching_lines(f"first line\n{text}\nlast line\n".encode()) == [f"2: {text}"]


@pytest.mark.parametrize(
    "text",
    [
        "torch.manual_seed(0)",
        "python examples/order_matters.py --seed 2",
        "train('posenc', seed=0)",
        "over 5 random seeds (min-max)",
        "random seeds 0-9",
        "seeds 0-4",
        "the PyTorch tutorial recipe (angles in float32)",
        "the odd-exponent cosine bug (cos uses base^((2i+1)/d))",
        "@settings(max_examples=60, deadline=None)  # hypothesis",
    ],
)
def test_the_pattern_spares_random_seeds_and_plain_names(text: str) -> None:
    assert not TEXT.search(text)
    assert matching_lines(text.encode()) == []
