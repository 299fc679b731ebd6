"""The `posenc` command, driven through main(argv)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from posenc.cli import main


def test_demo_prints_the_table_and_the_seed_batch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "posenc.sinusoidal(10, 8)" in out
    assert "0.8415" in out  # sin(1)
    assert "-0.9111" in out  # cos(9)
    assert "odd exponents" in out
    if "PyTorch is not installed" not in out:
        assert "for both sequences: True" in out


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "demo" in capsys.readouterr().err


def test_version_and_module_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "posenc.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.startswith("posenc ")
