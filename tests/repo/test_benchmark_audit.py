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
