"""Read one 2-D table from a file that may be hostile: sizes checked first, no pickles.

Formats: ``.npy``; ``.npz`` (only the member asked for is decompressed); ``.pt``, ``.pth``
and ``.bin`` (PyTorch, needs torch: ``torch.load(weights_only=True, mmap=True)``); and
``.safetensors`` (its header is parsed here, so neither torch nor safetensors is needed, and
only the one tensor is read).

Every reader learns the array's shape and dtype from the file's header and checks them before
it allocates anything: the array must have two dimensions and a number dtype, and the bytes it
will occupy must not exceed ``max_bytes`` (``--max-bytes``; by default a quarter of physical
memory, ``sizes.default_max_bytes``). It then reads exactly the bytes the header declares: a
file or member that holds fewer is truncated, one that holds more lies about its size, and
either is an error. Object arrays are never loaded (``allow_pickle`` is never set), and a
PyTorch file that holds anything but tensors is refused, and so is a tensor whose storage holds
fewer bytes than its shape declares (an expanded or overlapping view, a few bytes on disk that
would become the whole table once materialised) or more than ``max_bytes``. Buffers grow with
the bytes that arrive. So a compressed member of a zip bomb costs at most ``max_bytes``,
whatever it would inflate to, and a size a file declares but does not hold costs nothing.

Every unreadable input raises :class:`FileError` (a ``ValueError``) or ``TypeError`` with one
line that names the file (and the key), never a deep traceback.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import struct
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np
import numpy.typing as npt
from numpy.lib import format as npy_format

from .files import FileError, check_regular_file
from .sizes import format_size

__all__ = [
    "MAX_DIMS",
    "SUFFIXES",
    "TORCH_SUFFIXES",
    "Table",
    "read_arrays",
    "read_table",
    "table_shape",
]

#: The suffixes of PyTorch files (read with torch).
TORCH_SUFFIXES = (".pt", ".pth", ".bin")
#: The file suffixes ``read_table`` accepts (case-insensitive).
SUFFIXES = (".npy", ".npz", *TORCH_SUFFIXES, ".safetensors")

#: The most axes :func:`read_arrays` accepts in one array.
MAX_DIMS = 4

_CHUNK = 16 * 2**20  # bytes read at a time
_MAX_SAFETENSORS_HEADER = 100_000_000  # the safetensors format's own limit
_BFLOAT16_TOLERANCE = 2.0**-8  # one bfloat16 unit near 1


class Table(NamedTuple):
    """The table read: its key (None for ``.npy``), the array, the dtype it was stored in
    (``"bfloat16"`` arrives as float32), the tolerance to identify it with (None except
    for bfloat16) and the shape stored in the file (``(L, 1, d)`` for the PyTorch tutorial's
    buffer: its singleton axes are dropped, and ``array`` is ``(L, d)``)."""

    name: str | None
    array: npt.NDArray[Any]
    dtype: str
    tolerance: float | None
    stored_shape: tuple[int, ...] = ()


def table_shape(shape: tuple[int, ...]) -> tuple[int, int] | None:
    """The 2-D table a stored shape holds once its singleton axes are dropped (``(L, 1, d)``
    -> ``(L, d)``, ``(1, 1, d)`` -> ``(1, d)``), or None when more than two axes are > 1."""
    if len(shape) == 2:
        return (shape[0], shape[1])
    sizes = [n for n in shape if n != 1]
    if len(shape) < 2 or len(sizes) > 2:
        return None
    sizes = [1] * (2 - len(sizes)) + sizes
    return (sizes[0], sizes[1])


class _Header(NamedTuple):
    """What a header declares: the shape, the dtype of the array once read, the stored dtype's
    name, and whether the array is stored in Fortran order."""

    shape: tuple[int, ...]
    dtype: np.dtype[Any] | None  # None: no NumPy equivalent
    label: str
    fortran: bool = False


def _declared(header: _Header) -> str:
    """``64 x 16 float32`` for messages."""
    return " x ".join(str(n) for n in header.shape) + f" {header.label}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


# --------------------------------------------------------------------------- checks


def _where(path: Path, name: str | None) -> str:
    return f"{path}" + (f" [{name}]" if name is not None else "")


def _check_header(where: str, header: _Header, max_bytes: int, table: bool = True) -> int:
    """The bytes the array will occupy, after checking dtype, dimensions (a 2-D table when
    ``table``, else at most :data:`MAX_DIMS` axes) and size."""
    if header.label == "object":
        raise TypeError(f"{where} holds Python objects (dtype object), which are never loaded")
    if header.dtype is None or header.dtype.kind not in "fiu":
        raise TypeError(f"{where} must hold numbers, got dtype {header.label}")
    if not table and len(header.shape) > MAX_DIMS:
        raise ValueError(f"{where} must have at most {MAX_DIMS} axes, got shape {header.shape}")
    if table and table_shape(header.shape) is None:
        raise ValueError(
            f"{where} must be a 2-D table (positions x channels), got shape {header.shape} "
            "(axes of size 1 are dropped, as in the PyTorch tutorial's (L, 1, d) buffer)"
        )
    size = math.prod(header.shape) * header.dtype.itemsize
    if size > max_bytes:
        raise FileError(
            f"{where} declares {_declared(header)} ({format_size(size)}), more than "
            f"--max-bytes ({format_size(max_bytes)}); pass a larger --max-bytes to read it"
        )
    return size


def _check_rest(where: str, header: _Header, size: int, available: int) -> None:
    """The data after the header must be exactly ``size`` bytes."""
    if available < size:
        raise FileError(
            f"{where} is truncated: its header declares {_declared(header)} "
            f"({format_size(size)}), the file holds {max(available, 0):,}"
        )
    if available > size:
        raise FileError(
            f"{where} holds {available - size:,} bytes more than its header declares "
            f"({_declared(header)})"
        )


def _read_exactly(stream: IO[bytes], size: int, where: str, header: _Header) -> Any:
    """``size`` bytes from ``stream`` into a new uint8 array, in chunks; FileError if short.

    The buffer grows with the bytes that arrive, so a header or a zip directory that declares
    more than the stream holds costs what it holds, not what it declares.
    """
    buffer = bytearray()
    while len(buffer) < size:
        chunk = stream.read(min(_CHUNK, size - len(buffer)))
        if not chunk:
            _check_rest(where, header, size, len(buffer))
        buffer += chunk
    return np.frombuffer(buffer, dtype=np.uint8)


@contextlib.contextmanager
def _reading(where: str, what: str) -> Iterator[None]:
    """Errors of the parsers and decompressors below become one FileError ``where what``."""
    try:
        yield
    except FileError:
        raise
    except Exception as exc:  # zipfile, zlib, lzma, ast and friends raise many kinds
        raise FileError(f"{where} {what} ({_first_line(exc)})") from None


# --------------------------------------------------------------------------- .npy, .npz


def _npy_header(stream: IO[bytes], where: str) -> _Header:
    """Parse a .npy header (magic, version, dict) from ``stream``, leaving it at the data."""
    with _reading(where, "is not a readable .npy array"):
        version = npy_format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(stream)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = npy_format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unknown .npy format version {version}")
    if any(n < 0 for n in shape):
        raise FileError(f"{where} is not a readable .npy array (shape {shape})")
    label = "object" if dtype.hasobject else str(dtype)
    return _Header(tuple(shape), dtype, label, fortran)


def _npy_array(buffer: Any, header: _Header) -> npt.NDArray[Any]:
    assert header.dtype is not None
    order = "F" if header.fortran else "C"
    return buffer.view(header.dtype).reshape(header.shape, order=order)  # type: ignore[no-any-return]


class _Npy:
    """A .npy file: one array, no key."""

    def __init__(self, path: Path, stack: contextlib.ExitStack) -> None:
        self.path = path
        self.file = stack.enter_context(path.open("rb"))
        self.names: list[str] = []

    def header(self, name: str | None) -> _Header:
        return _npy_header(self.file, str(self.path))

    def read(self, name: str | None, header: _Header, size: int) -> npt.NDArray[Any]:
        where = str(self.path)
        available = os.fstat(self.file.fileno()).st_size - self.file.tell()
        _check_rest(where, header, size, available)
        return _npy_array(_read_exactly(self.file, size, where, header), header)


class _Npz:
    """A .npz archive: members ``NAME.npy``; only the headers and the chosen member are read."""

    def __init__(self, path: Path, stack: contextlib.ExitStack) -> None:
        self.path = path
        file = stack.enter_context(path.open("rb"))
        with _reading(str(path), "is not a .npz (zip) archive"):
            self.zip = stack.enter_context(zipfile.ZipFile(file))
        infos = self.zip.infolist()
        self.members = {i.filename[:-4]: i for i in infos if i.filename.endswith(".npy")}
        self.names = list(self.members)

    def header(self, name: str | None) -> _Header:
        assert name is not None
        where = _where(self.path, name)
        with _reading(where, "cannot be read"), self.zip.open(self.members[name]) as stream:
            return _npy_header(stream, where)

    def read(self, name: str | None, header: _Header, size: int) -> npt.NDArray[Any]:
        assert name is not None
        where = _where(self.path, name)
        with _reading(where, "is corrupt"), self.zip.open(self.members[name]) as stream:
            _npy_header(stream, where)
            _check_rest(where, header, size, self.members[name].file_size - stream.tell())
            buffer = _read_exactly(stream, size, where, header)
            if stream.read(1):  # also checks the CRC at the end of the member
                raise FileError(f"{where} holds more data than its header declares")
        return _npy_array(buffer, header)


# --------------------------------------------------------------------------- .safetensors

_SAFETENSORS_DTYPES = {
    "F64": ("<f8", "float64"),
    "F32": ("<f4", "float32"),
    "F16": ("<f2", "float16"),
    "BF16": ("<f4", "bfloat16"),  # stored as 2 bytes, read as float32
    "I64": ("<i8", "int64"),
    "I32": ("<i4", "int32"),
    "I16": ("<i2", "int16"),
    "I8": ("i1", "int8"),
    "U64": ("<u8", "uint64"),
    "U32": ("<u4", "uint32"),
    "U16": ("<u2", "uint16"),
    "U8": ("u1", "uint8"),
    "BOOL": ("?", "bool"),
}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class _Safetensors:
    """A .safetensors file: 8-byte header length, JSON header, then the tensors' bytes."""

    def __init__(self, path: Path, stack: contextlib.ExitStack) -> None:
        self.path = path
        self.file = stack.enter_context(path.open("rb"))
        self.size = os.fstat(self.file.fileno()).st_size
        if self.size < 8:
            raise FileError(
                f"{path} is too short for a .safetensors file ({self.size} bytes; it starts "
                "with an 8-byte header length)"
            )
        (length,) = struct.unpack("<Q", self.file.read(8))
        if length > min(self.size - 8, _MAX_SAFETENSORS_HEADER):
            raise FileError(
                f"{path} is not a .safetensors file: its header length {length} exceeds the "
                f"{self.size - 8} bytes that follow it (or the format's limit of 100 MB)"
            )
        with _reading(str(path), "is not a .safetensors file: its header is not valid JSON"):
            header = json.loads(self.file.read(length))
        if not isinstance(header, dict):
            raise FileError(f"{path} is not a .safetensors file: its header is not a JSON object")
        self.entries = {k: v for k, v in header.items() if k != "__metadata__"}
        self.names = list(self.entries)
        self.start = 8 + length

    def _entry(self, name: str) -> tuple[str, list[int], int, int]:
        entry = self.entries[name]
        where = _where(self.path, name)
        try:
            code, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            valid = isinstance(code, str) and all(_is_count(n) for n in [*shape, begin, end])
        except (TypeError, KeyError, ValueError):
            valid = False
        if not valid or begin > end:
            raise FileError(
                f"{where} is not a valid tensor entry (it needs dtype, shape and data_offsets), "
                f"got {json.dumps(entry)[:120]}"
            )
        if code not in _SAFETENSORS_DTYPES:
            raise FileError(
                f"{where} has unknown dtype {code!r}; known: {', '.join(_SAFETENSORS_DTYPES)}"
            )
        return code, shape, begin, end

    def header(self, name: str | None) -> _Header:
        assert name is not None
        code, shape, begin, end = self._entry(name)
        dtype, label = _SAFETENSORS_DTYPES[code]
        header = _Header(tuple(shape), np.dtype(dtype), label)
        stored = math.prod(shape) * (2 if code == "BF16" else np.dtype(dtype).itemsize)
        if end - begin != stored:
            raise FileError(
                f"{_where(self.path, name)} declares {_declared(header)} "
                f"({format_size(stored)}) but its data offsets span {end - begin:,} bytes"
            )
        return header

    def read(self, name: str | None, header: _Header, size: int) -> npt.NDArray[Any]:
        assert name is not None
        code, _, begin, end = self._entry(name)
        where = _where(self.path, name)
        _check_rest(where, header, end - begin, min(self.size - self.start - begin, end - begin))
        self.file.seek(self.start + begin)
        buffer = _read_exactly(self.file, end - begin, where, header)
        if code == "BF16":  # the top 16 bits of a float32
            buffer = (buffer.view("<u2").astype(np.uint32) << 16).view(np.float32)
        return buffer.view(header.dtype).reshape(header.shape)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- PyTorch


