"""``posenc inspect`` and the figures at any length: bounded work, sampled sections say so.

Small lengths give exactly today's numbers (compared with the analysis functions on the full
table); long ones evaluate at most a fixed number of rows, counted by wrapping the table
builder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import posenc
from posenc import analysis
from posenc.cli import _inspect, main

BILLION = 10**9


def counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str = "sinusoidal") -> list[int]:
    """Wrap ``module.<name>`` (a table builder); return the list of rows of each call."""
    rows: list[int] = []
    original: Callable[..., np.ndarray] = getattr(module, name)

    def wrapper(positions: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        table = original(positions, *args, **kwargs)
        rows.append(int(np.prod(table.shape[:-1])))
        return table

    monkeypatch.setattr(module, name, wrapper)
    return rows


def inspect_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["inspect", *argv, "--max-position", "1000", "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_inspect_work_is_bounded_at_any_length(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cap = _inspect.MAX_ROWS
    rows = counting(monkeypatch, _inspect)
    shifts = ["1", "-5", str(BILLION // 2)]
    argv = ["--d-model", "16", "--length", str(BILLION), "--shift", *shifts]
    report = inspect_json(argv, capsys)
    assert rows, "the table builder was not called"
    assert max(rows) <= cap
    assert sum(rows) <= (1 + 4 * len(shifts)) * cap  # distinct rows; 2 tables x (p, p+k)
    assert report["sample"] == {"positions": cap, "first": cap // 4, "last": cap // 4}
    assert [row["rows"] for row in report["distinct_rows"]] == [cap] * 3
    for row in report["shift"]:
        assert 0 < row["float64"] < 1e-6  # the rounding of angles near 10^9: p·2^-53 ~ 1e-7
        assert 0 < row["float32"] < 1e-6


def test_inspect_at_the_largest_length(capsys: pytest.CaptureFixture[str]) -> None:
    report = inspect_json(["--d-model", "8", "--length", str(2**53 + 1)], capsys)
    assert report["length"] == 2**53 + 1
    assert main(["inspect", "--length", str(2**53 + 2)]) == 2
    assert "--length" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("length", "d_model", "convention", "shifts"),
    [
        (2, 4, "paper", [1]),
        (300, 13, "marian", [1, -7, 299]),
        (4096, 16, "tensor2tensor", [1, 10, 100]),
        (8192, 6, "paper", [3, -8191]),
    ],
)
def test_inspect_small_lengths_check_every_position(
    length: int,
    d_model: int,
    convention: str,
    shifts: list[int],
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--d-model", str(d_model), "--convention", convention, "--length", str(length)]
    report = inspect_json([*argv, "--shift", *map(str, shifts)], capsys)
    assert report["sample"] is None
    setting = {"base": 10000.0, "convention": convention}
    full = {
        dt: posenc.sinusoidal(length, d_model, convention=convention, dtype=dt)
        for dt in ("float64", "float32")
    }
    for row, k in zip(report["shift"], shifts, strict=True):
        for dt, table in full.items():
            assert row[dt] == analysis.check_shift(table, k, **setting)
    for row in report["distinct_rows"]:
        assert row == analysis.distinct_rows(full["float64"], row["dtype"]).as_dict()


def test_inspect_sampled_distinct_rows_name_positions(capsys: pytest.CaptureFixture[str]) -> None:
    """The first 2048 positions are all sampled, so float16's first repeat (rows 2 and 712 at
    d_model 2) is found and reported as positions."""
    report = inspect_json(["--d-model", "2", "--length", "1000000", "--shift", "1"], capsys)
    float16 = report["distinct_rows"][2]
    expected = analysis.distinct_rows(100_000, "float16", d_model=2).first_duplicate
    assert float16["dtype"] == "float16"
    assert tuple(float16["first_duplicate"]) == expected == (2, 712)


def test_sampled_shift_residual_is_check_shift_of_each_pair() -> None:
    positions = np.array([0, 5, 9_000, 123_456, 10**7])
    for k in (1, 37, -3):
        starts = positions[positions + k >= 0]
        for dtype in ("float64", "float32"):
            got = _inspect.shift_residual(starts, k, 12, 500.0, "marian", dtype)
            expected = max(
                analysis.check_shift(
                    posenc.sinusoidal(
                        np.arange(min(p, p + k), max(p, p + k) + 1),
                        12,
                        base=500.0,
                        convention="marian",
                        dtype=dtype,
                    ),
                    k,
                    base=500.0,
                    convention="marian",
                )
                for p in starts
            )
            assert got == pytest.approx(expected, rel=0, abs=1e-15)  # BLAS may round differently


def test_inspect_text_says_what_was_sampled(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--d-model", "8", "--length", str(BILLION), "--shift", "1"]) == 0
    out = capsys.readouterr().out
    note = "the first 2,048, the last 2,048 and 4,096 evenly spaced between"
    assert f"(sampled: 8,192 positions: {note})" in out
    assert "8192 of 8192 sampled" in out
    assert main(["inspect", "--d-model", "8", "--length", "8192", "--shift", "1"]) == 0
    assert "sampled" not in capsys.readouterr().out


def test_inspect_help_documents_the_cap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"{_inspect.MAX_ROWS} sampled positions" in help_text
    assert f"Lengths up to {_inspect.MAX_ROWS} are checked at every position" in help_text


# --------------------------------------------------------------------------- figures


@pytest.fixture
def plot() -> Any:
    pytest.importorskip("matplotlib", reason="posenc.plot needs matplotlib")
    import posenc.plot

    return posenc.plot


def test_heatmap_of_a_billion_positions_draws_sampled_rows(
    plot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from posenc._figure_data import MAX_DRAWN_ROWS, even_positions

    rows = counting(monkeypatch, plot)
    fig = plot.heatmap(BILLION, 8)
    assert max(rows) <= MAX_DRAWN_ROWS
    image = np.asarray(fig.axes[0].images[0].get_array())
    shown = even_positions(BILLION, MAX_DRAWN_ROWS)
    assert (shown[0], shown[-1], len(shown)) == (0, BILLION - 1, MAX_DRAWN_ROWS)
    assert np.all(np.abs(np.diff(shown) - (BILLION - 1) / (MAX_DRAWN_ROWS - 1)) <= 1)
    assert np.array_equal(image, posenc.sinusoidal(shown, 8))
    assert "2,048 evenly spaced of 1,000,000,000 positions" in fig.axes[0].get_title()
    assert "evenly spaced" not in plot.heatmap(MAX_DRAWN_ROWS, 8).axes[0].get_title()


def test_sinusoids_of_a_billion_positions_draw_sampled_curves(
    plot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from posenc._figure_data import MAX_CURVE_POINTS

    rows = counting(monkeypatch, plot)
    fig = plot.sinusoids(BILLION, 8, channels=[6, 7])
    assert max(rows) <= MAX_CURVE_POINTS
    (sin, cos) = fig.axes[0].get_lines()
    x = np.asarray(sin.get_xdata())
    assert (x[0], x[-1], len(x)) == (0, BILLION - 1, MAX_CURVE_POINTS)
    expected = posenc.sinusoidal(x.astype(np.int64), 8, dtype=np.float64)
    assert np.array_equal(sin.get_ydata(), expected[:, 6])
    assert np.array_equal(cos.get_ydata(), expected[:, 7])
    assert f"{MAX_CURVE_POINTS:,} evenly spaced" in fig.axes[0].get_title()


@pytest.mark.slow
def test_similarity_of_a_billion_positions_is_bounded_and_exact_where_shown(
    plot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    original = analysis.similarity

    def similarity(positions: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(positions, *args, **kwargs)
        calls.append(len(result.positions))
        return result

    from posenc import _figure_data

    monkeypatch.setattr(_figure_data, "similarity", similarity)  # what the figure draws
    fig = plot.similarity_plot(BILLION, 8)
    assert calls
    assert max(calls) <= 2048
    (profile_ax,) = [a for a in fig.axes if a.get_title().startswith("similarity vs distance")]
    (line,) = [ln for ln in profile_ax.get_lines() if len(ln.get_xdata()) > 2]
    distances = np.asarray(line.get_xdata())
    assert np.array_equal(distances[:1024], np.arange(1024))
    assert distances[-1] == BILLION - 1
    # even d_model: the dot product depends on the distance only, so each point is exact
    picked = [0, 1000, len(distances) // 2, len(distances) - 1]
    for i in picked:
        pair = original([0, int(distances[i])], 8).matrix[0, 1]
        assert line.get_ydata()[i] == pytest.approx(pair, abs=1e-9)
    assert "sampled distances" in profile_ax.get_title()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["heatmap", "sinusoids", "similarity"])
def test_plot_length_beyond_2_53_names_the_length(
    kind: str, plot: Any, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    out = str(tmp_path / "f.png")
    assert main(["plot", kind, "--length", str(2**53 + 2), "--d-model", "4", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "--length must be at most 2**53 + 1" in err
    assert main(["plot", kind, "--length", str(2**53 + 1), "--d-model", "4", "--out", out]) == 0
