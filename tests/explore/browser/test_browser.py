"""The explorer in a real browser: headless Chromium (Debian's packages) driven by Selenium.

Skipped with a reason when Chromium, its driver or Selenium is missing; under the environment
variable CI a missing browser fails instead (``make test`` installs the packages as root).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posenc
from posenc import analysis
from posenc._figure_data import sin_cos_channels
from posenc.explore import PANELS, ExplorerServer
from posenc.explore._charts import rounded

from . import chromium

pytestmark = pytest.mark.slow

pytest.importorskip("flask")  # the explorer's web framework (the extra "explore")

WHY = chromium.missing()
if WHY is not None:
    if os.environ.get("CI"):
        pytest.fail(f"browser tests need Chromium under CI: {WHY}", pytrace=False)
    pytest.skip(WHY, allow_module_level=True)

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

#: Panels whose controls, pointer or upload a test has moved since the page was last loaded.
_moved: set[str] = set()


@pytest.fixture(scope="module")
def browser(server: ExplorerServer) -> Iterator[Any]:
    """One Chromium and one page for the module; :func:`_fresh` reloads it when a test needs
    panels that an earlier test moved."""
    driver = chromium.start()
    driver.get(server.url)
    chromium.wait_ready(driver)
    _moved.clear()
    yield driver
    driver.quit()


def _fresh(driver: Any, *panels: str) -> None:
    """``panels`` (every panel when none is named) as a fresh page shows them: the page is
    reloaded when a test moved one of them since the last load, whatever ran before (or failed
    half-way); the moving tests touch one panel each, so they share a load."""
    if _moved & (set(panels) or {p.name for p in PANELS}):
        driver.refresh()
        chromium.wait_ready(driver)
        _moved.clear()


def _errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _updates(driver: Any, panel: str) -> int:
    section = driver.find_element(By.ID, panel)
    return int(section.get_attribute("data-updates") or 0)


def _figure(driver: Any, panel: str) -> str:
    script = (
        "return [...document.querySelectorAll(`#${arguments[0]} canvas`)]"
        ".map(c => c.toDataURL()).join('|')"
    )
    return str(driver.execute_script(script, panel))


def _set(driver: Any, panel: str, name: str, value: str) -> None:
    """Set one control the way a user does, and wait for the panel's answer."""
    _moved.add(panel)
    before = _updates(driver, panel)
    element = driver.find_element(By.ID, f"{panel}-{name}")
    if element.tag_name == "select":
        Select(element).select_by_value(value)
    else:
        element.send_keys(Keys.CONTROL, "a")  # typing replaces the selection: one change
        element.send_keys(value)
        element.send_keys(Keys.TAB)  # leaving the field fires "change"
    WebDriverWait(driver, 30).until(
        lambda d: (
            _updates(d, panel) > before or d.find_element(By.CSS_SELECTOR, f"#{panel} .error").text
        )
    )
    error = driver.find_element(By.CSS_SELECTOR, f"#{panel} .error").text
    assert not error, f"{panel}.{name} = {value}: {error}"


def _number(driver: Any, panel: str, key: str) -> str:
    """The exact value of a number the panel shows (the page shows it rounded)."""
    number = driver.find_element(By.CSS_SELECTOR, f"#{panel} dd[data-key='{key}']")
    assert number.text == rounded(number.get_attribute("data-exact"))
    return str(number.get_attribute("data-exact"))


def test_every_panel_renders_without_console_errors(browser: Any, server: ExplorerServer) -> None:
    _fresh(browser)
    assert _errors(browser) == []
    for panel in PANELS:
        section = browser.find_element(By.ID, panel.name)
        assert section.find_elements(By.TAG_NAME, "canvas"), panel.name
        assert section.find_element(By.CSS_SELECTOR, ".caption").text, panel.name
        assert section.find_elements(By.CSS_SELECTOR, "dd[data-key]"), panel.name
        for control in panel.controls:  # each input has its label
            label = section.find_element(
                By.CSS_SELECTOR, f"label[for='{panel.name}-{control.name}']"
            )
            assert control.label in label.text


