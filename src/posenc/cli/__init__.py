"""The ``posenc`` command: one module per subcommand, each with ``add_parser`` and ``run``.

Tested through :func:`main`, which returns the exit code instead of exiting.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from . import demo

_SUBCOMMANDS = (demo,)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="posenc", description="Exact positional encodings for transformer models."
    )
    parser.add_argument("--version", action="version", version=f"posenc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``posenc`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except (ValueError, TypeError, OSError) as exc:
        print(f"posenc {args.command}: error: {exc}", file=sys.stderr)
        return 2
