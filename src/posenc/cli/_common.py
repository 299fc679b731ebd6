"""Pieces shared by the subcommands: common options (and the size type of ``--max-bytes``),
position parsing, a progress bar, and the SIGTERM and SIGHUP handlers of the command."""

from __future__ import annotations

import argparse
import difflib
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from types import FrameType, TracebackType
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from .._checks import MAX_EXACT_POSITION, check_int, memory_limit
from .._conventions import CONVENTIONS

__all__ = [
    "HungUp",
    "Progress",
    "Terminated",
    "UsageError",
    "add_encoding_options",
    "add_force_option",
    "add_positions_options",
    "add_subcommand",
    "check_d_model",
    "check_length_option",
    "parse_positions",
    "parse_size",
    "positions_of",
    "sigterm_raises",
]


class UsageError(Exception):
    """A command line that argparse rejected; ``main`` prints it as one line, exit code 2."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(f"{prog}: error: {message} (see '{prog} --help')")


class Terminated(BaseException):
    """SIGTERM arrived (raised by the handler :func:`sigterm_raises` installs).

    A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except Exception`` on the way
    swallows it: it unwinds every ``with`` block (removing partial files) up to ``main``.
    """


class HungUp(Terminated):
    """SIGHUP arrived (the terminal closed, an ssh session dropped): handled like SIGTERM."""


_RAISED = {"SIGTERM": Terminated, "SIGHUP": HungUp}


def _raise_signal_exception(signum: int, frame: FrameType | None) -> None:
    raise _RAISED[signal.Signals(signum).name]


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` and SIGHUP :class:`HungUp`; the
    handlers are restored after.

    Only for a signal whose action is the default (a handler set by the caller, or an inherited
    "ignore" as ``nohup`` sets for SIGHUP, is respected) and only in the main thread, where
    signal handlers run.
    """
    installed = {}
    if threading.current_thread() is threading.main_thread():
        for name in _RAISED:
            signum = getattr(signal, name, None)
            if signum is not None and signal.getsignal(signum) == signal.SIG_DFL:
                installed[signum] = signal.signal(signum, _raise_signal_exception)
    try:
        yield
    finally:
        for signum, previous in installed.items():
            signal.signal(signum, previous)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors become one line on stderr instead of usage + exit.

    A subcommand's parser names an option it does not know before anything else, with the
    closest option it has: argparse itself would first report the option the typo was meant
    to be as missing ("the following arguments are required: --d-model" for ``--dmodel``).
    """

    def error(self, message: str) -> Any:  # argparse declares NoReturn; we raise
        raise UsageError(self.prog, message)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        args = sys.argv[1:] if args is None else list(args)  # as argparse reads them
        tokens = args
        if self._subparsers is not None:  # its own options come before the subcommand
            first = next((n for n, t in enumerate(tokens) if not t.startswith("-")), None)
            tokens = tokens[:first]
        self._check_option_names(tokens)
        return super().parse_known_args(args, namespace)

    def _check_option_names(self, args: list[str]) -> None:
        known = sorted(s for s in self._option_string_actions if s.startswith("--"))
        for token in args:
            if token == "--":
                break
            if not token.startswith("--"):
                continue
            name = token.split("=", 1)[0]
            if name in self._option_string_actions:
                continue
            if self.allow_abbrev and any(option.startswith(name) for option in known):
                continue  # an abbreviation: argparse expands it (or names the ambiguity)
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            self.error(
                f"unrecognized option {name}" + (f"; did you mean {close[0]}?" if close else "")
            )


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def plain_text(doc: str) -> str:
    """A docstring as terminal text: ``x`` and :role:`x` markup become x.

    >>> plain_text("see :mod:`posenc.plot` and ``--out``")
    'see posenc.plot and --out'
    """
    return _ROLE.sub(r"\1", doc).replace("``", "")


def add_subcommand(sub: Any, name: str, help: str, doc: str | None) -> argparse.ArgumentParser:
    """Add subcommand ``name``: ``help`` in the command list; ``--help`` shows ``help`` and the
    module docstring ``doc`` after its first paragraph, as plain text (:func:`plain_text`)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=plain_text(help),
        description=plain_text(help + ".\n\n" + (doc or "").split("\n\n", 1)[-1]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def add_encoding_options(parser: argparse.ArgumentParser, *, d_model: int | None = None) -> None:
    """``--d-model`` (required unless a default is given), ``--base`` and ``--convention``."""
    parser.add_argument(
        "--d-model",
        type=int,
        required=d_model is None,
        default=d_model,
        metavar="D",
        help="number of channels" + ("" if d_model is None else f" (default {d_model})"),
    )
    parser.add_argument(
        "--base", type=float, default=10000.0, help="wavelength base (default 10000)"
    )
    parser.add_argument(
        "--convention",
        default="paper",
        choices=sorted(CONVENTIONS),
        help="channel layout and frequency schedule (default paper; see posenc.CONVENTIONS)",
    )


def check_d_model(value: Any) -> int:
    """``--d-model``: an integer >= 1 whose rows (with their float64 work, 8 float64 values a
    channel) fit in the machine's memory, checked before anything is computed."""
    d_model = check_int("--d-model", value, minimum=1)
    largest = memory_limit() // 64
    if d_model > largest:
        raise ValueError(
            f"--d-model must be at most {largest:,} (a row of the table and its float64 work "
            f"must fit in this machine's memory), got {d_model}"
        )
    return d_model


def add_force_option(parser: argparse.ArgumentParser) -> None:
    """``--force``: replace existing output files (by default they are an error)."""
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing output file (it stays untouched until the new one is "
        "complete); without --force an existing file is an error",
    )


def add_positions_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """``--length L`` (positions 0..L-1) or ``--positions LIST`` (mutually exclusive)."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--length", type=int, metavar="L", help="positions 0 .. L-1")
    group.add_argument(
        "--positions",
        metavar="LIST",
        help="comma-separated positions and START:STOP[:STEP] ranges, e.g. '0,5,100:200:10'",
    )


#: The largest length (and a range's STOP, which it excludes): positions up to 2**53.
MAX_LENGTH = MAX_EXACT_POSITION + 1


def parse_positions(text: str, *, limit: int | None = None) -> npt.NDArray[np.int64]:
    """Parse ``'0,5,100:200:10'`` into int64 positions (ranges exclude STOP, like Python's).

    Every number lies within +-(2**53 + 1) and the positions, counted before any is made,
    fit in ``limit`` bytes as int64 (default: the machine's memory), else a ``ValueError``
    naming ``--positions``.

    >>> parse_positions("3, 0:2, 10:16:2").tolist()
    [3, 0, 1, 10, 12, 14]
    >>> parse_positions("1.5")
    Traceback (most recent call last):
    ...
    ValueError: --positions must be integers or START:STOP[:STEP] ranges, got '1.5'
    >>> parse_positions("0:100000000000000000000")
    Traceback (most recent call last):
    ...
    ValueError: --positions must lie within +-2**53 (float64 holds them exactly; a range's \
STOP, which it excludes, up to 2**53 + 1), got 100000000000000000000 in '0:100000000000000000000'
    """
    ranges: list[range] = []
    for item in text.split(","):
        item = item.strip()
        try:
            fields = [int(f) for f in item.split(":")]
        except ValueError:
            fields = []
        if not 1 <= len(fields) <= 3 or (len(fields) == 3 and fields[2] == 0):
            raise ValueError(
                f"--positions must be integers or START:STOP[:STEP] ranges, got {item!r}"
            )
        for value in fields:
            if not -MAX_LENGTH <= value <= MAX_LENGTH:
                raise ValueError(
                    "--positions must lie within +-2**53 (float64 holds them exactly; a "
                    f"range's STOP, which it excludes, up to 2**53 + 1), got {value} in {item!r}"
                )
        ranges.append(range(fields[0], fields[0] + 1) if len(fields) == 1 else range(*fields))
    count = sum(len(r) for r in ranges)
    if count == 0:
        raise ValueError(f"--positions must name at least one position, got {text!r}")
    limit = memory_limit() if limit is None else limit
    if count * np.dtype(np.int64).itemsize > limit:
        raise ValueError(
            f"--positions names {count:,} positions, more than fit in this machine's memory "
            f"as int64 ({limit:,} bytes); name fewer, or use --length L (positions 0 .. L-1, "
            "written in bounded memory)"
        )
    return np.concatenate([np.arange(r.start, r.stop, r.step, dtype=np.int64) for r in ranges])


def positions_of(args: argparse.Namespace) -> int | npt.NDArray[np.int64]:
    """The positions asked for: an int length in [0, 2**53 + 1] or an int64 array."""
    if args.positions is not None:
        return parse_positions(args.positions)
    return check_length_option(args.length, minimum=0)


def check_length_option(value: Any, *, minimum: int) -> int:
    """``--length``: an integer in [``minimum``, 2**53 + 1] (positions 0 .. L-1, up to 2**53)."""
    length = check_int("--length", value, minimum=minimum)
    if length > MAX_LENGTH:
        raise ValueError(
            "--length must be at most 2**53 + 1 (positions up to 2**53, which float64 holds "
            f"exactly), got {length}"
        )
    return length


class Progress:
    """A progress bar on stderr: one line redrawn at most five times a second on a terminal,
    or a new line every 10% when stderr is a file or pipe (so logs stay readable).

    Silent when ``enabled`` is false. ``update(done)`` redraws; ``close(done)`` ends it. Used as
    a context manager, it ends the bar's line if an error leaves the block, so the one-line
    error message starts on a line of its own.
    """

    def __init__(self, total: int, *, unit: str, enabled: bool, stream: TextIO | None = None):
        self.total = max(total, 1)
        self.unit = unit
        self.enabled = enabled
        self.stream = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self._last = -1.0
        self._decile = -1

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and self.enabled and self.tty and self._last >= 0:
            self.stream.write("\n")
            self.stream.flush()

    def update(self, done: int, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        fraction = min(done / self.total, 1.0)
        if self.tty:
            if not force and now - self._last < 0.2:
                return
        elif int(10 * fraction) == self._decile:
            return
        self._last, self._decile = now, int(10 * fraction)
        filled = int(30 * fraction)
        elapsed = now - self.start
        eta = elapsed / fraction - elapsed if fraction > 0 else float("nan")
        start, end = ("\r", "") if self.tty else ("", "\n")
        self.stream.write(
            f"{start}[{'#' * filled}{'.' * (30 - filled)}] "
            f"{100 * fraction:5.1f}% {done:,}/{self.total:,} {self.unit}  "
            f"{elapsed:6.1f} s  eta {eta:6.1f} s{end}"
        )
        self.stream.flush()

    def close(self, done: int) -> None:
        if self.enabled:
            self.update(done, force=True)
            if self.tty:
                self.stream.write("\n")
            self.stream.flush()


_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgtp]?)(?:i?b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_MAX_SIZE = 2**63 - 1  # sizes are compared with file and array sizes, int64 on every platform


def parse_size(text: str) -> int:
    """A size in bytes: an integer, or a number with K, M, G, T or P (powers of 1024).

    The ``type`` of ``--max-bytes``; argparse turns the error into one line.

    >>> parse_size("8G"), parse_size("1.5k"), parse_size("512 MiB")
    (8589934592, 1536, 536870912)
    """
    match = _SIZE.fullmatch(text)
    value = 0
    if match and len(match[1]) <= 64:  # longer: far beyond the largest size, or not a size
        value = int(Fraction(match[1]) * _UNITS[match[2].lower()])  # exact, no float overflow
    if not 1 <= value <= _MAX_SIZE:
        shown = text if len(text) <= 40 else f"{text[:37]}..."
        raise argparse.ArgumentTypeError(
            "must be a positive size in bytes, e.g. 4096, 512M or 8G (K, M, G, T: powers of "
            f"1024), at most 2**63 - 1, got {shown!r}"
        )
    return value
