"""The explorer's speed: cold start, server time per panel update, render time in the browser.

    python -m benchmarks.explore                      # all three (render needs Chromium)
    python -m benchmarks.explore --screenshots docs/figures/explore   # one PNG per panel

- cold start: ``posenc explore --no-browser`` in a new process until its page answers HTTP 200
  (median of 5);
- update: one ``GET /api/panel/NAME`` at the panel's defaults, request to last byte, on a
  warm server (median of 20 after 2 untimed);
- render: in headless Chromium, from a control change to the panel's redraw, measured with the
  page's ``performance.now()`` (median of 5 per panel, and per step of the guided path);
- the largest ``/api`` answer: every panel at every control's limits (both ends of a number,
  every choice), its bytes and the slowest answer's seconds (aims: 512 KB, 10 s).

Aims: start under 5 s, updates under 200 ms on a 2-core machine.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.harness import environment, measure
from posenc.explore import PANELS, STEPS, make_server


def cold_start(repeats: int = 5) -> float:
    """Median seconds from launching ``posenc explore`` to the first HTTP 200 of its page."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "posenc", "explore", "--no-browser"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "CI": "1"},
        )
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            with urllib.request.urlopen(url, timeout=30) as response:
                response.read()
            times.append(time.perf_counter() - began)
        finally:
            process.terminate()
            process.wait(10)
    return statistics.median(times)


def updates(url: str) -> dict[str, float]:
    """Median seconds of one panel request at its defaults, by panel."""

    def get(name: str) -> None:
        with urllib.request.urlopen(f"{url}api/panel/{name}", timeout=60) as response:
            response.read()

    return {p.name: measure(lambda n=p.name: get(n), repeats=20, warmup=2).median for p in PANELS}


_RENDER = """
const [panel, done] = [arguments[0], arguments[arguments.length - 1]];
const section = document.getElementById(panel);
const form = section.querySelector('form');
const before = Number(section.dataset.updates || 0);
const began = performance.now();
form.dispatchEvent(new Event('change'));
(function wait() {
  if (Number(section.dataset.updates || 0) > before) {
    requestAnimationFrame(() => done(performance.now() - began));
  } else { setTimeout(wait, 1); }
})();
"""


def renders(url: str) -> tuple[dict[str, float], dict[str, float]] | None:
    """Median milliseconds from a control change to the redraw, by panel and by step of the
    guided path (None: no browser)."""
    from tests.explore.browser import chromium

    if chromium.missing():
        print(f"render: skipped, {chromium.missing()}")
        return None
    driver = chromium.start()
    try:
        driver.get(url)
        chromium.wait_ready(driver)
        panels = {
            p.name: statistics.median(
                driver.execute_async_script(_RENDER, p.name) for _ in range(5)
            )
            for p in PANELS
        }
        steps = {}
        for step in STEPS:
            _show_step(driver, step.name)
            steps[step.name] = statistics.median(
                driver.execute_async_script(_RENDER, f"step-{step.name}") for _ in range(5)
            )
        return panels, steps
    finally:
        driver.quit()


def _show_step(driver: Any, name: str) -> None:
    """Open step ``name`` of the guided path and wait until its figure is drawn."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script(
        "document.querySelector(`#steps button[data-step='${arguments[0]}']`).click()", name
    )
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.getElementById('path').dataset.step") == name
    )


def limit_queries() -> list[tuple[str, dict[str, Any]]]:
    """Each panel at each control's limits (numbers at both ends, every choice), the other
    controls at their defaults."""
    cases = []
    for panel in PANELS:
        for control in panel.controls:
            if control.kind in ("int", "float"):
                ends = [control.low, control.high]
                values = [int(v) if control.kind == "int" else v for v in ends if v is not None]
            elif control.kind == "choice":
                values = list(control.choices)
            else:
                continue
            cases += [(panel.name, {control.name: v}) for v in values]
    return cases


def largest_answer(url: str) -> tuple[int, str, float]:
    """(bytes, request, seconds) of the largest ``/api/panel`` answer at the panels' limits,
    and the slowest answer's seconds (refused settings, answered 400, are skipped)."""
    largest, which, slowest = 0, "", 0.0
    for name, values in limit_queries():
        path = f"api/panel/{name}?{urllib.parse.urlencode(values)}"
        began = time.perf_counter()
        try:
            with urllib.request.urlopen(url + path, timeout=60) as response:
                size = len(response.read())
        except urllib.error.HTTPError:
            continue
        slowest = max(slowest, time.perf_counter() - began)
        if size > largest:
            largest, which = size, path
    return largest, which, slowest


