"""Attention with an ALiBi bias: FlexAttention ``score_mod`` against SDPA with a materialised
bias and against transformers' BLOOM path, in time and in peak memory.

Run from the repository root::

    PYTHONPATH=src:. python -m benchmarks.bias [--quick]

Full run: batch 1, 16 heads, q = k = 4096, head_dim 64, float32 on the CPU, causal; ``--quick``
(and ``--smoke``): q = k = 256, eager only, and the peak memory of the first path of each group
only (each peak takes a fresh process of a few seconds). Each path computes the same causal ALiBi
attention:

- ``SDPA + mask``: ``bias_attn_mask(alibi_bias(16, L, L), causal=True)`` (the dense
  ``(heads, q, k)`` bias, built in every call) passed to ``scaled_dot_product_attention``;
- ``transformers BLOOM``: ``build_alibi_tensor`` + ``baddbmm`` + causal mask + float32
  softmax + ``bmm``, the steps of ``BloomAttention`` (skipped without transformers);
- ``FlexAttention, eager``: ``flex_attention`` with ``alibi_score_mod`` and a causal
  ``bias_block_mask`` (built once, outside the timing); eager FlexAttention (as on the CPU)
  computes the whole ``(heads, q, k)`` score matrix;
- ``FlexAttention, compiled`` (full run, when ``torch.compile`` works here): the same through
  ``torch.compile``; the kernel applies the bias block by block and never holds it whole.

Peak memory is measured as ``benchmarks/memory.py`` does for torch: each path in a fresh
process, after a warm-up call (the compilation included), the peak resident set of one call
minus the resident set before it. The note compares it with the bytes of the dense float32
bias ``heads·q·k·4``.

A second group, "dense bias build", times building that dense bias alone (16 heads,
q = k = 4096; ``--quick``: 256), in time and peak memory (measured the same way):
``posenc.alibi_bias`` and ``posenc.t5_bias`` in float32, ``posenc.torch.alibi_bias`` in
float32 and bfloat16, against the reference ``whole float64, cast once``: the exact ALiBi
product held whole in float64 (2 GiB at 4096) and cast to float32, which the functions built
before they went a block of query rows at a time (same values, bit for bit).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from benchmarks.harness import Table, measure, run_alone
from benchmarks.memory import MiB, torch_peaks

GROUP = "ALiBi attention"
HEADS, HEAD_DIM = 16, 64

#: the child process's setup: inputs, and one function per path (``{length}`` filled in)
_SETUP = """
import math
from torch.nn.attention.flex_attention import flex_attention
import posenc.torch as pt

torch.manual_seed(0)
L, H, D = {length}, {heads}, {head_dim}
q, k, v = (torch.randn(1, H, L, D) for _ in range(3))


def sdpa_mask():
    mask = pt.bias_attn_mask(pt.alibi_bias(H, L, L), causal=True)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def bloom():
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    alibi = build_alibi_tensor(torch.ones(1, L, dtype=torch.long), H, torch.float32)
    scores = alibi.baddbmm(
        q.reshape(H, L, D), k.reshape(H, L, D).transpose(1, 2), beta=1.0,
        alpha=1.0 / math.sqrt(D),
    )
    causal = torch.ones(L, L, dtype=torch.bool).triu(1)
    weights = torch.softmax(scores.masked_fill(causal, torch.finfo(torch.float32).min), -1)
    return torch.bmm(weights, v.reshape(H, L, D)).reshape(1, H, L, D)


score_mod = pt.alibi_score_mod(H)
block_mask = pt.bias_block_mask(L, L, causal=True)


def flex_eager():
    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


compiled = torch.compile(flex_attention, dynamic=False)


def flex_compiled():
    return compiled(q, k, v, score_mod=score_mod, block_mask=block_mask)
"""


DENSE_GROUP = "dense bias build"

#: the child process's setup for the dense builds (``{length}`` filled in)
_DENSE_SETUP = """
import numpy as np
import posenc
import posenc.torch as pt

L, H = {length}, {heads}
table = np.random.default_rng(0).normal(size=(32, H))
slopes = posenc.alibi_slopes(H)


def whole():
    distance = -np.abs(np.arange(L)[None, :] - np.arange(L)[:, None]).astype(np.float64)
    return (slopes[:, None, None] * distance[None] + 0.0).astype(np.float32)


def alibi_numpy():
    return posenc.alibi_bias(H, L, L)


def t5_numpy():
    return posenc.t5_bias(table, L, L)


def alibi_torch():
    return pt.alibi_bias(H, L, L)


def alibi_torch_bf16():
    return pt.alibi_bias(H, L, L, dtype=torch.bfloat16)
