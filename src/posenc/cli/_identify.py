"""``posenc identify FILE``: which convention, base and offset produced a stored table.

Reads ``.npy``, ``.npz`` (``--key`` picks the array), ``.safetensors`` state dicts (``--key``
names the tensor, e.g. ``model.encoder.embed_positions.weight``) and, with PyTorch installed,
``.pt``/``.pth``/``.bin`` files (loaded with ``weights_only=True``, memory-mapped).

Files are read defensively: the table's shape and dtype come from the file's header and are
checked before anything is allocated. A table larger than ``--max-bytes`` (default: a quarter
of physical memory) is refused, so is a file that is shorter or longer than its header
declares, and pickled Python objects are never loaded. Only the array asked for is read: in a
``.npz`` no other member is decompressed.

A table stored with axes of size 1 (the PyTorch tutorial's ``(L, 1, d)`` buffer) is read as
``(L, d)``, and the report says so. ``--skip-rows N`` leaves out the first N rows: the padding
rows of fairseq-style tables (``padding_idx + 1`` leading rows, the row ``padding_idx`` zero);
the offset found is then the position of row N of the file.

Exit code 0 when a convention matches, 1 when none does, 2 when the file cannot be used.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ._common import add_subcommand
from ._readers import default_max_bytes, format_size, parse_size, read_table

HELP = "report which convention, base and position offset produced a stored table"


def add_parser(sub: Any) -> None:
    parser = add_subcommand(sub, "identify", HELP, __doc__)
    parser.add_argument(
        "file", type=Path, metavar="FILE", help=".npy, .npz, .pt, .pth, .bin or .safetensors"
    )
    parser.add_argument("--key", help="the array's name inside .npz/.pt/.safetensors files")
    parser.add_argument(
        "--max-bytes",
        type=parse_size,
        metavar="SIZE",
        help="largest table to read, e.g. 512M or 8G (K, M, G, T: powers of 1024; default a "
        f"quarter of physical memory, here {format_size(default_max_bytes())})",
    )
    parser.add_argument(
        "--skip-rows",
        type=_row_count,
        default=0,
        metavar="N",
        help="leave out the first N rows (e.g. the padding rows of a fairseq table); the "
        "offset reported is then the position of row N",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .._describe import describe
    from ..analysis import identify

    max_bytes = default_max_bytes() if args.max_bytes is None else args.max_bytes
    found = read_table(args.file, args.key, max_bytes)
    table = found.array
    if args.skip_rows >= table.shape[0]:
        raise ValueError(
            f"--skip-rows must be less than the table's {table.shape[0]} rows, got {args.skip_rows}"
        )
    result = identify(table[args.skip_rows :], tolerance=found.tolerance)
    if args.json:
        report = {"file": str(args.file), "key": found.name, "shape": list(table.shape)}
        report |= {"stored_shape": list(found.stored_shape), "skip_rows": args.skip_rows}
        report["dtype"] = found.dtype
        print(json.dumps(report | result.as_dict() | {"message": describe(result)}, indent=2))
    else:
        where = f"{args.file}" + (f" [{found.name}]" if found.name else "")
        line = f"{where}: {table.shape[0]} x {table.shape[1]} {found.dtype}"
        if found.stored_shape != table.shape:
            stored = tuple(found.stored_shape)
            line += f" (stored as {stored}: the axes of size 1 are dropped)"
        if args.skip_rows:
            line += f"; rows {args.skip_rows}.. analysed (--skip-rows {args.skip_rows})"
        print(line)
        print(describe(result))
    return 0 if result.matched else 1


def _row_count(text: str) -> int:
    """``--skip-rows``: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {value}")
    return value
