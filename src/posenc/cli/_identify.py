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
``(L, d)``, and the report says so. The leading padding rows of fairseq-style tables
(``padding_idx + 1`` rows, the row ``padding_idx`` all zeros, or every one of them) are found
and skipped: when the only all-zero rows are among the first 16, the rows up to the last of
them are left out and the report says which ("rows 0–1 skipped: row 1 is all zeros
(padding)"); the offset found is then the position of the first row analysed.
``--skip-rows N`` leaves out the first N rows instead (``--skip-rows 0``: every row).
``--max-offset N`` searches first positions ``0 .. N-1`` (default 2**20, at most 2**24).

Exit code 0 when a convention matches, 1 when none does, 2 when the file cannot be used.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .._io.files import FileError
from .._io.sizes import default_max_bytes, format_size
from .._io.tables import read_table
from ._common import add_subcommand, parse_size

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
        default=None,
        metavar="N",
        help="leave out the first N rows (e.g. the padding rows of a fairseq table); the "
        "offset reported is then the position of row N (default: the leading padding rows, "
        "found by their zeros; 0 analyses every row)",
    )
    parser.add_argument(
        "--max-offset",
        type=_max_offset,
        default=None,
        metavar="N",
        help="search first positions 0..N-1 (default 2**20, at most 2**24 = 16777216)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .._describe import describe_for_cli
    from ..analysis import identify

    max_bytes = default_max_bytes() if args.max_bytes is None else args.max_bytes
    found = read_table(args.file, args.key, max_bytes)
    table = found.array
    where = f"{args.file}" + (f" [{found.name}]" if found.name else "")
    for axis, what in enumerate(("rows", "channels")):
        if table.shape[axis] == 0:
            raise FileError(f"{where} has no {what}: shape {table.shape}, nothing to identify")
    zeros = _padding_rows(table) if args.skip_rows is None else []
    skip = zeros[-1] + 1 if zeros else (args.skip_rows or 0)
    if skip >= table.shape[0]:
        raise ValueError(
            f"--skip-rows must be less than the table's {table.shape[0]} rows, got {skip}"
        )
    options = {} if args.max_offset is None else {"max_offset": args.max_offset}
    result = identify(table[skip:], tolerance=found.tolerance, **options)
    message = describe_for_cli(result)
    if zeros:
        message = f"{_skipped(zeros, result.offset)}; {message}"
    if args.json:
        report: dict[str, Any] = {"file": str(args.file), "key": found.name}
        report["shape"] = list(table.shape)
        report |= {"stored_shape": list(found.stored_shape), "skip_rows": skip}
        report["skipped_rows"] = (
            {"rows": [0, skip - 1], "zero_rows": zeros, "detected": bool(zeros)} if skip else None
        )
        report["dtype"] = found.dtype
        print(json.dumps(report | result.as_dict() | {"message": message}, indent=2))
    else:
        line = f"{where}: {table.shape[0]} x {table.shape[1]} {found.dtype}"
        if found.stored_shape != table.shape:
            stored = tuple(found.stored_shape)
            line += f" (stored as {stored}: the axes of size 1 are dropped)"
        if skip and not zeros:
            line += f"; rows {skip}.. analysed (--skip-rows {skip})"
        print(line)
        print(message)
    return 0 if result.matched else 1


_PADDING_ROWS = 16  # all-zero rows among the first 16, and none later: leading padding rows


def _padding_rows(table: Any) -> list[int]:
    """The all-zero rows of ``table`` ``(L, d)`` when they are all among its first
    :data:`_PADDING_ROWS` rows and rows follow them (fairseq's ``padding_idx`` row, or every
    row before the first real position); ``[]`` otherwise, and for ``d = 1`` (a sinusoidal
    column can be zero there)."""
    import numpy as np

    if table.shape[1] < 2:
        return []
    zero = [int(i) for i in np.flatnonzero(~np.any(table, axis=1))]
    if not zero or zero[-1] >= min(_PADDING_ROWS, table.shape[0] - 1):
        return []
    return zero


def _skipped(zeros: list[int], offset: int | None) -> str:
    """``"rows 0–1 skipped: row 1 is all zeros (padding); ..."`` for the command's report."""
    first = zeros[-1] + 1
    rows = "row 0 skipped" if first == 1 else f"rows 0–{first - 1} skipped"
    if len(zeros) == 1:
        which = f"row {zeros[0]} is"
    else:
        which = "rows " + ", ".join(str(z) for z in zeros[:-1]) + f" and {zeros[-1]} are"
    start = f"the table starts at row {first}" + ("" if offset is None else f", position {offset}")
    return f"{rows}: {which} all zeros (padding); {start} (--skip-rows 0 analyses every row)"


def _max_offset(text: str) -> int:
    """``--max-offset``: an integer in [1, 2**24]."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an integer in [1, 2**24], got {text!r}"
        ) from None
    if not 1 <= value <= 2**24:
        raise argparse.ArgumentTypeError(f"must be an integer in [1, 2**24], got {value}")
    return value


def _row_count(text: str) -> int:
    """``--skip-rows``: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {value}")
    return value