"""

DENSE_PATHS = {
    "whole float64, cast once": "whole",
    "posenc.alibi_bias, float32": "alibi_numpy",
    "posenc.t5_bias, float32": "t5_numpy",
    "posenc.torch.alibi_bias, float32": "alibi_torch",
    "posenc.torch.alibi_bias, bfloat16": "alibi_torch_bf16",
}


def _dense_namespace(length: int) -> dict[str, Any]:
    import torch

    namespace: dict[str, Any] = {"torch": torch}
    exec(_DENSE_SETUP.format(length=length, heads=HEADS), namespace)
    return namespace


def _dense(table: Table, length: int, repeats: int, warmup: int, quick: bool) -> None:
    """Time and peak memory of building the dense ``(16, L, L)`` bias (see the docstring)."""
    ns = _dense_namespace(length)
    reference = measure(ns["whole"], repeats=repeats, warmup=warmup)
    shape = f"{HEADS}x{length}x{length}"
    for label, name in DENSE_PATHS.items():
        timing = reference if name == "whole" else measure(ns[name], repeats=repeats,
                                                           warmup=warmup)  # fmt: skip
        table.add(DENSE_GROUP, f"{label} ({shape})", timing,
                  refs={"whole float64, cast once": reference})  # fmt: skip
    lines = [
        f"Dense bias build, peak memory: {HEADS} heads x {length} x {length}; peak = extra "
        "resident bytes during one call in a fresh process (see benchmarks/bias.py)",
        "",
        "| path | output MiB | peak MiB | peak / output |",
        "|---|---|---|---|",
    ]
    setup = _DENSE_SETUP.format(length=length, heads=HEADS)
    measured_labels, unmeasured = _peak_jobs(list(DENSE_PATHS), quick)
    names = [DENSE_PATHS[label] for label in measured_labels]
    jobs = [
        (f"{setup}\n{name}()\n", f"{name}()" if "torch" in name else f"torch.from_numpy({name}())")
        for name in names  # from_numpy: no copy
    ]
    for label, measured in zip(measured_labels, torch_peaks(jobs), strict=True):
        peak, out = measured["peak"], measured["result"]
        lines.append(f"| {label} | {out / MiB:.1f} | {peak / MiB:.1f} | {peak / out:.2f} |")
    lines += [unmeasured] if unmeasured else []
    table.note("\n".join(lines))


def _namespace(length: int) -> dict[str, Any]:
    import torch

    namespace: dict[str, Any] = {"torch": torch}
    exec(_SETUP.format(length=length, heads=HEADS, head_dim=HEAD_DIM), namespace)
    return namespace


def _compiles(namespace: dict[str, Any]) -> str:
    """'' when compiled FlexAttention runs here, else why not."""
    try:
        namespace["flex_compiled"]()
    except Exception as exc:  # no C++ compiler, an unsupported backend ...
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    return ""


def run(table: Table, *, quick: bool = False) -> None:
    """Add the timing rows and the memory note to ``table`` (see the module docstring)."""
    length = 256 if quick else 4096
    repeats, warmup = 3, 1
    ns = _namespace(length)
    paths = {"SDPA + mask": "sdpa_mask", "FlexAttention, eager": "flex_eager"}
    skipped: list[str] = []
    if importlib.util.find_spec("transformers") is not None:
        paths["transformers BLOOM"] = "bloom"
    else:
        skipped.append("transformers BLOOM: transformers is not installed")
    if quick:
        skipped.append("FlexAttention, compiled: full run only")
    elif why := _compiles(ns):
        skipped.append(f"FlexAttention, compiled: torch.compile fails here ({why})")
    else:
        paths["FlexAttention, compiled"] = "flex_compiled"
    reference = measure(ns["sdpa_mask"], repeats=repeats, warmup=warmup)
    shape = f"1x{HEADS}x{length}x{HEAD_DIM}, causal"
    for label, name in paths.items():
        timing = reference if name == "sdpa_mask" else measure(ns[name], repeats=repeats,
                                                               warmup=warmup)  # fmt: skip
        table.add(GROUP, f"{label} ({shape})", timing, refs={"SDPA + mask": reference})
    table.note(_memory_note(length, paths, skipped, quick))
    _dense(table, length, repeats, warmup, quick)


def _peak_jobs(labels: list[str], quick: bool) -> tuple[list[str], str]:
    """The paths whose peak is measured (each a fresh process of a few seconds: the quick run
    measures the first only) and the line naming the others."""
    if not quick or len(labels) < 2:
        return labels, ""
    return labels[:1], f"- peak memory not measured in the quick run: {', '.join(labels[1:])}"


def _memory_note(length: int, paths: dict[str, str], skipped: list[str], quick: bool) -> str:
    bias = HEADS * length * length * 4
    lines = [
        f"ALiBi attention, peak memory: 1 x {HEADS} heads x {length} x {length}, head_dim "
        f"{HEAD_DIM}, float32, causal; the dense bias holds {bias / MiB:.1f} MiB; peak = extra "
        "resident bytes during one call in a fresh process (see benchmarks/bias.py)",
        "",
        "| path | output MiB | peak MiB | peak / dense bias | note |",
        "|---|---|---|---|---|",
    ]
    setup = _SETUP.format(length=length, heads=HEADS, head_dim=HEAD_DIM)
    # the warm-up call first: compilation and caches before the reset
    measured_labels, unmeasured = _peak_jobs(list(paths), quick)
    jobs = [(f"{setup}\n{paths[label]}()\n", f"{paths[label]}()") for label in measured_labels]
    for label, measured in zip(measured_labels, torch_peaks(jobs), strict=True):
        peak, out = measured["peak"], measured["result"]
        holds = "peak >= dense bias" if peak >= bias else "peak < dense bias: never held whole"
        lines.append(
            f"| {label} | {out / MiB:.1f} | {peak / MiB:.1f} | {peak / bias:.2f} | {holds} |"
        )
    lines += [unmeasured] if unmeasured else []
    lines += [f"- skipped: {why}" for why in skipped]
    return "\n".join(lines)


if __name__ == "__main__":
    run_alone(run, __doc__)
