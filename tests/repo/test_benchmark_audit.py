"""The audit benchmark's error table: the one docs/precision.md shows is the one it computes."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("gguf")  # the benchmark module writes GGUF files

from benchmarks import audit

ROOT = Path(__file__).resolve().parents[2]


def test_docs_show_the_computed_error_table() -> None:
    assert audit.error_table(1024) in (ROOT / "docs" / "precision.md").read_text()


def test_float32_angles_grow_with_the_position_and_16_bit_tables_do_not() -> None:
    config = audit.ERROR_CONFIGS["default (base 10000)"]
    short, long = (audit.pipeline_errors(config, n, 64) for n in (2**12, 2**20))
    assert long["float32 angles"] > 100 * short["float32 angles"]
    assert long["bfloat16 tables"] == pytest.approx(short["bfloat16 tables"], rel=0.01)
    assert short["bfloat16 tables"] <= 2.0**-9
    assert long["bfloat16 positions"] > 1.0


def test_docs_show_the_figure_of_the_table_drawn_from_the_same_numbers() -> None:
    pytest.importorskip("matplotlib")
    from PIL import Image

    png = audit.FIGURE
    assert f"figures/{png.name}" in (ROOT / "docs" / "precision.md").read_text()
    assert png.stat().st_size < 100_000, f"{png.name}: {png.stat().st_size:,} bytes"
    with Image.open(png) as image:
        assert image.info["Description"] == "rows=1024, head_dim=128"
    fig = audit.error_figure(1024)
    values = audit.error_values(1024)
    assert [ax.get_title() for ax in fig.axes] == list(values)
    for ax, by_length in zip(fig.axes, values.values(), strict=True):
        assert ax.get_yscale() == "log"
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert list(lines) == list(audit.PIPELINES)
        for name, line in lines.items():
            assert list(line.get_ydata()) == [by_length[n][name] for n in audit.ERROR_LENGTHS]
