"""``posenc plan CONFIG.json``: the RoPE of every layer of a model, from its ``config.json``.

Prints :func:`posenc.rope_plan` of a Hugging Face ``config.json``: a table with one row per
distinct kind of layer (which layers, rope type, base, rotated and head channels, pair layout,
attention factor, axes and sections, whether the layer rotates), then the scaling parameters,
where each pair layout comes from, the inert keys and the notes. ``--json`` prints the same as
one JSON object (docs/reference/cli.md describes its fields), the frequencies as float64
numbers written with enough digits to read back exactly. ``--vision`` prints the plan of the
file's ``vision_config`` (``posenc.rope_plan(config, vision=True)``).

A model whose positions act on the attention scores (ALiBi: BLOOM, MPT, Falcon with
``alibi``; T5 buckets: T5, mT5, UMT5, LongT5; DeBERTa-v2 buckets) gets a second table: per
layer of each stack, the bias kind, heads, slope rule, ``num_buckets``, ``max_distance`` and
direction (``bias`` in ``--json``).

The file is read defensively: its size is checked against ``--max-bytes`` before it is read,
it must be UTF-8 JSON holding one object nested at most 64 levels deep, and a config the plan
rejects (an unknown rope key, a missing size) is one line naming the file and the key.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from .._io.config_file import read_config_file
from .._io.plan_json import bias_dict, plan_dict
from .._io.sizes import default_max_bytes, format_size
from ._common import add_subcommand, parse_size

HELP = "print the RoPE (or attention bias) of every layer of a model, from its config.json"

#: The version of the ``--json`` document's layout (docs/reference/cli.md): it changes when a
#: field is renamed, removed or changes meaning, not when one is added.
SCHEMA_VERSION = 1


def add_parser(sub: Any) -> None:
    parser = add_subcommand(sub, "plan", HELP, __doc__)
    parser.add_argument("config", type=Path, metavar="CONFIG", help="a config.json file")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument(
        "--vision",
        action="store_true",
        help="the plan of the vision tower (the file's vision_config; a block without "
        "model_type is read as the tower of the file's model_type, e.g. qwen2_vl -> "
        "qwen2_vl_vision)",
    )
    parser.add_argument(
        "--layer-type",
        metavar="T",
        help="show only the layers of this type (e.g. sliding_attention)",
    )
    parser.add_argument(
        "--max-bytes",
        type=parse_size,
        metavar="SIZE",
        help="largest file to read, e.g. 1M (K, M, G, T: powers of 1024; default a quarter "
        f"of physical memory, here {format_size(default_max_bytes())})",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .._bias.config import bias_plan
    from .._rope.plan import rope_plan

    max_bytes = default_max_bytes() if args.max_bytes is None else args.max_bytes
    config = read_config_file(args.config, max_bytes)
    try:
        bias = None if args.vision else bias_plan(config)
        try:
            plan = rope_plan(config, vision=args.vision)
        except ValueError as exc:
            if bias is None:
                raise
            plan, no_rope = None, str(exc)  # a bias model: its bias is the plan
            if "has no RoPE settings" in no_rope:
                no_rope = "the config has no RoPE settings: positions act through the bias"
        if args.layer_type is not None:
            if plan is None:
                raise ValueError(f"--layer-type selects RoPE layers, and {no_rope}")
            plan.layer(args.layer_type)  # checks the name
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"{args.config}: {exc}") from None
    if plan is not None:
        report = plan_dict(plan, args.layer_type)
    elif bias is not None:
        report = {"model_type": bias.model_type, "source": None, "num_layers": len(bias),
                  "kinds": [], "notes": [no_rope]}  # fmt: skip
    report["bias"] = None if bias is None else bias_dict(bias)
    if args.json:
        document = {"schema_version": SCHEMA_VERSION, "file": str(args.config), **report}
        print(json.dumps(document, indent=2, allow_nan=False))
    else:
        print(plan_text(str(args.config), report))
    return 0


# --------------------------------------------------------------------------- the table

_COLUMNS = (
    "layers",
    "layer type",
    "rope type",
    "base",
    "rotary/head",
    "pairs",
    "attention",
    "axes (sections)",
    "positions",
)


def _ranges(indices: list[int] | None) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``; None -> ``"-"``."""
    if not indices:
        return "-"
    parts = []
    start = previous = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == previous + 1:
            previous = i
            continue
        parts.append(f"{start}" if start == previous else f"{start}-{previous}")
        if i is not None:
            start = previous = i
    return ",".join(parts)


