"""Headless Chromium from Debian's ``chromium`` and ``chromium-driver`` packages, driven by
Selenium with the driver's path given, so that nothing is downloaded. Shared by the browser
tests, the explorer's benchmark and the screenshot command."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

CHROMIUM = os.environ.get("POSENC_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("POSENC_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)


def missing() -> str | None:
    """Why the browser cannot start here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -r requirements-dev.txt)"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    return None


def start(width: int = 1100, height: int = 900) -> Any:
    """A new headless Chromium with a fresh profile (removed when the driver quits)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="posenc-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    quit_driver = driver.quit

    def quit_and_clean() -> None:
        try:
            quit_driver()
        finally:
            shutil.rmtree(profile, ignore_errors=True)

    driver.quit = quit_and_clean
    return driver


def wait_ready(driver: Any, timeout: float = 60.0) -> None:
    """Until every panel has drawn once (``body[data-ready]``)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.body.dataset.ready === 'yes'")
    )
