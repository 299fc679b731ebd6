"""``posenc explore`` as a process: its URL line, a port in use, Ctrl-C and SIGTERM, hosts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import webbrowser

import pytest

from posenc.cli import _explore, main

pytest.importorskip("flask")  # the explorer's web framework (the extra "explore")


#: Seconds to start (print the URL) and to end after a signal: generous, for a busy machine.
STARTUP_SECONDS = 60.0
#: Seconds from the signal to the exit code: a server that waited for a request thread or its
#: 20-s computation limit before ending would take longer.
PROMPT_SECONDS = 15.0


def _default_signals() -> None:
    """In the child: SIGINT and SIGTERM at their defaults whatever the test runner ignores (a
    background job starts with SIGINT ignored, and Python then installs no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "CI": "1"}  # never a browser
    process = subprocess.Popen(
        [sys.executable, "-m", "posenc", "explore", "--no-browser", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_default_signals,
    )
    assert process.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(STARTUP_SECONDS)
    if not lines:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"no URL within {STARTUP_SECONDS:g} s: {err!r}")
    return process, lines[0].strip()


def _end(process: subprocess.Popen[str], sig: int) -> tuple[int, str]:
    """Send ``sig``; (exit code, stderr) once the process has ended (within PROMPT_SECONDS)."""
    began = time.monotonic()
    process.send_signal(sig)
    _, err = process.communicate(timeout=STARTUP_SECONDS)
    assert time.monotonic() - began < PROMPT_SECONDS
    return process.returncode, err


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_prints_its_url_serves_and_ends_on_a_signal(sig: int, code: int) -> None:
    process, url = _start("--port", "0")
    try:
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/")
        with urllib.request.urlopen(url, timeout=STARTUP_SECONDS) as response:
            assert response.status == 200
        assert _end(process, sig)[0] == code
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
        code, err = _end(process, signal.SIGINT)
        assert code == 130, err
        assert "warning: listening on 127.0.0.2" in err
    finally:
        process.kill()
        process.communicate()


def test_no_browser_under_ci_nor_a_text_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert _explore.graphical_browser() is None
    monkeypatch.delenv("CI")
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(webbrowser, "get", lambda: webbrowser.GenericBrowser("lynx"))
    assert _explore.graphical_browser() is None
    monkeypatch.setattr(webbrowser, "get", lambda: webbrowser.BackgroundBrowser("firefox"))
    assert _explore.graphical_browser() is not None