# How torch.load(weights_only=True) names a pickled class or function it refuses.
_UNSUPPORTED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


class _Torch:
    """A PyTorch file: ``torch.load(weights_only=True)``, memory-mapped when it can be."""

    def __init__(self, path: Path, stack: contextlib.ExitStack, max_bytes: int) -> None:
        try:
            import torch
        except ImportError:
            needs = f"reading {path.suffix} files needs PyTorch: pip install torch"
            raise FileError(needs) from None
        self.path, self.torch, self.max_bytes = path, torch, max_bytes
        mappable = zipfile.is_zipfile(path)  # what torch.save writes since PyTorch 1.6
        size = path.stat().st_size
        if not mappable and size > max_bytes:
            raise FileError(
                f"{path} is an old-format PyTorch file of {format_size(size)}, more than "
                f"--max-bytes ({format_size(max_bytes)}); it can only be read whole"
            )
        try:
            loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=mappable)
        except Exception as exc:  # torch raises many kinds for unreadable files
            found = _UNSUPPORTED_GLOBAL.search(str(exc))
            if found:
                raise FileError(
                    f"{path} holds Python objects other than tensors ({found[1]}), which are "
                    "never loaded"
                ) from None
            reason = type(exc).__name__
            raise FileError(f"{path} is not a readable PyTorch file ({reason})") from None
        self.tensors: dict[str, Any] = {}
        _flatten(loaded, "", self.tensors, torch.Tensor)
        if not self.tensors:
            raise FileError(f"{path} holds no tensors")
        self.names = list(self.tensors)

    def header(self, name: str | None) -> _Header:
        assert name is not None
        tensor = self.tensors[name]
        where = _where(self.path, name)
        if tensor.is_nested:  # before .shape, which a nested tensor may not have
            raise FileError(
                f"{where} is a nested tensor (rows of different lengths), not a table; save "
                "one of its tensors"
            )
        if tensor.layout != self.torch.strided:
            layout = str(tensor.layout).removeprefix("torch.")
            raise FileError(
                f"{where} is a sparse tensor (layout {layout}), not a dense table; save "
                "tensor.to_dense() to read it"
            )
        label = str(tensor.dtype).removeprefix("torch.")
        if tensor.dtype == self.torch.bfloat16:
            return _Header(tuple(tensor.shape), np.dtype(np.float32), label)
        try:
            dtype = self.torch.empty(0, dtype=tensor.dtype).numpy().dtype
        except (TypeError, RuntimeError):
            dtype = None  # float8, quantized, ...: no NumPy equivalent
        return _Header(tuple(tensor.shape), dtype, label)

    def read(self, name: str | None, header: _Header, size: int) -> npt.NDArray[Any]:
        assert name is not None
        tensor = self.tensors[name].detach()
        where = _where(self.path, name)
        if tensor.device.type == "meta":
            raise FileError(
                f"{where} is on the meta device: it has a shape but no values (save it from "
                "a module built on a real device)"
            )
        _check_storage(where, header, tensor, self.max_bytes)
        with _reading(where, "cannot be read"):
            if tensor.dtype == self.torch.bfloat16:
                tensor = tensor.float()
            return tensor.resolve_neg().numpy()  # type: ignore[no-any-return]


