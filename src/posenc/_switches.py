"""The one switch for posenc's fast paths.

Every speed-up in posenc (the angle-addition table engine, the fused add + dropout, the chunked
RoPE kernels) sits behind one entry point per kernel family that chooses between the fast path
and the plain formula written next to it. This switch forces the plain formulas everywhere::

    posenc.set_fast_paths(False)          # from now on
    with posenc.set_fast_paths(False):    # inside the block only
        ...

or, for a whole process, the environment variable ``POSENC_FAST_PATHS=0``. The two give the
same tables, additions and CPU rotations bit for bit (rotations off the CPU within one unit
in the last place, and dropout masks drawn like ``torch.nn.Dropout``'s); tests use the switch
to compare them, and it is the first thing to try when a fast path is suspected of a
problem. Code traced by ``torch.compile`` always runs the plain formulas.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import ClassVar

from ._checks import check_bool

__all__ = ["Switch", "fast_paths_enabled", "set_fast_paths"]

_ENV = "POSENC_FAST_PATHS"


def _from_environment() -> bool:
    value = os.environ.get(_ENV, "1").strip().lower()
    if value in ("1", "true", "yes", "on", ""):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{_ENV} must be 0 or 1 (or true/false, yes/no, on/off), got {value!r}")


class Switch:
    """A process-wide on/off setting, changed by a call or for a ``with`` block (restored on
    exit). Subclasses name their setting (``_state``) and document it."""

    _state: ClassVar[list[bool]]  # one mutable cell per setting

    def __init__(self, enabled: bool) -> None:
        self._previous = self._state[0]
        self._state[0] = check_bool("enabled", enabled)

    def __enter__(self) -> Switch:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._state[0] = self._previous

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._state[0]})"


_FAST_PATHS = [_from_environment()]


def fast_paths_enabled() -> bool:
    """Whether the kernels may take their fast paths (see :class:`set_fast_paths`)."""
    return _FAST_PATHS[0]


class set_fast_paths(Switch):
    """Turn posenc's fast paths on or off: a call, or a ``with`` block that restores the
    previous setting on exit.

    Args:
        enabled: True (the default state) lets each kernel choose its fast path where one
            applies; False runs the plain formulas everywhere.

    >>> import posenc
    >>> with posenc.set_fast_paths(False):
    ...     plain = posenc.sinusoidal(1000, 8)
    >>> bool((plain == posenc.sinusoidal(1000, 8)).all())   # the same bits
    True
    """

    _state = _FAST_PATHS
