"""The ``posenc`` command: one module per subcommand, each with ``add_parser`` and ``run``.

Tested through :func:`main`, which returns the exit code instead of exiting. :func:`main` is the
one error boundary of the command: whatever goes wrong in any subcommand ends as one line on
stderr and one of these exit codes (the README's "Command line" section lists them too):

- 0: success;
- 1: ``posenc identify`` found no convention that fits the table; ``posenc audit`` found a
  layer whose RoPE is wrong or worse than float32 angles;
- 2: a problem the user can fix: a bad option or value, an input file that cannot be read or is
  too large, an output that cannot be written (no such folder, an existing file without
  ``--force``, a full disk);
- 70: an unexpected error, i.e. a bug in posenc: one line, and ``posenc --debug COMMAND ...``
  shows the traceback;
- 129: hung up (SIGHUP: the terminal closed); 130: interrupted (SIGINT, Ctrl-C); 143:
  terminated (SIGTERM);
- 141: standard output was closed early (``posenc table ... | head``): the command stops
  quietly, with the status a shell gives a program ended by SIGPIPE.

Output files are written to a temporary file and renamed into place when complete, so after any
of these failures no partial file is left under the final name.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from .. import __version__
from . import _audit, _demo, _explore, _identify, _inspect, _plan, _plot, _table
from ._common import HungUp, Parser, Terminated, UsageError, sigterm_raises

__all__ = ["build_parser", "main"]

_SUBCOMMANDS = (_demo, _table, _plot, _inspect, _identify, _plan, _audit, _explore)

# Exceptions that mean "the user can fix this" (exit 2): bad values and types, files that cannot
# be read or written, a missing optional package, an input too large for memory.
_EXPECTED = (ValueError, TypeError, OSError, ImportError, MemoryError)
_SIGNALS = {
    KeyboardInterrupt: (130, "interrupted"),
    Terminated: (143, "terminated"),
    HungUp: (129, "hung up (SIGHUP)"),
}
_BROKEN_PIPE = 141  # 128 + SIGPIPE


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="posenc", description="Exact positional encodings for transformer models.")
    parser.add_argument("--version", action="version", version=f"posenc {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error, print the traceback before the one-line message",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``posenc`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    While it runs, SIGTERM and SIGHUP raise an exception (as SIGINT does) so that partial
    files are removed; the previous handler is restored on return.
    """
    parser = build_parser()
    args = argparse.Namespace(command=None, debug=False)
    with sigterm_raises():
        try:
            try:
                args = parser.parse_args(argv)
            except SystemExit as exc:  # --help and --version
                return exc.code if isinstance(exc.code, int) else 0
            if args.command is None:
                parser.print_help(sys.stderr)
                return 2
            code = int(args.run(args))
            sys.stdout.flush()
            return code
        except UsageError as exc:
            print(exc, file=sys.stderr)
            return 2
        except (Exception, KeyboardInterrupt, Terminated) as exc:
            return _report(exc, args)


def _report(exc: BaseException, args: argparse.Namespace) -> int:
    """Print ``exc`` as one line (after its traceback with ``--debug``); return the exit code."""
    if isinstance(exc, BrokenPipeError):
        _discard_stdout()
        return _BROKEN_PIPE
    prog = "posenc" + (f" {args.command}" if args.command else "")
    if isinstance(exc, KeyboardInterrupt | Terminated):
        code, line = _SIGNALS[type(exc)]
    elif isinstance(exc, _EXPECTED):
        code, line = 2, f"error: {_one_line(exc)}"
    else:
        code = 70
        line = (
            f"internal error: {type(exc).__name__}: {_one_line(exc)} (a bug in posenc; "
            f"run 'posenc --debug {args.command or ''} ...' again to see the traceback)"
        )
    if args.debug:
        traceback.print_exception(exc)
    print(f"{prog}: {line}", file=sys.stderr)
    return code


def _one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (its lines joined by spaces)."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    if isinstance(exc, MemoryError):
        return "out of memory" + (f" ({text})" if text else "")
    return text or type(exc).__name__


def _discard_stdout() -> None:
    """Point the real standard output at the null device, so that Python's final flush of what
    is left in its buffer does not fail again with a message on stderr."""
    stdout = sys.__stdout__
    if stdout is None or sys.stdout is not stdout:
        return  # redirected within the process (a test, an embedding program): leave it alone
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
