"""SIGHUP (the terminal closed, an ssh session dropped) during ``posenc table`` is handled like
Ctrl-C and SIGTERM: the hidden temporary file is removed, an existing output is kept, one line
on stderr, exit code 129 (128 + SIGHUP)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_files import BIG, OLD, listing, one_line, wait_until_written

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")


def _defaults() -> None:
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing"])
def test_sighup_removes_the_partial_file(tmp_path: Path, existing: bool) -> None:
    out = tmp_path / "big.npy"
    if existing:
        out.write_bytes(OLD)
    before = listing(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "posenc", *BIG, "--out", str(out), *(["--force"] * existing)],
        stderr=subprocess.PIPE,
        preexec_fn=_defaults,
    )
    wait_until_written(tmp_path, before, 4 << 20, proc)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 129, err
    assert one_line(err) == "posenc table: hung up (SIGHUP)\n"
    assert listing(tmp_path) == before  # no hidden .part file left
    if existing:
        assert out.read_bytes() == OLD


def test_sighup_handler_is_restored_after_main() -> None:
    from posenc.cli import main

    before = signal.getsignal(signal.SIGHUP)
    assert main(["--version"]) == 0
    assert signal.getsignal(signal.SIGHUP) is before