def _row(kind: dict[str, Any]) -> list[str]:
    if not kind["uses_positions"]:
        return [_ranges(kind["layers"]), kind["layer_type"], *["-"] * 6, "no"]
    axes = "-"
    if kind["axes"]:
        sections = "/".join(str(s) for s in kind["sections"])
        axes = ",".join(kind["axes"]) + f" ({sections})"
        if kind["interleaved_sections"]:
            axes += " interleaved"
        elif kind["order"] not in (None, "sectioned"):
            axes += f" {kind['order']}"
        if kind["pairs_per_axis"]:
            axes += " pairs_per_axis"
    return [
        _ranges(kind["layers"]),
        kind["layer_type"],
        kind["rope_type"],
        f"{kind['base']:g}",
        f"{kind['rotary_dim']}/{kind['head_dim']}",
        kind["pairs"],
        f"{kind['attention_factor']:.6g}",
        axes,
        "yes" if not kind["unsupported"] else "yes (no tables)",
    ]


def _details(kinds: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    sources = dict.fromkeys((k["pairs"], k["pairs_source"]) for k in kinds if k["uses_positions"])
    lines += [f"pairs {pairs}: from {source}" for pairs, source in sources]
    for k in kinds:
        if k["scaling"]:
            params = ", ".join(f"{n}={_short(v)}" for n, v in k["scaling"].items())
            lines.append(f"scaling of {k['layer_type']} ({k['rope_type']}): {params}")
        if k["unsupported"]:
            lines.append(f"no tables for {k['layer_type']}: {k['unsupported']}")
        if k["temperature"]:
            t = k["temperature"]
            params = ", ".join(f"{n}={_short(v)}" for n, v in t["params"].items())
            where = f"layers {_ranges(k['layers'])}" if k["layers"] else k["layer_type"]
            lines.append(f"temperature of {where} ({t['kind']}): {params}, on the {t['scales']}")
    inert = {n: v for k in kinds for n, v in k["inert"].items()}
    lines += [f"inert key {n} = {json.dumps(v)}" for n, v in inert.items()]
    return lines


def _short(value: Any) -> str:
    """``value`` for the text report: a float that float32 holds exactly (a config's factors,
    written from float32 tensors) in the fewest digits that read back as that float32; lists
    element by element. The ``--json`` report keeps every float64 digit."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, float) and np.isfinite(value) and float(np.float32(value)) == value:
        return np.format_float_positional(np.float32(value), unique=True, trim="0")
    return repr(value)


_BIAS_COLUMNS = (
    "stack",
    "layers",
    "bias",
    "heads",
    "slope rule",
    "buckets",
    "max distance",
    "direction",
    "table",
)


def _bias_row(kind: dict[str, Any]) -> list[str]:
    rule = "-"
    if kind["slope_rule"] is not None:
        rule = f"{kind['slope_rule']} (max_bias {kind['max_bias']:g}, form {kind['form']})"
    table = "-"
    if kind["kind"] != "alibi":
        table = "shared" if kind["shared_table"] else "own"
    return [
        kind["stack"],
        _ranges(kind["layers"]),
        kind["kind"],
        str(kind["heads"]),
        rule,
        "-" if kind["num_buckets"] is None else str(kind["num_buckets"]),
        "-" if kind["max_distance"] is None else str(kind["max_distance"]),
        kind["direction"],
        table,
    ]


def _table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    rows = [list(columns), *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def plan_text(name: str, report: dict[str, Any]) -> str:
    """The report of :func:`plan_dict` as a table and a few lines of details and notes; the
    attention bias (``report["bias"]``, when there is one) as a second table."""
    kinds = report["kinds"]
    bias = report.get("bias")
    head = f"{name}: model_type {report['model_type']}, {report['num_layers']} layers"
    lines = []
    if report["source"] is not None:
        lines += [head + f", rope parameters from {report['source']}", ""]
        lines += _table(_COLUMNS, [_row(k) for k in kinds])
    else:
        lines.append(head)
    if bias is not None:
        if report["source"] is not None:
            lines.append("")
        lines += [f"attention bias from {bias['source']}", ""]
        lines += _table(_BIAS_COLUMNS, [_bias_row(k) for k in bias["kinds"]])
    details = _details(kinds)
    bias_notes = []
    if bias is not None:
        bias_notes = [*bias["notes"], *(n for k in bias["kinds"] for n in k["notes"])]
    notes = list(
        dict.fromkeys([*report["notes"], *(n for k in kinds for n in k["notes"]), *bias_notes])
    )
    if details or notes:
        lines.append("")
    lines += details + [f"note: {n}" for n in notes]
    return "\n".join(lines)
