"""``posenc plan`` on configs with many layers: time per run, 2^12 to 2^16 layers.

Run from the repository root::

    PYTHONPATH=src:. python -m benchmarks.plan [--quick]

Each row is one ``posenc plan --json CONFIG`` through :func:`posenc.cli.main` (in this process,
the output discarded), on a config of a SmolLM3-shaped model where every other layer has no
RoPE (``no_rope_layers``: one note per such layer) and on one whose ``layer_types`` gives every
layer its own type (one row per layer). Linear work shows as a time that doubles with the
layers (the ``x previous`` note). Full run: 2^12 .. 2^16 layers, 3 repeats; ``--quick``: 2^12
and 2^13, 1 repeat.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import Table, Timing, measure, run_alone
from posenc.cli import main

GROUP = "posenc plan"


def no_rope_config(layers: int) -> dict[str, Any]:
    """A SmolLM3-shaped config of ``layers`` layers, every other one without RoPE."""
    return {
        "model_type": "smollm3",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": layers,
        "no_rope_layers": [1, 0] * (layers // 2),
        "rope_theta": 10000.0,
    }


def distinct_types_config(layers: int) -> dict[str, Any]:
    """A config whose ``layer_types`` names every layer differently (one row per layer)."""
    return {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "layer_types": [f"type_{i}" for i in range(layers)],
        "rope_theta": 10000.0,
    }


def plan_once(path: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["plan", "--json", str(path)])
    if code != 0:
        raise RuntimeError(f"posenc plan {path} exited with {code}")


def run(table: Table, *, quick: bool = False) -> None:
    powers = (12, 13) if quick else (12, 13, 14, 15, 16)
    repeats = 1 if quick else 3
    builders = (("no-RoPE layers", no_rope_config), ("distinct layer_types", distinct_types_config))
    with tempfile.TemporaryDirectory() as folder:
        for label, build in builders:
            previous: Timing | None = None
            for power in powers:
                path = Path(folder) / f"{label.split()[0]}-{power}.json"
                path.write_text(json.dumps(build(2**power)))
                timing = measure(lambda p=path: plan_once(p), repeats=repeats, warmup=0)
                note = ""
                if previous is not None:
                    note = f"x previous {timing.median / previous.median:.2f}"
                table.add(GROUP, f"{label}, 2^{power} layers", timing, note=note)
                print(f"plan: {label}, 2^{power} layers: {1e3 * timing.median:.1f} ms")
                previous = timing


if __name__ == "__main__":
    run_alone(run, __doc__)
