"""The files the ``posenc`` command writes: checked before any work, then written whole or not
at all.

A subcommand describes each file it will write with an :class:`Output` as soon as its arguments
are read and calls :meth:`Output.check`, so a path that cannot be written (no such folder, a
folder in its place, a wrong suffix, an existing file without ``--force``) is reported before any
work. It then writes inside :meth:`Output.writing`: the data goes to a hidden temporary file in
the same folder (``.NAME.XXXXXXXX.part.SUFFIX``), which is flushed to disk and renamed over the
final name only when complete. An error or a signal removes the temporary file instead, so a file
under the final name is always whole, and an existing file there (``--force``) stays untouched
until its replacement is complete.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["Output", "format_bytes"]


def format_bytes(size: int) -> str:
    """``size`` in bytes, KiB, MiB, GiB, TiB or PiB with one decimal.

    >>> format_bytes(1000), format_bytes(6656), format_bytes(32 * 10**12)
    ('1000 bytes', '6.5 KiB', '29.1 TiB')
    """
    if size < 1024:
        return f"{size} bytes"
    value, units = size / 1024, ["KiB", "MiB", "GiB", "TiB", "PiB"]
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    return f"{value:.1f} {units[0]}"


class Output:
    """One file the command will write.

    Args:
        path: the file name as the user gave it (messages quote it as given).
        force: replace an existing file (``--force``); without it an existing file is an error.
        suffixes: the suffixes allowed (lower case, e.g. ``(".png", ".svg")``); None for any.
        make_folder: create missing folders on the way to ``path`` (checked to be creatable).
    """

    def __init__(
        self,
        path: Path,
        *,
        force: bool,
        suffixes: tuple[str, ...] | None = None,
        make_folder: bool = False,
    ) -> None:
        self.path = Path(path)
        self.force = force
        self.suffixes = suffixes
        self.make_folder = make_folder

    def _error(self, reason: str) -> str:
        return f"cannot write {self.path}: {reason}"

    def check(self) -> None:
        """Raise ``ValueError``/``OSError`` (one-line message) if the file cannot be written."""
        try:
            self._check()
        except OSError as exc:  # the system's own (a name too long, a loop of links)
            if exc.errno is None:
                raise
            raise self._failed(exc) from None

    def _check(self) -> None:
        path = self.path
        if self.suffixes is not None and path.suffix.lower() not in self.suffixes:
            allowed = " or ".join(self.suffixes)
            raise ValueError(self._error(f"--out must end in {allowed} (the suffix is the format)"))
        if path.is_dir():
            raise IsADirectoryError(self._error("it is a folder; name a file in it"))
        if path.exists():
            if not path.is_file():
                raise ValueError(self._error("it exists and is not a regular file"))
            if not self.force:
                raise FileExistsError(self._error("it exists (--force replaces it)"))
        folder = path.parent
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise NotADirectoryError(self._error(f"{existing} is not a folder"))
        if existing != folder and not self.make_folder:
            raise FileNotFoundError(self._error(f"no such folder {folder}"))
        if not os.access(existing, os.W_OK | os.X_OK):
            raise PermissionError(self._error(f"the folder {existing} is not writable"))

    def check_space(self, size: int, what: str, *, at_least: bool = False) -> None:
        """Raise ``OSError`` (one line) if the file system of the folder has less than ``size``
        bytes free: ``what`` (e.g. ``"the table (10 rows x 8 float32)"``) is named with its size,
        before anything is written. ``at_least``: ``size`` is a lower bound (text formats).

        The temporary file is complete before an existing file is replaced, so the space of an
        existing file does not count as free.
        """
        existing = self.path.parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        free = shutil.disk_usage(existing).free
        if size > free:
            need = ("at least " if at_least else "") + format_bytes(size)
            raise OSError(
                self._error(
                    f"{what} would take {need}, and the file system of {existing} has "
                    f"{format_bytes(free)} free"
                ),
            )

    @contextmanager
    def writing(self) -> Iterator[Path]:
        """Yield the temporary file to write; move it to the final name when the block ends.

        On success the file is flushed to disk and renamed over the final name (following a
        symbolic link there). On any error or signal it is removed and the error propagates;
        an ``OSError`` becomes ``OSError("cannot write PATH: reason")``.
        """
        target = Path(os.path.realpath(self.path))
        temp: Path | None = None
        try:
            with _signals_held():  # a signal here arrives once ``temp`` is known
                if self.make_folder:
                    target.parent.mkdir(parents=True, exist_ok=True)
                temp = _reserve(target)
            yield temp
            with _signals_held():
                _sync(temp)
                os.replace(temp, target)
                _sync_folder(target.parent)
        except BaseException as exc:
            if temp is not None:
                with _signals_held():
                    temp.unlink(missing_ok=True)
            if isinstance(exc, OSError) and exc.errno is not None:
                raise self._failed(exc) from exc
            raise

    def _failed(self, exc: OSError) -> OSError:
        """``exc`` as one line naming the final file (not the temporary one)."""
        return OSError(self._error(exc.strerror or str(exc)))


def _reserve(target: Path) -> Path:
    """Create an empty hidden file next to ``target`` (new name, mode as ``target`` or umask)."""
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
    while True:
        temp = target.with_name(f".{target.stem}.{secrets.token_hex(4)}.part{target.suffix}")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        try:
            if mode is not None:
                os.chmod(fd if os.chmod in os.supports_fd else temp, mode)
        finally:
            os.close(fd)
        return temp


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    """Make the rename durable where the platform allows it (POSIX); best effort elsewhere."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_NAMES = ("SIGINT", "SIGTERM", "SIGHUP")
_HELD = tuple(getattr(signal, name) for name in _NAMES if hasattr(signal, name))


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP for the few calls that finish or remove a file, then deliver
    them: a second Ctrl-C never cuts a rename or a clean-up in half."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    saved = {}
    for signum in _HELD:
        handler = signal.getsignal(signum)
        if handler is not None:  # None: set outside Python, cannot be restored
            saved[signum] = signal.signal(signum, lambda s, _: caught.append(s))
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)
