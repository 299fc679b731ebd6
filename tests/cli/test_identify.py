"""``posenc identify FILE`` through main(argv): every file kind, keys, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc.analysis import identify as identify_table
from posenc.analysis import odd_exponent_table
from posenc.cli import main


def identify(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["identify", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_npy_table_is_identified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pe.npy"
    np.save(path, posenc.sinusoidal(np.arange(2, 130), 64, convention="tensor2tensor"))
    code, out, err = identify([str(path)], capsys)
    assert (code, err) == (0, "")
    assert "128 x 64 float32" in out
    assert "tensor2tensor" in out
    assert "10000" in out
    expected = posenc.describe(identify_table(np.load(path)))
    assert out.splitlines()[1] == expected
    code, out, _ = identify([str(path), "--json"], capsys)
    report = json.loads(out)
    assert code == 0
    assert report["message"] == expected
    assert report["matched"] is True
    assert report["convention"] == "tensor2tensor"
    assert report["offset"] == 2
    assert report["base"] == pytest.approx(10000.0)
    assert report["shape"] == [128, 64]


def test_no_match_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "noise.npy"
    np.save(path, np.random.default_rng(0).uniform(-1, 1, (50, 16)))
    code, out, err = identify([str(path), "--json"], capsys)
    assert (code, err) == (1, "")
    assert json.loads(out)["matched"] is False


def test_odd_exponent_bug_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "odd_exponent.npy"
    np.save(path, odd_exponent_table(100, 32))
    code, out, _ = identify([str(path), "--json"], capsys)
    report = json.loads(out)
    assert code == 1
    assert report["bug"] == "odd-exponent cosine"
    assert report["outcome"] == "bug"
    assert "odd-exponent cosine bug" in report["message"]


def test_npz_key_choice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "weights.npz"
    np.savez(path, pos=posenc.sinusoidal(40, 12, convention="marian"), bias=np.zeros(3))
    code, out, _ = identify([str(path)], capsys)  # the only 2-D array is chosen
    assert code == 0
    assert "[pos]" in out
    assert "marian" in out
    np.savez(path, a=posenc.sinusoidal(40, 12), b=posenc.sinusoidal(40, 12))
    code, _, err = identify([str(path)], capsys)
    assert code == 2
    assert "choose one with --key: a (40, 12), b (40, 12)" in err
    assert identify([str(path), "--key", "b"], capsys)[0] == 0
    code, _, err = identify([str(path), "--key", "c"], capsys)
    assert code == 2
    assert "--key 'c' is not in" in err


def test_torch_state_dict_and_bfloat16(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    table = torch.from_numpy(posenc.sinusoidal(np.arange(7, 71), 32, dtype=np.float64))
    state = {"model": {"embed.weight": torch.zeros(5, 32), "pos.weight": table.bfloat16()}}
    torch.save(state, path)
    code, out, err = identify([str(path), "--key", "model.pos.weight", "--json"], capsys)
    assert err == ""
    report = json.loads(out)
    assert (code, report["dtype"], report["offset"]) == (0, "bfloat16", 7)
    assert report["convention"] == "paper"
    code, _, err = identify([str(path)], capsys)
    assert code == 2
    assert "model.pos.weight (64, 32)" in err  # listed first: named like positions


def test_safetensors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("safetensors")
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({"encoder.embed_positions.weight": posenc.sinusoidal(30, 8)}, str(path))
    code, out, _ = identify([str(path)], capsys)
    assert code == 0
    assert "paper" in out


@pytest.mark.parametrize(
    ("make", "argv", "message"),
    [
        (None, [], "no such file"),
        ("one_d", [], "must be a 2-D table (positions x channels), got shape (5,)"),
        ("strings", [], "must hold numbers, got dtype <U1"),
        ("garbage", [], "is not a readable .npy array"),
        ("one_d", ["--key", "x"], "--key does not apply to .npy files"),
        ("text", [], "FILE must end in .npy, .npz, .pt, .pth, .bin or .safetensors"),
        ("dir", [], "is a directory"),
        ("garbage_pt", [], "is not a readable PyTorch file"),
    ],
)
def test_bad_files_are_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: str | None,
    argv: list[str],
    message: str,
) -> None:
    path = tmp_path / "missing.npy"
    if make == "one_d":
        np.save(path, np.arange(5.0))
    elif make == "strings":
        np.save(path, np.array([["a", "b"]]))
    elif make == "garbage":
        path.write_bytes(b"not an array")
    elif make == "text":
        path = tmp_path / "table.txt"
        path.write_text("1 2 3\n")
    elif make == "dir":
        path = tmp_path
    elif make == "garbage_pt":
        pytest.importorskip("torch")
        path = tmp_path / "model.pt"
        path.write_bytes(b"not a checkpoint")
    code, out, err = identify([str(path), *argv], capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("posenc identify: error: ")
    assert message in err


def _fairseq_table(rows: int, d: int, padding_idx: int) -> np.ndarray:
    """fairseq's SinusoidalPositionalEmbedding.get_embedding(rows, d, padding_idx): row r is
    position r of the tensor2tensor table, row ``padding_idx`` zeroed (real tokens are
    numbered from padding_idx + 1)."""
    table = posenc.sinusoidal(rows, d, convention="tensor2tensor")
    table[padding_idx] = 0.0
    return table


@pytest.mark.parametrize("leading_zeros", [False, True])
def test_leading_padding_rows_are_skipped_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], leading_zeros: bool
) -> None:
    path = tmp_path / "fairseq.npy"
    table = _fairseq_table(130, 32, padding_idx=1)
    if leading_zeros:  # rows 0 and 1 both zero (the rows before the first real position)
        table[0] = 0.0
    np.save(path, table)
    code, out, err = identify([str(path)], capsys)
    assert (code, err) == (0, "")
    zero = "rows 0 and 1 are" if leading_zeros else "row 1 is"
    assert f"rows 0–1 skipped: {zero} all zeros (padding)" in out
    assert "the table starts at row 2, position 2" in out
    assert "tensor2tensor (base 10000, positions 2..129)" in out
    code, out, _ = identify([str(path), "--json"], capsys)
    report = json.loads(out)
    assert code == 0
    assert (report["convention"], report["offset"]) == ("tensor2tensor", 2)
    assert report["skip_rows"] == 2
    assert report["skipped_rows"] == {
        "rows": [0, 1],
        "zero_rows": [0, 1] if leading_zeros else [1],
        "detected": True,
    }
    assert "rows 0–1 skipped" in report["message"]
    # --skip-rows 0 analyses every row: the zero row then fits no convention
    code, out, _ = identify([str(path), "--skip-rows", "0"], capsys)
    assert code == 1
    assert "--skip-rows 2" in out


def test_every_hint_is_an_option_of_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a zero row the command does not skip itself (beyond the leading rows) is hinted at
    # with --skip-rows, never with Python slicing
    path = tmp_path / "late_zero.npy"
    table = posenc.sinusoidal(200, 16, convention="tensor2tensor")
    table[100] = 0.0
    np.save(path, table)
    code, out, _ = identify([str(path)], capsys)
    assert code == 1
    assert "--skip-rows 101" in out
    assert "table[" not in out
    assert "in Python" not in out
    # a first position beyond the search: the hint is --max-offset, which the command takes
    path = tmp_path / "far.npy"
    np.save(path, posenc.sinusoidal(np.arange(5000, 5040), 16))
    code, out, _ = identify([str(path), "--max-offset", "1000"], capsys)
    assert code == 1
    assert "--max-offset" in out
    assert "max_offset =" not in out
    code, out, _ = identify([str(path), "--max-offset", "6000"], capsys)
    assert code == 0
    assert "positions 5000..5039" in out
    code, out, err = identify([str(path), "--max-offset", "0"], capsys)
    assert code == 2
    assert "--max-offset" in err