def test_no_request_leaves_the_machine(browser: Any, server: ExplorerServer) -> None:
    urls = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    origin = server.url.rstrip("/")
    assert urls
    assert all(u.startswith(origin) for u in urls), urls


def _readout(browser: Any, before: str) -> tuple[int, int, float]:
    """(position, channel, value) once the heatmap's pointer readout has changed."""
    readout = browser.find_element(By.CSS_SELECTOR, "#heatmap .pointer")
    WebDriverWait(browser, 30).until(lambda d: readout.text != before)
    position, channel, value = re.fullmatch(r"PE\[(\d+), (\d+)\] = (\S+)", readout.text).groups()
    return int(position), int(channel), float(value)


def test_the_charting_library_draws_and_the_pointer_reads_posenc(browser: Any) -> None:
    _fresh(browser, "heatmap")
    assert browser.execute_script("return echarts.version") == "6.1.0"
    for panel in PANELS:  # every figure is an ECharts chart
        drawn = "return [...document.querySelectorAll(`#${arguments[0]} .chart`)]" \
                ".map(box => Boolean(echarts.getInstanceByDom(box)))"  # fmt: skip
        figures = browser.execute_script(drawn, panel.name)
        assert figures, panel.name
        assert all(figures), panel.name
    table = posenc.sinusoidal(100, 64)  # the heatmap panel's defaults
    _moved.add("heatmap")  # its pointer
    box = browser.find_element(By.CSS_SELECTOR, "#heatmap .chart")
    before = browser.find_element(By.CSS_SELECTOR, "#heatmap .pointer").text
    box.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_DOWN)  # the keyboard cursor
    assert _readout(browser, before) == (1, 2, table[1, 2])
    before = browser.find_element(By.CSS_SELECTOR, "#heatmap .pointer").text
    ActionChains(browser).move_to_element(box).move_by_offset(-40, 30).perform()  # the mouse
    position, channel, value = _readout(browser, before)
    assert (position, channel) != (1, 2)
    assert value == table[position, channel]
    assert _errors(browser) == []


#: A value each control moves to (the others: a select's last choice, a number doubled).
MOVES = {
    ("channels", "channels"): "0, 1",
    ("shift", "pair"): "3",
    ("shift", "p"): "40",
    ("bug", "pair"): "2",
    ("rope", "pair"): "5",
    ("rope", "distance"): "7",
    ("scaling", "factor"): "4",
    ("multi_axis", "base"): "50000",
    ("identify", "offset"): "5",
    ("identify", "convention"): "odd-exponent bug",
    ("precision", "max_position"): "10000000",
    # BLOOM's and Falcon's rounding take max_bias 8 only: MPT's takes the doubled one
    ("alibi", "convention"): "mpt",
    ("alibi", "shown"): "2, 5",
    ("buckets", "position"): "-40",
}


def _move(panel: Any, control: Any) -> str:
    if (panel.name, control.name) in MOVES:
        return MOVES[(panel.name, control.name)]
    if control.kind == "choice":
        others = [c for c in control.choices if c != control.default]
        return others[-1]
    value = control.default * 2 if control.default else 1
    if control.kind == "float":
        return repr(float(value))
    return str(int(value))


@pytest.mark.parametrize("panel", PANELS, ids=lambda p: p.name)
def test_moving_each_control_changes_its_figure(browser: Any, panel: Any) -> None:
    _fresh(browser, panel.name)
    for control in panel.controls:
        before = _figure(browser, panel.name)
        _set(browser, panel.name, control.name, _move(panel, control))
        assert _figure(browser, panel.name) != before, f"{panel.name}.{control.name}"


BASE = 12345.6


