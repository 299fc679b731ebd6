"""``posenc table``: write a sinusoidal table as text, CSV, JSON or ``.npy``, at any size.

Tables are produced in blocks of rows, so memory stays bounded whatever the length:

- ``.npy``: the header is written first, then each block of rows (``BLOCK_BYTES``, 32 MiB) is
  computed and appended to the file. Besides that block the process holds only the float64
  temporaries of the builder (about 2 MiB each), so a 10^7 x 1024 float32 table (41 GB on disk)
  is written with well under 100 MiB of resident memory.
- text, CSV and JSON stream block by block to the output.

With ``--out FILE`` the table goes to a hidden temporary file in the same folder, renamed to
FILE only when complete: an interrupted run or a full disk leaves no partial FILE, and an
existing FILE (replaced only with ``--force``) stays untouched until then. A table larger than
the free space of that folder is refused before anything is written, with its size (exact for
``.npy``, a lower bound for text).

A progress bar is drawn on stderr for tables of more than one block (``--quiet`` hides it).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import numpy as np
import numpy.typing as npt

from .._checks import check_float_dtype, check_position_magnitude
from .._features import feature_slices
from .._frequencies import check_schedule_base, frequencies
from .._sinusoidal import fill_table
from ._common import (
    Progress,
    add_encoding_options,
    add_force_option,
    add_positions_options,
    add_subcommand,
    check_d_model,
    positions_of,
)
from ._output import Output

HELP = "write a sinusoidal table (text, csv, json or npy), in bounded memory at any length"

#: Bytes of output produced per block (of .npy data; text holds the same rows).
BLOCK_BYTES = 32 << 20

_FORMATS = ("text", "csv", "json", "npy")
_SUFFIX_FORMATS = {".txt": "text", ".csv": "csv", ".json": "json", ".npy": "npy"}
# csv/json: significant digits that make each dtype's values round-trip through decimal text.
_DIGITS = {"float16": 5, "float32": 9, "float64": 17}
# text: aligned fixed-point columns, as many decimals as the dtype resolves near 1.
_DECIMALS = {"float16": 4, "float32": 8, "float64": 16}


def add_parser(sub: Any) -> None:
    parser = add_subcommand(sub, "table", HELP, __doc__)
    add_positions_options(parser, required=True)
    add_encoding_options(parser)
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=("float16", "float32", "float64"),
        help="value type (default float32); values are float64 rounded once",
    )
    parser.add_argument(
        "--format",
        choices=_FORMATS,
        help="output format (default: from the --out suffix .txt/.csv/.json/.npy, else text)",
    )
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="output file (default: standard output)"
    )
    add_force_option(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    positions = positions_of(args)
    d_model = check_d_model(args.d_model)
    base = check_schedule_base("--base", args.base)
    dtype = check_float_dtype("--dtype", args.dtype)
    fmt = args.format or _SUFFIX_FORMATS.get(args.out.suffix.lower() if args.out else "", "text")
    if fmt == "npy" and args.out is None:
        raise ValueError("--format npy writes binary data and needs --out FILE")
    spec = _Spec(positions, d_model, base, args.convention, dtype)
    output = None if args.out is None else Output(args.out, force=args.force)
    if output is not None:
        output.check()
        what = f"the table ({spec.rows} rows x {d_model} {dtype.name})"
        output.check_space(_file_bytes(fmt, spec), what, at_least=fmt != "npy")

    enabled = not args.quiet and spec.blocks > 1
    with Progress(spec.rows, unit="rows", enabled=enabled) as progress:
        if output is None:
            _TEXT_WRITERS[fmt](sys.stdout, spec, progress)
            sys.stdout.flush()
        else:
            with output.writing() as temp:
                _write_file(temp, fmt, spec, progress)
        progress.close(spec.rows)
    if args.out is not None:
        print(f"wrote {spec.rows} x {d_model} {dtype.name} ({fmt}) to {args.out}", file=sys.stderr)
    return 0


class _Spec:
    """What to compute, and the blocks of rows to compute it in."""

    def __init__(
        self,
        positions: int | npt.NDArray[np.int64],
        d_model: int,
        base: float,
        convention: str,
        dtype: np.dtype[Any],
    ) -> None:
        self.positions = positions
        self.rows = positions if isinstance(positions, int) else int(positions.shape[0])
        if not isinstance(positions, int) and positions.size:
            check_position_magnitude("--positions", int(positions.min()), int(positions.max()))
        self.d_model, self.base, self.convention, self.dtype = d_model, base, convention, dtype
        self.omega = frequencies(d_model, base=base, convention=convention)
        self.layout = feature_slices(d_model, convention)
        self.block_rows = max(1, BLOCK_BYTES // (d_model * dtype.itemsize))
        self.blocks = -(-self.rows // self.block_rows)

    def block_positions(self, start: int) -> npt.NDArray[np.int64]:
        stop = min(start + self.block_rows, self.rows)
        if isinstance(self.positions, int):
            return np.arange(start, stop, dtype=np.int64)
        return self.positions[start:stop]

    def blocks_of(self, progress: Progress) -> Iterator[tuple[int, npt.NDArray[Any]]]:
        """Yield ``(start, block)`` pairs: each block's positions and its computed rows.

        Every block is a view of one buffer, overwritten by the next: use a block before asking
        for the next one (so one block of memory is held, not two).
        """
        buffer = np.empty((min(self.block_rows, self.rows), self.d_model), dtype=self.dtype)
        for start in range(0, self.rows, self.block_rows):
            pos = self.block_positions(start)
            block = buffer[: pos.shape[0]]
            fill_table(block, pos, self.omega, self.layout)
            yield start, block
            progress.update(start + pos.shape[0])


def _npy_header(spec: _Spec) -> dict[str, Any]:
    return {
        "descr": np.lib.format.dtype_to_descr(spec.dtype),
        "fortran_order": False,
        "shape": (spec.rows, spec.d_model),
    }


def _file_bytes(fmt: str, spec: _Spec) -> int:
    """The size of the file: exact for ``.npy``, a lower bound for the text formats (each value
    takes at least its fixed width in text, one digit in CSV and JSON, and one separator)."""
    if fmt == "npy":
        header = io.BytesIO()
        np.lib.format.write_array_header_2_0(header, _npy_header(spec))
        return len(header.getvalue()) + spec.rows * spec.d_model * spec.dtype.itemsize
    per_value = _DECIMALS[spec.dtype.name] + 4 if fmt == "text" else 2
    return spec.rows * spec.d_model * per_value


def _write_file(path: Path, fmt: str, spec: _Spec, progress: Progress) -> None:
    """Write the table to the (temporary) file ``path`` in format ``fmt``."""
    if fmt == "npy":
        with open(path, "wb") as f:
            _write_npy(f, spec, progress)
    else:
        with open(path, "w", encoding="utf-8", newline="") as stream:
            _TEXT_WRITERS[fmt](stream, spec, progress)


def _write_npy(f: BinaryIO, spec: _Spec, progress: Progress) -> None:
    """The ``.npy`` header, then each block of rows, written in order with ``f.write``.

    Sequential writes (never a memory map over space the file system has not allocated yet) make
    a full disk an ``OSError`` from ``write``, not a signal.
    """
    np.lib.format.write_array_header_2_0(f, _npy_header(spec))
    end = f.tell() + spec.rows * spec.d_model * spec.dtype.itemsize
    for _, block in spec.blocks_of(progress):
        f.write(block.data)
    if f.tell() != end:
        raise RuntimeError(f".npy data ends at byte {f.tell()}, expected {end}")


def _value_format(spec: _Spec) -> str:
    return f"%.{_DIGITS[spec.dtype.name]}g"


def _row_lines(spec: _Spec, progress: Progress, fmt: str, sep: str, width: int) -> Iterator[str]:
    for start, block in spec.blocks_of(progress):
        pos = spec.block_positions(start)
        for p, row in zip(pos.tolist(), block, strict=True):
            yield f"{p:>{width}}{sep}" + sep.join(fmt % v for v in row.tolist())


def _describe(spec: _Spec) -> str:
    return (
        f"posenc table: convention={spec.convention} base={spec.base:g} "
        f"d_model={spec.d_model} dtype={spec.dtype.name} rows={spec.rows}"
    )


def _write_text(stream: TextIO, spec: _Spec, progress: Progress) -> None:
    stream.write(f"# {_describe(spec)}\n# position, then channels 0 .. {spec.d_model - 1}\n")
    decimals = _DECIMALS[spec.dtype.name]
    fmt = f"%{decimals + 3}.{decimals}f"
    ends = [0, spec.rows]
    if not isinstance(spec.positions, int):
        ends = [int(spec.positions.min()), int(spec.positions.max())]
    width = max((len(str(p)) for p in ends), default=1)
    for line in _row_lines(spec, progress, fmt, " ", width):
        stream.write(line + "\n")


def _write_csv(stream: TextIO, spec: _Spec, progress: Progress) -> None:
    stream.write("position," + ",".join(f"ch{c}" for c in range(spec.d_model)) + "\n")
    for line in _row_lines(spec, progress, _value_format(spec), ",", 0):
        stream.write(line + "\n")


def _write_json(stream: TextIO, spec: _Spec, progress: Progress) -> None:
    meta = {
        "convention": spec.convention,
        "base": spec.base,
        "d_model": spec.d_model,
        "dtype": spec.dtype.name,
        "rows": spec.rows,
    }
    stream.write(json.dumps(meta)[:-1] + ', "positions": [')
    for start in range(0, spec.rows, spec.block_rows):
        pos = spec.block_positions(start).tolist()
        stream.write(("," if start else "") + ",".join(map(str, pos)))
    stream.write('], "table": [\n')
    fmt = _value_format(spec)
    first = True
    for _, block in spec.blocks_of(progress):
        for row in block.tolist():
            stream.write(("" if first else ",\n") + "[" + ",".join(fmt % v for v in row) + "]")
            first = False
    stream.write("\n]}\n")


_TEXT_WRITERS: dict[str, Callable[[TextIO, _Spec, Progress], None]] = {
    "text": _write_text,
    "csv": _write_csv,
    "json": _write_json,
}
