"""Adding the encoding: eval add, in-place inference add, train add + dropout, embedding input.

Run from the repository root::

    PYTHONPATH=src:. python -m benchmarks.add [--quick]

Full run: x = (b, s, d) = (8, 2048, 1024), 7 repeats (fp32 and bf16); ``--quick``:
(4, 256, 256), 3 repeats. Every group starts with its hardware references on a tensor of x's
shape and dtype, measured in the same run: ``x.clone()`` (allocate + copy) and ``buf.copy_(x)``
(copy into a preallocated buffer). Ratios are medians over those medians.

Rows, per dtype:

- posenc ``SinusoidalPositionalEncoding`` in eval mode (under ``torch.inference_mode``):
  batch-first and sequence-first, default positions and explicit ``positions`` of shape
  ``(s,)`` (a range, and shuffled) and ``(b, s)`` (broadcast along the batch, and per token
  from left padding);
- the in-place inference path: ``module.add_(x)`` and ``module(x, out=buf)``;
- training, dropout p = 0.1, ``x.requires_grad``: forward, and forward + backward;
- peers: a common tutorial implementation (a batch-first ``PositionalEncoding`` module with
  dropout and the PyTorch tutorial recipe, re-typed below) in fp32, cast to bf16, and not cast
  with a bf16 input (its output silently becomes fp32); ``positional_encodings``'
  ``Summer(PositionalEncoding1D(d))`` (cached table); the tutorial module in training (and,
  in the full run, the same under ``torch.compile``, measured last with its own clone/copy_
  references).

Then ``TransformerEmbedding`` in eval mode (token embedding x sqrt(d) + PE, fp32, vocabulary
30000) against the clone of the output-sized tensor, next to the eager composition of
``nn.Embedding`` x sqrt(d) and the tutorial module.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from benchmarks.harness import Table, Timing, measure, run_alone

FULL = (8, 2048, 1024)
QUICK = (4, 256, 256)
VOCAB = 30000
P = 0.1


def tutorial_module(torch: Any) -> Any:
    """A common tutorial implementation: a batch-first ``PositionalEncoding`` module with
    dropout and the PyTorch tutorial recipe, re-typed from a tutorial."""
    nn = torch.nn

    class PositionalEncoding(nn.Module):  # type: ignore[misc]
        def __init__(self, d_model: int, seq_len: int, dropout: float) -> None:
            super().__init__()
            self.d_model = d_model
            self.seq_len = seq_len
            self.dropout = nn.Dropout(dropout)
            pe = torch.zeros(seq_len, d_model)
            position = torch.arange(0, seq_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(
                torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model)
            )
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0)
            self.register_buffer("pe", pe)

        def forward(self, x: Any) -> Any:
            x = x + (self.pe[:, : x.shape[1], :]).requires_grad_(False)
            return self.dropout(x)

    return PositionalEncoding


def _inference(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run under ``torch.inference_mode``."""
    import torch

    def call() -> Any:
        with torch.inference_mode():
            return fn()

    return call


