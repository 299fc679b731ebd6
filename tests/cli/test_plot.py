"""``posenc plot`` of the biases: ``bias``, ``buckets`` and ``slopes`` write their figures;
``plot bias --table FILE`` draws T5's learned bucket table, read from a file through the
bounded readers of ``posenc identify``, drawn against the relative position per head; hostile
files and options that do not apply are refused with one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from posenc.cli import main

pytest.importorskip("matplotlib", reason="posenc.plot needs matplotlib")
bias_module = pytest.importorskip("posenc.plot._bias")


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The arguments each bias figure was drawn from (the figure itself is drawn as usual)."""
    calls: list[tuple[Any, ...]] = []
    real = bias_module.bias_curves

    def recording(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(bias_module, "bias_curves", recording)
    return calls


def _table(rows: int = 8, heads: int = 3) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(rows, heads)).astype(np.float32)


@pytest.mark.parametrize("causal", [False, True])
def test_a_t5_table_from_npy_is_drawn_with_its_bucket_settings(
    causal: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], drawn: list[Any]
) -> None:
    table = _table()
    np.save(tmp_path / "t5.npy", table)
    out = tmp_path / "bias.png"
    options = ["--num-buckets", "8", "--max-distance", "16", "--distance", "20"]
    argv = ["plot", "bias", "--table", str(tmp_path / "t5.npy"), *options, "--out", str(out)]
    code, err = cli(argv + (["--causal"] if causal else []), capsys)
    assert code == 0, err
    assert out.read_bytes().startswith(b"\x89PNG")
    heads, distance, _, got, buckets = drawn[0]
    assert heads is None
    assert distance == 20
    assert np.array_equal(got, table)
    assert buckets == (8, 16, not causal)


def test_a_table_in_an_npz_archive_is_named_with_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], drawn: list[Any]
) -> None:
    table = _table(32, 4)
    np.savez(tmp_path / "w.npz", other=np.zeros((2, 2)), bias=table)
    out = tmp_path / "bias.svg"
    argv = ["plot", "bias", "--table", str(tmp_path / "w.npz"), "--key", "bias", "--heads", "4"]
    code, err = cli([*argv, "--out", str(out)], capsys)
    assert code == 0, err
    assert np.array_equal(drawn[0][3], table)
    assert drawn[0][4] == (32, 128, True)  # T5's defaults


@pytest.mark.parametrize(
    ("array", "options", "message"),
    [
        (_table(3, 8), ["--num-buckets", "8"], "(num_buckets, heads) = (8, heads)"),
        (_table(3, 8), ["--num-buckets", "8"], "transposed"),
        (np.full((32, 2), np.nan), [], "NaN or infinity"),
        (np.zeros(32), [], "(num_buckets, heads)"),
        (np.zeros((32, 2), dtype=bool), [], "must hold numbers"),
        (np.array([{"a": 1}, None], dtype=object), [], "never loaded"),
        (_table(32, 2), ["--heads", "3"], "--heads must be the --table's 2 heads"),
        (_table(32, 2), ["--max-bias", "4"], "--max-bias does not apply with --table"),
        (np.zeros((32, 0)), [], "at least one head"),
        (np.full((32, 2), np.inf, dtype=np.float16), [], "NaN or infinity"),
    ],
)
def test_hostile_or_mismatched_tables_are_refused_in_one_line(
    array: np.ndarray,
    options: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    np.save(tmp_path / "t5.npy", array, allow_pickle=array.dtype == object)
    out = tmp_path / "f.png"
    argv = ["plot", "bias", "--table", str(tmp_path / "t5.npy"), *options, "--out", str(out)]
    code, err = cli(argv, capsys)
    assert code == 2
    assert message in err
    assert "--table" in err or "t5.npy" in err
    assert err.count("\n") == 1
    assert not out.exists()


def test_a_table_larger_than_max_bytes_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "t5.npy", _table(32, 64))
    argv = ["plot", "bias", "--table", str(tmp_path / "t5.npy"), "--max-bytes", "1K"]
    code, err = cli([*argv, "--out", str(tmp_path / "f.png")], capsys)
    assert code == 2
    assert "--max-bytes" in err


@pytest.mark.parametrize(
    "options",
    [
        ["bias", "--heads", "6", "--distance", "12", "--max-bias", "4"],
        ["buckets", "--method", "deberta", "--num-buckets", "16", "--max-distance", "32"],
        ["buckets", "--causal", "--distance", "40"],
        ["slopes", "--heads", "24"],
    ],
)
def test_cli_writes_the_bias_figures(
    options: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "figure.png"
    code, err = cli(["plot", *options, "--out", str(out)], capsys)
    assert code == 0, err
    assert out.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["bias", "--d-model", "64"], "--d-model does not apply to the bias plot"),
        (["slopes", "--base", "100"], "--base does not apply to the slopes plot"),
        (["heatmap", "--heads", "4"], "--heads does not apply to the heatmap plot"),
        (["slopes", "--distance", "4"], "--distance does not apply to the slopes plot"),
        (["buckets", "--num-buckets", "1"], "--num-buckets must be an integer >= 4"),
        (["bias", "--max-bias", "-1"], "--max-bias must be a positive finite number"),
        # T5's bucket settings mean nothing to ALiBi: refused, not ignored
        (["bias", "--num-buckets", "8"], "--num-buckets applies to the bias plot with --table"),
        (["bias", "--max-distance", "16"], "--max-distance applies to the bias plot with --table"),
        (["bias", "--causal"], "--causal applies to the bias plot with --table"),
        (["heatmap", "--table", "t5.npy"], "--table does not apply to the heatmap plot"),
        (["buckets", "--key", "w"], "--key does not apply to the buckets plot"),
        (["bias", "--key", "w"], "--key applies to the bias plot with --table"),
    ],
)
def test_options_that_do_not_apply_or_are_out_of_range_are_refused(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli(["plot", *options, "--out", str(tmp_path / "f.png")], capsys)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "f.png").exists()


def test_a_wide_table_over_the_longest_distance_is_drawn_in_bounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 4096 heads at 2**21 + 1 relative positions would be 64 GiB of float64
    np.save(tmp_path / "t5.npy", _table(32, 4096))
    out = tmp_path / "bias.png"
    argv = ["plot", "bias", "--table", str(tmp_path / "t5.npy"), "--distance", str(2**20)]
    code, err = cli([*argv, "--out", str(out)], capsys)
    assert code == 0, err
    assert out.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("value", [1e308, -1.7e308, 1e301])
def test_a_table_too_large_to_draw_is_refused_in_one_line(
    value: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = np.zeros((32, 2))
    table[3, 1] = value
    np.save(tmp_path / "t5.npy", table)
    out = tmp_path / "f.png"
    code, err = cli(
        ["plot", "bias", "--table", str(tmp_path / "t5.npy"), "--out", str(out)], capsys
    )
    assert code == 2
    assert "--table" in err
    assert "holds values up to" in err
    assert err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--distance", str(10**20)], "distance must be at most 1048576 (2**20), got 1"),
        (["--distance", str(2**20 + 1)], "distance must be at most 1048576"),
        (["--heads", str(10**11)], "heads must be at most 65536 for a figure"),
    ],
)
def test_a_distance_or_heads_beyond_a_figure_is_refused_by_its_limit(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli(["plot", "bias", *options, "--out", str(tmp_path / "f.png")], capsys)
    assert code == 2
    assert message in err
    assert "memory" not in err
    assert err.count("\n") == 1
