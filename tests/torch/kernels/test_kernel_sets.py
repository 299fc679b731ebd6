"""torch.compile (Inductor) under a kernel set forced with ``ATEN_CPU_CAPABILITY``.

``ATEN_CPU_CAPABILITY=default`` or ``=avx2`` makes ATen use those kernels, and Inductor
generates its C++ for the same vector width. But Inductor's on-disk FX graph cache does not
key its entries by that width (torch 2.13): a graph compiled earlier under the machine's own
kernels (AVX-512 here, 16 float lanes) is loaded and its code recompiled for the forced
ISA. Under ``avx2`` the 16-lane loops store only the first 8 lanes (the rest of the output is
whatever the memory held: NaN, 1e24); under ``default`` the vector code meets a build without
the vector headers (``'at::vec' has not been declared``). Minimal reproducer, no posenc::

    f = lambda x: (x.to(torch.float64) * w).cos().to(torch.float32)   # w: float64 (3, 8)
    torch.compile(f, dynamic=True)(torch.randint(0, 3000, (2, 5, 3, 1)))
    # run once natively, then again with ATEN_CPU_CAPABILITY=avx2: wrong values

(any small float64 to float32 kernel does; ``_rotation`` below is the one these tests use).
``tests/conftest.py`` therefore turns the FX graph cache off whenever the variable is set, so
every graph is compiled for the kernels of the run. These tests prove it: the same compiled
rotation, first natively (which fills a fresh cache), then under the forced kernel sets, in
fresh processes sharing that cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[3]


def _rotation(q: torch.Tensor, ids: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """Multi-axis RoPE written out: float64 angles from (b, s, 3) coordinates, cos/sin
    rounded once to float32, half pairs rotated."""
    angles = (ids.to(torch.float64).unsqueeze(-1) * frequencies).sum(-2)  # (b, s, 8)
    cos = torch.cat([angles.cos(), angles.cos()], -1).to(torch.float32).unsqueeze(1)
    sin = torch.cat([angles.sin(), angles.sin()], -1).to(torch.float32).unsqueeze(1)
    rotated = torch.cat([-q[..., 8:], q[..., :8]], -1)
    return q * cos + rotated * sin


def test_inductor_rotation_equals_eager() -> None:
    """Inductor's code for the rotation equals eager, bit for bit, over changing lengths."""
    torch._dynamo.reset()
    generator = torch.Generator().manual_seed(0)
    frequencies = torch.rand(3, 8, generator=generator, dtype=torch.float64)
    compiled = torch.compile(_rotation, fullgraph=True, dynamic=True)
    for n in (5, 9, 14):
        q = torch.randn(2, 2, n, 16, generator=generator)
        ids = torch.randint(0, 3000, (2, n, 3), generator=generator)
        got, want = compiled(q, ids, frequencies), _rotation(q, ids, frequencies)
        # the same float64 and float32 operations in the same order: no rounding differs
        assert torch.equal(got, want), (n, float((got - want).abs().max()))


#: A fresh process: the suite's conftest (which sets the cache policy under a forced kernel set,
#: as in every pytest run), then the rotation test; no pytest start-up, no collection.
_PROCESS = """
import tests.conftest
from tests.torch.kernels.test_kernel_sets import test_inductor_rotation_equals_eager
test_inductor_rotation_equals_eager()
print("1 passed")
"""


def _run(capability: str | None, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    env.pop("ATEN_CPU_CAPABILITY", None)
    if capability is not None:
        env["ATEN_CPU_CAPABILITY"] = capability
    return subprocess.run(
        [sys.executable, "-c", _PROCESS],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.skipif(
    bool(os.environ.get("ATEN_CPU_CAPABILITY")),
    reason="starts its own processes under each kernel set: run once, by the native run",
)
def test_a_cache_filled_natively_serves_no_other_kernel_set(tmp_path: Path) -> None:
    """Native first (fills the cache), then ``avx2`` and ``default`` read the same cache (three
    compilations in fresh processes)."""
    native = torch.backends.cpu.get_cpu_capability()
    forced = (["avx2"] if native.startswith("AVX512") else []) + ["default"]
    first = _run(None, tmp_path / "inductor")
    assert "1 passed" in first.stdout, first.stdout[-3000:] + first.stderr[-3000:]
    failed = {}
    for capability in forced:
        done = _run(capability, tmp_path / "inductor")
        if "1 passed" not in done.stdout:
            failed[capability] = done.stdout[-1500:] + done.stderr[-1500:]
    assert not failed, "\n".join(f"ATEN_CPU_CAPABILITY={k}:\n{v}" for k, v in failed.items())