def _add_group(
    table: Table,
    timed: Callable[[Callable[[], Any]], Timing],
    base: Any,
    dtype: Any,
    name: str,
) -> None:
    """The eval, in-place and training rows for one dtype."""
    import torch

    import posenc
    from posenc.torch import SinusoidalPositionalEncoding

    tutorial = tutorial_module(torch)
    b, s, d = base.shape
    group = f"add {name} {b}x{s}x{d}"
    x = base.to(dtype)
    buf = torch.empty_like(x)
    t_clone = timed(x.clone)
    t_copy = timed(lambda: buf.copy_(x))
    refs = {"clone": t_clone, "copy_": t_copy}
    table.add(group, "x clone", t_clone, refs)
    table.add(group, "x copy_", t_copy, refs)

    ours = SinusoidalPositionalEncoding(d, dropout=P, max_len=s, dtype=dtype).eval()
    seq_first = SinusoidalPositionalEncoding(d, dropout=P, batch_first=False, max_len=s)
    seq_first = seq_first.to(dtype).eval()
    x_seq_first = x.transpose(0, 1).contiguous()
    arange = torch.arange(s)
    shuffled = torch.randperm(s)
    pads = torch.randint(0, max(1, s // 4), (b,))
    mask = (torch.arange(s)[None, :] >= pads[:, None]).numpy()
    left_padded = torch.from_numpy(posenc.positions_from_mask(mask))
    eval_rows: list[tuple[str, Callable[[], Any]]] = [
        ("posenc eval, batch-first", lambda: ours(x)),
        ("posenc eval, seq-first", lambda: seq_first(x_seq_first)),
        ("posenc eval, positions (s,) range", lambda: ours(x, positions=arange)),
        ("posenc eval, positions (s,) shuffled", lambda: ours(x, positions=shuffled)),
        ("posenc eval, positions (b, s) broadcast", lambda: ours(x, positions=arange.expand(b, s))),
        ("posenc eval, positions (b, s) per token", lambda: ours(x, positions=left_padded)),
    ]
    for label, fn in eval_rows:
        table.add(group, label, timed(_inference(fn)), refs, f"out {fn().dtype}")

    target = x.clone()
    table.add(group, "posenc add_(x), in place", timed(_inference(lambda: ours.add_(target))), refs)
    table.add(
        group, "posenc forward(x, out=buf)", timed(_inference(lambda: ours(x, out=buf))), refs
    )
    table.add(
        group,
        "posenc add_(x, positions=(b, s))",
        timed(_inference(lambda: ours.add_(target, positions=left_padded))),
        refs,
        "per token",
    )

    peer = tutorial(d, s, P).eval()
    if dtype == torch.float32:
        table.add(group, "tutorial module eval", timed(_inference(lambda: peer(x))), refs)
    else:
        cast = tutorial(d, s, P).to(dtype).eval()
        label = f"tutorial module eval, module cast to {name}"
        table.add(group, label, timed(_inference(lambda: cast(x))), refs)
        label = f"tutorial module eval, module not cast ({name} input)"
        table.add(group, label, timed(_inference(lambda: peer(x))), refs, f"out {peer(x).dtype}")
    try:
        from positional_encodings.torch_encodings import PositionalEncoding1D, Summer
    except ImportError as exc:
        print(f"add: positional-encodings skipped ({exc})")
    else:
        summer = Summer(PositionalEncoding1D(d))
        label = "positional-encodings Summer(1D)"
        table.add(group, label, timed(_inference(lambda: summer(x))), refs, "cached table")

    # Training: dropout p = 0.1 on an input that requires grad (a new graph each call).
    ours.train()
    xg = x.clone().requires_grad_()
    grad = torch.randn(b, s, d).to(dtype)
    train_peer = tutorial(d, s, P).to(dtype).train()

    def backward(module: Any) -> None:
        xg.grad = None
        module(xg).backward(grad)

    table.add(group, f"posenc train p={P}, fwd", timed(lambda: ours(xg)), refs)
    table.add(group, f"tutorial module train p={P}, fwd", timed(lambda: train_peer(xg)), refs)
    table.add(group, f"posenc train p={P}, fwd+bwd", timed(lambda: backward(ours)), refs)
    label = f"tutorial module train p={P}, fwd+bwd"
    table.add(group, label, timed(lambda: backward(train_peer)), refs)


def _compiled_group(
    table: Table, timed: Callable[[Callable[[], Any]], Timing], base: Any, dtype: Any, name: str
) -> None:
    """The tutorial module in training under ``torch.compile`` (full run only, after everything
    else: compiling takes seconds and leaves worker processes behind)."""
    import torch

    b, s, d = base.shape
    group = f"add {name} {b}x{s}x{d}"
    x = base.to(dtype)
    buf = torch.empty_like(x)
    t_clone = timed(x.clone)
    t_copy = timed(lambda: buf.copy_(x))
    refs = {"clone": t_clone, "copy_": t_copy}
    xg = x.clone().requires_grad_()
    train_peer = tutorial_module(torch)(d, s, P).to(dtype).train()
    try:
        start = time.perf_counter()
        compiled = torch.compile(train_peer)
        compiled(xg)
    except Exception as exc:  # no C++ compiler, or inductor unavailable
        print(f"add: torch.compile row skipped ({type(exc).__name__}: {exc})")
        return
    note = f"clone/copy_ re-measured; first call (compile) {time.perf_counter() - start:.0f} s"
    label = f"tutorial module train p={P}, fwd, torch.compile"
    table.add(group, label, timed(lambda: compiled(xg)), refs, note)


def _embedding_group(
    table: Table, timed: Callable[[Callable[[], Any]], Timing], shape: tuple[int, int, int]
) -> None:
    """TransformerEmbedding eval against the clone of its output-sized tensor (fp32)."""
    import torch

    from posenc.torch import TransformerEmbedding

    b, s, d = shape
    group = f"embed fp32 {b}x{s}x{d}"
    out_like = torch.randn(b, s, d)
    buf = torch.empty_like(out_like)
    t_clone = timed(out_like.clone)
    t_copy = timed(lambda: buf.copy_(out_like))
    refs = {"clone": t_clone, "copy_": t_copy}
    table.add(group, "x clone", t_clone, refs)
    table.add(group, "x copy_", t_copy, refs)
    tokens = torch.randint(0, VOCAB, (b, s))
    emb = TransformerEmbedding(VOCAB, d, dropout=P, max_len=s).eval()
    label = "posenc TransformerEmbedding eval"
    table.add(group, label, timed(_inference(lambda: emb(tokens))), refs, "inference_mode")
    label = "posenc TransformerEmbedding eval, grad mode"
    table.add(group, label, timed(lambda: emb(tokens)), refs, "weights need grad: unfused")
    pe_peer = tutorial_module(torch)(d, s, P).eval()
    scale = math.sqrt(d)
    label = "eager: nn.Embedding x sqrt(d) + tutorial module"
    table.add(group, label, timed(_inference(lambda: pe_peer(emb.token(tokens) * scale))), refs)


def run(table: Table, *, quick: bool) -> None:
    """Add the rows described in the module docstring to ``table``."""
    import torch

    shape = QUICK if quick else FULL
    repeats = 3 if quick else 7

    def timed(fn: Callable[[], Any]) -> Timing:
        return measure(fn, repeats=repeats, warmup=1 if quick else 2)

    torch.manual_seed(0)
    base = torch.randn(*shape)
    dtypes = ((torch.float32, "fp32"), (torch.bfloat16, "bf16"))
    for dtype, name in dtypes:
        _add_group(table, timed, base, dtype, name)
    _embedding_group(table, timed, shape)
    if not quick:
        for dtype, name in dtypes:
            _compiled_group(table, timed, base, dtype, name)


if __name__ == "__main__":
    run_alone(run, __doc__)
