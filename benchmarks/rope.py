"""Rotary position embedding (RoPE) apply: posenc next to its peers and to memory speed.

Run from the repository root::

    PYTHONPATH=src:. python -m benchmarks.rope [--quick]

Full run: q and k of shape (b, h, s, d) = (8, 16, 2048, 64), 9 repeats, in fp32 and bf16;
``--quick``: (2, 4, 256, 64), 3 repeats. Each dtype is one group. Its hardware references are
measured on q (and on q and k together) at the start and again at the end of the group; a
reference is the smaller of the two medians (on a shared machine a disturbance only slows a
measurement down; the smaller reference can only make posenc's ratios worse).
References: ``q.clone()`` (allocate + copy) and ``buf.copy_(q)`` (copy into a preallocated
buffer); for the row that rotates q and k, the clones (copies) of both. The note gives the
minor page faults of one call: a fresh output costs one per 4 KiB page when the allocator maps
new memory and none when it reuses a free region of its heap. Which happens to a 32 MiB bf16
tensor depends on the process's allocation history (glibc's dynamic mmap and trim
thresholds), so compare ``x clone`` of rows with the same fault counts, or use ``x copy_``;
``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1048576:glibc.malloc.trim_threshold=1048576``
makes every large allocation fresh for clone and the rows alike.

Rows, for ``pairs="half"`` and ``pairs="interleaved"``:

- posenc ``RotaryEmbedding(d, pairs=...)`` forward on q and k together, and ``rotate(q)``
  alone (the module's cached cos/sin);
- ``posenc.torch.apply_rotary(q, cos, sin, pairs=...)`` with tables from
  ``posenc.torch.rotary_cos_sin``;
- multi-axis RoPE with explicit ``(t, h, w)`` ids (cos/sin computed from float64 in every
  call): a Qwen2-VL-like M-RoPE (``sections`` d/8, 3d/16, 3d/16, shared schedule) over a batch
  of text + image + text ids per batch element ``(b, s, 3)``, and a Flux-like per-axis RoPE
  (``axes_dim`` d/8, 7d/16, 7d/16, interleaved pairs) over text + image ids ``(s, 3)``.

Peers (their cos/sin in float32, as they compute them, then in q's dtype where they cast):

- rotary-embedding-torch ``RotaryEmbedding(d).rotate_queries_or_keys(q)`` (interleaved pairs,
  its frequency cache warm); every row also gets its ratio to this one (target: <= 0.2);
- the half-split formula of Hugging Face transformers (``rotate_half`` and
  ``apply_rotary_pos_emb`` of ``models/llama/modeling_llama.py``), re-typed: tables cast to
  q's dtype, ``q * cos + rotate_half(q) * sin``;
- the interleaved formula (``rotate_every_two`` of transformers' ``models/gptj/modeling_gptj.py``),
  re-typed in the same way;
- the complex multiplication of Meta's Llama (``apply_rotary_emb`` in ``llama/model.py`` of
  meta-llama/llama), re-typed: ``view_as_complex(q.float())`` times ``freqs_cis``, back to q's
  dtype.

posenc's arithmetic is float32 for both dtypes (bf16 inputs are rotated in float32 and
rounded once); the peers that cast their tables to bf16 compute in bf16.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.harness import Table, Timing, measure, run_alone

FULL = (8, 16, 2048, 64)
QUICK = (2, 4, 256, 64)
BASE = 10000.0


def hf_rotate_half(torch: Any, x: Any) -> Any:
    """transformers' ``rotate_half`` (models/llama/modeling_llama.py), re-typed."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def gptj_rotate_every_two(torch: Any, x: Any) -> Any:
    """transformers' ``rotate_every_two`` (models/gptj/modeling_gptj.py), re-typed."""
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def meta_apply_rotary_emb(torch: Any, x: Any, freqs_cis: Any) -> Any:
    """Meta Llama's ``apply_rotary_emb`` for one tensor (llama/model.py), re-typed.

    ``freqs_cis``: complex64 ``(s, d/2)``; broadcast over the (b, h) of x = (b, h, s, d)
    (Meta's own layout is (b, s, h, d): only the broadcast shape differs).
    """
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(x_ * freqs_cis.view(1, 1, *freqs_cis.shape)).flatten(3)
    return out.type_as(x)


def page_faults(fn: Callable[[], Any]) -> str:
    """Minor page faults of one call of ``fn`` ("" where ``resource`` is missing).

    A fresh output costs a fault per 4 KiB page when the allocator maps new memory, and none
    when it reuses a free region of its heap; which one happens depends on the process's
    history, so the count is shown next to the timings.
    """
    try:
        import resource
    except ImportError:  # not on Windows
        return ""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    return f"{resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before} faults"


