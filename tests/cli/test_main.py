"""The `posenc` command as a whole, `posenc demo`, `posenc inspect` and `posenc plot`,
driven through main(argv)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from posenc.cli import main


def test_demo_without_figures_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--no-figures"]) == 0
    assert "Figures" not in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "demo" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["demo", "table", "plot", "inspect", "identify"])
def test_every_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    assert f"usage: posenc {command}" in capsys.readouterr().out


def test_unknown_command_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "invalid choice: 'frobnicate'" in err


def test_version_and_module_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "posenc.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.startswith("posenc ")


def test_inspect_report(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["inspect", "--d-model", "64", "--length", "256", "--max-position", "100000"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "convention=paper base=10000 d_model=64" in out
    assert "32 pairs from 6.28319 to 47117.2, common ratio 1.33352" in out
    assert "(--all lists all 32)" in out
    assert "Relative shift" in out
    assert "256 of 256" in out
    assert "Precision (float32)" in out
    assert "Precision (bfloat16)" in out
    assert "(the recipe carried out in float32 is the float32 recipe itself (listed once))" in out
    assert main([*argv, "--all"]) == 0
    assert "(--all lists" not in capsys.readouterr().out


def test_inspect_json_matches_the_analysis(capsys: pytest.CaptureFixture[str]) -> None:
    from posenc import analysis

    argv = ["inspect", "--d-model", "12", "--base", "500", "--convention", "tensor2tensor"]
    assert main([*argv, "--length", "64", "--shift", "3", "--max-position", "5000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["setting"] == {"d_model": 12, "base": 500.0, "convention": "tensor2tensor"}
    expected = analysis.wavelengths(12, base=500.0, convention="tensor2tensor")
    assert report["wavelengths"]["wavelengths"] == pytest.approx(expected.wavelengths.tolist())
    assert [row["k"] for row in report["shift"]] == [3]
    assert report["shift"][0]["float64"] < 1e-12
    assert 1e-9 < report["shift"][0]["float32"] < 1e-6
    assert [row["dtype"] for row in report["distinct_rows"]] == ["float32", "bfloat16", "float16"]
    assert [p["dtype"] for p in report["precision"]] == ["float32", "bfloat16"]
    assert [p["note"] for p in report["precision"]] == [
        "the recipe carried out in float32 is the float32 recipe itself (listed once)",
        "",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--d-model", "0"], "--d-model must be an integer >= 1, got 0"),
        (["--length", "1"], "--length must be an integer >= 2, got 1"),
        (["--length", "10", "--shift", "10"], "--shift must satisfy 0 < |k| < --length (10)"),
        (["--max-position", "0"], "--max-position must be an integer >= 1"),
        (["--base", "nan"], "--base must be a positive finite number"),
        (["--base", "1e-320"], "--base must be a number >= 2**-970"),
        (["--max-position", str(10**20)], "--max-position must be at most 2**53 "),
        (["--d-model", str(10**20)], "--d-model must be at most"),
        (["--d-model", "10000000", "--length", "4000"], "--length and --d-model ask for"),
        (["--length", str(10**20)], "--length must be at most 2**53 + 1 "),
    ],
)
def test_inspect_bad_input(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert message in err


@pytest.mark.parametrize(
    "kind", ["heatmap", "sinusoids", "wavelengths", "similarity", "precision", "shift"]
)
def test_plot_writes_each_kind(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / f"{kind}.svg"
    argv = ["plot", kind, "--d-model", "32", "--out", str(path)]
    if kind in ("precision", "shift"):
        argv += ["--max-position", "10000"]
    if kind == "shift":
        argv += ["--shifts", "1,7"]
    assert main(argv) == 0
    assert f"wrote {path}" in capsys.readouterr().err
    assert b"<svg" in path.read_bytes()[:2000]


def test_plot_defaults_to_kind_png(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    assert main(["plot", "heatmap", "--length", "20", "--d-model", "16"]) == 0
    assert (tmp_path / "heatmap.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["wavelengths", "--length", "5"], "--length does not apply to the wavelengths plot"),
        (["heatmap", "--out", "x.gif"], "--out must end in .png or .svg"),
        (["sinusoids", "--channels", "a,b"], "--channels must be comma-separated integers"),
        (["shift", "--shifts", "1,x"], "--shifts must be comma-separated integers"),
        (["heatmap", "--shifts", "1"], "--shifts does not apply to the heatmap plot"),
        (["shift", "--shifts", "0"], "shifts must be an integer >= 1, got 0"),
        (["pie"], "invalid choice: 'pie'"),
        (["heatmap", "--d-model", "0"], "--d-model must be an integer >= 1, got 0"),
        (["heatmap", "--length", str(10**20)], "--length must be at most 2**53 + 1"),
        (["rotation", "--position", str(10**20)], "--position + --shift must lie within +-2**53"),
        (["precision", "--max-position", str(10**20)], "--max-position must be at most 2**53"),
        (["slopes", "--heads", str(10**20)], "--heads must be at most 65536 for a figure"),
        (["heatmap", "--d-model", str(10**20)], "--length and --d-model ask for"),
    ],
)
def test_plot_bad_input(
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    assert main(["plot", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert message in err


@pytest.mark.parametrize(
    ("argv", "typo", "meant"),
    [
        (["table", "--dmodel", "8", "--length", "4"], "--dmodel", "--d-model"),
        (["table", "--d-model", "8", "--lenght", "4"], "--lenght", "--length"),
        (["table", "--dmodel=8", "--length", "4"], "--dmodel", "--d-model"),
        (["plot", "heatmap", "--lenght", "4"], "--lenght", "--length"),
        (["inspect", "--d-model", "8", "--bsae", "100"], "--bsae", "--base"),
        (["--dbug", "table", "--length", "4"], "--dbug", "--debug"),
    ],
)
def test_a_mistyped_option_is_named_with_the_option_meant(
    argv: list[str], typo: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not "the following arguments are required": the option typed is what is wrong."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"unrecognized option {typo}" in err, err
    assert f"did you mean {meant}?" in err, err


def test_an_option_of_no_subcommand_is_named_without_a_guess(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["table", "--length", "4", "--d-model", "8", "--zzzz", "1"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized option --zzzz" in err
    assert "did you mean" not in err
    assert "posenc table --help" in err


def test_abbreviated_and_joined_options_still_parse(capsys: pytest.CaptureFixture[str]) -> None:
    """An unambiguous prefix of an option (argparse's abbreviation) and ``--option=value``."""
    assert main(["table", "--len", "2", "--d-mod", "4", "--base=100"]) == 0
    assert "base=100" in capsys.readouterr().out
