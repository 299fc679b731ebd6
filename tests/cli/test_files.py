"""The error contract of the ``posenc`` command: files are only ever whole, every failure is one
line on stderr with a fixed exit code, and output paths are checked before any work.

The signal, full-disk and broken-pipe tests run the real command in a subprocess
(``python -m posenc``); the rest call :func:`posenc.cli.main` in-process.
"""

from __future__ import annotations

import importlib.util
import io
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posenc
from posenc.cli import _demo, _table, main
from posenc.cli._common import Progress

REPO = Path(__file__).resolve().parents[2]
OLD = b"the previous contents, which must survive a failed write\n"
#: 3.8 GiB (10^6 x 1024 float32): the signal tests stop it after its first 4 MiB, but it must
#: fit in the free space, which ``posenc table`` checks before writing.
BIG = ["table", "--positions", "0:1000000", "--d-model", "1024", "--quiet"]

#: Run ``posenc`` with ``shutil.disk_usage`` reporting ``{free}`` bytes free: a disk that fills
#: after the command checked its free space (another program wrote to it meanwhile).
_LYING_DISK = """
import shutil, sys
real = shutil.disk_usage
shutil.disk_usage = lambda path: type(real(path))(*real(path)[:2], {free})
from posenc.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def one_line(err: str | bytes) -> str:
    text = err.decode() if isinstance(err, bytes) else err
    assert text.count("\n") == 1, text
    assert text.endswith("\n"), text
    return text


def _child_setup(fsize: int | None) -> Callable[[], None]:
    def setup() -> None:
        # Whatever the test runner ignores, the command starts with default handlers.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if fsize is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead

    return setup


def posenc_process(
    argv: list[str], *, fsize: int | None = None, free: int | None = None, **kw: Any
) -> subprocess.Popen:
    """``python -m posenc ARGV``; ``fsize``: a file size limit; ``free``: the free space the
    command is told (see ``_LYING_DISK``)."""
    command = ["-m", "posenc"] if free is None else ["-c", _LYING_DISK.format(free=free)]
    return subprocess.Popen(
        [sys.executable, *command, *argv],
        stderr=subprocess.PIPE,
        preexec_fn=_child_setup(fsize),
        **kw,
    )


def wait_until_written(folder: Path, before: list[str], size: int, proc: subprocess.Popen) -> None:
    """Poll until a new file in ``folder`` holds ``size`` bytes (deadline 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(p.name not in before and p.stat().st_size >= size for p in folder.iterdir()):
            return
        if proc.poll() is not None:
            pytest.fail(f"exited with {proc.returncode} before writing: {proc.stderr.read()!r}")
        time.sleep(0.005)
    proc.kill()
    pytest.fail(f"no file of {size} bytes in {folder} after 60 s: {listing(folder)}")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing"])
@pytest.mark.parametrize(
    ("signum", "code", "word"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
    ids=["SIGINT", "SIGTERM"],
)
def test_signal_removes_the_partial_file(
    tmp_path: Path, signum: int, code: int, word: str, existing: bool
) -> None:
    out = tmp_path / "big.npy"
    if existing:
        out.write_bytes(OLD)
    before = listing(tmp_path)
    proc = posenc_process([*BIG, "--out", str(out), *(["--force"] if existing else [])])
    wait_until_written(tmp_path, before, 4 << 20, proc)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert word in one_line(err)
    assert listing(tmp_path) == before
    if existing:
        assert out.read_bytes() == OLD


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (needs Linux and the right to mount)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if sys.platform != "linux":
        pytest.skip("tmpfs needs Linux")
    cmd = ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)]
    try:
        mounted = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def _assert_write_failed(folder: Path, name: str, existing: bool, message: str, **kw: Any) -> None:
    out = folder / name
    if existing:
        out.write_bytes(OLD)
    before = listing(folder)
    argv = ["table", "--length", "2000", "--d-model", "1024", "--quiet", "--out", str(out)]
    proc = posenc_process([*argv, *(["--force"] if existing else [])], **kw)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (proc.returncode, err)
    line = one_line(err)
    assert line.startswith(f"posenc table: error: cannot write {out}: "), line
    assert message in line
    assert listing(folder) == before
    if existing:
        assert out.read_bytes() == OLD


@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing"])
@pytest.mark.parametrize("name", ["t.npy", "t.csv"])
def test_full_disk_is_one_line_and_no_file(small_disk: Path, name: str, existing: bool) -> None:
    """The disk fills while the table is written (the free space checked first was taken)."""
    _assert_write_failed(small_disk, name, existing, "No space left on device", free=1 << 40)