def _check_storage(where: str, header: _Header, tensor: Any, max_bytes: int) -> None:
    """The storage under ``tensor`` must hold every element it declares (no expanded or
    overlapping view, which would grow from a few bytes on disk to the whole table once
    materialised) and fit in ``max_bytes``."""
    stored = tensor.untyped_storage().nbytes()
    needed = tensor.numel() * tensor.element_size()
    if stored < needed:
        raise FileError(
            f"{where} declares {_declared(header)} ({format_size(needed)}) but its storage "
            f"holds {format_size(stored)}: an expanded or overlapping view, whose elements are "
            "not in the file; save tensor.contiguous() to read it"
        )
    if stored > max_bytes:
        raise FileError(
            f"{where} is a view of a storage of {format_size(stored)}, more than --max-bytes "
            f"({format_size(max_bytes)}); save tensor.clone() or pass a larger --max-bytes"
        )


def _flatten(obj: Any, prefix: str, out: dict[str, Any], tensor: type) -> None:
    """The tensors in ``obj`` (dicts, lists and tuples, nested), named by their path
    (``"a.0.b"``), in the order of a depth-first walk. Iterative, and each container is
    walked once: a file's containers may nest deeper than Python's recursion limit, or
    hold themselves."""
    stack: list[tuple[str, Any]] = [(prefix, obj)]
    walked: set[int] = set()
    while stack:
        prefix, obj = stack.pop()
        if isinstance(obj, tensor):
            out[prefix or "tensor"] = obj
            continue
        if isinstance(obj, Mapping):
            items = list(obj.items())
        elif isinstance(obj, list | tuple):
            items = list(enumerate(obj))
        else:
            continue
        if id(obj) in walked:
            continue
        walked.add(id(obj))
        stack += [(f"{prefix}.{k}" if prefix else str(k), v) for k, v in reversed(items)]


