"""``posenc identify FILE``: which convention, base and offset produced a stored table.

Reads ``.npy``, ``.npz`` (``--key`` picks the array), ``.safetensors`` state dicts (``--key``
names the tensor, e.g. ``model.encoder.embed_positions.weight``) and, with PyTorch installed,
``.pt``/``.pth``/``.bin`` files (loaded with ``weights_only=True``, memory-mapped).

Files are read defensively: the table's shape and dtype come from the file's header and are
checked before anything is allocated. A table larger than ``--max-bytes`` (default: a quarter
of physical memory) is refused, so is a file that is shorter or longer than its header
declares, and pickled Python objects are never loaded. Only the array asked for is read: in a
``.npz`` no other member is decompressed.

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
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .._describe import describe
    from ..analysis import identify

    max_bytes = default_max_bytes() if args.max_bytes is None else args.max_bytes
    found = read_table(args.file, args.key, max_bytes)
    table = found.array
    result = identify(table, tolerance=found.tolerance)
    if args.json:
        report = {"file": str(args.file), "key": found.name, "shape": list(table.shape)}
        report["dtype"] = found.dtype
        print(json.dumps(report | result.as_dict() | {"message": describe(result)}, indent=2))
    else:
        where = f"{args.file}" + (f" [{found.name}]" if found.name else "")
        print(f"{where}: {table.shape[0]} x {table.shape[1]} {found.dtype}")
        print(describe(result))
    return 0 if result.matched else 1