def _both(a: Timing, b: Timing) -> Timing:
    """One reference from two measurements of it: the smaller median (a disturbance only
    slows a measurement down, and a smaller reference can only make the ratios worse)."""
    best = a if a.median <= b.median else b
    return Timing(best.median, min(a.min, b.min), max(a.max, b.max), a.repeats + b.repeats)


def _group(
    table: Table,
    name: str,
    q: Any,
    k: Any,
    timed: Callable[[Callable[[], Any]], Timing],
    peer_class: Any,
) -> str:
    """Add one dtype's rows (q and k of that dtype) to ``table``; return its summary line."""
    import torch

    from posenc.torch import RotaryEmbedding, apply_rotary, rotary_cos_sin

    b, h, s, d = q.shape
    group = f"rope {name} q,k {b}x{h}x{s}x{d}"
    buf_q, buf_k = torch.empty_like(q), torch.empty_like(k)

    def references() -> dict[str, Timing]:
        return {
            "clone": timed(q.clone),
            "copy_": timed(lambda: buf_q.copy_(q)),
            "clone q,k": timed(lambda: (q.clone(), k.clone())),
            "copy_ q,k": timed(lambda: (buf_q.copy_(q), buf_k.copy_(k))),
        }

    first = references()
    # (name, call, rotates q and k, note), measured in this order
    calls: list[tuple[str, Callable[[], Any], bool, str]] = []
    if peer_class is not None:
        peer = peer_class(d)
        calls.append(
            (
                "rotary-embedding-torch rotate_queries_or_keys(q)",
                lambda: peer.rotate_queries_or_keys(q),
                False,
                "",
            )
        )
        calls.append(
            (
                "rotary-embedding-torch, q and k",
                lambda: (peer.rotate_queries_or_keys(q), peer.rotate_queries_or_keys(k)),
                True,
                "",
            )
        )
    for pairs in ("half", "interleaved"):
        rope = RotaryEmbedding(d, pairs=pairs, max_len=s)
        cos, sin = rotary_cos_sin(s, d, pairs=pairs, dtype=torch.float32)
        note = f"{pairs}; float32 arithmetic, rounded once" if name == "bf16" else pairs
        calls += [
            (f"posenc RotaryEmbedding(q, k), {pairs}", lambda r=rope: r(q, k), True, note),
            (f"posenc rotate(q), {pairs}", lambda r=rope: r.rotate(q), False, note),
            (
                f"posenc.torch.apply_rotary(q), {pairs}",
                lambda c=cos, s_=sin, p=pairs: apply_rotary(q, c, s_, pairs=p),
                False,
                note,
            ),
        ]

    calls += _multi_axis_calls(q, k, name)

    # The peers' tables as they compute them (float32 angles), in q's dtype where they cast.
    inv_freq = 1.0 / (BASE ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = torch.outer(torch.arange(s, dtype=torch.float32), inv_freq)
    half_cos = torch.cat((angles, angles), dim=-1).cos().to(q.dtype)
    half_sin = torch.cat((angles, angles), dim=-1).sin().to(q.dtype)
    pair_cos = angles.repeat_interleave(2, dim=-1).cos().to(q.dtype)
    pair_sin = angles.repeat_interleave(2, dim=-1).sin().to(q.dtype)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)
    cast = f"tables in {name}" if name == "bf16" else ""
    calls += [
        (
            "HF half-split formula (rotate_half), re-typed",
            lambda: q * half_cos + hf_rotate_half(torch, q) * half_sin,
            False,
            cast,
        ),
        (
            "interleaved formula (GPT-J rotate_every_two), re-typed",
            lambda: q * pair_cos + gptj_rotate_every_two(torch, q) * pair_sin,
            False,
            cast,
        ),
        (
            "Meta complex multiply (apply_rotary_emb), re-typed",
            lambda: meta_apply_rotary_emb(torch, q, freqs_cis),
            False,
            "float32 arithmetic" if name == "bf16" else "",
        ),
    ]
    rows: list[tuple[str, Timing, bool, str]] = []
    for label, call, both, note in calls:
        timing = timed(call)
        faults = page_faults(call)
        rows.append(
            (label, timing, both, f"{note}; {faults}" if note and faults else note + faults)
        )
    peer_q = rows[0][1] if peer_class is not None else None
    peer_qk = rows[1][1] if peer_class is not None else None

    last = references()
    refs = {key: _both(first[key], last[key]) for key in first}
    refs_q = {"clone": refs["clone"], "copy_": refs["copy_"]}
    refs_qk = {"clone": refs["clone q,k"], "copy_": refs["copy_ q,k"]}
    if peer_q is not None and peer_qk is not None:
        refs_q["rotary-embedding-torch"] = peer_q
        refs_qk["rotary-embedding-torch"] = peer_qk
    table.add(group, "q clone", refs["clone"], refs_q, page_faults(q.clone))
    table.add(group, "q copy_", refs["copy_"], refs_q)
    table.add(group, "q, k clone", refs["clone q,k"], refs_qk)
    table.add(group, "q, k copy_", refs["copy_ q,k"], refs_qk)
    worst = worst_copy = slowest_vs_peer = 0.0
    for label, timing, both, note in rows:
        row = table.add(group, label, timing, refs_qk if both else refs_q, note)
        if label.startswith("posenc"):
            worst = max(worst, row.ratios["clone"])
            worst_copy = max(worst_copy, row.ratios["copy_"])
            slowest_vs_peer = max(slowest_vs_peer, row.ratios.get("rotary-embedding-torch", 0.0))
    line = f"rope {name}: posenc rows at most {worst:.2f} x clone (target 1.3)"
    line += f" and {worst_copy:.2f} x copy_"
    if slowest_vs_peer:
        line += f", at least {1 / slowest_vs_peer:.1f} x faster than rotary-embedding-torch"
        line += " (target 5)"
    return line