def _expected(panel: str) -> tuple[str, float]:
    """The key of one displayed number and its value from a direct posenc call at BASE."""
    if panel == "heatmap":
        return "last", float(posenc.sinusoidal(100, 64, base=BASE)[99, 63])
    if panel == "channels":  # the first channel the panel picks by default (length 200)
        lam = analysis.wavelengths(64, base=BASE).wavelengths
        sine, _ = sin_cos_channels(200, 64, "paper", lam)[0]
        return f"wavelength_{sine}", float(lam[sine // 2])
    if panel == "wavelengths":
        return "longest", analysis.wavelengths(64, base=BASE).longest
    if panel == "similarity":
        s = analysis.similarity(np.arange(256), 64, base=BASE)
        return "at_1", float(s.profile[list(s.distances).index(1)])
    if panel == "shift":
        return "exact", float(posenc.sinusoidal([8], 16, base=BASE, dtype=np.float64)[0, 2])
    if panel == "precision":
        report = analysis.precision_report(100_000, 64, "float32", base=BASE, samples=16)
        return "method_1", report.methods[1].max_error
    if panel == "bug":
        table = analysis.odd_exponent_table(np.arange(200), 16, base=BASE, dtype=np.float64)
        return "bad", analysis.check_shift(table[:201], 1, base=BASE)
    if panel == "scaling":
        yarn = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192}
        omega, _ = posenc.rope_frequencies(128, base=BASE, scaling=yarn)
        return "omega_last", float(omega[-1])
    if panel == "multi_axis":
        f = posenc.multi_axis_frequencies((16, 24, 24), base=BASE)
        return "omega_min", float(f.frequencies.max(axis=0).min())
    if panel == "identify":
        return "base", BASE
    # rope: the score of the fixed query at 12 and key at 9
    q = np.linspace(-1.0, 1.0, 64)
    k = 0.5 - q[::-1] ** 2
    cos, sin = posenc.rotary_cos_sin([12, 9], 64, base=BASE, dtype=np.float64)
    q_rot = posenc.apply_rotary(q[None], cos[:1], sin[:1])[0]
    k_rot = posenc.apply_rotary(k[None], cos[1:], sin[1:])[0]
    return "score", float(q_rot @ k_rot)


WITH_BASE = [p.name for p in PANELS if any(c.name == "base" for c in p.controls)]


@pytest.mark.parametrize("panel", WITH_BASE)
def test_a_displayed_number_equals_posenc_at_an_arbitrary_base(browser: Any, panel: str) -> None:
    _fresh(browser, panel)
    _set(browser, panel, "base", repr(BASE))
    key, expected = _expected(panel)
    # The similarity profile is a mean over the pairs at each distance: the page averages
    # over fewer positions (those whose differences cover every distance), so it agrees to
    # the rounding of that mean only.
    rel = 1e-12 if panel == "similarity" else 1e-15
    assert float(_number(browser, panel, key)) == pytest.approx(expected, rel=rel, abs=0)


def test_the_bias_panels_show_posencs_numbers_at_arbitrary_settings(browser: Any) -> None:
    _fresh(browser, "alibi", "buckets")
    for name, value in [("heads", "37"), ("max_bias", "5.5"), ("convention", "mpt"),
                        ("shown", "3, 29"), ("distance", "1001")]:  # fmt: skip
        _set(browser, "alibi", name, value)
    slopes = posenc.alibi_slopes(37, max_bias=5.5, convention="mpt")
    assert float(_number(browser, "alibi", "slope_last")) == slopes[36]
    bias = posenc.alibi_bias(37, [1001], [0], max_bias=5.5, convention="mpt")
    assert float(_number(browser, "alibi", "bias_29")) == bias[28, 0, 0]
    for name, value in [("num_buckets", "44"), ("max_distance", "300"), ("position", "-123")]:
        _set(browser, "buckets", name, value)
    t5 = posenc.t5_buckets([-123], num_buckets=44, max_distance=300)
    assert int(_number(browser, "buckets", "bucket")) == t5[0]
    _set(browser, "buckets", "scheme", "DeBERTa-v2")
    deberta = posenc.deberta_buckets([123], bucket_size=44, max_position=300)  # query - key
    assert int(_number(browser, "buckets", "bucket")) == deberta[0]


def _upload(browser: Any, panel: str, path: Path) -> str:
    _moved.add(panel)
    before = _updates(browser, panel)
    field = browser.find_element(By.ID, f"{panel}-file")
    field.send_keys(str(path))
    WebDriverWait(browser, 30).until(
        lambda d: (
            _updates(d, panel) > before or d.find_element(By.CSS_SELECTOR, f"#{panel} .error").text
        )
    )
    return str(browser.find_element(By.CSS_SELECTOR, f"#{panel} .error").text)


def test_uploads_work_and_hostile_ones_get_a_message(browser: Any, tmp_path: Path) -> None:
    _fresh(browser, "identify", "plan")
    good = tmp_path / "table.npy"
    np.save(good, posenc.sinusoidal(np.arange(2, 50), 16, base=BASE, convention="tensor2tensor"))
    assert _upload(browser, "identify", good) == ""
    assert float(_number(browser, "identify", "base")) == BASE
    assert _number(browser, "identify", "offset") == "2"
    bad = tmp_path / "pickled.npy"
    np.save(bad, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert "object" in _upload(browser, "identify", bad)
    config = tmp_path / "config.json"
    config.write_text('{"head_dim": 64, "rope_theta": 12345.6, "num_hidden_layers": 2}')
    assert _upload(browser, "plan", config) == ""
    omega = posenc.rope_frequencies(64, base=BASE)[0]
    assert float(_number(browser, "plan", "omega_0")) == omega[-1]
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert "deeper than 64 levels" in _upload(browser, "plan", deep)
    errors = [e for e in _errors(browser) if "status of 400" not in e]
    assert errors == []


def test_the_narrow_layout_renders(server: ExplorerServer) -> None:
    driver = chromium.start(width=360, height=800)
    try:
        # headless Chromium opens a window at least 500 pixels wide whatever --window-size
        # asks; resizing it gives the page a 360-pixel viewport
        driver.set_window_size(360, 800)
        driver.get(server.url)
        chromium.wait_ready(driver)
        assert driver.execute_script("return window.innerWidth") == 360
        width = driver.execute_script("return document.documentElement.clientWidth")
        scroll = driver.execute_script("return document.documentElement.scrollWidth")
        assert scroll <= width + 1, (scroll, width)
        for panel in PANELS:
            canvas = driver.find_element(By.CSS_SELECTOR, f"#{panel.name} canvas")
            assert 0 < canvas.size["width"] <= width
        assert _errors(driver) == []
    finally:
        driver.quit()


def _chart_option(driver: Any, panel: str, index: int) -> Any:
    script = (
        "const box = document.querySelectorAll(`#${arguments[0]} .chart`)[arguments[1]];"
        "const o = echarts.getInstanceByDom(box).getOption();"
        "return [o.yAxis[0].min, o.yAxis[0].max];"
    )
    return driver.execute_script(script, panel, index)


def test_dragging_a_slider_redraws_during_the_drag(browser: Any) -> None:
    _moved.add("rope")
    slider = browser.find_element(By.ID, "rope-p-slider")
    before = _updates(browser, "rope")
    drag = ActionChains(browser).click_and_hold(slider)
    for _ in range(4):
        drag.move_by_offset(6, 0).pause(0.15)
    drag.perform()
    during = _updates(browser, "rope")  # the button is still held
    ActionChains(browser).release().perform()
    assert during >= before + 2, (before, during)
    box = browser.find_element(By.ID, "rope-p")
    assert int(box.get_attribute("value")) != 12  # the number box follows the slider


def test_the_readout_shows_the_value_under_the_pointer_on_a_line_chart(browser: Any) -> None:
    _moved.add("similarity")
    answer = (  # the server's answer for the panel as it stands (earlier tests moved it)
        "const done = arguments[arguments.length - 1];"
        "const form = document.querySelector('#similarity form');"
        "const query = new URLSearchParams(new FormData(form)).toString();"
        "fetch('/api/panel/similarity?' + query).then(r => r.json()).then(done);"
    )
    (curve,) = browser.execute_async_script(answer)["chart"]["series"]
    box = browser.find_elements(By.CSS_SELECTOR, "#similarity .chart")[0]
    readout = browser.find_element(By.CSS_SELECTOR, "#similarity .readout")
    box.send_keys(Keys.HOME, Keys.ARROW_RIGHT)  # the keyboard: the second point
    x, y = int(curve["x"][1]), curve["y"][1]
    WebDriverWait(browser, 10).until(lambda d: readout.text.startswith(f"distance p - q = {x} "))
    assert readout.text.endswith(f": {float(f'{y:.6g}'):g}")
    ActionChains(browser).move_to_element(box).move_by_offset(100, 0).perform()  # the mouse
    WebDriverWait(browser, 10).until(
        lambda d: not readout.text.startswith(f"distance p - q = {x} ")
    )
    shown = re.fullmatch(r"distance p - q = (\d+) · .*: (\S+)", readout.text)
    assert shown is not None, readout.text
    index = curve["x"].index(float(shown.group(1)))
    assert float(shown.group(2)) == pytest.approx(curve["y"][index], rel=1e-5)


def test_the_rope_score_at_a_distant_position_is_flat_with_its_rounding_stated(
    browser: Any,
) -> None:
    _set(browser, "rope", "p", "10000000")
    score = abs(float(_number(browser, "rope", "score")))
    low, high = _chart_option(browser, "rope", 1)
    assert high - low >= 0.01 * score
    note = browser.find_element(By.CSS_SELECTOR, "#rope .note")
    assert re.search(r"constant up to rounding: the values differ by at most \S+e-\d\d", note.text)
    note.find_element(By.CSS_SELECTOR, "button.zoom").click()
    low, high = _chart_option(browser, "rope", 1)
    assert high - low < 1e-6 * score


def test_the_largest_answer_at_the_panels_limits_is_under_512_kb(browser: Any) -> None:
    fetch = (
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0]).then(r => r.text()).then(t => done(t.length));"
    )
    sizes = [
        browser.execute_async_script(fetch, path)
        for path in (  # the largest answers at the limits (tests/explore/test_teach.py)
            "/api/panel/scaling?head_dim=4096",
            "/api/panel/buckets?max_distance=100000",
            "/api/panel/similarity?length=1000000",
        )
    ]
    assert max(sizes) <= 512 * 1024, sizes


