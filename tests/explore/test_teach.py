"""What the explorer teaches: honest axes, the defects a learner meets, bounded answers."""

from __future__ import annotations

import time
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


def _limits() -> list[tuple[str, dict[str, Any]]]:
    """Each panel at each control's limits (numbers at both ends, every choice), the others
    at their defaults; settings the panel refuses are skipped by the caller."""
    cases = []
    for panel in PANELS:
        for control in panel.controls:
            if control.kind in ("int", "float"):
                ends = [control.low, control.high]
                values = [int(v) if control.kind == "int" else v for v in ends]
            elif control.kind == "choice":
                values = list(control.choices)
            else:
                continue
            cases += [(panel.name, {control.name: v}) for v in values]
    return cases


#: The most bytes an /api answer may hold, and the most points a curve may carry.
MAX_ANSWER = 512 * 1024
MAX_POINTS = 2000


@pytest.mark.slow
def test_every_answer_at_every_controls_limit_is_bounded() -> None:
    from posenc.explore._site import to_json

    answered = flat = 0
    for panel, values in _limits():
        began = time.perf_counter()
        try:
            answer = _compute(panel, **values)
        except ValueError:
            continue  # a refused combination: a message, not an answer
        assert time.perf_counter() - began < 10, (panel, values)
        answered += 1
        size = len(to_json(answer))
        assert size <= MAX_ANSWER, (panel, values, size)
        for chart in _charts(answer):
            for s in chart.get("series", []):
                assert len(s["x"]) <= MAX_POINTS, (panel, values, s["name"], len(s["x"]))
            for axis_ in (chart["x"], chart["y"]):
                # honest axes: none magnifies rounding (a span under a millionth of the
                # values' size); a quantity constant up to rounding spans 2 % and says so
                size_ = max(abs(axis_["low"]), abs(axis_["high"]))
                span = axis_["high"] - axis_["low"]
                assert span >= 1e-6 * size_, (panel, values, axis_)
                if span < 0.01 * size_ and "zoom" not in axis_:
                    flat += 1  # a real variation, small but far above the rounding
        for chart in _charts(answer):
            if "zoom" in chart["y"]:
                assert chart["y"]["high"] - chart["y"]["low"] >= 0.01 * abs(chart["y"]["high"])
    assert answered > 60
    assert flat <= 2  # wavelengths at base 1.0001: 2π .. 2π·1.0001, truly that close


def test_a_long_curve_is_sampled_with_its_extremes_and_says_so() -> None:
    from posenc import analysis
    from posenc._figure_data import difference_cover

    answer = _compute("similarity", length=10**6, d_model=16)
    chart = _charts(answer)[0]
    (curve,) = chart["series"]
    s = analysis.similarity(difference_cover(10**6, limit=2048), 16)
    y = s.profile[s.distances >= 0]
    assert len(curve["y"]) <= MAX_POINTS
    assert min(curve["y"]) == pytest.approx(y.min(), rel=1e-12)
    assert max(curve["y"]) == pytest.approx(y.max(), rel=1e-12)
    assert f"of {y.size:,} points drawn" in chart["drawn"]


def test_readouts_are_rounded_with_the_exact_value_kept() -> None:
    for panel in PANELS:
        for n in _compute(panel.name)["numbers"]:
            assert "None" not in n["shown"], (panel.name, n)
            for word in n["shown"].replace(",", " ").split():
                if not any(ch in word for ch in ".e"):
                    continue  # counts, indices: exact integers
                digits = word.lstrip("+-").split("e")[0].replace(".", "").lstrip("0")
                assert len(digits) <= 6, (panel.name, n)
    alibi = {n["key"]: n for n in _compute("alibi", convention="bloom")["numbers"]}
    exact = float(alibi["rounding"]["value"])
    assert float(alibi["rounding"]["shown"]) == pytest.approx(exact, rel=1e-5)
    assert alibi["rounding"]["shown"] != alibi["rounding"]["value"]


def test_the_content_security_policy_is_unchanged(server: Any) -> None:
    from .conftest import request

    for path in ("/", "/static/explore.js", "/api/panels", "/api/panel/rope"):
        status, _ = request(server, path)
        assert status == 200
    import http.client

    for path in ("/", "/api/panel/rope"):
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        connection.close()
        policy = response.getheader("Content-Security-Policy")
        assert policy == "default-src 'self'; frame-ancestors 'none'"


def test_every_slider_steps_through_allowed_values_including_the_default() -> None:
    for panel in PANELS:
        for control in panel.controls:
            stops = control.stops()
            if control.kind not in ("int", "float"):
                assert stops == []
                continue
            assert control.default in stops, (panel.name, control.name)
            assert stops == sorted(set(stops))
            assert stops[0] == control.low
            assert stops[-1] == control.high
            assert len(stops) <= 130
            for value in stops:
                control.parse(repr(value) if control.kind == "float" else str(value))


#: The ideas of the guided path, in the tutorial's order.
ORDER = ("need", "table", "wavelengths", "shift", "similarity", "precision", "bug", "rope",
         "scaling", "alibi", "buckets")  # fmt: skip


def test_the_guided_path_follows_the_tutorial_and_each_link_resolves(server: Any) -> None:
    import re
    from urllib.parse import urlencode

    from .conftest import request

    status, body = request(server, "/api/path")
    assert status == 200
    steps = body["steps"]
    assert tuple(s["name"] for s in steps) == ORDER
    pages: dict[str, str] = {}
    for step in steps:
        assert 1 <= len(step["controls"]) <= 2, step["name"]
        assert step["try"].endswith(".")
        assert step["notice"].endswith(".")
        values = {c["name"]: c["default"] for c in step["controls"]} | step["fixed"]
        query = urlencode(values)
        status, answer = request(server, f"/api/panel/{step['panel']}?{query}")
        assert status == 200, (step["name"], answer)
        assert 1 <= len(step["figures"]) <= 2  # one live figure (the RoPE step: two views)
        assert max(step["figures"]) < len(_charts(answer))
        page = step["link"]["page"]
        if page not in pages:
            status, html = request(server, f"/docs/{page}")
            assert status == 200
            pages[page] = html.decode()
        assert f'id="{step["link"]["anchor"]}"' in pages[page], step["link"]
    for html in pages.values():  # within the Content-Security-Policy
        assert not re.search(r"<script|\sstyle=|<style|\son\w+=", html)
        assert "src=" not in html.replace('<link rel="icon" href', "")
    status, body = request(server, "/docs/deploying")
    assert status == 404


def test_the_tutorial_pages_go_into_the_wheel() -> None:
    from pathlib import Path

    from posenc.explore._docs import DOCS

    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later

    root = Path(__file__).resolve().parents[2]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    included = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert included == {f"docs/{d}.md": f"posenc/explore/docs/{d}.md" for d in DOCS}


def test_every_step_answers_across_its_controls_ranges() -> None:
    from posenc.explore import STEPS

    for step in STEPS:
        controls = step.exposed()
        defaults = {c.name: c.default for c in controls} | dict(step.values)
        for control in controls:
            ends = control.stops()[:: max(len(control.stops()) - 1, 1)] or list(control.choices)
            for value in ends:
                answer = _compute(step.panel, **(defaults | {control.name: value}))
                assert answer["chart"], (step.name, control.name, value)
