"""What every reader of a possibly hostile file shares: its error, and the check that the path
can be opened at all."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["FileError", "check_exists", "check_regular_file", "special_kind"]


class FileError(ValueError):
    """A file that cannot be used; the message names it and says why."""


def check_exists(path: Path) -> None:
    """A ``FileNotFoundError`` (or ``OSError``) saying why ``path`` cannot be opened: missing, a
    link to nothing, or a loop of symbolic links (``Path.exists`` is False for all three)."""
    try:
        path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise FileNotFoundError(
                f"{path} is a symbolic link to {os.readlink(path)}, which does not exist"
            ) from None
        raise FileNotFoundError(f"no such file: {path}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(
                f"{path}: too many levels of symbolic links (a loop of links), expected a file"
            ) from None
        raise OSError(f"{path}: {exc.strerror or exc}") from None


def special_kind(path: Path) -> str:
    """``"a FIFO (named pipe)"``, ``"a character device"``, ... for what is not a regular file
    (reading one may never end); ``""`` for a regular file."""
    mode = path.stat().st_mode
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return ""


def check_regular_file(path: Path, expected: str = "a file", advice: str = "") -> None:
    """``path`` exists (:func:`check_exists`) and is a regular file: a directory raises
    ``IsADirectoryError`` ("expected ``expected``"), a pipe, device or socket a
    :class:`FileError` (with ``advice`` after a colon), before anything is read from it."""
    check_exists(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, expected {expected}")
    kind = special_kind(path)
    if kind:
        raise FileError(f"{path} is {kind}, not a regular file" + (f": {advice}" if advice else ""))