def test_a_slow_update_dims_the_figure_and_says_so(browser: Any, server: ExplorerServer) -> None:
    watch = (  # what the page shows while the answer is awaited, recorded by the page itself
        "const section = document.getElementById('wavelengths'); window.seen = null;"
        "new MutationObserver((changes, observer) => {"
        "  if (!section.classList.contains('busy') || window.seen) return;"
        "  window.seen = [getComputedStyle(section.querySelector('.figures')).opacity,"
        "                 section.querySelector('.busy-note').textContent, performance.now()];"
        "  observer.disconnect();"
        "}).observe(section, { attributes: true, attributeFilter: ['class'] });"
        "window.asked = performance.now();"
    )
    server.app.config["POSENC_EXPLORE_DELAY"] = lambda query: 0.5
    try:
        _moved.add("wavelengths")
        before = _updates(browser, "wavelengths")
        browser.execute_script(watch)
        browser.find_element(By.ID, "wavelengths-d_model").send_keys(Keys.BACKSPACE, Keys.TAB)
        WebDriverWait(browser, 10).until(lambda d: _updates(d, "wavelengths") > before)
        opacity, note, at = browser.execute_script("return window.seen")
        assert at - browser.execute_script("return window.asked") >= 150  # not at once
        assert float(opacity) < 1
        assert "computing" in note
        section = browser.find_element(By.ID, "wavelengths")
        assert "busy" not in section.get_attribute("class")
        assert section.find_element(By.CSS_SELECTOR, ".busy-note").text == ""
    finally:
        server.app.config["POSENC_EXPLORE_DELAY"] = None


