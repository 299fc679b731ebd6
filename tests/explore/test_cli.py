"""``posenc explore`` as a process: its URL line, a port in use, Ctrl-C and SIGTERM, hosts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import webbrowser

import pytest

from posenc.cli import _explore, main

pytest.importorskip("flask")  # the explorer's web framework (the extra "explore")


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "CI": "1"}  # never a browser
    process = subprocess.Popen(
        [sys.executable, "-m", "posenc", "explore", "--no-browser", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    return process, url


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_prints_its_url_serves_and_ends_on_a_signal(sig: int, code: int) -> None:
    process, url = _start("--port", "0")
    try:
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/")
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
        began = time.monotonic()
        process.send_signal(sig)
        assert process.wait(timeout=10) == code
        assert time.monotonic() - began < 5
    finally:
        process.kill()
        process.communicate()


def test_a_port_in_use_is_one_line_and_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["explore", "--no-browser", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"127.0.0.1:{port}" in err
    assert "--port 0" in err


def test_a_port_out_of_range_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "--no-browser", "--port", "70000"]) == 2
    assert "--port must be in 0 .. 65535" in capsys.readouterr().err


def test_a_non_loopback_host_prints_a_warning() -> None:
    process, url = _start("--host", "127.0.0.2")
    try:
        assert url.startswith("http://127.0.0.2:")
        process.send_signal(signal.SIGINT)
        process.wait(timeout=10)
        _, err = process.communicate()
        assert "warning: listening on 127.0.0.2" in err
    finally:
        process.kill()


def test_no_browser_under_ci_nor_a_text_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert _explore.graphical_browser() is None
    monkeypatch.delenv("CI")
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(webbrowser, "get", lambda: webbrowser.GenericBrowser("lynx"))
    assert _explore.graphical_browser() is None
    monkeypatch.setattr(webbrowser, "get", lambda: webbrowser.BackgroundBrowser("firefox"))
    assert _explore.graphical_browser() is not None
