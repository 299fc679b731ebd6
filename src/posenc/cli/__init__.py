"""The ``posenc`` command: one module per subcommand, each with ``add_parser`` and ``run``.

Tested through :func:`main`, which returns the exit code instead of exiting. Every problem
with the input (a bad option, a missing file, a value out of range) is reported as one line on
stderr with exit code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from . import _demo, _identify, _inspect, _plot, _table
from ._common import Parser, UsageError

__all__ = ["build_parser", "main"]

_SUBCOMMANDS = (_demo, _table, _plot, _inspect, _identify)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="posenc", description="Exact positional encodings for transformer models.")
    parser.add_argument("--version", action="version", version=f"posenc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``posenc`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except (ValueError, TypeError, OSError, ImportError) as exc:
        print(f"posenc {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"posenc {args.command}: interrupted", file=sys.stderr)
        return 130
