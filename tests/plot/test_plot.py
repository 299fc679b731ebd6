"""posenc.plot: figures, their data, saving and argument errors (needs matplotlib)."""

from __future__ import annotations

import importlib
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="posenc.plot needs the 'plot' extra (matplotlib)")

from matplotlib.figure import Figure

import posenc
from posenc import _figure_data, analysis, plot
from posenc._figure_data import precision_grid
from tests.tolerance import assert_close_ulp

# Small arguments for each figure, so that the whole file stays fast.
SMALL: dict[str, dict[str, Any]] = {
    "heatmap": {"length": 20, "d_model": 16},
    "sinusoids": {"length": 20, "d_model": 16},
    "wavelengths": {"d_model": 16},
    "similarity": {"length": 20, "d_model": 16},
    "precision": {"max_position": 1000, "d_model": 16},
    "shift": {"max_position": 1000, "d_model": 16},
    "rotation": {"p": 3, "k": 2, "d_model": 16},
}
WITH_COLORBAR = {"heatmap", "similarity"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _titles(fig: Figure) -> str:
    parts = [fig.get_suptitle()] + [ax.get_title() for ax in fig.axes]
    return "\n".join(parts)


def _data_axes(fig: Figure) -> list[Any]:
    """The axes that hold data (colour bars and axes of text only excluded)."""
    colorbar_axes = {im.colorbar.ax for ax in fig.axes for im in ax.images if im.colorbar}
    return [ax for ax in fig.axes if ax not in colorbar_axes and ax.axison]


def test_plots_mapping_names_every_figure_and_is_read_only() -> None:
    assert dict(plot.PLOTS) == {
        "heatmap": plot.heatmap,
        "sinusoids": plot.sinusoids,
        "wavelengths": plot.wavelength_plot,
        "similarity": plot.similarity_plot,
        "precision": plot.precision_plot,
        "shift": plot.shift_plot,
        "rotation": plot.rotation_plot,
        "bias": plot.bias_plot,
        "buckets": plot.bucket_plot,
        "slopes": plot.slope_plot,
    }
    with pytest.raises(TypeError):
        plot.PLOTS["new"] = plot.heatmap  # type: ignore[index]


@pytest.mark.parametrize("kind", sorted(SMALL))
@pytest.mark.parametrize(
    ("convention", "base"), [("paper", 10000.0), ("tensor2tensor", 500.0), ("marian", 1e6)]
)
def test_figure_is_labelled_and_titled(kind: str, convention: str, base: float) -> None:
    fig = plot.PLOTS[kind](**SMALL[kind], base=base, convention=convention)
    assert isinstance(fig, Figure)
    title = _titles(fig)
    d_model = SMALL[kind]["d_model"]
    assert f"convention={convention}" in title
    assert f"base={base:g}" in title
    assert f"d_model={d_model}" in title
    axes = _data_axes(fig)
    assert axes
    for ax in axes:
        assert "(" in ax.get_xlabel()  # every label is there and states its unit
        assert "(" in ax.get_ylabel()
        assert ax.has_data()
    has_colorbar = any(im.colorbar is not None for ax in fig.axes for im in ax.images)
    assert has_colorbar == (kind in WITH_COLORBAR)
    for ax in fig.axes:
        for image in ax.images:
            assert image.colorbar is not None
            assert image.colorbar.ax.get_ylabel()


@pytest.mark.parametrize("convention", ["paper", "tensor2tensor", "marian"])
@pytest.mark.parametrize(("length", "d_model"), [(1, 1), (7, 5), (30, 16)])
def test_heatmap_shows_the_table(convention: str, length: int, d_model: int) -> None:
    fig = plot.heatmap(length, d_model, base=100.0, convention=convention)
    image = fig.axes[0].images[0]
    expected = posenc.sinusoidal(length, d_model, base=100.0, convention=convention)
    data = np.asarray(image.get_array())
    assert data.shape == (length, d_model)  # positions down, channels across
    assert np.array_equal(data, expected)
    assert image.get_clim() == (-1.0, 1.0)
    assert image.get_cmap().name == "RdBu_r"


def test_sinusoids_draws_the_channels_named_in_the_legend() -> None:
    fig = plot.sinusoids(40, 16, channels=[0, 5, 15], base=100.0)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    lam = analysis.wavelengths(16, base=100.0).wavelengths
    assert texts == [
        f"channel 0: sin, λ = {lam[0]:.3g}",
        f"channel 5: cos, λ = {lam[2]:.3g}",
        f"channel 15: cos, λ = {lam[7]:.3g}",
    ]
    table = posenc.sinusoidal(40, 16, base=100.0, dtype=np.float64)
    dots = [line for line in ax.get_lines() if line.get_linestyle() == "None"]
    assert len(dots) == 3
    for line, channel in zip(dots, [0, 5, 15], strict=True):
        assert np.array_equal(line.get_xdata(), np.arange(40))
        assert np.array_equal(line.get_ydata(), table[:, channel])


def test_sinusoids_zero_column_and_default_channels() -> None:
    texts = [
        t.get_text()
        for t in plot.sinusoids(10, 7, channels=[6], convention="tensor2tensor")
        .axes[0]
        .get_legend()
        .get_texts()
    ]
    assert texts == ["channel 6: zero column"]
    # default: the sin and cos channel of up to three frequencies, fastest first, each making
    # between half a period and 8 periods over the range (none flat, none a solid block)
    for length, d_model in ((100, 128), (10_000, 1024), (200, 512)):
        lam = analysis.wavelengths(d_model).wavelengths
        texts = [
            t.get_text() for t in plot.sinusoids(length, d_model).axes[0].get_legend().get_texts()
        ]
        assert 2 <= len(texts) <= 6
        channels = [int(text.split()[1].rstrip(":")) for text in texts]
        assert [text.split()[2].rstrip(",") for text in texts] == ["sin", "cos"] * (len(texts) // 2)
        assert channels[1::2] == [c + 1 for c in channels[::2]]
        for channel in channels:
            assert 0.5 <= length / lam[channel // 2] <= 8


@pytest.mark.parametrize("convention", ["paper", "tensor2tensor"])
def test_wavelength_plot_data_and_reference_lines(convention: str) -> None:
    fig = plot.wavelength_plot(64, base=1000.0, convention=convention)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    expected = analysis.wavelengths(64, base=1000.0, convention=convention).wavelengths
    curves = [line for line in ax.get_lines() if len(line.get_xdata()) == expected.shape[0]]
    assert len(curves) == 1
    assert np.array_equal(curves[0].get_ydata(), expected)
    levels = {float(line.get_ydata()[0]) for line in ax.get_lines() if line not in curves}
    assert levels == {2 * math.pi, 1000.0 * 2 * math.pi}


@pytest.mark.parametrize("metric", ["dot", "cosine"])
def test_similarity_plot_shows_the_analysis_result(metric: str) -> None:
    fig = plot.similarity_plot(25, 12, convention="marian", metric=metric)
    expected = analysis.similarity(25, 12, convention="marian", metric=metric)
    matrix_ax, profile_ax = _data_axes(fig)
    assert np.array_equal(np.asarray(matrix_ax.images[0].get_array()), expected.matrix)
    assert (
        matrix_ax.images[0]
        .colorbar.ax.get_ylabel()
        .startswith("PE[p]·PE[q]" if metric == "dot" else "cosine(PE[p], PE[q])")
    )
    assert ("dot product" if metric == "dot" else "cosine similarity") in fig.get_suptitle()
    (line,) = [ln for ln in profile_ax.get_lines() if len(ln.get_xdata()) == 25]
    assert np.array_equal(line.get_xdata(), expected.distances)
    assert np.array_equal(line.get_ydata(), expected.profile)


def test_similarity_colour_scale_fits_the_values() -> None:
    # all values >= 0: a sequential map from the smallest value to the largest
    image = plot.similarity_plot(200, 512, metric="cosine").axes[0].images[0]
    values = analysis.similarity(200, 512, metric="cosine").matrix
    assert image.get_cmap().name == "viridis"
    assert image.get_clim() == (values.min(), values.max())
    assert 0.3 < values.min() < 0.4  # not a ±1 scale washing out 0.34 .. 1
    # negative values too (d_model = 2: cos of the distance): diverging, centred at 0
    image = plot.similarity_plot(20, 2).axes[0].images[0]
    top = np.abs(analysis.similarity(20, 2).matrix).max()
    assert image.get_cmap().name == "RdBu_r"
    assert image.get_clim() == (-top, top)
    # a constant matrix (d_model = 1 under tensor2tensor is all zeros) still gets a scale
    low, high = plot.similarity_plot(5, 1, convention="tensor2tensor").axes[0].images[0].get_clim()
    assert low < high


def test_similarity_plot_beyond_2048_positions_keeps_every_distance() -> None:
    fig = plot.similarity_plot(2100, 8)
    matrix_ax, profile_ax = _data_axes(fig)
    assert np.asarray(matrix_ax.images[0].get_array()).shape == (2048, 2048)
    (line,) = [ln for ln in profile_ax.get_lines() if len(ln.get_xdata()) > 2]
    assert np.array_equal(line.get_xdata(), np.arange(2100))
    # even d_model: the similarity depends on distance only, so the subset's profile is exact
    full = analysis.similarity(2100, 8)
    # sums of 8 products of sin/cos of float64 angles <= 2100·ω: 8 ulps of the largest angle
    assert_close_ulp(line.get_ydata(), full.profile, ulps=8, dtype=np.float64, scale=2100)


def test_precision_plot_curves(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int, int]] = []
    report = analysis.precision_report

    def counted(max_position: int, d_model: int, *args: Any, **kwargs: Any) -> Any:
        calls.append((max_position, d_model, kwargs["samples"]))
        return report(max_position, d_model, *args, **kwargs)

    monkeypatch.setattr(_figure_data, "precision_report", counted)  # what the figure draws
    fig = plot.precision_plot()  # the default figure: up to 10**6, d_model 128
    # bounded work: two reports (float32, bfloat16) of 8 positions per point of a 21-point grid
    grid = precision_grid(10**6)
    assert len(grid) == 21
    assert sorted(calls) == sorted((int(p), 128, 8) for p in grid for _ in range(2))
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    curves = {line.get_label(): line for line in ax.get_lines() if line.get_marker() == "o"}
    assert set(curves) == {
        "posenc, float32",
        "float32 recipe",
        "posenc, bfloat16",
        "bfloat16 recipe",
    }
    x = curves["posenc, float32"].get_xdata()
    assert x[0] == 10
    assert x[-1] == 10**6
    assert np.all(np.diff(np.log10(x)) > 0.1)  # a log grid
    ours32 = np.asarray(curves["posenc, float32"].get_ydata())
    recipe32 = np.asarray(curves["float32 recipe"].get_ydata())
    ours16 = np.asarray(curves["posenc, bfloat16"].get_ydata())
    recipe16 = np.asarray(curves["bfloat16 recipe"].get_ydata())
    assert np.all(ours32 <= 2.0**-25 * (1 + 1e-6))
    assert np.all(ours16 <= 2.0**-9 * (1 + 1e-6))
    assert recipe32[-1] > 1e-2 > 1e-6 > recipe32[0] / 10
    assert np.all(recipe16 > ours16)
    last = analysis.precision_report(10**6, 128, "float32", samples=8, seed=0)
    assert recipe32[-1] == last.method("float32 recipe").max_error


def _shift_curves(fig: Figure) -> dict[str, Any]:
    """The data curves of a shift_plot figure by label (the grey guides have no marker)."""
    lines = fig.axes[0].get_lines()
    return {line.get_label(): line for line in lines if line.get_marker() != "None"}


def test_shift_plot_draws_check_shift_for_each_table_and_shift() -> None:
    fig = plot.shift_plot(10**4, 16, shifts=[1, 7], base=100.0, convention="marian")
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    curves = _shift_curves(fig)
    tables = ("posenc, float64", "posenc, float32", "float32 recipe")
    assert set(curves) == {f"{t}, k = {k}" for t in tables for k in (1, 7)}
    x = curves["posenc, float32, k = 1"].get_xdata()
    assert (x[0], x[-1]) == (10, 10**4)
    # one point: the residual over positions P .. P+63 of each table
    i = 3
    positions = np.arange(x[i], x[i] + 64 + 7)
    built = {
        "posenc, float64": posenc.sinusoidal(
            positions, 16, base=100.0, convention="marian", dtype=np.float64
        ),
        "posenc, float32": posenc.sinusoidal(positions, 16, base=100.0, convention="marian"),
        "float32 recipe": analysis.float32_recipe(positions, 16, base=100.0, convention="marian"),
    }
    for label, table in built.items():
        expected = analysis.check_shift(table[: 64 + 7], 7, base=100.0, convention="marian")
        assert curves[f"{label}, k = 7"].get_ydata()[i] == expected
    guides = [line for line in ax.get_lines() if line.get_marker() == "None"]
    assert len(guides) == 3
    assert all(line.get_color() == "tab:gray" for line in guides)


def test_shift_plot_shows_the_float32_recipe_drifting() -> None:
    curves = _shift_curves(plot.shift_plot(10**6, 64, shifts=[3]))
    ours64 = np.asarray(curves["posenc, float64, k = 3"].get_ydata())
    ours32 = np.asarray(curves["posenc, float32, k = 3"].get_ydata())
    recipe = np.asarray(curves["float32 recipe, k = 3"].get_ydata())
    assert np.all(ours64 < 1e-9)
    assert np.all(ours32 <= (1 + math.sqrt(2)) * 2.0**-25)  # float32 storage only
    assert recipe[-1] > 1e-2  # angle rounding grows with the position
    assert recipe[-1] > 100 * recipe[0]
    assert np.all(recipe > ours32)


def test_shift_plot_repeated_shifts_count_once() -> None:
    curves = _shift_curves(plot.shift_plot(100, 8, shifts=(2, 2, 5)))
    assert len(curves) == 6


@pytest.mark.parametrize(
    ("kind", "suffix", "as_str"),
    [
        ("heatmap", ".png", False),
        ("sinusoids", ".svg", True),
        ("wavelengths", ".SVG", False),
        ("precision", ".PNG", True),
        ("shift", ".svg", False),
        ("rotation", ".png", True),
    ],
)
def test_saving_writes_the_format_of_the_suffix(
    tmp_path: Path, kind: str, suffix: str, as_str: bool
) -> None:
    target = tmp_path / f"figure{suffix}"
    fig = plot.PLOTS[kind](**SMALL[kind], path=str(target) if as_str else target)
    assert isinstance(fig, Figure)
    data = target.read_bytes()
    if suffix.lower() == ".png":
        assert data.startswith(PNG_MAGIC)
    else:
        assert data.lstrip().startswith(b"<?xml")
        assert b"<svg" in data[:2000]


@pytest.mark.parametrize("kind", sorted(SMALL))
@pytest.mark.parametrize("name", ["figure.pdf", "figure.png.txt"])
def test_bad_path_suffix_raises_and_writes_nothing(tmp_path: Path, kind: str, name: str) -> None:
    with pytest.raises(ValueError, match=r"path must end in \.png or \.svg.*" + name):
        plot.PLOTS[kind](**SMALL[kind], path=tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_path_without_suffix_or_of_the_wrong_type() -> None:
    with pytest.raises(ValueError, match=r"path must end in \.png or \.svg .*got 'figure'"):
        plot.heatmap(5, 4, path="figure")
    with pytest.raises(TypeError, match=r"path must be a str or os\.PathLike"):
        plot.heatmap(5, 4, path=123)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda: plot.heatmap(0, 8), ValueError, r"length must be an integer >= 1, got 0"),
        (lambda: plot.heatmap(2.5, 8), TypeError, r"length must be an integer"),
        (lambda: plot.heatmap(5, 0), ValueError, r"d_model must be an integer >= 1, got 0"),
        (lambda: plot.heatmap(5, True), TypeError, r"d_model must be an integer"),
        (lambda: plot.heatmap(5, 8, base=-1.0), ValueError, r"base must be a positive"),
        (lambda: plot.heatmap(5, 8, base="x"), TypeError, r"base must be a positive"),
        (lambda: plot.heatmap(5, 8, convention="bert"), ValueError, r"convention must be one"),
        (
            lambda: plot.sinusoids(5, 8, channels=[8]),
            ValueError,
            r"channels must lie in 0 \.\. d_model-1 = 7, got 8",
        ),
        (lambda: plot.sinusoids(5, 8, channels=[-1]), ValueError, r"channels must be an integer"),
        (lambda: plot.sinusoids(5, 8, channels=[]), ValueError, r"channels must name at least"),
        (lambda: plot.sinusoids(5, 8, channels="0"), TypeError, r"channels must be None or"),
        (lambda: plot.sinusoids(5, 8, channels=[1.5]), TypeError, r"channels must be an integer"),
        (lambda: plot.sinusoids(0, 8), ValueError, r"length must be an integer >= 1"),
        (lambda: plot.wavelength_plot(0), ValueError, r"d_model must be an integer >= 1"),
        (lambda: plot.wavelength_plot(8, base=0.0), ValueError, r"base must be a positive"),
        (lambda: plot.similarity_plot(1, 8), ValueError, r"length must be an integer >= 2"),
        (lambda: plot.similarity_plot(5, 8, metric="l2"), ValueError, r"metric must be 'dot'"),
        (lambda: plot.precision_plot(5, 8), ValueError, r"max_position must be an integer >= 10"),
        (lambda: plot.precision_plot(2**53 + 1, 8), ValueError, r"max_position must be at most"),
        (lambda: plot.precision_plot(100, 8, convention=3), TypeError, r"convention must be a"),
        (lambda: plot.shift_plot(5, 8), ValueError, r"max_position must be an integer >= 10"),
        (lambda: plot.shift_plot(100, 8, shifts=[]), ValueError, r"shifts must hold 1 to 6"),
        (lambda: plot.shift_plot(100, 8, shifts=range(1, 8)), ValueError, r"1 to 6 distinct"),
        (lambda: plot.shift_plot(100, 8, shifts=[0]), ValueError, r"shifts must be an integer"),
        (lambda: plot.shift_plot(100, 8, shifts=[1.5]), TypeError, r"shifts must be an integer"),
        (lambda: plot.shift_plot(100, 8, shifts="1"), TypeError, r"shifts must be a sequence"),
        (lambda: plot.shift_plot(100, 8, shifts=[10_001]), ValueError, r"at most 10000"),
        (lambda: plot.shift_plot(2**53, 8), ValueError, r"must be at most 2\*\*53"),
        (
            lambda: plot.shift_plot(100, 1, convention="tensor2tensor"),
            ValueError,
            r"d_model must be >= 2 under convention 'tensor2tensor'",
        ),
        (
            lambda: plot.wavelength_plot(1, convention="tensor2tensor"),
            ValueError,
            r"d_model must be >= 2 under convention 'tensor2tensor'",
        ),
        (
            lambda: plot.precision_plot(100, 1, convention="tensor2tensor"),
            ValueError,
            r"d_model must be >= 2 under convention 'tensor2tensor'",
        ),
    ],
)
def test_bad_arguments_raise_errors_naming_them(call: Any, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        call()


def test_no_pyplot_and_no_open_figures() -> None:
    """Figures are built without pyplot: nothing is registered with it and it is not imported."""
    code = (
        "import sys, posenc.plot as p\n"
        "for name, f in p.PLOTS.items():\n"
        "    if name in ('bias', 'buckets', 'slopes'):\n"
        "        f(distance=8) if name != 'slopes' else f(4)\n"
        "        continue\n"
        "    f(**({'max_position': 100} if name in ('precision', 'shift') else {}), d_model=8)\n"
        "print('matplotlib.pyplot' in sys.modules)\n"
        "import matplotlib.pyplot as plt\n"
        "print(plt.get_fignums())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split("\n")[:2] == ["False", "[]"]


def test_missing_matplotlib_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name.split(".")[0] == "matplotlib" or name.startswith("posenc.plot"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    with pytest.raises(ImportError, match=r"pip install matplotlib .*pip install '\.\[plot\]'"):
        importlib.import_module("posenc.plot")
