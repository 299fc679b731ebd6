"""``posenc audit`` on a large GGUF file: a cold process, without torch.

Run from the repository root::

    PYTHONPATH=src:. python -m benchmarks.audit [--quick]

Writes, with the ``gguf`` package's writer, a Llama 3.1-shaped GGUF file (the metadata
llama.cpp's converter writes, a tokenizer of 128,256 strings, ``rope_freqs``, and 145 float32
weight tensors of zeros) of at least 1 GiB (``--quick``: 64 MiB) beside its ``config.json`` in
a temporary folder, then times ``python -m posenc audit config.json model.gguf`` from a new
process each time (interpreter start and imports included), 5 repeats (``--quick``: 1). The
audit reads the metadata and the rope tensor only, so its time does not grow with the file.
Each run also checks that torch was not imported. Target: under 2 s on a 2-core machine.

Then the error table the audit's verdicts rest on: per rope type (default, linear, llama3,
YaRN; head_dim 128), how far four common pipelines are from the exact table at the 1024
positions below 32K, 128K, 512K and 1M (``--quick``: 64): float32 angles, bfloat16 tables,
float16 tables and bfloat16 positions. A full run (not ``--quick``) also draws that table to
docs/figures/pipeline-errors.png (matplotlib; written atomically), the figure
docs/precision.md shows.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gguf  # the writer of the file (a missing package skips the section)
import numpy as np

from benchmarks.harness import Table, Timing, run_alone

GROUP = "posenc audit"
ROOT = Path(__file__).resolve().parents[1]

CONFIG: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 16,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}

#: What each run executes: the command's main, then whether torch was imported.
_SCRIPT = (
    "import sys, posenc.cli; code = posenc.cli.main(['audit', sys.argv[1], sys.argv[2]]); "
    "sys.exit(code if 'torch' not in sys.modules else 99)"
)


def llama3_factors() -> np.ndarray:  # type: ignore[type-arg]
    """The ``rope_freqs`` llama.cpp's converter writes for :data:`CONFIG`."""
    scaling = CONFIG["rope_scaling"]
    dim = CONFIG["hidden_size"] // CONFIG["num_attention_heads"]
    freqs = CONFIG["rope_theta"] ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    wavelength = 2 * np.pi / freqs
    old = scaling["original_max_position_embeddings"]
    smooth = (old / wavelength - scaling["low_freq_factor"]) / (
        scaling["high_freq_factor"] - scaling["low_freq_factor"]
    )
    factors = 1 / ((1 - smooth) / scaling["factor"] + smooth)
    factors = np.where(wavelength < old / scaling["high_freq_factor"], 1.0, factors)
    factors = np.where(wavelength > old / scaling["low_freq_factor"], scaling["factor"], factors)
    return factors.astype(np.float32)


