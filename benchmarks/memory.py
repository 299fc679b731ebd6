"""Memory: peak memory of a 10^6-position request next to the size of its result, and the cache.

Run from the repository root::

    PYTHONPATH=src:. python -m benchmarks.memory [--quick]

Full run: 10^6 positions, d_model = 64 (a float32 result of 244 MiB), decoding 10^5 steps;
``--quick``: 10^5 positions and 10^4 steps.

How peak memory is measured:

- NumPy: ``tracemalloc``, in this process. NumPy reports its array buffers to tracemalloc, so
  the traced peak during the call is the bytes of every array alive at the worst moment
  (result plus temporaries), independent of what the allocator keeps cached.
- torch: torch's CPU allocator does not report to tracemalloc, so each torch measurement runs
  in a fresh Python subprocess and reads the resident set size from ``/proc/self/status``:
  after imports, inputs and a small warm-up call, the peak (``VmHWM``) is reset by writing
  ``5`` to ``/proc/self/clear_refs``, the call is made, and "peak" is ``VmHWM`` minus the
  resident size just before the call: every page touched by the result and the temporaries
  at the worst moment (inputs made before the reset are not counted). Where ``/proc`` is
  missing (not Linux) ``resource.getrusage`` peak RSS is used instead, which cannot be reset,
  so the figure includes the start-up peak when that was larger (noted in the output).
- The module's cache (``SinusoidalPositionalEncoding.pe``) is inspected directly: its rows
  after a short sequence and after a far decoding jump (nothing proportional to a length never
  asked for), and how often it is rebuilt while a sequence grows one token at a time
  (geometric growth: about log2(length) rebuilds and a bounded total of rows computed).

Results go into the combined report as a separate table (a note), not as timing rows.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import posenc
from benchmarks.harness import Table, run_alone

MiB = float(1 << 20)
D_MODEL = 64

# The subprocess side: RSS of this process in bytes, and a reset of its peak.
_CHILD_PRELUDE = textwrap.dedent(
    """
    import json, resource, sys

    def status(key):
        try:
            with open("/proc/self/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith(key + ":"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return None

    def reset_peak():
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def max_rss():
        scale = 1 if sys.platform == "darwin" else 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale

    import numpy as np
    import torch
    import posenc
    from posenc.torch import SinusoidalPositionalEncoding, sinusoidal
    """
)

_CHILD_MEASURE = textwrap.dedent(
    """
    reset = reset_peak()
    before = status("VmRSS")
    proc = before is not None
    if not proc:
        before = max_rss()
    result = MEASURE()
    peak = status("VmHWM") if proc else max_rss()
    print(json.dumps({
        "peak": peak - before,
        "result": result.numel() * result.element_size(),
        "exact_peak": proc and reset,
    }))
    """
)


def _child_env() -> dict[str, str]:
    """The environment of a subprocess that imports posenc and benchmarks from here."""
    src = str(Path(posenc.__file__).resolve().parents[1])
    root = str(Path(__file__).resolve().parents[1])
    paths = [src, root, os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def torch_peak(setup: str, measure: str) -> dict[str, Any]:
    """Run ``setup`` then ``MEASURE = lambda: <measure>`` in a fresh interpreter (see above)."""
    code = _CHILD_PRELUDE + textwrap.dedent(setup) + f"\nMEASURE = lambda: {measure}\n"
    code += _CHILD_MEASURE
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=_child_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"memory subprocess failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def torch_peaks(jobs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """:func:`torch_peak` of each ``(setup, measure)``, in order, two processes at a time: each
    measures its own peak, so running side by side changes no number (call it where nothing is
    being timed)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda job: torch_peak(*job), jobs))


def numpy_peak(fn: Callable[[], np.ndarray]) -> dict[str, Any]:
    """Traced peak bytes of ``fn()`` (tracemalloc) and the bytes of its result."""
    fn()  # warm-up outside the trace
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    return {"peak": peak, "result": result.nbytes, "exact_peak": True}


def _row(name: str, measured: dict[str, Any], note: str = "") -> str:
    peak, result = measured["peak"], measured["result"]
    if not measured.get("exact_peak", True):
        note = (note + "; " if note else "") + "peak RSS could not be reset (includes start-up)"
    ratio = peak / result if result else float("nan")
    return f"| {name} | {result / MiB:.1f} | {peak / MiB:.1f} | {ratio:.2f} | {note} |"