@pytest.mark.parametrize("name", ["t.npy", "t.csv"])
def test_a_table_the_disk_cannot_hold_is_refused_first(small_disk: Path, name: str) -> None:
    _assert_write_failed(small_disk, name, False, "would take", free=None)


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing"])
@pytest.mark.parametrize("name", ["t.npy", "t.csv"])
def test_file_size_limit_is_one_line_and_no_file(tmp_path: Path, name: str, existing: bool) -> None:
    _assert_write_failed(tmp_path, name, existing, "File too large", fsize=1 << 20)


def test_a_file_name_too_long_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / ("x" * 300 + ".csv")
    assert main(["table", "--length", "3", "--d-model", "4", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"posenc table: error: cannot write {out}: File name too long"), err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes and signals")
def test_broken_pipe_ends_quietly_with_141() -> None:
    proc = posenc_process(
        ["table", "--length", "1000000", "--d-model", "64"], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(b"# posenc table")
    proc.stdout.close()  # like `posenc table ... | head -1`
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141
    assert err == b""


# ------------------------------------------------------------------ in-process: main's boundary


def _explode(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("the work started")


def test_force_replaces_with_the_complete_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.npy"
    out.write_bytes(OLD)
    out.chmod(0o640)
    assert main(["table", "--length", "50", "--d-model", "8", "--out", str(out), "--force"]) == 0
    np.testing.assert_array_equal(np.load(out), posenc.sinusoidal(50, 8))
    assert listing(tmp_path) == ["t.npy"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # the replaced file's permissions
    # A new file gets the permissions any new file gets (the umask's), not a temporary file's.
    (tmp_path / "plain").write_bytes(b"")
    assert main(["table", "--length", "5", "--d-model", "8", "--out", str(tmp_path / "n.npy")]) == 0
    modes = {stat.S_IMODE((tmp_path / name).stat().st_mode) for name in ("plain", "n.npy")}
    assert len(modes) == 1


@pytest.mark.parametrize("name", ["t.npy", "t.csv", "t.json"])
def test_failure_midway_keeps_the_old_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    monkeypatch.setattr(_table, "BLOCK_BYTES", 8 * 4 * 10)  # 10 rows a block
    fill = _table.fill_table
    calls = []

    def fill_then_fail(out: Any, *args: Any) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        fill(out, *args)

    monkeypatch.setattr(_table, "fill_table", fill_then_fail)
    out = tmp_path / name
    out.write_bytes(OLD)
    argv = ["table", "--length", "100", "--d-model", "8", "--quiet", "--out", str(out)]
    assert main([*argv, "--force"]) == 2
    assert "No space left on device" in one_line(capsys.readouterr().err)
    assert len(calls) == 3
    assert listing(tmp_path) == [name]
    assert out.read_bytes() == OLD


NEEDS_MATPLOTLIB = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None, reason="posenc plot needs matplotlib"
)


def _demo_figures(folder: Path) -> None:
    folder.mkdir()
    (folder / "heatmap.png").write_bytes(OLD)


@pytest.mark.parametrize(
    ("argv", "prepare", "message"),
    [
        (["table", "--length", "9", "--d-model", "4", "--out", "t.npy"], "t.npy", "--force"),
        (["table", "--length", "9", "--d-model", "4", "--out", "no/t.npy"], None, "no such folder"),
        (["table", "--length", "9", "--d-model", "4", "--out", "d"], "d/", "is a folder"),
        pytest.param(
            ["plot", "heatmap", "--out", "h.gif"], None, ".png or .svg", marks=NEEDS_MATPLOTLIB
        ),
        pytest.param(
            ["plot", "heatmap", "--out", "no/h.png"], None, "no such folder", marks=NEEDS_MATPLOTLIB
        ),
        pytest.param(
            ["plot", "heatmap", "--out", "h.png"], "h.png", "--force", marks=NEEDS_MATPLOTLIB
        ),
        pytest.param(["plot", "heatmap"], "heatmap.png", "--force", marks=NEEDS_MATPLOTLIB),
        (["demo", "--out", "pe.npy"], None, "folder"),
        (["demo", "--out", "f"], "f", "not a folder"),
        (["demo", "--out", "figs"], _demo_figures, "--force"),
    ],
)
def test_output_is_checked_before_any_work(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    prepare: str | Callable[[Path], None] | None,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_table, "fill_table", _explode)
    monkeypatch.setattr(_demo, "_table", _explode)
    if argv[0] == "plot":
        plot = pytest.importorskip("posenc.plot")
        monkeypatch.setattr(plot, "PLOTS", dict.fromkeys(plot.PLOTS, _explode))
    if isinstance(prepare, str):
        if prepare.endswith("/"):
            (tmp_path / prepare).mkdir()
        else:
            (tmp_path / prepare).write_bytes(OLD)
    elif prepare is not None:
        prepare(tmp_path / argv[-1])
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = one_line(captured.err)
    assert line.startswith(f"posenc {argv[0]}: error: "), line
    assert message in line
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("command", ["table", "plot", "demo"])
def test_force_is_documented(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    assert "--force" in capsys.readouterr().out


def _table_run(behaviour: Callable[[], Any]) -> Callable[[Any], int]:
    def run(args: Any) -> int:
        behaviour()
        return 0

    return run


def test_unexpected_error_is_one_line_exit_70_and_debug_shows_the_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_table, "run", _explode)
    argv = ["table", "--length", "3", "--d-model", "4"]
    assert main(argv) == 70
    line = one_line(capsys.readouterr().err)
    assert line.startswith("posenc table: internal error: RuntimeError: the work started")
    assert "posenc --debug table" in line
    assert main(["--debug", *argv]) == 70
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "_explode" in err
    assert err.splitlines()[-1].startswith("posenc table: internal error: RuntimeError")


def test_keyboard_interrupt_is_one_line_exit_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_table, "run", _table_run(interrupt))
    assert main(["table", "--length", "3", "--d-model", "4"]) == 130
    assert one_line(capsys.readouterr().err) == "posenc table: interrupted\n"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_handler_raises_inside_main_and_is_restored_after(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def terminate() -> None:
        handler = signal.getsignal(signal.SIGTERM)
        seen.append(handler)
        assert callable(handler), handler
        handler(signal.SIGTERM, None)

    monkeypatch.setattr(_table, "run", _table_run(terminate))
    assert main(["table", "--length", "3", "--d-model", "4"]) == 143
    assert one_line(capsys.readouterr().err) == "posenc table: terminated\n"
    assert len(seen) == 1
    assert seen[0] is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_messages_of_several_lines_become_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail() -> None:
        raise ValueError("first line\n  second line")

    monkeypatch.setattr(_table, "run", _table_run(fail))
    assert main(["table", "--length", "3", "--d-model", "4"]) == 2
    assert one_line(capsys.readouterr().err) == "posenc table: error: first line second line\n"


# Each exit code of the README's table → the test that shows it.
EXIT_CODE_TESTS = {
    0: "tests/cli/test_files.py::test_force_replaces_with_the_complete_file",
    1: "tests/cli/test_identify.py::test_no_match_exits_1",
    2: "tests/cli/test_files.py::test_output_is_checked_before_any_work",
    70: "tests/cli/test_files.py::"
    "test_unexpected_error_is_one_line_exit_70_and_debug_shows_the_traceback",
    129: "tests/cli/test_sighup.py::test_sighup_removes_the_partial_file",
    130: "tests/cli/test_files.py::test_signal_removes_the_partial_file",
    141: "tests/cli/test_files.py::test_broken_pipe_ends_quietly_with_141",
    143: "tests/cli/test_files.py::test_signal_removes_the_partial_file",
}


def test_readme_lists_each_exit_code_and_each_has_a_test() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Command line", 1)[1].split("\n## ", 1)[0]
    codes = {int(m) for m in re.findall(r"^\| `?(\d+)`? +\|", section, flags=re.MULTILINE)}
    assert codes == set(EXIT_CODE_TESTS)
    for test in EXIT_CODE_TESTS.values():
        path, name = test.split("::")
        assert f"def {name}(" in (REPO / path).read_text(encoding="utf-8"), test


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_signals_are_held_while_a_file_is_moved_into_place() -> None:
    from posenc.cli._output import _signals_held

    # Python's own handler, whatever this process was started with (a shell starts a
    # background job with SIGINT ignored, and Python then installs none)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    done = []

    def rename_while_interrupted() -> None:
        with _signals_held():
            signal.raise_signal(signal.SIGINT)
            done.append("the rename")

    try:
        with pytest.raises(KeyboardInterrupt):
            rename_while_interrupted()
        assert done == ["the rename"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_an_error_ends_the_progress_bar_line_first() -> None:
    stream = _Terminal()

    def interrupted_midway() -> None:
        with Progress(100, unit="rows", enabled=True, stream=stream) as progress:
            progress.update(40)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted_midway()
    text = stream.getvalue()
    assert text.startswith("\r[")
    assert "40/100 rows" in text
    assert text.endswith("\n")
