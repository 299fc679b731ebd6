"""The docs hold one screenshot per panel and one per step of the guided path
(``python -m benchmarks.explore --screenshots docs/figures/explore``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from posenc.explore import PANELS, STEPS

FOLDER = Path(__file__).resolve().parents[2] / "docs" / "figures" / "explore"


@pytest.mark.parametrize("panel", [p.name for p in PANELS])
def test_one_screenshot_per_panel_under_200_kb(panel: str) -> None:
    path = FOLDER / f"{panel}.png"
    assert path.is_file(), (
        f"missing {path}: run python -m benchmarks.explore --screenshots {FOLDER}"
    )
    assert path.stat().st_size <= 200 * 1024


@pytest.mark.parametrize("step", [s.name for s in STEPS])
def test_one_screenshot_per_step_under_120_kb(step: str) -> None:
    path = FOLDER / f"step-{step}.png"
    assert path.is_file(), (
        f"missing {path}: run python -m benchmarks.explore --screenshots {FOLDER}"
    )
    assert path.stat().st_size <= 120 * 1024


def test_no_screenshot_of_a_panel_or_step_that_does_not_exist() -> None:
    expected = {p.name for p in PANELS} | {f"step-{s.name}" for s in STEPS}
    assert {p.stem for p in FOLDER.glob("*.png")} == expected
