"""``python -m benchmarks --busy``: its background load starts and always stops, its ratios
are medians taken side by side, and it runs alone (never in ``--smoke``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from benchmarks import busy
from benchmarks.__main__ import main


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_busy_process_stops_with_the_block_even_on_an_error(monkeypatch) -> None:
    started: list[subprocess.Popen[bytes]] = []
    original = subprocess.Popen

    def record(*args, **kwargs):
        process = original(*args, **kwargs)
        started.append(process)
        return process

    monkeypatch.setattr(busy.subprocess, "Popen", record)
    running: list[bool] = []

    def interrupted_rows() -> None:
        with busy.one_core_busy():
            running.append(started[0].poll() is None)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted_rows()
    assert running == [True]  # running while the rows run
    assert started[0].poll() is not None


def test_the_busy_loop_ends_when_its_parent_is_gone(tmp_path) -> None:
    # a parent that starts the loop and exits at once: the loop must notice within seconds
    script = (
        "import subprocess, sys\n"
        "import os\n"
        f"p = subprocess.Popen([sys.executable, '-c', {busy.BUSY_LOOP!r}, str(os.getpid())], "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid, flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def test_ratio_is_the_ratio_of_medians() -> None:
    slow, fast = lambda: time.sleep(0.004), lambda: time.sleep(0.001)
    value, spread = busy.ratio(slow, fast, repeats=5)
    assert 1.5 < value < 8  # about 4 on an idle machine; sleeps only ever run long
    assert spread >= 0


def test_busy_runs_alone(capsys) -> None:
    for extra in (["--smoke"], ["--only", "rope"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["--busy", *extra])
        assert exit_info.value.code == 2
        assert "--busy runs alone" in capsys.readouterr().err


def test_every_target_names_a_row() -> None:
    pytest.importorskip("torch")
    names = {name for name, _, _ in busy.rows(quick=True)}
    assert set(busy.TARGETS) <= names
