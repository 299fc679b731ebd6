"""The ``posenc`` command stays bounded: peak memory of a subprocess, whatever it is asked.

Each command runs under a small Python wrapper that reports
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``, the peak resident memory of its one child.
The wrapper is needed: on Linux a process started directly from the test session inherits the
session's own peak into its ``ru_maxrss`` (exec records the peak of the memory it replaces).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from numpy.lib import format as npy_format

GIB = 2**30
MIB = 2**20

# argv: RSS_FILE LIMIT_S COMMAND...; runs COMMAND, writes its peak memory to RSS_FILE.
_WRAPPER = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[3:], timeout=float(sys.argv[2]))
with open(sys.argv[1], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


class Finished(NamedTuple):
    code: int
    out: str
    err: str
    peak_bytes: int


def run_posenc(argv: list[str], folder: Path, *, limit_s: float = 300.0) -> Finished:
    """Run ``python -m posenc ARGV`` in ``folder``; its exit code, output and peak memory."""
    rss_file = folder / "maxrss.txt"
    command = [sys.executable, "-c", _WRAPPER, str(rss_file), str(limit_s)]
    result = subprocess.run(
        [*command, sys.executable, "-m", "posenc", *argv],
        capture_output=True,
        text=True,
        cwd=folder,
    )
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    peak = int(rss_file.read_text()) * scale
    return Finished(result.returncode, result.stdout, result.stderr, peak)


@pytest.mark.slow
def test_inspect_a_billion_positions_in_bounded_memory(tmp_path: Path) -> None:
    result = run_posenc(["inspect", "--length", "1000000000", "--shift", "1", "999999"], tmp_path)
    assert (result.code, result.err) == (0, "")
    assert result.peak_bytes < GIB
    assert "over positions 0 .. 999999999" in result.out
    assert "(sampled: 8,192 positions: the first 2,048, the last 2,048" in result.out
    assert "8192 of 8192 sampled" in result.out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["heatmap", "sinusoids", "similarity"])
def test_plot_a_billion_positions_in_bounded_memory(kind: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = run_posenc(["plot", kind, "--length", "1000000000", "--out", "f.png"], tmp_path)
    assert result.code == 0, result.err
    assert result.peak_bytes < GIB
    assert (tmp_path / "f.png").read_bytes().startswith(b"\x89PNG")


@pytest.fixture(scope="module")
def zip_bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A .npz whose one member, 200 MB of zeros, deflates to about 200 KB."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.npz"
    shape = (50_000, 1_000)  # float32: 200 MB
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive,
        archive.open("pos.npy", "w", force_zip64=True) as member,
    ):
        npy_format.write_array_header_1_0(
            member, {"descr": "<f4", "fortran_order": False, "shape": shape}
        )
        zeros = bytes(MIB)
        for _ in range(200 * 1_000_000 // MIB):
            member.write(zeros)
        member.write(bytes(200 * 1_000_000 % MIB))
    assert path.stat().st_size < 2 * MIB
    return path


def test_zip_bomb_costs_no_more_than_the_limit(zip_bomb: Path, tmp_path: Path) -> None:
    result = run_posenc(["identify", str(zip_bomb), "--max-bytes", "10M"], tmp_path)
    assert result.code == 2
    assert "Traceback" not in result.err
    assert result.err.count("\n") == 1, result.err
    assert "[pos] declares 50000 x 1000 float32 (190.7 MiB), more than --max-bytes" in result.err
    assert result.peak_bytes < 100 * MIB  # the member would be 200 MB


def test_npz_reads_only_the_member_asked_for(zip_bomb: Path, tmp_path: Path) -> None:
    """Another member, small, is read without inflating the bomb next to it."""
    import posenc

    path = tmp_path / "two.npz"
    with zipfile.ZipFile(zip_bomb) as source, zipfile.ZipFile(path, "w") as archive:
        archive.writestr(source.getinfo("pos.npy"), source.read("pos.npy"))
        with archive.open("table.npy", "w") as member:
            np.save(member, posenc.sinusoidal(np.arange(5, 69), 16))
    result = run_posenc(["identify", str(path), "--key", "table"], tmp_path)
    assert result.code == 0, result.err
    assert "[table]: 64 x 16 float32" in result.out
    assert result.peak_bytes < 100 * MIB
