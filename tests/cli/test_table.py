"""``posenc table`` through main(argv): every format, positions, bounded blocks, bad input."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc.cli import _table as table
from posenc.cli import main


def run_table(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["table", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_text_to_stdout_is_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_table(["--length", "10", "--d-model", "8"], capsys)
    assert code == 0
    assert err == ""
    lines = [line for line in out.splitlines() if not line.startswith("#")]
    values = np.array([[float(v) for v in line.split()] for line in lines])
    np.testing.assert_array_equal(values[:, 0], np.arange(10))
    # printed with 8 decimals (float32): half a unit of the last printed digit
    np.testing.assert_allclose(values[:, 1:], posenc.sinusoidal(10, 8), atol=5e-9)
    assert "convention=paper base=10000 d_model=8 dtype=float32 rows=10" in out


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("convention", sorted(posenc.CONVENTIONS))
def test_csv_round_trips_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dtype: str, convention: str
) -> None:
    out = tmp_path / "t.csv"
    argv = ["--positions", "7,0:3,1000:1003", "--d-model", "5", "--base", "500"]
    code, _, err = run_table(
        [*argv, "--convention", convention, "--dtype", dtype, "--out", str(out)], capsys
    )
    assert code == 0
    assert f"to {out}" in err
    rows = list(csv.reader(io.StringIO(out.read_text())))
    assert rows[0] == ["position", "ch0", "ch1", "ch2", "ch3", "ch4"]
    positions = [int(r[0]) for r in rows[1:]]
    assert positions == [7, 0, 1, 2, 1000, 1001, 1002]
    got = np.array([[float(v) for v in r[1:]] for r in rows[1:]]).astype(dtype)
    expected = posenc.sinusoidal(positions, 5, base=500.0, convention=convention, dtype=dtype)
    np.testing.assert_array_equal(got, expected)


def test_json_has_metadata_and_exact_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.json"
    code, _, _ = run_table(
        ["--length", "4", "--d-model", "6", "--dtype", "float64", "--out", str(out)], capsys
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["d_model"] == 6
    assert doc["dtype"] == "float64"
    assert doc["convention"] == "paper"
    assert doc["positions"] == [0, 1, 2, 3]
    np.testing.assert_array_equal(np.array(doc["table"]), posenc.sinusoidal(4, 6, dtype=np.float64))


def test_npy_is_written_block_by_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small blocks so the test exercises many windows, a ragged last block and the progress bar.
    monkeypatch.setattr(table, "BLOCK_BYTES", 3 * 16 * 4)
    out = tmp_path / "t.npy"
    code, _, err = run_table(["--length", "100", "--d-model", "16", "--out", str(out)], capsys)
    assert code == 0
    got = np.load(out)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, posenc.sinusoidal(100, 16))
    assert "100.0% 100/100 rows" in err  # progress bar (one line per 10% when not a terminal)
    assert err.count("\n") >= 10


def test_npy_block_bound_is_documented_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.npy"
    spec = table._Spec(10**7, 1024, 10000.0, "paper", np.dtype(np.float32))
    assert spec.block_rows * 1024 * 4 <= table.BLOCK_BYTES == 32 << 20
    assert spec.blocks == -(-(10**7) // spec.block_rows)
    code, _, err = run_table(
        ["--length", "3", "--d-model", "2", "--quiet", "--out", str(out)], capsys
    )
    assert code == 0
    assert "%" not in err  # one block, or --quiet: no progress bar


def test_format_follows_suffix_and_flag_wins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.npy"
    assert run_table(["--length", "2", "--d-model", "2", "--out", str(out)], capsys)[0] == 0
    assert np.load(out).shape == (2, 2)
    out = tmp_path / "t.data"
    argv = ["--length", "2", "--d-model", "2", "--format", "json", "--out", str(out)]
    assert run_table(argv, capsys)[0] == 0
    assert json.loads(out.read_text())["rows"] == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--length", "-3", "--d-model", "4"], "--length must be an integer >= 0, got -3"),
        (["--length", "3", "--d-model", "0"], "--d-model must be an integer >= 1, got 0"),
        (["--length", "3", "--d-model", "x"], "argument --d-model: invalid int value: 'x'"),
        (["--length", "3", "--d-model", "4", "--base", "-1"], "--base must be a positive"),
        (["--d-model", "4"], "one of the arguments --length --positions is required"),
        (["--length", "3", "--positions", "1", "--d-model", "4"], "not allowed with argument"),
        (["--positions", "1,a", "--d-model", "4"], "--positions must be integers"),
        (["--positions", "5:1", "--d-model", "4"], "--positions must name at least one"),
        (["--length", "3", "--d-model", "4", "--format", "npy"], "needs --out FILE"),
        (["--length", "3", "--d-model", "4", "--convention", "bert"], "invalid choice: 'bert'"),
        (["--length", "3", "--d-model", "4", "--dtype", "int8"], "invalid choice: 'int8'"),
        (["--positions", "0,9007199254740993", "--d-model", "4"], "within +-2**53"),
        (["--positions", str(10**20), "--d-model", "4"], "--positions must lie within +-2**53"),
        (["--positions", f"-{10**20}", "--d-model", "4"], "--positions must lie within +-2**53"),
        (["--positions", f"0:{10**20}", "--d-model", "4"], "--positions must lie within +-2**53"),
        (["--positions", f"0:3:{10**20}", "--d-model", "4"], "--positions must lie within"),
        (["--positions", f"0:{2**53 + 1}", "--d-model", "4"], "--positions names 9,007,199,"),
        (["--positions", "0x10", "--d-model", "4"], "--positions must be integers"),
        (["--positions", "1e400", "--d-model", "4"], "--positions must be integers"),
        (["--positions", "", "--d-model", "4"], "--positions must be integers"),
        (["--length", str(10**20), "--d-model", "4"], "--length must be at most 2**53 + 1"),
        (["--length", "nan", "--d-model", "4"], "argument --length: invalid int value: 'nan'"),
        (["--length", "3", "--d-model", str(10**20)], "--d-model must be at most"),
        (["--length", "3", "--d-model", "4", "--base", "1e-320"], "--base must be a number >="),
        (["--length", "3", "--d-model", "4", "--base", "1e400"], "--base must be a positive"),
        (["--length", "3", "--d-model", "4", "--out", "/nonexistent/dir/t.csv"], "no such folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run_table(argv, capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("posenc table")
    assert message in err


def _free_space(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    import shutil

    real = shutil.disk_usage

    def disk_usage(path: object) -> object:
        total, used, _ = real(path)  # type: ignore[arg-type]
        return type(real(path))(total, used, free)  # type: ignore[arg-type]

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)


@pytest.mark.parametrize(("name", "size"), [("t.npy", "6.4 KiB"), ("t.txt", "at least 18.8 KiB")])
def test_a_table_larger_than_the_free_space_is_refused_before_writing(
    name: str, size: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    _free_space(monkeypatch, 1000)
    out = tmp_path / name
    code, _, err = run_table(["--length", "100", "--d-model", "16", "--out", str(out)], capsys)
    assert code == 2
    assert err.count("\n") == 1, err
    what = "the table (100 rows x 16 float32)"
    assert f"cannot write {out}: {what} would take {size}, and the file system of" in err, err
    assert "has 1000 bytes free" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["npy", "text", "csv", "json"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_the_size_checked_is_never_more_than_the_file_written(
    fmt: str, dtype: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exact for .npy; a lower bound for text (a file that fits is never refused)."""
    out = tmp_path / f"t.{fmt}"
    argv = ["--positions", "0,7,99999", "--d-model", "6", "--dtype", dtype, "--format", fmt]
    assert run_table([*argv, "--out", str(out)], capsys)[0] == 0
    spec = table._Spec(np.array([0, 7, 99999]), 6, 10000.0, "paper", np.dtype(dtype))
    estimate, written = table._file_bytes(fmt, spec), out.stat().st_size
    assert estimate == written if fmt == "npy" else estimate <= written


def test_a_huge_table_says_its_size_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """10^12 rows of 8 float32 channels: 29.1 TiB, more than any disk here."""
    from posenc.cli._output import Output

    def never(self: object) -> None:
        raise AssertionError("the table started writing")

    monkeypatch.setattr(Output, "writing", never)
    out = tmp_path / "big.npy"
    argv = ["--length", str(10**12), "--d-model", "8", "--out", str(out)]
    code, _, err = run_table(argv, capsys)
    assert code == 2, err
    assert "the table (1000000000000 rows x 8 float32) would take 29.1 TiB" in err, err
    assert list(tmp_path.iterdir()) == []
