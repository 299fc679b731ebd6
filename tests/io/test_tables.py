"""The bounded table readers (``posenc/_io/tables.py``), through ``posenc identify``: files that
are empty, truncated, corrupt or lying about their sizes.

Every such file gives exit code 2 and one line on stderr naming the file, never a traceback,
and no declared size is allocated before it is checked against ``--max-bytes``.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.lib import format as npy_format

import posenc
from posenc.cli import main

TABLE = posenc.sinusoidal(np.arange(3, 67), 16)  # 64 x 16 float32, offset 3


def identify(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["identify", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    """A valid .npy header (magic, version 1.0) declaring ``shape`` and ``descr``."""
    buffer = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    npy_format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def safetensors_bytes(header: object, data: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def good_safetensors_header(shape: list[int], dtype: str = "F32", size: int = 0) -> dict:
    return {"pos": {"dtype": dtype, "shape": shape, "data_offsets": [0, size]}}


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


# name → (file name, contents, extra argv, words the one-line message must contain)
HOSTILE: dict[str, tuple[str, Callable[[], bytes], list[str], str]] = {
    "empty npy": ("t.npy", lambda: b"", [], "is empty"),
    "npy truncated in its data": (
        "t.npy",
        lambda: npy_bytes(TABLE)[:-100],
        [],
        "is truncated: its header declares 64 x 16 float32 (4,096 bytes), the file holds 3,996",
    ),
    "npy truncated in its header": (
        "t.npy",
        lambda: npy_bytes(TABLE)[:40],
        [],
        "is not a readable .npy array",
    ),
    "npy declaring 500 GiB": (
        "t.npy",
        lambda: npy_header((131_072_000, 1024)) + bytes(64),
        ["--max-bytes", "1G"],
        "declares 131072000 x 1024 float32 (500 GiB), more than --max-bytes (1 GiB)",
    ),
    "npy declaring 500 GiB, default limit": (
        "t.npy",
        lambda: npy_header((131_072_000, 1024)) + bytes(64),
        [],
        "declares 131072000 x 1024 float32 (500 GiB)",
    ),
    "npy with negative shape": ("t.npy", lambda: npy_header((-4, 16)), [], "shape (-4, 16)"),
    "npy of objects": (
        "t.npy",
        lambda: npy_bytes(np.array([{"a": 1}, None], dtype=object)),
        [],
        "holds Python objects (dtype object), which are never loaded",
    ),
    "npy of 3 dimensions": (
        "t.npy",
        lambda: npy_bytes(np.zeros((2, 3, 4))),
        [],
        "must be a 2-D table (positions x channels), got shape (2, 3, 4)",
    ),
    "empty npz": ("t.npz", lambda: b"", [], "is empty (0 bytes)"),
    "truncated npz": (
        "t.npz",
        lambda: _truncated(_zip_bytes({"pos.npy": npy_bytes(TABLE)})),
        [],
        "is not a .npz (zip) archive",
    ),
    "corrupt npz": ("t.npz", lambda: b"PK\x03\x04" + b"junk" * 64, [], "is not a .npz (zip)"),
    "npz member with a corrupt header": (
        "t.npz",
        lambda: _zip_bytes({"pos.npy": b"\x93NUMPY garbage"}),
        ["--key", "pos"],
        "[pos] is not a readable .npy array",
    ),
    "npz member longer than its header declares": (
        "t.npz",
        lambda: _zip_bytes({"pos.npy": npy_header((4, 16)) + bytes(4 * 16 * 4 + 1000)}),
        ["--key", "pos"],
        "[pos] holds 1,000 bytes more than its header declares",
    ),
    "npz member shorter than its header declares": (
        "t.npz",
        lambda: _zip_bytes({"pos.npy": npy_header((40, 16)) + bytes(100)}),
        ["--key", "pos"],
        "[pos] is truncated",
    ),
    "npz member declaring more than --max-bytes": (
        "t.npz",
        lambda: _zip_bytes({"pos.npy": npy_header((4096, 1024)) + bytes(4096 * 1024 * 4)}),
        ["--max-bytes", "1M"],
        "[pos] declares 4096 x 1024 float32 (16 MiB), more than --max-bytes (1 MiB)",
    ),
    "npz with a missing key": (
        "t.npz",
        lambda: _zip_bytes({"pos.npy": npy_bytes(TABLE), "bias.npy": npy_bytes(np.zeros(3))}),
        ["--key", "nope"],
        "--key 'nope' is not in",
    ),
    "empty safetensors": ("t.safetensors", lambda: b"", [], "is empty (0 bytes)"),
    "safetensors shorter than its header length": (
        "t.safetensors",
        lambda: b"\x10\x00\x00",
        [],
        "is too short for a .safetensors file (3 bytes",
    ),
    "safetensors header longer than the file": (
        "t.safetensors",
        lambda: struct.pack("<Q", 2**60) + b"{}",
        [],
        "header length 1152921504606846976 exceeds the 2 bytes that follow it",
    ),
    "safetensors header that is not JSON": (
        "t.safetensors",
        lambda: struct.pack("<Q", 5) + b"{nope",
        [],
        "header is not valid JSON",
    ),
    "safetensors header that is a list": (
        "t.safetensors",
        lambda: safetensors_bytes([1, 2]),
        [],
        "header is not a JSON object",
    ),
    "safetensors with an unknown dtype": (
        "t.safetensors",
        lambda: safetensors_bytes(good_safetensors_header([4, 4], "F7", 16), bytes(16)),
        [],
        "[pos] has unknown dtype 'F7'",
    ),
    "safetensors with a malformed entry": (
        "t.safetensors",
        lambda: safetensors_bytes({"pos": {"dtype": "F32", "shape": "big"}}),
        [],
        "[pos] is not a valid tensor entry",
    ),
    "truncated safetensors": (
        "t.safetensors",
        lambda: safetensors_bytes(good_safetensors_header([64, 16], size=4096), bytes(1000)),
        [],
        "[pos] is truncated",
    ),
    "safetensors offsets that disagree with the shape": (
        "t.safetensors",
        lambda: safetensors_bytes(good_safetensors_header([64, 16], size=400), bytes(400)),
        [],
        "[pos] declares 64 x 16 float32 (4,096 bytes) but its data offsets span 400 bytes",
    ),
    "safetensors declaring huge sizes": (
        "t.safetensors",
        lambda: safetensors_bytes(good_safetensors_header([2**30, 2**20], size=2**52), bytes(16)),
        ["--max-bytes", "8G"],
        "[pos] declares 1073741824 x 1048576 float32 (4 PiB), more than --max-bytes (8 GiB)",
    ),
    "safetensors with a bool tensor": (
        "t.safetensors",
        lambda: safetensors_bytes(good_safetensors_header([4, 4], "BOOL", 16), bytes(16)),
        [],
        "must hold numbers, got dtype bool",
    ),
}


def readers() -> Any:
    """The reader module (imported late, so that the command tests also run without it)."""
    from posenc._io import tables

    return tables


def assert_one_line_error(code: int, out: str, err: str, message: str) -> None:
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    assert err.startswith("posenc identify: error: ")
    assert message in err


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_file_is_one_line_and_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, contents, argv, message = HOSTILE[case]
    path = tmp_path / name
    path.write_bytes(contents())
    code, out, err = identify([str(path), *argv], capsys)
    assert_one_line_error(code, out, err, message)
    assert str(path) in err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX FIFOs and devices")
@pytest.mark.parametrize(
    ("make", "kind"),
    [("fifo", "a FIFO (named pipe)"), ("device", "a character device")],
)
def test_a_file_that_is_not_regular_is_refused_before_it_is_read(
    make: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "table.npy"
    if make == "fifo":
        os.mkfifo(path)  # opening it to read would wait for a writer forever
    else:
        path.symlink_to("/dev/zero")  # endless zeros
    code, out, err = identify([str(path)], capsys)
    assert_one_line_error(code, out, err, f"{path} is {kind}, not a regular file")


def test_npz_member_with_objects_does_not_block_another_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mixed.npz"
    np.savez(path, pos=TABLE, meta=np.array([{"a": 1}], dtype=object))
    code, out, err = identify([str(path), "--key", "pos", "--json"], capsys)
    assert (code, err) == (0, "")
    assert json.loads(out)["offset"] == 3
    # asked for, the object member is refused without being unpickled
    code, out, err = identify([str(path), "--key", "meta"], capsys)
    assert_one_line_error(code, out, err, "[meta] holds Python objects (dtype object)")


def test_max_bytes_refuses_an_honest_table_until_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pe.npy"
    np.save(path, TABLE)  # 4096 bytes
    code, out, err = identify([str(path), "--max-bytes", "4095"], capsys)
    assert_one_line_error(code, out, err, "(4,096 bytes), more than --max-bytes (4,095 bytes)")
    assert identify([str(path), "--max-bytes", "4096"], capsys)[0] == 0


@pytest.mark.parametrize(
    ("text", "value"),
    [("4096", 4096), ("8G", 8 * 2**30), ("1.5k", 1536), ("2 MiB", 2 * 2**20), ("1t", 2**40)],
)
def test_parse_size(text: str, value: int) -> None:
    from posenc.cli._common import parse_size

    assert parse_size(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x",
        "-1",
        "0",
        "8X",
        "nan",
        "inf",
        "1e400",
        "9" * 400,
        "9" * 400 + "P",
        "8192P",
        "9" * 5000,
    ],
)
def test_bad_max_bytes_is_one_line(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pe.npy"
    np.save(path, TABLE)
    assert main(["identify", str(path), "--max-bytes", text]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "--max-bytes" in err
    assert "a positive size in bytes, e.g. 4096, 512M or 8G" in err


def test_default_limit_is_a_quarter_of_memory() -> None:
    import os

    from posenc._io.sizes import default_max_bytes

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert default_max_bytes() == total // 4


@pytest.mark.parametrize(
    "array",
    [
        TABLE,
        np.asfortranarray(TABLE.astype(np.float64)),
        TABLE.astype(">f4"),
        TABLE.astype(np.float16),
        np.arange(12, dtype=np.int16).reshape(3, 4),
        np.zeros((0, 4), dtype=np.float32),
    ],
    ids=["float32", "fortran float64", "big-endian", "float16", "int16", "no rows"],
)
@pytest.mark.parametrize("suffix", [".npy", ".npz", ".npz stored"])
def test_readers_give_what_numpy_saved(array: np.ndarray, suffix: str, tmp_path: Path) -> None:
    if suffix == ".npy":
        path, key = tmp_path / "a.npy", None
        np.save(path, array)
    else:
        path, key = tmp_path / "a.npz", "x"
        save = np.savez if suffix == ".npz stored" else np.savez_compressed
        save(path, x=array, other=np.zeros(2))
    table = readers().read_table(path, key, max_bytes=2**20)
    assert table.name == key
    assert table.array.dtype == array.dtype
    assert table.array.shape == array.shape
    assert np.array_equal(table.array, array)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int64", "uint8"])
def test_safetensors_reader_gives_what_safetensors_saved(dtype: str, tmp_path: Path) -> None:
    pytest.importorskip("safetensors")
    from safetensors.numpy import save_file

    path = tmp_path / "m.safetensors"
    array = (TABLE * 100).astype(dtype)
    save_file({"a.weight": np.zeros((2, 3), np.float32), "pos": array}, str(path))
    table = readers().read_table(path, "pos", max_bytes=2**20)
    assert (table.name, table.array.dtype, table.tolerance) == ("pos", array.dtype, None)
    assert np.array_equal(table.array, array)


def test_safetensors_bfloat16_without_torch(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from safetensors.torch import save_file

    path = tmp_path / "m.safetensors"
    tensor = torch.from_numpy(TABLE).bfloat16()
    save_file({"pos": tensor}, str(path))
    table = readers().read_table(path, None, max_bytes=2**20)
    assert table.dtype == "bfloat16"
    assert table.tolerance == 2.0**-8
    assert np.array_equal(table.array, tensor.float().numpy())


def test_pt_with_a_pickled_object_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    torch.save({"pos": torch.from_numpy(TABLE), "extra": Path("not a tensor")}, path)
    code, out, err = identify([str(path)], capsys)
    assert_one_line_error(code, out, err, "holds Python objects other than tensors")


@pytest.mark.parametrize("case", ["empty", "truncated", "too big", "legacy too big"])
def test_hostile_pt_files(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    state = {"pos": torch.from_numpy(TABLE)}
    argv = [str(path)]
    if case == "empty":
        path.write_bytes(b"")
        message = "is empty"
    elif case == "truncated":
        torch.save(state, path)
        path.write_bytes(_truncated(path.read_bytes()))
        message = "is not a readable PyTorch file"
    elif case == "too big":
        torch.save(state, path)
        argv += ["--max-bytes", "4000"]
        message = "[pos] declares 64 x 16 float32 (4,096 bytes), more than --max-bytes"
    else:  # the legacy format cannot be memory-mapped: the whole file counts
        torch.save(state, path, _use_new_zipfile_serialization=False)
        argv += ["--max-bytes", "4000"]
        message = "is an old-format PyTorch file of"
    code, out, err = identify(argv, capsys)
    assert_one_line_error(code, out, err, message)


def _odd_tensors(torch: Any) -> dict[str, tuple[Any, str]]:
    """Tensors that are not a dense table, with the message each must give."""
    table = torch.from_numpy(TABLE)
    return {
        "sparse COO": (table.to_sparse(), "is a sparse tensor (layout sparse_coo)"),
        "sparse CSR": (table.to_sparse_csr(), "is a sparse tensor (layout sparse_csr)"),
        "sparse BSR": (table.to_sparse_bsr((2, 2)), "is a sparse tensor (layout sparse_bsr)"),
        "nested": (
            torch.nested.nested_tensor([table[:3], table[:5]]),
            "is a nested tensor (rows of different lengths)",
        ),
        "meta": (torch.empty(64, 16, device="meta"), "is on the meta device"),
        "complex": (table.to(torch.complex64), "must hold numbers, got dtype complex64"),
        "0-d": (torch.tensor(1.0), "must be a 2-D table (positions x channels), got shape ()"),
        "no rows": (table[:0].clone(), "has no rows: shape (0, 16)"),
    }


ODD_TENSORS = [
    *("sparse COO", "sparse CSR", "sparse BSR", "nested", "meta", "complex", "0-d", "no rows")
]


@pytest.mark.parametrize("case", ODD_TENSORS)
def test_pt_holding_a_tensor_that_is_not_a_dense_table(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sparse CSR/BSR support is in beta
        tensor, message = _odd_tensors(torch)[case]
        torch.save({"pos": tensor}, path)
    code, out, err = identify([str(path)], capsys)
    assert_one_line_error(code, out, err, message)
    assert f"{path} [pos]" in err


def test_pt_views_are_read_as_their_values(tmp_path: Path) -> None:
    """A strided, transposed or negated view holds its own values: read as they are."""
    torch = pytest.importorskip("torch")
    table = torch.from_numpy(TABLE)
    views = {
        "strided": torch.cat([table, table], dim=1)[:, ::2],
        "transposed": table.t().contiguous().t(),
        "negated": torch.complex(-table, table).conj().imag,  # the negative bit set
    }
    path = tmp_path / "model.pt"
    for name, view in views.items():
        torch.save({"pos": view}, path)
        read = readers().read_table(path, None, max_bytes=2**20).array
        assert np.array_equal(read, view.resolve_neg().numpy()), name


def test_pt_whose_containers_refer_to_themselves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dict that holds itself: each container is walked once (no endless recursion)."""
    torch = pytest.importorskip("torch")
    state: dict[str, Any] = {"pos": torch.from_numpy(TABLE)}
    state["self"] = state
    state["again"] = [state, (state,)]
    path = tmp_path / "model.pt"
    torch.save(state, path)
    table = readers().read_table(path, None, max_bytes=2**20)
    assert table.name == "pos"
    assert np.array_equal(table.array, TABLE)


def test_pt_legacy_format_and_bfloat16_are_read(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    tensor = torch.from_numpy(TABLE)
    torch.save({"a": {"pos": tensor.bfloat16()}}, path, _use_new_zipfile_serialization=False)
    table = readers().read_table(path, None, max_bytes=2**20)
    assert (table.name, table.dtype, table.tolerance) == ("a.pos", "bfloat16", 2.0**-8)
    assert np.array_equal(table.array, tensor.bfloat16().float().numpy())


def test_pt_without_torch_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"PK not read")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now fails
    code, out, err = identify([str(path)], capsys)
    assert_one_line_error(code, out, err, "reading .pt files needs PyTorch: pip install torch")
