"""The fast paths on a busy machine: ``python -m benchmarks --busy [--quick]``.

Each row is timed on a quiet machine and then beside a background process that keeps one core
busy (a pure-Python loop in a subprocess, started before the warm-up and stopped after the
rows), first with PyTorch's default intra-op threads and then with one thread. A row's figure
is its ratio to ``x.clone()`` of its input measured in the same conditions: the row and the
clone are called alternately, ``repeats`` times each after a warm-up, and the ratio is the
ratio of their medians; the spread column gives the row's (max - min) / median.

Rows (full run; ``--quick`` uses small shapes, where call overheads dominate):

- RoPE ``RotaryEmbedding(64).rotate(q)``, q = (8, 16, 2048, 64) float32, half and interleaved
  pairs (targets: busy <= 1.6, quiet half <= 1.3);
- ``SinusoidalPositionalEncoding`` eval add, x = (8, 2048, 1024), float32 and bfloat16 (busy
  <= 1.3; quiet bfloat16 <= 1.05), next to PyTorch's own ``x + table`` (the floor for an add);
- training, dropout p = 0.1, forward (busy <= 3.2; quiet <= 2.5).

Not run by ``--smoke``: the busy rows take about a minute.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: The background load: a pure-Python loop that also ends when its parent is gone.
#: The background load: a pure-Python loop that ends when its parent (the pid it is given as
#: its argument) is gone, even if that happened before it started.
BUSY_LOOP = (
    "import os, sys\n"
    "parent = int(sys.argv[1])\n"
    "while os.getppid() == parent:\n"
    "    for _ in range(200_000):\n"
    "        pass\n"
)

#: (row, busy target, quiet target) as ratios to clone; None: no target.
TARGETS: dict[str, tuple[float | None, float | None]] = {
    "RoPE half pairs, rotate(q)": (1.6, 1.3),
    "RoPE interleaved pairs, rotate(q)": (1.6, None),
    "eval add float32": (1.3, None),
    "eval add bfloat16": (1.3, 1.05),
    "train dropout p=0.1, fwd": (3.2, 2.5),
}


@contextmanager
def one_core_busy() -> Iterator[None]:
    """Keep one core busy while the block runs (the process is stopped however it ends)."""
    process = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(os.getpid())])
    try:
        time.sleep(0.3)  # let it reach its loop
        yield
    finally:
        process.kill()
        process.wait()


def ratio(row: Callable[[], Any], clone: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median time of ``row`` over median time of ``clone``, timed alternately, and the row's
    spread ((max - min) / median)."""
    for _ in range(2):
        row(), clone()
    rows, clones = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        row()
        rows.append(time.perf_counter() - start)
        start = time.perf_counter()
        clone()
        clones.append(time.perf_counter() - start)
    median = statistics.median(rows)
    return median / statistics.median(clones), (max(rows) - min(rows)) / median


def rows(quick: bool) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(name, call, clone of its input) for each row."""
    import torch

    from posenc.torch import RotaryEmbedding, SinusoidalPositionalEncoding

    torch.manual_seed(0)
    q_shape, x_shape = (
        ((2, 4, 256, 64), (4, 256, 256)) if quick else ((8, 16, 2048, 64), (8, 2048, 1024))
    )
    q = torch.randn(*q_shape)
    x = torch.randn(*x_shape)
    x16 = x.to(torch.bfloat16)
    d, s = x_shape[2], x_shape[1]
    half = RotaryEmbedding(q_shape[-1], pairs="half", max_len=q_shape[2])
    interleaved = RotaryEmbedding(q_shape[-1], pairs="interleaved", max_len=q_shape[2])
    add = SinusoidalPositionalEncoding(d, dropout=0.1, max_len=s).eval()
    add16 = SinusoidalPositionalEncoding(d, dropout=0.1, max_len=s, dtype=torch.bfloat16).eval()
    table16 = add16.encoding(s)
    train = SinusoidalPositionalEncoding(d, dropout=0.1, max_len=s).train()
    x_grad = x.clone().requires_grad_()

    def inference(fn: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            with torch.inference_mode():
                return fn()

        return call

    return [
        ("RoPE half pairs, rotate(q)", lambda: half.rotate(q), q.clone),
        ("RoPE interleaved pairs, rotate(q)", lambda: interleaved.rotate(q), q.clone),
        ("eval add float32", inference(lambda: add(x)), x.clone),
        ("eval add bfloat16", inference(lambda: add16(x16)), x16.clone),
        ("PyTorch x + table, bfloat16 (reference)", inference(lambda: x16 + table16), x16.clone),
        ("train dropout p=0.1, fwd", lambda: train(x_grad), x.clone),
    ]


def run(*, quick: bool) -> str:
    """Measure every row quiet and busy, default threads and one thread; return the table."""
    import torch

    repeats = 3 if quick else 7
    default = torch.get_num_threads()
    measured: dict[tuple[str, int, str], tuple[float, float]] = {}
    table = rows(quick)
    try:
        for threads in dict.fromkeys((default, 1)):
            torch.set_num_threads(threads)
            for load in ("quiet", "busy"):
                print(f"[busy] {threads} thread(s), {load} ...", flush=True)
                if load == "busy":
                    with one_core_busy():
                        for name, call, clone in table:
                            measured[name, threads, load] = ratio(call, clone, repeats)
                else:
                    for name, call, clone in table:
                        measured[name, threads, load] = ratio(call, clone, repeats)
    finally:
        torch.set_num_threads(default)
    head = "| row | threads | quiet x clone | busy x clone | busy / quiet | targets (busy, quiet) |"
    lines = [head, "|---|---|---|---|---|---|"]
    for name, _, _ in table:
        busy_target, quiet_target = TARGETS.get(name, (None, None))
        targets = ", ".join(
            f"{label} <= {value}"
            for label, value in (("busy", busy_target), ("quiet", quiet_target))
            if value is not None
        )
        for threads in dict.fromkeys((default, 1)):
            quiet, quiet_spread = measured[name, threads, "quiet"]
            busy, busy_spread = measured[name, threads, "busy"]
            lines.append(
                f"| {name} | {threads} | {quiet:.2f} (±{quiet_spread:.0%}) | "
                f"{busy:.2f} (±{busy_spread:.0%}) | {busy / quiet:.2f} | "
                f"{targets if threads == default else ''} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv[1:]))