def test_an_answer_older_than_the_latest_request_is_dropped(
    browser: Any, server: ExplorerServer
) -> None:
    server.app.config["POSENC_EXPLORE_DELAY"] = lambda q: 0.5 if q.get("p") == "40" else 0.0
    try:
        _moved.add("rope")
        box = browser.find_element(By.ID, "rope-p")
        for value in ("40", "50"):  # the first answer arrives last
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(value, Keys.TAB)
            box.click()
        WebDriverWait(browser, 10).until(lambda d: "50" in _label(d, "rope", "score"))
        time.sleep(0.7)  # the slow answer for p = 40 has arrived by now
        assert "at 50" in _label(browser, "rope", "score")
    finally:
        server.app.config["POSENC_EXPLORE_DELAY"] = None


def _label(driver: Any, panel: str, key: str) -> str:
    number = driver.find_element(By.CSS_SELECTOR, f"#{panel} dd[data-key='{key}']")
    return str(
        driver.execute_script("return arguments[0].previousElementSibling.textContent", number)
    )


def test_the_keyboard_alone_reaches_every_control(browser: Any) -> None:
    browser.execute_script(
        "window.reached = new Set();"
        "document.addEventListener('focusin', e => window.reached.add(e.target.id));"
        "document.activeElement.blur(); window.scrollTo(0, 0);"
    )
    wanted = {f"{p.name}-{c.name}" for p in PANELS for c in p.controls}
    wanted |= {f"{p.name}-{c.name}-slider" for p in PANELS for c in p.controls if c.stops()}
    ActionChains(browser).send_keys(Keys.TAB * (len(wanted) + 120)).perform()
    reached = set(browser.execute_script("return [...window.reached]"))
    assert wanted <= reached, sorted(wanted - reached)[:5]
    assert _errors(browser) == []