def cache_behaviour(steps: int) -> list[str]:
    """Lines on the module's cache: rows held, and rebuilds while decoding ``steps`` tokens."""
    import torch

    from posenc.torch import SinusoidalPositionalEncoding

    def rows(module: Any) -> int:
        pe = getattr(module, "pe", None)
        return int(pe.shape[0]) if isinstance(pe, torch.Tensor) else 0

    lines = []
    m = SinusoidalPositionalEncoding(D_MODEL)
    lines.append(f"- constructed without max_len: the cache holds {rows(m)} rows")
    m(torch.zeros(2, 128, D_MODEL))
    held = rows(m)
    lines.append(f"- after forward on a (2, 128, {D_MODEL}) input: {held} rows (<= 256)")
    m(torch.zeros(1, 1, D_MODEL), offset=10**6)
    what = "unchanged: the far position is computed on the fly" if rows(m) == held else "grew"
    lines.append(f"- after one decoding step at offset 10^6: {rows(m)} rows ({what})")
    m = SinusoidalPositionalEncoding(D_MODEL)
    token = torch.zeros(1, 1, D_MODEL)
    rebuilds, built, last = 0, 0, (0, 0)
    for step in range(steps):
        m(token, offset=step)
        now = (m.pe.data_ptr(), rows(m))
        if now != last:
            rebuilds, built, last = rebuilds + 1, built + now[1], now
    lines.append(
        f"- decoding {steps} tokens one at a time (offset 0 .. {steps - 1}): {rebuilds} cache "
        f"rebuilds, {built} rows computed in all ({built / steps:.2f} x the length), final "
        f"cache {rows(m)} rows ({rows(m) / steps:.2f} x the length): geometric growth"
    )
    return lines


def run(table: Table, *, quick: bool) -> None:
    """Add the memory report to ``table`` as a note (see the module docstring)."""
    n = 10**5 if quick else 10**6
    steps = 10**4 if quick else 10**5
    label = "10^5" if quick else "10^6"
    lines = [
        f"Memory, {label} positions x d_model {D_MODEL} (float32 results); peak = extra bytes "
        "at the worst moment of the call (NumPy: tracemalloc; torch: peak RSS in a fresh "
        "process), see benchmarks/memory.py",
        "",
        "| request | result MiB | peak MiB | peak / result | note |",
        "|---|---|---|---|---|",
    ]
    rng = np.random.default_rng(0)
    scattered = rng.integers(0, 10 * n, size=n)
    lines.append(
        _row(
            f"NumPy posenc.sinusoidal({label}, {D_MODEL})",
            numpy_peak(lambda: posenc.sinusoidal(n, D_MODEL)),
        )
    )
    lines.append(
        _row(
            f"NumPy posenc.sinusoidal(<{label} scattered positions>, {D_MODEL})",
            numpy_peak(lambda: posenc.sinusoidal(scattered, D_MODEL)),
        )
    )
    lines.append(
        _row(
            f"NumPy posenc.sinusoidal({label}, {D_MODEL}, dtype=float64)",
            numpy_peak(lambda: posenc.sinusoidal(n, D_MODEL, dtype=np.float64)),
            "direct float64 build",
        )
    )
    try:
        import torch  # noqa: F401
    except ImportError:
        print("memory: torch is not installed; torch measurements skipped")
        table.note("\n".join(lines))
        return
    warm = "sinusoidal(1000, 64); SinusoidalPositionalEncoding(64)(torch.zeros(1, 1000, 64))\n"
    cases = [
        (f"posenc.torch.sinusoidal({label}, {D_MODEL})", warm, f"sinusoidal({n}, {D_MODEL})", ""),
        (
            f"module.encoding({label}) (builds the cache)",
            warm + f"m = SinusoidalPositionalEncoding({D_MODEL})\n",
            f"m.encoding({n})",
            "result is the cache itself",
        ),
        (
            f"module forward, x = (1, {label}, {D_MODEL})",
            warm
            + f"m = SinusoidalPositionalEncoding({D_MODEL})\nx = torch.randn(1, {n}, {D_MODEL})\n",
            "m(x)",
            "output + the cache it builds (x made before)",
        ),
        (
            "tutorial recipe in float64, then cast (reference)",
            warm + "from benchmarks.tables import float64_then_cast\n",
            f"float64_then_cast({n}, {D_MODEL}, torch)",
            "",
        ),
    ]
    if quick:  # each case is a fresh interpreter (~2 s): keep the smoke test short
        cases = cases[::2]
    for name, setup, measure, note in cases:
        lines.append(_row(name, torch_peak(setup, measure), note))
    lines += ["", "Module cache (SinusoidalPositionalEncoding, no max_len):", ""]
    lines += cache_behaviour(steps)
    table.note("\n".join(lines))


if __name__ == "__main__":
    run_alone(run, __doc__)
