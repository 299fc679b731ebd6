"""``posenc audit REFERENCE SUBJECT``: another stack's RoPE against the config it implements.

REFERENCE is a Hugging Face ``config.json`` (or a model directory holding one); its plan is what
``posenc plan`` prints. SUBJECT is what the other stack computes:

- a ``.gguf`` file: the RoPE llama.cpp builds from its metadata (base, rotated channels,
  scaling type and factor, original context, attention factor, M-RoPE sections, sliding-window
  base) and its rope tensors (``rope_freqs``, ``rope_factors_long``/``_short``); only the
  metadata and those small tensors are read, never the weights; for a vision projector
  (an mmproj file) the 2-D RoPE llama.cpp's clip.cpp runs for the vision tower, against the
  config's ``vision_config``;
- a ``.onnx`` file: the ``cos_cache``/``sin_cache`` and ``interleaved`` attribute of its
  ``RotaryEmbedding`` nodes (ONNX's and onnxruntime's) and ``GroupQueryAttention`` nodes with
  ``do_rotary``, bare cache initializers, or the cos/sin it computes from ``position_ids``
  (what ``torch.onnx.export`` writes): what the graph computes is evaluated with onnxruntime
  at the probe positions;
- arrays dumped from anywhere (``.npy``, ``.npz``, ``.safetensors``, ``.pt``): ``cos`` and
  ``sin`` (with ``position_ids``), a ``cos_sin_cache`` (vLLM, SGLang: the cosines of each row's
  pairs, then their sines) or an ``inv_freq`` (names ending in ``.inv_freq`` too); ``--key
  ROLE=NAME`` names others (``--key cos=rope.cos --key sin=rope.sin``), ``--key NAME`` takes a
  1-D array as an ``inv_freq`` and a 2-D one as a ``cos_sin_cache``;
- ``module:attr``: a Python callable ``positions -> (cos, sin)``, a rotation ``(positions, q,
  k) -> (q, k)`` (probed with basis vectors: its pairs and direction are measured), or an object
  with ``cos_sin_cache`` or ``inv_freq``; it is imported from the working directory and run in a
  child process that is killed after ``--timeout`` seconds.

Each layer (or kind of layer) is compared with the exact float64 tables at the probe positions
(0 .. 16, powers of two and their neighbours up to 2**20, the model's full context; or
``--positions``): exact (within one unit in the last place of the subject's dtype), within the
error of float32 angles (the report names the recipe and its bound at the model's length), or
wrong, with the cause in words, where it first differs and by how much, and the error at the
full context and at position 2**20 - 1. ``--json`` prints the report as JSON
(``schema_version``).

Exit code 0 when every layer is exact or within float32 angles' error, 1 when a layer is wrong
or worse (bfloat16 tables), 2 when the reference or subject cannot be used (a truncated file,
NaN in a table, a callable that raised or ran past ``--timeout``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .._io.sizes import default_max_bytes, format_size
from ._common import add_subcommand, parse_positions, parse_size

HELP = "audit another stack's RoPE (a GGUF file, arrays, a Python callable) against a config"


def add_parser(sub: Any) -> None:
    parser = add_subcommand(sub, "audit", HELP, __doc__)
    parser.add_argument(
        "reference", metavar="REFERENCE", help="a config.json, or a model directory holding one"
    )
    parser.add_argument(
        "subject",
        metavar="SUBJECT",
        help=".gguf, .onnx, .npy, .npz, .safetensors, .pt file, or module:attr (a Python "
        "callable or object)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--key",
        action="append",
        metavar="[ROLE=]NAME",
        help="the array to read: ROLE one of cos, sin, position_ids, inv_freq, cos_sin_cache "
        "(repeat for several); a NAME alone is an inv_freq (1-D) or a cos_sin_cache (2-D)",
    )
    parser.add_argument(
        "--layer-type",
        metavar="T",
        help="the layer type a single table implements, when the config has several",
    )
    parser.add_argument(
        "--positions",
        metavar="LIST",
        help="positions to probe: comma-separated positions and START:STOP[:STEP] ranges "
        "(default: 0..16, powers of two and their neighbours up to 2**20, the full context)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds a module:attr subject may run before it is killed (default 60)",
    )
    parser.add_argument(
        "--max-bytes",
        type=parse_size,
        metavar="SIZE",
        help="largest config or array file to read (default a quarter of physical memory, "
        f"here {format_size(default_max_bytes())})",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..audit import MAX_POSITIONS, audit

    positions = None
    if args.positions is not None:  # counted before any is made
        positions = parse_positions(args.positions, limit=8 * MAX_POSITIONS)
    if not args.timeout > 0:
        raise ValueError(f"--timeout must be a number of seconds > 0, got {args.timeout}")
    subject: Any = args.subject
    if ":" not in subject or Path(subject).exists():
        subject = Path(subject)
    report = audit(
        Path(args.reference),
        subject,
        layer_type=args.layer_type,
        positions=positions,
        key=args.key,
        timeout=args.timeout,
        max_bytes=args.max_bytes,
    )
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, allow_nan=False))
    else:
        print(report)
    return report.exit_code
