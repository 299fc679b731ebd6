"""The docs hold one screenshot per panel (``python -m benchmarks.explore --screenshots``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from posenc.explore import PANELS

FOLDER = Path(__file__).resolve().parents[2] / "docs" / "figures" / "explore"


@pytest.mark.parametrize("panel", [p.name for p in PANELS])
def test_one_screenshot_per_panel_under_200_kb(panel: str) -> None:
    path = FOLDER / f"{panel}.png"
    assert path.is_file(), (
        f"missing {path}: run python -m benchmarks.explore --screenshots {FOLDER}"
    )
    assert path.stat().st_size <= 200 * 1024


def test_no_screenshot_of_a_panel_that_does_not_exist() -> None:
    assert {p.stem for p in FOLDER.glob("*.png")} == {p.name for p in PANELS}