def _multi_axis_calls(q: Any, k: Any, name: str) -> list[tuple[str, Callable[[], Any], bool, str]]:
    """The multi-axis rows: explicit ``(t, h, w)`` ids, tables computed from float64 in each
    call (a Qwen2-VL-like M-RoPE over a text + image + text batch, per batch element, and a
    Flux-like per-axis RoPE over text + image ids shared by the batch)."""
    import numpy as np
    import torch

    import posenc
    from posenc.torch import RotaryEmbedding

    b, _, s, d = q.shape
    text = 16 if s < 1024 else 64
    merged = (14, 16) if s < 1024 else (40, 48)  # (h, w) of the image after a 2 x 2 merge
    assert 2 * text + merged[0] * merged[1] == s
    types = np.array([0] * text + [1] * (merged[0] * merged[1]) + [0] * text)
    grid = [1, 2 * merged[0], 2 * merged[1]]
    qwen_ids = posenc.multimodal_positions(
        np.broadcast_to(types, (b, s)), image_grids=[grid] * b, spatial_merge=2
    ).positions
    qwen_ids = torch.from_numpy(qwen_ids + 1000 * np.arange(b)[:, None, None])  # (b, s, 3)
    qwen = RotaryEmbedding(d, sections=[d // 8, 3 * d // 16, 3 * d // 16], base=1e6)
    image = posenc.grid_positions((1, merged[0], merged[1] + 2 * text // merged[0]))
    flux_ids = torch.from_numpy(np.concatenate([np.zeros((s - len(image), 3), np.int64), image]))
    flux = RotaryEmbedding(
        d, sections=[d // 16, 7 * d // 32, 7 * d // 32], schedule="per_axis", pairs="interleaved"
    )
    note = "tables from float64 in each call" + ("; float32 arithmetic" if name == "bf16" else "")
    return [
        (
            f"posenc RotaryEmbedding(q, k), M-RoPE [{d // 8}, {3 * d // 16}, {3 * d // 16}] "
            "(Qwen2-VL-like), ids (b, s, 3)",
            lambda: qwen(q, k, positions=qwen_ids),
            True,
            note,
        ),
        (
            f"posenc RotaryEmbedding(q, k), per_axis [{d // 16}, {7 * d // 32}, {7 * d // 32}] "
            "interleaved (Flux-like), ids (s, 3)",
            lambda: flux(q, k, positions=flux_ids),
            True,
            note,
        ),
    ]


def run(table: Table, *, quick: bool) -> None:
    """Add the rows described in the module docstring to ``table``."""
    import torch

    b, h, s, d = QUICK if quick else FULL
    repeats = 3 if quick else 9

    def timed(fn: Callable[[], Any]) -> Timing:
        return measure(fn, repeats=repeats, warmup=1 if quick else 2)

    try:
        from rotary_embedding_torch import RotaryEmbedding as peer_class
    except ImportError as exc:
        print(f"rope: rotary-embedding-torch skipped ({exc})")
        peer_class = None

    torch.manual_seed(0)
    q32, k32 = torch.randn(b, h, s, d), torch.randn(b, h, s, d)
    summary = [
        _group(table, name, q32.to(dtype), k32.to(dtype), timed, peer_class)
        for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16"))
    ]
    if quick:
        summary.append("quick mode: tensors of 512 KiB, where call overheads dominate")
    text = "\n".join(f"- {line}" for line in summary)
    if hasattr(table, "note"):
        table.note(text)
    else:
        print(text)


if __name__ == "__main__":
    run_alone(run, __doc__)
