"""Every ``--help`` text is plain terminal text, and ``python -m posenc`` runs the CLI."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from posenc.cli import main

SUBCOMMANDS = ["", "demo", "table", "plot", "inspect", "identify", "plan", "audit", "explore"]
MARKUP = re.compile(r"``|:[a-z]+:`|`[^`\s][^`]*`")


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_has_no_markup(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [command, "--help"] if command else ["--help"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.strip()
    assert not MARKUP.findall(text), MARKUP.findall(text)


def test_the_markup_check_can_fail() -> None:
    assert MARKUP.findall("see :mod:`posenc.plot` and ``--out``")


def test_python_dash_m_posenc_runs_the_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "posenc", "--version"], capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith("posenc ")
