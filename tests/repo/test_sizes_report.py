"""``tools/sizes.py`` runs and prints its sections, largest first; it counts code lines only.

The walks are left out here (``--no-walks``): they import torch and transformers, and
tests/torch/test_walks.py runs tools/walk.py itself.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _sizes_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("posenc_sizes", ROOT / "tools" / "sizes.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sizes = _sizes_tool()


def test_the_report_prints_its_sections_largest_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert sizes.main(["--top", "3", "--no-walks"]) == 0
    out = capsys.readouterr().out
    sections = out.rstrip("\n").split("\n\n")
    heads = [section.split(":")[0] for section in sections]
    assert heads[1:] == ["modules", "functions", "classes", "root", "walks"], out
    for section in sections[1:4]:
        counts = [int(line.split()[0]) for line in section.splitlines()[1:]]
        assert len(counts) == 3, section
        assert counts == sorted(counts, reverse=True), section
    assert re.search(r"^root: \d+ private modules", sections[4], re.MULTILINE)
    assert "_rope" in sections[4]
    assert sections[5] == "walks: left out (--no-walks)"


def test_an_entry_past_its_guide_is_marked(tmp_path: Path) -> None:
    package = tmp_path / "posenc"
    package.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(31))
    (package / "big.py").write_text(
        f'"""Doc."""\n\n\ndef forward():\n{body}\n\ndef small():\n    pass\n'
    )
    out = sizes.report(top=0, walks=False, src=package)
    assert "     32  posenc/big.py  forward  over" in out  # a forward's guide is 30
    assert "      2  posenc/big.py  small\n" in out
    assert "1 over the guide" in out


def test_code_lines_leave_out_docstrings_comments_and_blanks() -> None:
    source = 'def f():\n    """Doc\n    string."""\n    # comment\n\n    x = 1\n    return x\n'
    assert sizes.code_lines(source.splitlines(), ast.parse(source))[-1] == 3
    module = '"""Module\ndocstring."""\n\nimport os  # why\n' + source
    assert sizes.code_lines(module.splitlines(), ast.parse(module))[-1] == 4
