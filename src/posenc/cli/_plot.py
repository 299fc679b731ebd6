"""``posenc plot KIND``: draw one of the figures of :mod:`posenc.plot` to a PNG or SVG file.

Kinds: heatmap, sinusoids, wavelengths, similarity, precision, shift, rotation (the
sinusoidal table, with ``--d-model``, ``--base``, ``--convention``), and the attention biases:
bias (ALiBi per head against relative position: ``--heads``, ``--distance``, ``--max-bias``;
or, with ``--table FILE``, T5's learned ``(num_buckets, heads)`` bucket table read from a
``.npy``, ``.npz``, ``.safetensors`` or PyTorch file through the bounded readers of ``posenc
identify`` (``--key``, ``--max-bytes``), with ``--num-buckets``, ``--max-distance`` and
``--causal``), buckets (T5 or DeBERTa buckets: ``--method``, ``--distance``, ``--num-buckets``,
``--max-distance``, ``--causal``) and slopes (ALiBi slopes per head, exact and as BLOOM, MPT
and Falcon compute them: ``--heads``, ``--max-bias``). See ``posenc.plot.PLOTS``.
Options a kind does not use (e.g. ``--length`` for ``wavelengths``) are rejected, not ignored.
Long ranges are drawn from evenly spaced positions (at most 2048 rows of a heatmap or of a
similarity matrix, 10,000 points of a curve: the bias and bucket plots draw at most 9,999
relative positions and 2048 heads) and the figure's title says so, so any ``--length`` up to
2**53 + 1, and any ``--distance`` up to 2**20, finishes in bounded time and memory.
The figure is written to a temporary file renamed to ``--out`` when complete; an existing file
is replaced only with ``--force``. Needs matplotlib: ``pip install matplotlib``.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import TooLargeError, sized_by
from .._io.sizes import default_max_bytes
from .._io.tables import read_table
from ._common import (
    add_encoding_options,
    add_force_option,
    add_subcommand,
    check_length_option,
    parse_size,
)
from ._output import Output

HELP = "draw a figure (heatmap, sinusoids, ..., bias, buckets, slopes) to PNG/SVG"

KINDS = (
    "heatmap",
    "sinusoids",
    "wavelengths",
    "similarity",
    "precision",
    "shift",
    "rotation",
    "bias",
    "buckets",
    "slopes",
)
#: The options of the sinusoidal figures, with their defaults (None in the parser, so that
#: an attention-bias figure can refuse them when given).
_ENCODING = {"d_model": 128, "base": 10000.0, "convention": "paper"}

# Command-line option → keyword argument of the plot functions.
_OPTIONAL = {
    "length": "length",
    "max_position": "max_position",
    "channels": "channels",
    "metric": "metric",
    "shifts": "shifts",
    "position": "p",
    "shift": "k",
    "pair": "pair",
    "heads": "heads",
    "distance": "distance",
    "max_bias": "max_bias",
    "method": "method",
    "num_buckets": "num_buckets",
    "max_distance": "max_distance",
    "causal": "bidirectional",
}


def add_parser(sub: Any) -> None:
    parser = add_subcommand(sub, "plot", HELP, __doc__)
    parser.add_argument("kind", choices=KINDS, metavar="KIND", help=", ".join(KINDS))
    add_encoding_options(parser, d_model=128)
    parser.add_argument("--length", type=int, metavar="L", help="positions 0 .. L-1 shown")
    parser.add_argument(
        "--max-position", type=int, metavar="P", help="largest position (precision, shift plots)"
    )
    parser.add_argument(
        "--channels",
        metavar="LIST",
        help="comma-separated channels to draw (sinusoids plot)",
    )
    parser.add_argument("--metric", choices=("dot", "cosine"), help="similarity measure")
    parser.add_argument(
        "--shifts", metavar="LIST", help="comma-separated shifts k, e.g. 1,10,100 (shift plot)"
    )
    parser.add_argument("--position", type=int, metavar="P", help="start position (rotation plot)")
    parser.add_argument("--shift", type=int, metavar="K", help="shift k (rotation plot)")
    parser.add_argument("--pair", type=int, metavar="I", help="frequency index (rotation plot)")
    parser.add_argument("--heads", type=int, metavar="H", help="attention heads (bias, slopes)")
    parser.add_argument(
        "--distance", type=int, metavar="D", help="largest |key - query| shown (bias, buckets)"
    )
    parser.add_argument("--max-bias", type=float, metavar="B", help="ALiBi max_bias (default 8)")
    parser.add_argument("--method", choices=("t5", "deberta"), help="buckets of (buckets plot)")
    parser.add_argument("--num-buckets", type=int, metavar="N", help="buckets (buckets plot)")
    parser.add_argument(
        "--max-distance", type=int, metavar="M", help="T5 max_distance, DeBERTa max_position"
    )
    parser.add_argument(
        "--causal", action="store_const", const=False, help="T5 decoder buckets (buckets, bias)"
    )
    parser.add_argument(
        "--table",
        type=Path,
        metavar="FILE",
        help="T5's learned (num_buckets, heads) bias table, .npy/.npz/.safetensors/.pt (bias plot)",
    )
    parser.add_argument("--key", help="the table's name inside .npz/.pt/.safetensors (--table)")
    parser.add_argument(
        "--max-bytes", type=parse_size, metavar="SIZE", help="largest --table to read, e.g. 64M"
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="output file, .png or .svg (default: KIND.png in the current folder)",
    )
    add_force_option(parser)
    parser.set_defaults(run=run, d_model=None, base=None, convention=None)


def run(args: argparse.Namespace) -> int:
    from .. import plot

    out = args.out if args.out is not None else Path(f"{args.kind}.png")
    output = Output(out, force=args.force, suffixes=plot.FORMATS)
    output.check()
    function = plot.PLOTS[args.kind]
    accepted = inspect.signature(function).parameters
    kwargs: dict[str, Any] = {}
    if args.kind == "bias":
        _t5_table(args, kwargs)
    else:
        for option in _TABLE_OPTIONS:
            if getattr(args, option) is not None:
                raise ValueError(
                    f"--{option.replace('_', '-')} does not apply to the {args.kind} plot"
                )
    for option, default in _ENCODING.items():
        value = getattr(args, option)
        if option not in accepted and value is not None:
            flag = "--" + option.replace("_", "-")
            raise ValueError(f"{flag} does not apply to the {args.kind} plot")
        kwargs[option] = default if value is None else value
    for option, keyword in _OPTIONAL.items():
        value = getattr(args, option)
        if value is None:
            continue
        if keyword not in accepted:
            flag = "--" + option.replace("_", "-")
            raise ValueError(f"{flag} does not apply to the {args.kind} plot")
        if option in ("channels", "shifts"):
            value = _integers(f"--{option}", value)
        kwargs[keyword] = value
    if args.length is not None:
        check_length_option(args.length, minimum=1)
    try:
        with sized_by(positions="--length", **_FLAGS), output.writing() as temp:
            function(**{k: v for k, v in kwargs.items() if k in accepted}, path=temp)
    except TooLargeError:
        raise  # its names are the options already (sized_by)
    except (ValueError, TypeError) as exc:  # the plot function's words: name the options
        raise type(exc)(as_options(str(exc))) from None
    print(f"wrote {out}", file=sys.stderr)
    return 0


#: Keyword argument of the plot functions → its command-line option.
_FLAGS = {
    keyword: "--" + option.replace("_", "-")
    for option, keyword in {**{o: o for o in _ENCODING}, **_OPTIONAL}.items()
}
_SUBJECT = re.compile(r" (must|ask for) ")


def as_options(message: str) -> str:
    """A plot function's error with the keywords of its subject (the words before "must" or
    "ask for") spelled as the options that set them.

    >>> as_options("p + k must lie within +-2**53, got 7 (k = 5)")
    '--position + --shift must lie within +-2**53, got 7 (k = 5)'
    """
    found = _SUBJECT.search(message)
    if found is None:
        return message
    head = re.sub(r"\b\w+\b", lambda m: _FLAGS.get(m.group(), m.group()), message[: found.start()])
    return head + message[found.start() :]


#: The options that read a T5 table from a file, and T5's bucket settings (bias plot).
_TABLE_OPTIONS = ("table", "key", "max_bytes")
_T5_SETTINGS = ("num_buckets", "max_distance", "causal")


def _t5_table(args: argparse.Namespace, kwargs: dict[str, Any]) -> None:
    """``--table``: read T5's ``(num_buckets, heads)`` table into ``kwargs["table"]`` (checked
    here, so that every error names the option); without it, refuse T5's options."""
    if args.table is None:
        for option in (*_TABLE_OPTIONS[1:], *_T5_SETTINGS):
            if getattr(args, option) is not None:
                flag = "--" + option.replace("_", "-")
                raise ValueError(f"{flag} applies to the bias plot with --table only (T5)")
        return
    if args.max_bias is not None:
        raise ValueError("--max-bias does not apply with --table (ALiBi's, not T5's)")
    max_bytes = default_max_bytes() if args.max_bytes is None else args.max_bytes
    try:
        found = read_table(args.table, args.key, max_bytes)
    except (ValueError, TypeError) as exc:  # one line naming the file, from the reader
        raise type(exc)(f"--table: {exc}; a T5 table is (num_buckets, heads)") from None
    table = found.array
    if table.ndim == 2 and table.shape[1] < 1:
        raise ValueError(
            f"--table {args.table} must hold at least one head: (num_buckets, heads) with "
            f"heads >= 1, got {table.shape}"
        )
    buckets = 32 if args.num_buckets is None else args.num_buckets
    if table.shape[0] != buckets:
        hint = " (transposed? it is (heads, num_buckets))" if table.shape[1] == buckets else ""
        raise ValueError(
            f"--table {args.table} must have shape (num_buckets, heads) = ({buckets}, heads) "
            f"(--num-buckets {buckets}), got {table.shape}{hint}"
        )
    if args.heads is not None and args.heads != table.shape[1]:
        raise ValueError(
            f"--heads must be the --table's {table.shape[1]} heads (or left out), got {args.heads}"
        )
    if not np.isfinite(table).all():
        raise ValueError(f"--table {args.table} must hold finite numbers, got NaN or infinity")
    from .._figure_data import MAX_DRAWN_VALUE

    peak = float(np.max(np.abs(table.astype(np.float64))))
    if peak > MAX_DRAWN_VALUE:
        raise ValueError(
            f"--table {args.table} holds values up to {peak:.3g} in magnitude; a figure draws "
            f"values within +-{MAX_DRAWN_VALUE:.0e} (its axes would overflow)"
        )
    kwargs["table"] = table


def _integers(flag: str, text: str) -> list[int]:
    try:
        return [int(c) for c in text.split(",")]
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated integers, got {text!r}") from None
