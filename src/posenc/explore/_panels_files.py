"""Panels 11-12: a model's rope plan from a ``config.json``, and identifying a table (``.npy``).

Both show an example until a file is uploaded. Uploads go through the readers of the ``posenc``
command (``posenc plan``, ``posenc identify``): sizes checked before anything is allocated, no
pickles, one-line errors. PyTorch files are refused here: the explorer never imports torch.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .. import _figure_data as fd
from .._conventions import CONVENTIONS
from .._describe import describe
from .._io.config_file import read_config_file
from .._io.files import FileError
from .._io.plan_json import plan_dict
from .._io.sizes import format_size
from .._io.tables import TORCH_SUFFIXES, read_table
from .._rope.plan import rope_plan
from .._sinusoidal import sinusoidal
from ..analysis._identify import identify
from ..analysis._recipes import odd_exponent_table
from . import _charts as ch
from . import _controls as c
from ._controls import MAX_D_MODEL, MAX_DRAWN_ROWS, Control
from ._panel import Panel, result

#: The largest upload accepted (bytes).
MAX_UPLOAD = 16 * 2**20
#: Rows of an uploaded table that identify reads (the first ones, consecutive positions).
MAX_IDENTIFY_ROWS = MAX_DRAWN_ROWS
N = ch.number

EXAMPLES: dict[str, dict[str, Any]] = {
    "Llama 3.1 (llama3 scaling)": {
        "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
        "num_hidden_layers": 32, "max_position_embeddings": 131072, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    },
    "Gemma 3 (sliding and full attention)": {
        "model_type": "gemma3_text", "head_dim": 256, "num_hidden_layers": 6,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        },
    },
}  # fmt: skip


def plan_result(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The plan of ``config``: a row per kind of layer and the wavelengths of each kind."""
    try:
        report = plan_dict(rope_plan(config))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name}: {exc}") from None
    rows, curves, numbers = [], [], []
    for i, kind in enumerate(report["kinds"]):
        layers = kind["layers"]
        where = "-" if not layers else f"{layers[0]}-{layers[-1]} ({len(layers)})"
        if not kind["uses_positions"]:
            rows.append([where, kind["layer_type"], "no positions", "-", "-", "-", "-"])
            continue
        omega = np.asarray(kind["frequencies"], dtype=np.float64)
        rows.append([where, kind["layer_type"], kind["rope_type"], f"{kind['base']:g}",
                     f"{kind['rotary_dim']}/{kind['head_dim']}", kind["pairs"],
                     f"{kind['attention_factor']:.6g}"])  # fmt: skip
        keep = omega > 0
        lam = 2 * math.pi / omega[keep]
        curves.append(ch.series(kind["layer_type"], np.flatnonzero(keep), np.log10(lam),
                                mode="points", colour=i))  # fmt: skip
        numbers.append((f"omega_{i}", f"{kind['layer_type']}: ω of the last pair", N(omega[-1])))
    if not curves:
        raise ValueError(f"{name}: no layer of this model uses rotary positions")
    low, high = ch.bounds(*(np.power(10.0, np.asarray(s["y"], dtype=float)) for s in curves))
    top = max(len(s["x"]) for s in curves)
    chart = ch.lines(
        ch.axis("pair k", 0, max(top - 1, 1)),
        ch.axis("wavelength (positions, log scale)", low, high, log=True),
        curves,
    )
    table = ch.table(
        f"{name}: model_type {report['model_type']}, {report['num_layers']} layers",
        ["layers", "layer type", "rope type", "base", "rotary/head", "pairs", "attention"],
        rows,
    )
    return result(
        f"{name}: one row per kind of layer, the wavelengths of each kind's pairs in the figure.",
        numbers,
        chart,
        [table],
    )


def plan_panel(v: dict[str, Any]) -> dict[str, Any]:
    return plan_result(EXAMPLES[v["example"]], v["example"])


