"""Attention biases, seen: ``posenc.analysis`` (bias_profile, bucket_map, slope_table), the
``bias``, ``buckets`` and ``slopes`` figures of ``posenc.plot`` and ``posenc plot``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posenc
from posenc import analysis


def test_alibi_profile_is_the_dense_bias_of_one_query() -> None:
    profile = analysis.bias_profile("alibi", heads=12, distance=20, max_bias=8.0)
    # query at position 20, keys 0 .. 40: relative positions -20 .. 20
    dense = posenc.alibi_bias(12, [20], 41, dtype=np.float64)[:, 0, :]
    assert np.array_equal(profile.values, dense)
    assert np.array_equal(profile.slopes, posenc.alibi_slopes(12))


def test_t5_profile_reads_the_table_through_the_buckets() -> None:
    table = np.random.default_rng(0).normal(size=(32, 3))
    profile = analysis.bias_profile("t5", table=table, distance=200, bidirectional=False)
    dense = posenc.t5_bias(table, [200], 401, bidirectional=False, dtype=np.float64)
    assert np.array_equal(profile.values, dense[:, 0, :])
    assert profile.buckets is not None
    assert profile.buckets[profile.relative > 0].max() == 0  # causal: the future is bucket 0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"method": "t5"}, ValueError, "needs table="),
        ({"method": "t5", "table": np.zeros((16, 2))}, ValueError, r"table must have shape"),
        ({"method": "t5", "table": np.zeros((32, 2)), "heads": 3}, ValueError, "heads must be"),
        ({"method": "alibi", "table": np.zeros((32, 2))}, ValueError, "table applies to"),
        ({"method": "kerple"}, ValueError, "method must be"),
        ({"distance": 2**20 + 1}, ValueError, "distance must be at most"),
        ({"heads": 0}, ValueError, "heads"),
    ],
)
def test_bias_profile_refuses_by_name(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        analysis.bias_profile(**kwargs)


def test_t5_bucket_map_regions() -> None:
    m = analysis.bucket_map("t5", distance=300)
    keys_before = -m.relative  # distances to earlier keys
    before = m.buckets[m.relative <= 0]
    distance = keys_before[m.relative <= 0]
    exact = distance <= m.exact_limit
    assert m.exact_limit == 7
    assert np.array_equal(before[exact], distance[exact])  # each distance its own bucket
    assert set(before[distance >= 128].tolist()) == {15}  # from max_distance on: the last
    assert len(set(before[(distance > 7) & (distance < 128)].tolist())) == 8  # 8 log buckets


def test_deberta_bucket_map_is_of_query_minus_key() -> None:
    m = analysis.bucket_map("deberta", distance=600)
    assert m.exact_limit == 128
    assert np.array_equal(m.buckets, posenc.deberta_buckets(-m.relative))
    assert m.buckets[m.relative == -511].item() == 255  # the log buckets end at max_position
    with pytest.raises(ValueError, match="bidirectional must be True"):
        analysis.bucket_map("deberta", bidirectional=False)
    with pytest.raises(ValueError, match="max_distance"):
        analysis.bucket_map("deberta", num_buckets=256, max_distance=100)


def test_slope_table_measures_the_frameworks() -> None:
    t = analysis.slope_table(128)
    assert np.array_equal(t.exact, posenc.alibi_slopes(128))
    for rule in ("bloom", "mpt", "falcon"):
        assert np.array_equal(t.rules[rule], posenc.alibi_slopes(128, convention=rule))
    assert 1 <= np.abs(t.ulps["bloom"]).max() <= 11  # BLOOM: up to 11 float32 ulps at 128
    assert np.abs(t.ulps["falcon"]).max() > 2**10  # bfloat16 keeps 8 bits
    assert sorted(analysis.slope_table(8, max_bias=16.0).rules) == ["mpt"]
    assert t.as_dict()["heads"] == 128


# --------------------------------------------------------------------------- figures

pytest.importorskip("matplotlib", reason="posenc.plot needs matplotlib")
plot = pytest.importorskip("posenc.plot")


def test_bias_figure_draws_the_profile() -> None:
    fig = plot.bias_plot(20, distance=10)
    profile = analysis.bias_profile("alibi", heads=20, distance=10)
    assert np.array_equal(fig.axes[1].images[0].get_array(), profile.values)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 16  # 16 of the 20 heads get a curve
    assert np.array_equal(lines[0].get_ydata(), profile.values[0])
    assert np.array_equal(lines[-1].get_ydata(), profile.values[19])
    assert "16 of 20 heads" in fig.axes[0].get_title()


def test_bucket_figure_draws_the_map_and_its_regions() -> None:
    fig = plot.bucket_plot("t5", distance=200, num_buckets=32, max_distance=128)
    ax = fig.axes[0]
    m = analysis.bucket_map("t5", distance=200)
    (line,) = ax.get_lines()
    assert np.array_equal(line.get_ydata(), m.buckets)
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["exact: |r| in [0, 7]", "logarithmic: |r| in [8, 127]",
                      "last bucket: |r| in [128, 200]"]  # fmt: skip
    causal = plot.bucket_plot("t5", distance=20, bidirectional=False)
    assert "causal" in causal.axes[0].get_title()


def test_slope_figure_draws_every_rule() -> None:
    fig = plot.slope_plot(12)
    t = analysis.slope_table(12)
    left, right = fig.axes
    by_label = {line.get_label(): line for line in left.get_lines()}
    assert np.array_equal(by_label["exact (float64)"].get_ydata(), t.exact)
    assert np.array_equal(by_label["Falcon (bfloat16)"].get_ydata(), t.rules["falcon"])
    ulps = {line.get_label(): line for line in right.get_lines()}
    assert np.array_equal(ulps["BLOOM (float32)"].get_ydata(), t.ulps["bloom"])


def test_the_docs_figures_are_committed_small_and_say_what_they_show() -> None:
    from PIL import Image

    figures = Path(__file__).resolve().parents[2] / "docs" / "figures"
    page = (figures.parent / "attention-biases.md").read_text()
    wanted = {
        "bias-alibi.png": "8 heads",
        "bias-t5-buckets.png": "num_buckets=32, max_distance=128",
        "bias-deberta-buckets.png": "bucket_size=256, max_position=512",
        "bias-slopes.png": "32 heads",
    }
    for name, setting in wanted.items():
        png = figures / name
        assert png.stat().st_size < 100_000, f"{name}: {png.stat().st_size:,} bytes"
        assert f"figures/{name}" in page
        with Image.open(png) as image:
            assert setting in image.info["Description"], name


# ------------------------------------------------- long ranges, many heads, unplottable values


def test_a_long_distance_is_drawn_through_evenly_spaced_relative_positions() -> None:
    fig = plot.bias_plot(64, distance=2**20)
    slopes = posenc.alibi_slopes(64)
    lines = fig.axes[0].get_lines()
    relative = lines[0].get_xdata()
    assert relative.size == 9999  # not 2**21 + 1
    assert relative[0] == -(2**20)
    assert relative[-1] == 2**20
    assert 0 in relative
    np.testing.assert_array_equal(lines[-1].get_ydata(), -slopes[63] * np.abs(relative))
    image = fig.axes[1].images[0].get_array()
    assert image.shape == (64, 2047)
    assert image[:, 1023].tolist() == [0.0] * 64  # the column of relative position 0
    np.testing.assert_array_equal(image[:, 0], -slopes * 2**20)
    assert "9,999 evenly spaced of 2,097,153 relative positions drawn" in fig._suptitle.get_text()
    buckets = plot.bucket_plot("t5", distance=2**20)
    (line,) = buckets.axes[0].get_lines()
    assert line.get_xdata().size == 9999
    assert "of 2,097,153 relative positions drawn" in buckets.axes[0].get_title()


def test_a_table_of_many_heads_is_drawn_through_evenly_spaced_heads() -> None:
    table = np.random.default_rng(0).normal(size=(32, 3000))
    fig = plot.bias_plot(table=table, distance=50)
    image = fig.axes[1].images[0].get_array()
    assert image.shape == (512, 101)
    np.testing.assert_array_equal(
        image[-1], analysis.bias_profile("t5", table=table, distance=50).values[-1]
    )
    assert fig.axes[1].get_title() == "512 evenly spaced of 3,000 heads"
    assert "16 of 3000 heads" in fig.axes[0].get_title()
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels[0] == "head 0"
    assert labels[-1] == "head 2999"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: plot.bias_plot(2**16 + 1), "heads must be at most 65536"),
        (lambda: plot.slope_plot(2**16 + 1), "heads must be at most 65536"),
        (lambda: plot.bias_plot(table=np.full((32, 2), 1e308)), "table holds values up to 1e"),
        (lambda: plot.bias_plot(table=np.zeros((32, 0))), "table must have shape"),
        (lambda: plot.bias_plot(4, distance=2**20 + 1), "distance must be at most"),
        (lambda: plot.slope_plot(8, max_bias=1e308), "max_bias must be at most 126"),
    ],
)
def test_figures_refuse_what_they_cannot_draw(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