def write_model(folder: Path, total_bytes: int) -> Path:
    """``folder/model.gguf`` of at least ``total_bytes`` (weights of zeros, read from a sparse
    file) and ``folder/config.json``."""
    (folder / "config.json").write_text(json.dumps(CONFIG))
    path = folder / "model.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(CONFIG["num_hidden_layers"])
    writer.add_context_length(CONFIG["max_position_embeddings"])
    writer.add_embedding_length(CONFIG["hidden_size"])
    writer.add_head_count(CONFIG["num_attention_heads"])
    writer.add_head_count_kv(CONFIG["num_key_value_heads"])
    writer.add_rope_dimension_count(128)
    writer.add_rope_freq_base(CONFIG["rope_theta"])
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"token{i}" for i in range(128256)])
    writer.add_tensor("rope_freqs.weight", llama3_factors())
    tensors = 145
    rows = max(1, total_bytes // (tensors * 4 * 1024) + 1)
    zeros = folder / "zeros.bin"
    with zeros.open("wb") as file:
        file.truncate(rows * 1024 * 4)
    weight = np.memmap(zeros, dtype=np.float32, mode="r", shape=(rows, 1024))
    for i in range(tensors):
        writer.add_tensor(f"blk.{i // 9}.w{i % 9}.weight", weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    zeros.unlink()
    return path


def audit_cold(folder: Path, path: Path) -> float:
    """Seconds of one ``posenc audit`` in a new process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(folder / "config.json"), str(path)],
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if done.returncode == 99:
        raise RuntimeError("posenc audit imported torch")
    if done.returncode != 0:
        raise RuntimeError(f"posenc audit exited with {done.returncode}: {done.stderr.strip()}")
    return elapsed


#: The rope types of the error table: a config each (head_dim 128).
ERROR_CONFIGS: dict[str, dict[str, Any]] = {
    "default (base 10000)": {"model_type": "llama", "head_dim": 128, "rope_theta": 10000.0},
    "linear x8 (Gemma 3 global)": {
        "model_type": "llama",
        "head_dim": 128,
        "rope_theta": 1000000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    },
    "llama3 (Llama 3.1)": {**CONFIG, "num_attention_heads": 32},
    "yarn x4 (Qwen2.5)": {
        "model_type": "qwen2",
        "head_dim": 128,
        "rope_theta": 1000000.0,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        },
    },
}
#: The lengths of the error table: positions just below each.
ERROR_LENGTHS = (2**15, 2**17, 2**19, 2**20)


def _bfloat16(values: Any) -> Any:
    """Round float64 values to the nearest bfloat16 (ties to even), float64 out."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return rounded.view(np.float32).astype(np.float64)


def pipeline_errors(config: dict[str, Any], length: int, rows: int) -> dict[str, float]:
    """The largest error against the exact table at the ``rows`` positions below ``length`` of
    four common pipelines: float32 angles, bfloat16 tables, float16 tables, bfloat16
    positions (cos and sin, every channel)."""
    from posenc import rope_plan

    layer = rope_plan(config).layer()
    omega, attention = layer.frequencies_at(None)
    positions = np.arange(length - rows, length, dtype=np.float64)
    theta = positions[:, None] * omega
    exact = [np.cos(theta) * attention, np.sin(theta) * attention]
    theta32 = positions.astype(np.float32)[:, None] * omega.astype(np.float32)
    att32 = np.float32(attention)
    theta_bf16 = _bfloat16(positions)[:, None] * omega
    made = {
        "float32 angles": [np.cos(theta32) * att32, np.sin(theta32) * att32],
        "bfloat16 tables": [_bfloat16(t) for t in exact],
        "float16 tables": [t.astype(np.float16) for t in exact],
        "bfloat16 positions": [np.cos(theta_bf16) * attention, np.sin(theta_bf16) * attention],
    }
    worst = {}
    for name, tables in made.items():
        pairs = zip(tables, exact, strict=True)
        worst[name] = max(float(np.abs(np.asarray(m, np.float64) - e).max()) for m, e in pairs)
    return worst


#: The pipelines of the error table, in its column order.
PIPELINES = ("float32 angles", "bfloat16 tables", "float16 tables", "bfloat16 positions")
#: The figure of the error table that docs/precision.md shows.
FIGURE = ROOT / "docs" / "figures" / "pipeline-errors.png"


@functools.lru_cache(maxsize=4)
def error_values(rows: int) -> dict[str, dict[int, dict[str, float]]]:
    """:func:`pipeline_errors` of every rope type and length: ``values[label][length][name]``
    (cached: do not modify)."""
    return {
        label: {length: pipeline_errors(config, length, rows) for length in ERROR_LENGTHS}
        for label, config in ERROR_CONFIGS.items()
    }


def error_table(rows: int) -> str:
    """The markdown table of :func:`pipeline_errors` for every rope type and length."""
    header = "| rope type | positions below | " + " | ".join(PIPELINES) + " |"
    lines = [header, "|---|---|" + "---|" * len(PIPELINES)]
    for label, by_length in error_values(rows).items():
        for length, errors in by_length.items():
            cells = " | ".join(f"{errors[n]:.1e}" for n in PIPELINES)
            lines.append(f"| {label} | {length:,} | {cells} |")
    return "\n".join(lines)


def error_figure(rows: int) -> Any:
    """The error table drawn: one panel per rope type, the length on the x axis (log 2), the
    largest error on a log y axis, one line per pipeline (a matplotlib ``Figure``, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 6.4), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    values = error_values(rows)
    axes = fig.subplots(2, 2, sharex=True, sharey=True).ravel()
    ticks = [f"{n // 2**10:,}K" if n < 2**20 else f"{n // 2**20}M" for n in ERROR_LENGTHS]
    for ax, (label, by_length) in zip(axes, values.items(), strict=True):
        for name, marker in zip(PIPELINES, "osD^", strict=True):
            errors = [by_length[n][name] for n in ERROR_LENGTHS]
            ax.plot(ERROR_LENGTHS, errors, marker=marker, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ERROR_LENGTHS, ticks)
        ax.set_title(label, fontsize="medium")
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes[2:]:
        ax.set_xlabel("positions below")
    for ax in axes[::2]:
        ax.set_ylabel("largest error")
    axes[0].legend(fontsize="small")
    fig.suptitle(
        f"Error against the exact table at the {rows:,} positions below each length "
        "(cos and sin, every channel, head_dim 128)",
        fontsize="medium",
    )
    return fig


def write_error_figure(rows: int, path: Path = FIGURE) -> Path:
    """Write :func:`error_figure` to ``path`` (PNG) atomically: drawn into a temporary file
    beside it, then renamed over it, so a reader never sees half a file."""
    fig = error_figure(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".part.png", dir=path.parent)
    temp = Path(name)
    try:
        with os.fdopen(handle, "wb") as file:
            fig.savefig(file, format="png", dpi=100,
                        metadata={"Description": f"rows={rows}, head_dim=128"})  # fmt: skip
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return path


def run(table: Table, *, quick: bool = False) -> None:
    size = 64 * 2**20 if quick else 2**30
    repeats = 1 if quick else 5
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        path = write_model(folder, size)
        stored = path.stat().st_size
        times = [audit_cold(folder, path) for _ in range(repeats)]
        median = sorted(times)[len(times) // 2]
        timing = Timing(median, min(times), max(times), repeats)
        label = f"GGUF of {stored / 2**30:.2f} GiB + config.json, cold process"
        table.add(GROUP, label, timing, note="no torch import; target < 2 s")
        print(f"audit: {label}: {median:.2f} s (min {min(times):.2f}, max {max(times):.2f})")
    rows = 64 if quick else 1024
    text = error_table(rows)
    table.note(
        f"Largest error against the exact table at the {rows} positions below each length "
        "(cos and sin, every channel; head_dim 128):\n\n" + text
    )
    if not quick:  # the figure docs/precision.md shows (a quick run's rows would not match)
        try:
            written = write_error_figure(rows)
        except ImportError:
            print("audit: matplotlib is not installed: the error figure is not drawn")
        else:
            print(f"audit: wrote {written.relative_to(ROOT)}")


if __name__ == "__main__":
    run_alone(run, __doc__)