def identify_result(table: np.ndarray, name: str, tolerance: float | None = None) -> dict[str, Any]:
    """Identify ``table`` and show it as a heatmap with the verdict as text."""
    if table.ndim != 2 or table.shape[0] < 2 or table.shape[1] < 2:
        raise ValueError(f"{name} must be a 2-D table with at least 2 rows and 2 channels, "
                         f"got shape {table.shape}")  # fmt: skip
    if table.shape[1] > MAX_D_MODEL:
        raise ValueError(f"{name} has {table.shape[1]} channels; the explorer reads at most "
                         f"{MAX_D_MODEL} (posenc identify reads any)")  # fmt: skip
    note = ""
    if table.shape[0] > MAX_IDENTIFY_ROWS:
        table, note = table[:MAX_IDENTIFY_ROWS], f" (its first {MAX_IDENTIFY_ROWS} rows)"
    found = identify(table, tolerance=tolerance)
    rows = fd.even_positions(table.shape[0], 512)
    shown = np.asarray(table[rows], dtype=np.float64)
    chart = ch.heatmap(
        np.where(np.isfinite(shown), shown, 0.0),
        ch.axis("channel", 0, table.shape[1] - 1),
        ch.axis("row", 0, table.shape[0] - 1),
        rows=rows.tolist(),
        columns=list(range(table.shape[1])),
    )
    return result(
        f"{name}{note}: {describe(found)}",
        [
            ("outcome", "outcome", str(found.outcome)),
            ("convention", "convention", "-" if found.convention is None else found.convention),
            ("base", "base", "-" if found.base is None else N(found.base)),
            ("offset", "first position", "-" if found.offset is None else str(found.offset)),
            ("bug", "bug", "none found" if found.bug is None else str(found.bug)),
            ("residual", "residual (max error of the best fit)", N(found.residual)),
        ],
        chart,
    )


def identify_panel(v: dict[str, Any]) -> dict[str, Any]:
    positions = np.arange(v["offset"], v["offset"] + v["rows"])
    if v["convention"] == "odd-exponent bug":
        table = odd_exponent_table(positions, v["d_model"], base=v["base"])
    else:
        table = sinusoidal(positions, v["d_model"], base=v["base"], convention=v["convention"])
    return identify_result(table, f"example table ({v['convention']}, base {v['base']:g})")


def read_upload(kind: str, data: bytes, name: str) -> dict[str, Any]:
    """The panel result for an uploaded file: ``kind`` is ``"config"`` or ``"table"``."""
    if len(data) > MAX_UPLOAD:
        raise ValueError(
            f"{name} holds {len(data):,} bytes; uploads are limited to {format_size(MAX_UPLOAD)}"
        )
    shown = Path(name).name or "upload"
    suffix = Path(shown).suffix.lower()
    if kind == "table" and suffix in TORCH_SUFFIXES:
        raise ValueError(
            f"{shown}: PyTorch files are not read here (the explorer does not import torch); "
            "use 'posenc identify FILE', or save it as .npy"
        )
    with tempfile.TemporaryDirectory(prefix="posenc-explore-") as folder:
        path = Path(folder) / ("upload" + suffix if suffix.isascii() else "upload")
        path.write_bytes(data)
        try:
            if kind == "config":
                return plan_result(read_config_file(path, MAX_UPLOAD), shown)
            table = read_table(path, None, MAX_UPLOAD)
            return identify_result(table.array, shown, table.tolerance)
        except (FileError, ValueError, TypeError, OSError) as exc:
            message = str(exc).replace(str(path), shown)
            message = message.replace("; pass a larger --max-bytes to read it", "")
            message = message.replace("--max-bytes", "the upload limit")
            raise ValueError(message) from None


PANELS = (
    Panel("plan", "A model's rope plan", "Layers of one kind share a row: look for layers "
          "that rotate differently (sliding against full attention) or not at all.",
          (Control("example", "example config", "choice", "Llama 3.1 (llama3 scaling)",
                   choices=tuple(EXAMPLES)),), plan_panel, upload="config"),
    Panel("identify", "Identify a table", "posenc recovers the convention, base and first "
          "position of a table from its values alone, or names the bug it has.",
          (Control("convention", "example convention", "choice", "tensor2tensor",
                   choices=(*CONVENTIONS, "odd-exponent bug")),
           c.base(), Control("offset", "first position", "int", 2, 0, 4096, step=1),
           Control("rows", "rows", "int", 64, 2, MAX_DRAWN_ROWS, step=1),
           c.d_model(32)), identify_panel, upload="table"),
)  # fmt: skip
