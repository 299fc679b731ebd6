"""What every reader of a possibly hostile file shares: its error, and the check that the path
can be opened at all."""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["FileError", "check_exists"]


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