#: The guided path's steps, in the tutorial's order.
STEPS = ("need", "table", "wavelengths", "shift", "similarity", "precision", "bug", "rope",
         "scaling", "alibi", "buckets")  # fmt: skip


def test_the_guided_path_steps_load_in_order_and_link_to_the_tutorial(
    browser: Any, server: ExplorerServer
) -> None:
    path = browser.find_element(By.ID, "path")
    assert path.location["y"] < browser.find_element(By.ID, "lab").location["y"]  # opens on it
    links = []
    for i, name in enumerate(STEPS):
        if i:
            browser.find_element(By.ID, "step-next").click()
        WebDriverWait(browser, 20).until(lambda d, n=name: path.get_attribute("data-step") == n)
        section = browser.find_element(By.ID, f"step-{name}")
        assert section.is_displayed()
        assert section.find_elements(By.TAG_NAME, "canvas"), name
        assert 1 <= len(section.find_elements(By.CSS_SELECTOR, ".chart")) <= 2, name
        assert section.find_element(By.CSS_SELECTOR, ".try").text.startswith("Try this:")
        assert section.find_element(By.CSS_SELECTOR, ".notice").text.startswith("Notice:")
        assert (
            1
            <= len(section.find_elements(By.CSS_SELECTOR, "form input:not(.slider), form select"))
            <= 2
        )
        shown = [
            s for s in browser.find_elements(By.CSS_SELECTOR, "#step section") if s.is_displayed()
        ]
        assert len(shown) == 1  # one idea at a time
        links.append(section.find_element(By.CSS_SELECTOR, "a.tutorial").get_attribute("href"))
    assert browser.find_element(By.ID, "step-next").get_attribute("disabled")
    assert _errors(browser) == []
    resolve = (  # the page the link opens, read as the browser reads it
        "const [link, done] = [arguments[0], arguments[arguments.length - 1]];"
        "fetch(link).then(r => r.text().then(t => done([r.status, new DOMParser()"
        ".parseFromString(t, 'text/html').getElementById(link.split('#')[1]) !== null])));"
    )
    for link in links:  # offline: the explorer serves the tutorial itself
        assert link.startswith(server.url)
        assert browser.execute_async_script(resolve, link) == [200, True], link
    assert _errors(browser) == []