_Source = _Npy | _Npz | _Safetensors | _Torch

# --------------------------------------------------------------------------- choosing a key


def _choose(path: Path, key: str | None, names: list[str], shape: Callable[[str], Any]) -> str:
    """The key to use: ``key`` if given (and present), else the file's only array, else its
    only 2-D array."""
    if key is not None:
        if key not in names:
            raise FileError(f"--key {key!r} is not in {path}; it holds: {_listing(names, shape)}")
        return key
    if len(names) == 1:
        return names[0]
    tables = [name for name in names if table_shape(shape(name) or ()) is not None]
    if len(tables) == 1:
        return tables[0]
    if not tables:
        raise FileError(f"{path} holds no 2-D array; it holds: {_listing(names, shape)}")
    raise FileError(
        f"{path} holds several 2-D arrays; choose one with --key: {_listing(names, shape)}"
    )


def _listing(names: list[str], shape: Callable[[str], Any], limit: int = 12) -> str:
    """Up to ``limit`` names with shapes, 2-D arrays named like positions first."""
    shapes = {name: shape(name) for name in names}
    ranked = sorted(names, key=lambda n: (len(shapes[n] or ()) != 2, "pos" not in n.lower()))
    shown = [f"{n} {'(unreadable)' if shapes[n] is None else shapes[n]}" for n in ranked[:limit]]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(shown) + more if shown else "nothing"