#: The largest screenshot the docs take (bytes), and the scales tried until one fits.
SCREENSHOT_BYTES = 200 * 1024
SCREENSHOT_SCALES = (1.0, 0.9, 0.8, 0.7)


def _capture(driver: Any, element: Any, scale: float) -> bytes:
    """A PNG of ``element`` whole, even where it is taller than the window."""
    x, y, width, height = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height];",
        element,
    )
    clip = {"x": x, "y": y, "width": width, "height": height, "scale": scale}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True}
    )
    return base64.b64decode(shot["data"])


def _shoot(driver: Any, element: Any, path: Path, limit: int, scales: tuple[float, ...]) -> None:
    driver.execute_async_script(  # two frames and a pause: the charts have painted
        "const done = arguments[0];"
        "requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done, 300)));"
    )
    for scale in scales:
        png = _capture(driver, element, scale)
        if len(png) <= limit:
            break
    else:
        raise SystemExit(f"{path.name}: no screenshot under {limit // 1024} KB down to {scale}")
    path.write_bytes(png)
    print(f"{path}: {len(png) // 1024} KB, scale {scale:g}")


#: Screenshots of the guided path's steps: smaller, since a step is one figure.
STEP_BYTES = 120 * 1024
STEP_SCALES = (0.8, 0.7, 0.6, 0.5)


def screenshots(url: str, folder: Path) -> None:
    """One PNG per panel (``NAME.png``, the whole panel, at most 200 KB) and one per step of
    the guided path (``step-NAME.png``, at most 120 KB) into ``folder``: a PNG that is larger
    is taken again at a smaller scale."""
    from selenium.webdriver.common.by import By

    from tests.explore.browser import chromium

    folder.mkdir(parents=True, exist_ok=True)
    driver = chromium.start(width=800, height=1400)
    try:
        driver.get(url)
        chromium.wait_ready(driver)
        for panel in PANELS:
            element = driver.find_element(By.ID, panel.name)
            path = folder / f"{panel.name}.png"
            _shoot(driver, element, path, SCREENSHOT_BYTES, SCREENSHOT_SCALES)
        for step in STEPS:
            _show_step(driver, step.name)
            element = driver.find_element(By.ID, f"step-{step.name}")
            _shoot(driver, element, folder / f"step-{step.name}.png", STEP_BYTES, STEP_SCALES)
    finally:
        driver.quit()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshots", type=Path, metavar="DIR", help="write screenshots only")
    args = parser.parse_args(argv)
    server = make_server()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        if args.screenshots is not None:
            screenshots(server.url, args.screenshots)
            return
        print(environment())
        print(f"cold start to first HTTP 200: {cold_start():.2f} s (median of 5; aim < 5 s)")
        update = updates(server.url)
        measured = renders(server.url)
        render, step_render = measured or ({}, {})
        print(f"{'panel':<12} {'update (ms)':>12} {'render (ms)':>12}   (aim: update < 200 ms)")
        for p in PANELS:
            shown = f"{render[p.name]:.1f}" if p.name in render else "-"
            print(f"{p.name:<12} {1000 * update[p.name]:>12.1f} {shown:>12}")
        if step_render:
            print(f"{'step':<12} {'render (ms)':>12}   (guided path; median of 5)")
            for name, ms in step_render.items():
                print(f"{name:<12} {ms:>12.1f}")
            print(f"median over the steps: {statistics.median(step_render.values()):.1f} ms")
        middle = 1000 * statistics.median(update.values())
        print(f"median server update over the panels: {middle:.1f} ms")
        size, path, slowest = largest_answer(server.url)
        print(f"largest /api answer at the panels' limits: {size:,} bytes ({path}); "
              f"slowest answer {slowest:.2f} s (limits: 512 KB, 10 s)")  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
