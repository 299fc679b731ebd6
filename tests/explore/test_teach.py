"""What the explorer teaches: honest axes, the defects a learner meets, bounded answers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from posenc.explore import PANELS
from posenc.explore._site import BY_NAME

pytest.importorskip("flask")  # the explorer's web framework (the extra "explore")


def _compute(panel: str, **values: Any) -> dict[str, Any]:
    p = BY_NAME[panel]
    query = {c.name: c.default for c in p.controls}
    query.update(values)
    return p.compute(query)


def _charts(answer: dict[str, Any]) -> list[dict[str, Any]]:
    chart = answer["chart"]
    return chart if isinstance(chart, list) else [chart]


@pytest.mark.parametrize("p", [12, 10**7])
def test_the_rope_score_is_drawn_flat_with_its_rounding_stated(p: int) -> None:
    answer = _compute("rope", p=p)
    score = float(next(n["value"] for n in answer["numbers"] if n["key"] == "score"))
    chart = _charts(answer)[1]
    y = chart["y"]
    assert y["high"] - y["low"] >= 0.01 * abs(score)  # at least 1 % of its magnitude
    assert y["low"] < score < y["high"]
    assert "rounding" in y["note"]
    zoom = y["zoom"]  # the exact variation, one click away
    assert zoom["high"] - zoom["low"] < 1e-6 * abs(score)
    values = [v for s in chart["series"] for v in s["y"] if v is not None]
    assert zoom["low"] <= min(values)
    assert max(values) <= zoom["high"]


def test_a_varying_quantity_gets_no_rounding_note() -> None:
    chart = _charts(_compute("similarity"))[0]
    assert "zoom" not in chart["y"]
    assert "note" not in chart["y"]


def test_the_alibi_panel_explains_the_head_count_rule() -> None:
    caption = _compute("alibi", heads=12)["caption"]
    assert "not a power of two" in caption
    assert "8" in caption
    assert "16" in caption
    assert "power of two" not in _compute("alibi", heads=8)["caption"]


@pytest.mark.parametrize("pair", [0, 1, 31])
def test_the_rope_pair_table_repeats_no_column(pair: int) -> None:
    columns = _compute("rope", pair=pair)["tables"][0]["columns"]
    assert len(columns) == len(set(columns)), columns
    assert f"pair {pair}" in columns
    assert len(set(_compute("rope", head_dim=2, pair=0)["tables"][0]["columns"])) >= 2


def test_an_odd_head_dim_is_named() -> None:
    with pytest.raises(ValueError, match=r"head_dim must be even.*got 63"):
        _compute("rope", head_dim=63)


def test_the_wavelength_legend_names_each_bound_once() -> None:
    names = [s["name"] for s in _charts(_compute("wavelengths"))[0]["series"]]
    assert len(names) == len(set(names))
    assert sum("base·2π" in n for n in names) == 1
    assert sum(n.startswith("2π") for n in names) == 1


def test_the_heatmap_uses_the_demos_colour_map() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    from posenc._figure_data import _DIVERGING

    cmap = matplotlib.colormaps[_DIVERGING]
    chart = _charts(_compute("heatmap"))[0]
    expected = [matplotlib.colors.to_hex(cmap(x)) for x in np.linspace(0, 1, len(chart["colours"]))]
    assert [c.lower() for c in chart["colours"]] == expected


def test_every_rope_type_answers_at_the_defaults() -> None:
    for kind in BY_NAME["scaling"].controls[0].choices:
        assert _compute("scaling", rope_type=kind)["numbers"]


def test_panels_are_the_fourteen() -> None:
    assert len(PANELS) == 14