# --------------------------------------------------------------------------- entry point


def read_table(path: Path, key: str | None, max_bytes: int) -> Table:
    """Read the 2-D table ``key`` (or the only 2-D array) of ``path``, at most ``max_bytes``.

    Raises:
        FileError (a ValueError), TypeError or OSError, with one line naming the file.
    """
    _check_path(path)
    suffix = path.suffix.lower()
    if suffix == ".npy" and key is not None:
        raise FileError(f"--key does not apply to .npy files (got --key {key!r})")
    with contextlib.ExitStack() as stack:
        source = _open(path, stack, max_bytes)
        name = None if suffix == ".npy" else _choose(path, key, source.names, _shape_of(source))
        header = source.header(name)
        size = _check_header(_where(path, name), header, max_bytes)
        array = source.read(name, header, size)
    tolerance = _BFLOAT16_TOLERANCE if header.label == "bfloat16" else None
    squeezed = array.reshape(table_shape(header.shape))  # a view: the axes dropped are of size 1
    return Table(name, squeezed, header.label, tolerance, tuple(header.shape))


def read_arrays(
    path: Path, choose: Callable[[list[str]], list[str]], max_bytes: int
) -> dict[str | None, Table]:
    """The arrays of ``path`` that ``choose`` picks from its names (a ``.npy`` file's one array
    is read whole, under the name None), each of at most :data:`MAX_DIMS` axes, in their stored
    shape, with at most ``max_bytes`` in all. The same checks as :func:`read_table`.

    Raises:
        FileError (a ValueError), TypeError or OSError, with one line naming the file.
    """
    _check_path(path)
    found: dict[str | None, Table] = {}
    budget = max_bytes
    with contextlib.ExitStack() as stack:
        source = _open(path, stack, max_bytes)
        names: list[str | None] = [None]
        if path.suffix.lower() != ".npy":
            names = list(choose(list(source.names)))
        for name in names:
            header = source.header(name)
            size = _check_header(_where(path, name), header, budget, table=False)
            budget -= size
            array = source.read(name, header, size)
            tolerance = _BFLOAT16_TOLERANCE if header.label == "bfloat16" else None
            found[name] = Table(name, array, header.label, tolerance, tuple(header.shape))
    return found


def _open(path: Path, stack: contextlib.ExitStack, max_bytes: int) -> _Source:
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return _Npy(path, stack)
    if suffix == ".npz":
        return _Npz(path, stack)
    if suffix == ".safetensors":
        return _Safetensors(path, stack)
    return _Torch(path, stack, max_bytes)


def _check_path(path: Path) -> None:
    """A regular, non-empty file with one of :data:`SUFFIXES`."""
    # before its size (0) is read as empty, or a read that never ends
    check_regular_file(path, advice="save the table to a file")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise FileError(
            f"FILE must end in {', '.join(SUFFIXES[:-1])} or {SUFFIXES[-1]}, got {path.name!r}"
        )
    if path.stat().st_size == 0:
        raise FileError(f"{path} is empty (0 bytes)")


def _shape_of(source: _Source) -> Callable[[str], tuple[int, ...] | None]:
    """The declared shape of a member, or None when its header cannot be read."""

    def shape(name: str) -> tuple[int, ...] | None:
        try:
            return source.header(name).shape
        except (ValueError, TypeError):
            return None

    return shape
