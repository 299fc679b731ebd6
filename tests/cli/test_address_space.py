"""No ``posenc`` command's memory grows with a size declared inside an input file.

Each command runs in a subprocess whose address space is limited (``RLIMIT_AS``) to
:data:`LIMIT`, far below the default ``--max-bytes`` (a quarter of physical memory), on small
files that declare large sizes: a ``config.json`` of 40 bytes, ``.npz`` members and ``.pt``
tensors that declare a gigabyte or more in a few kilobytes. Each must end with exit code 2 and
one line naming the file, never ``MemoryError`` (``out of memory``) or a crash; an honest small
input must succeed under the same limit.

What the limit leaves room for was measured first (``VmPeak`` of ``/proc/self/status`` at exit,
2-core Linux): about 150 MiB for ``posenc table`` and ``posenc identify`` on a ``.npy``, 650 MiB
for ``posenc identify`` on a ``.pt`` (PyTorch's import and threads).
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.lib import format as npy_format

import posenc

resource = pytest.importorskip("resource")  # POSIX only

pytestmark = pytest.mark.slow  # each test: a fresh posenc process under an address-space limit

GIB = 2**30
LIMIT = 3 * GIB // 2  # 1.5 GiB of address space

_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
sys.argv = ["posenc", *sys.argv[2:]]
from posenc.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_limited(argv: list[str], folder: Path) -> tuple[int, str, str]:
    """``posenc ARGV`` in a subprocess limited to :data:`LIMIT` bytes of address space."""
    source = str(Path(posenc.__file__).parents[1])  # the posenc this session imports
    path = os.pathsep.join([source, *filter(None, [os.environ.get("PYTHONPATH")])])
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(LIMIT), *argv],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=120,
    )
    return result.returncode, result.stdout, result.stderr


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("these tests need PyTorch under CI", pytrace=False)
        pytest.skip("PyTorch is not installed")
    return torch


def _assert_refused(result: tuple[int, str, str], *words: str) -> None:
    code, _, err = result
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert "out of memory" not in err, err
    assert "Traceback" not in err, err
    for word in words:
        assert word in err, err


# --------------------------------------------------------------------------- posenc plan


def test_plan_reads_a_small_config_under_the_limit(tmp_path: Path) -> None:
    """A config of 80 bytes with a large --max-bytes: only what the file holds is allocated."""
    config = {"model_type": "llama", "head_dim": 8, "num_hidden_layers": 2, "rope_theta": 1e4}
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = run_limited(["plan", "config.json", "--max-bytes", "8G"], tmp_path)
    assert (code, err) == (0, ""), err
    assert "2 layers" in out


def test_plan_layer_types_beyond_the_layer_limit(tmp_path: Path) -> None:
    config = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": 1e4}
    config["layer_types"] = ["full_attention"] * 1_000_000  # 17 MB
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = run_limited(["plan", "config.json"], tmp_path)
    _assert_refused(result, "layer_types has 1000000 entries, more than the 65536 layers")


# --------------------------------------------------------------------------- posenc identify


def _npz_lying_about_its_member(path: Path, shape: tuple[int, int]) -> None:
    """A .npz whose member declares ``shape`` float32, in its .npy header and in the zip's
    central directory, but holds 64 bytes of data."""
    buffer = io.BytesIO()
    header = {"descr": "<f4", "fortran_order": False, "shape": shape}
    npy_format.write_array_header_1_0(buffer, header)
    member = buffer.getvalue() + bytes(64)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pos.npy", member)
    data = bytearray(path.read_bytes())
    entry = data.index(b"PK\x01\x02")  # the central directory's record of the member
    declared = len(member) - 64 + 4 * shape[0] * shape[1]
    data[entry + 24 : entry + 28] = struct.pack("<I", declared)  # its uncompressed size
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as archive:
        assert archive.getinfo("pos.npy").file_size == declared


def test_npz_member_declaring_gigabytes(tmp_path: Path) -> None:
    _npz_lying_about_its_member(tmp_path / "t.npz", (2**15, 2**14))  # 2 GiB
    result = run_limited(["identify", "t.npz"], tmp_path)
    _assert_refused(result, "t.npz [pos] is truncated")


def test_pt_expanded_tensor(tmp_path: Path) -> None:
    """1.5 KB on disk, a 1 GiB table once materialised."""
    torch = _torch()
    torch.save(torch.zeros(1).expand(2**14, 2**14), tmp_path / "t.pt")
    assert (tmp_path / "t.pt").stat().st_size < 4096
    result = run_limited(["identify", "t.pt"], tmp_path)
    _assert_refused(result, "t.pt [tensor] declares 16384 x 16384 float32 (1 GiB)", "4 bytes")


def test_pt_view_of_a_storage_larger_than_max_bytes(tmp_path: Path) -> None:
    """A small table cut from a larger storage: the storage counts against --max-bytes."""
    torch = _torch()
    big = torch.zeros(1 << 20)
    torch.save(big[:1024].view(64, 16), tmp_path / "t.pt")
    result = run_limited(["identify", "t.pt", "--max-bytes", "1M"], tmp_path)
    _assert_refused(result, "t.pt [tensor] is a view of a storage of 4 MiB, more than --max-bytes")


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".safetensors", ".pt"])
def test_honest_tables_are_read_under_the_limit(suffix: str, tmp_path: Path) -> None:
    table = posenc.sinusoidal(np.arange(3, 67), 16)
    path = tmp_path / f"t{suffix}"
    if suffix == ".npy":
        np.save(path, table)
    elif suffix == ".npz":
        np.savez_compressed(path, pos=table)
    elif suffix == ".safetensors":
        header = json.dumps({"pos": {"dtype": "F32", "shape": [64, 16], "data_offsets": [0, 4096]}})
        path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + table.tobytes())
    else:
        torch = _torch()
        buffer = io.BytesIO()
        torch.save({"pos": torch.from_numpy(table)}, buffer)
        path.write_bytes(buffer.getvalue())
    code, out, err = run_limited(["identify", path.name], tmp_path)
    assert (code, err) == (0, ""), err
    assert "64 x 16 float32" in out


def test_table_of_many_positions_under_the_limit(tmp_path: Path) -> None:
    """``posenc table`` writes 10^6 x 64 float32 (244 MiB) in blocks."""
    code, _, err = run_limited(
        ["table", "--length", "1000000", "--d-model", "64", "--out", "t.npy", "--quiet"], tmp_path
    )
    assert (code, err) == (0, "wrote 1000000 x 64 float32 (npy) to t.npy\n"), err
    assert np.load(tmp_path / "t.npy", mmap_mode="r").shape == (1_000_000, 64)


def test_npy_and_safetensors_declaring_gigabytes(tmp_path: Path) -> None:
    """Headers that declare 2 GiB over 64 bytes of data: refused before anything is read."""
    header = {"descr": "<f4", "fortran_order": False, "shape": (2**15, 2**14)}
    buffer = io.BytesIO()
    npy_format.write_array_header_1_0(buffer, header)
    (tmp_path / "t.npy").write_bytes(buffer.getvalue() + bytes(64))
    _assert_refused(run_limited(["identify", "t.npy"], tmp_path), "t.npy is truncated")
    entry = {"dtype": "F32", "shape": [2**15, 2**14], "data_offsets": [0, 2**31]}
    text = json.dumps({"pos": entry}).encode()
    (tmp_path / "t.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + bytes(64))
    result = run_limited(["identify", "t.safetensors"], tmp_path)
    _assert_refused(result, "t.safetensors [pos] is truncated")


# --------------------------------------------------------------------------- lengths


def test_plot_a_length_it_does_not_materialise(tmp_path: Path) -> None:
    """A heatmap of 10^12 positions (a table of 2 PB at d_model 512) in bounded memory: it
    draws 2048 sampled rows. (``inspect`` at 10^9 positions: tests/cli/test_bounds.py.)"""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("this test needs matplotlib under CI", pytrace=False)
        pytest.skip("matplotlib is not installed")
    argv = ["plot", "heatmap", "--length", str(10**12), "--d-model", "512", "--out", "h.png"]
    code, _, err = run_limited(argv, tmp_path)
    assert code == 0, err
    assert (tmp_path / "h.png").read_bytes().startswith(b"\x89PNG")
