"""The figures a learner meets first: the README's heatmap, the tutorial's channels and the
shift drawn as a rotation. Each is the demo's (``posenc demo --out docs/figures`` writes the
committed ones), and each must read at the size it is shown."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc import analysis
from posenc.cli import _demo as demo

pytest.importorskip("matplotlib", reason="the figures need matplotlib")
from PIL import Image

from posenc import plot

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "docs" / "figures"


def _first_figure(markdown: Path) -> Path:
    match = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)", markdown.read_text(encoding="utf-8"))
    assert match is not None, f"{markdown} shows no PNG figure"
    return markdown.parent / match.group(1)


def _settings(png: Path) -> dict[str, str]:
    """The ``name=value`` settings the figure's title states, read from the PNG's metadata."""
    with Image.open(png) as image:
        description = image.info.get("Description", "")
    return dict(re.findall(r"(\w+)=([^,\s]+)", description))


def test_the_readme_heatmap_is_small_and_reads_at_readme_width() -> None:
    """At d_model = 512, 512 columns squeezed into the README's width alias into a moiré."""
    figure = _first_figure(ROOT / "README.md")
    assert figure.stat().st_size < 150_000, f"{figure.name}: {figure.stat().st_size:,} bytes"
    settings = _settings(figure)
    assert "d_model" in settings, f"{figure.name} does not state its d_model in its metadata"
    assert int(settings["d_model"]) <= 128
    kind, kwargs = demo.FIGURES[figure.stem]
    assert kind == "heatmap"
    assert kwargs["d_model"] <= 128


def test_every_demo_figure_is_committed_with_the_settings_of_the_demo() -> None:
    for stem, (_, kwargs) in demo.FIGURES.items():
        png = FIGURES / f"{stem}.png"
        assert png.exists(), f"run posenc demo --out docs/figures --force ({stem}.png missing)"
        assert int(_settings(png)["d_model"]) == kwargs["d_model"], stem


def test_the_sinusoid_figure_shows_sine_and_cosine_channels_that_all_move() -> None:
    kind, kwargs = demo.FIGURES["sinusoids"]
    fig = plot.PLOTS[kind](**kwargs)
    ax = fig.axes[0]
    curves = {line.get_label(): line for line in ax.get_lines() if line.get_label()[0] != "_"}
    kinds = {label.split(": ")[1].split(",")[0] for label in curves}
    assert kinds == {"sin", "cos"}, list(curves)
    wavelengths = {label.split("λ = ")[1] for label in curves}
    assert len(wavelengths) >= 2, "the channels shown must turn at visibly different speeds"
    for label, line in curves.items():
        values = np.asarray(line.get_ydata(), dtype=np.float64)
        assert np.ptp(values) > 0.5, f"{label} is flat over the range shown"


def test_the_rotation_figure_turns_one_pair() -> None:
    """The demo's rotation figure turns one (sin, cos) pair on the unit circle from p to p+k and
    shows the 2x2 block of M_k that does it."""
    kind, kwargs = demo.FIGURES["rotation"]
    assert kind == "rotation"
    p, k, d, pair = kwargs["p"], kwargs["k"], kwargs["d_model"], kwargs["pair"]
    fig = plot.PLOTS[kind](**kwargs)
    circle, matrix = fig.axes[0], fig.axes[1]
    table = posenc.sinusoidal([p, p + k], d, dtype=np.float64)
    start = table[0, 2 * pair : 2 * pair + 2]  # (sin, cos) of pair `pair`, paper layout
    end = table[1, 2 * pair : 2 * pair + 2]
    points = {line.get_label(): line for line in circle.get_lines()}
    for label, (s, c) in ((f"PE[{p}]", start), (f"PE[{p + k}]", end)):
        line = points[label]
        assert line.get_xdata()[0] == pytest.approx(c)
        assert line.get_ydata()[0] == pytest.approx(s)
        assert math.hypot(s, c) == pytest.approx(1.0)
    block = analysis.shift_matrix(k, d)[2 * pair : 2 * pair + 2, 2 * pair : 2 * pair + 2]
    shown = " ".join(t.get_text() for t in matrix.texts)
    for value in block.ravel():
        assert f"{value:.4f}" in shown
    assert np.allclose(block @ start, end)


def test_rotation_plot_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"pair must lie in 0 \.\. 3"):
        plot.rotation_plot(p=0, k=1, d_model=8, pair=4)
    with pytest.raises(ValueError, match="k must be"):
        plot.rotation_plot(p=0, k=0, d_model=8, pair=0)
    with pytest.raises(TypeError, match="p must be"):
        plot.rotation_plot(p=1.5, k=1, d_model=8, pair=0)


def test_posenc_plot_rotation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from posenc.cli import main

    out = tmp_path / "rotation.png"
    argv = ["plot", "rotation", "--position", "5", "--shift", "3", "--d-model", "8"]
    assert main([*argv, "--pair", "1", "--out", str(out)]) == 0
    assert _settings(out)["d_model"] == "8"
    assert main(["plot", "heatmap", "--shift", "3", "--out", str(tmp_path / "h.png")]) == 2
    assert "--shift does not apply to the heatmap plot" in capsys.readouterr().err
    assert main([*argv, "--pair", "4", "--out", str(tmp_path / "r.png")]) == 2
    assert "pair must lie in 0 .. 3" in capsys.readouterr().err
