"""Train a small transformer encoder to reverse sequences, with and without positions.

Reversing ``[a, b, c, d]`` into ``[d, c, b, a]`` needs to know where each token sits. A
``torch.nn.TransformerEncoder`` without positional information is permutation-equivariant:
shuffling its input shuffles its output the same way, so the token it predicts at a position
depends only on the token there and on the unordered set of all tokens. It cannot reverse, and
its accuracy stays near that of guessing one of the tokens in the sequence. Adding posenc's
sinusoidal encoding to the token embeddings makes the task easy.

Three models are trained with the same data, initial weights and schedule; only the term added
to the token embeddings differs:

- ``posenc``: :class:`posenc.torch.SinusoidalPositionalEncoding` (the paper's table);
- ``none``: nothing, so the encoder sees a bag of tokens;
- ``seed001``: the table of seed 001, whose cosine columns use the odd exponents
  ``10000^((2i+1)/d)`` (a bug: :func:`posenc.analysis.odd_exponent_table`), as a fixed buffer.

The seed-001 table is still a set of distinct sinusoids per position, so a model can learn to
use it; how well it does is reported, not assumed.

Usage (from the repository root, with posenc and PyTorch installed)::

    python examples/order_matters.py              # the defaults below, about 1-2 minutes
    python examples/order_matters.py --threads 1  # steadier on cores shared with other work
    python examples/order_matters.py --steps 300 --seed 1 --encodings posenc none

Measured on a 2-core machine shared with other jobs, PyTorch 2.13 CPU,
``python examples/order_matters.py --threads 1`` (78 s in all)::

    Task: reverse 24 tokens from a vocabulary of 32 (seed 0)
    Model: d_model=64, layers=2, heads=4; 800 steps of 64 sequences, lr=0.002
    encoding   token acc  seq acc  seconds
    posenc         1.000    1.000     23.9
    none           0.125    0.000     25.2
    seed001        1.000    1.000     24.6

With PyTorch's default two threads each run takes 15-17 s when the cores are free (and up to
several times longer while another process competes for them); ``none`` then reads 0.126.

Everything is seeded (weights, training batches, evaluation set) and run with
``torch.use_deterministic_algorithms(True)``, so a rerun on the same machine and thread count
prints the same accuracies.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from torch import nn

from posenc.torch import SinusoidalPositionalEncoding

ENCODINGS = ("posenc", "none", "seed001")

#: Defaults of the full script (``main``); the test suite uses smaller ones.
DEFAULTS: dict[str, Any] = {
    "steps": 800,
    "d_model": 64,
    "layers": 2,
    "heads": 4,
    "length": 24,
    "vocab": 32,
    "batch": 64,
    "seed": 0,
    "lr": 2e-3,
}

#: Sequences in the held-out evaluation set.
EVAL_SEQUENCES = 1024


class Result(NamedTuple):
    """Outcome of one training run.

    Attributes:
        encoding: which positional term was added (``"posenc"``, ``"none"`` or ``"seed001"``).
        token_accuracy: fraction of output tokens that are right on the held-out set, in [0, 1].
        sequence_accuracy: fraction of held-out sequences reversed without a single error.
        seconds: wall-clock time of training and evaluation.
    """

    encoding: str
    token_accuracy: float
    sequence_accuracy: float
    seconds: float


class _FixedTable(nn.Module):
    """Adds a fixed ``(length, d)`` table (a non-trainable buffer) to ``(b, s, d)`` input."""

    table: torch.Tensor

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("table", table)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[: x.shape[1]]


class Reverser(nn.Module):
    """Token embedding + positional term + ``nn.TransformerEncoder`` + a linear read-out.

    ``forward(tokens)`` maps integer tokens ``(b, s)`` to logits ``(b, s, vocab)`` (float32);
    the target at position ``i`` is the input token at position ``s - 1 - i``. The token
    embedding is not scaled by sqrt(d_model): ``nn.Embedding`` starts with unit-variance
    entries, the same scale as the encoding's values in [-1, 1].
    """

    def __init__(
        self, position: nn.Module, *, vocab: int, d_model: int, layers: int, heads: int
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = position
        layer = nn.TransformerEncoderLayer(
            d_model,
            heads,
            dim_feedforward=4 * d_model,
            dropout=0.0,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.position(self.embed(tokens))
        out: torch.Tensor = self.head(self.encoder(x))
        return out


def _position_term(encoding: str, length: int, d_model: int) -> nn.Module:
    if encoding == "posenc":
        return SinusoidalPositionalEncoding(d_model)
    if encoding == "seed001":
        from posenc.analysis import odd_exponent_table

        table = torch.from_numpy(odd_exponent_table(length, d_model))
        return _FixedTable(table)
    return nn.Identity()


def _batch(generator: torch.Generator, size: int, length: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (size, length), generator=generator)


def check_int(name: str, value: Any, *, minimum: int) -> int:
    """``value`` as an int >= ``minimum`` (bools and floats refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_base(name: str, value: Any) -> float:
    """``value`` as a positive finite float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a positive finite number, got {value!r}")
    if not 0.0 < float(value) < math.inf:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def check_settings(**settings: Any) -> dict[str, Any]:
    """Validate the keyword arguments of :func:`train` (all but ``encoding``); return them.

    Raises ``TypeError``/``ValueError`` naming the argument, the value and what is allowed.

    >>> check_settings(steps=0)
    Traceback (most recent call last):
    ...
    ValueError: steps must be an integer >= 1, got 0
    """
    minimum = {"length": 2, "vocab": 2, "seed": 0}
    checked: dict[str, Any] = {}
    for name, value in settings.items():
        if name not in DEFAULTS:
            raise TypeError(f"unknown setting {name!r}; allowed: {', '.join(DEFAULTS)}")
        if name == "lr":
            checked[name] = check_base("lr", value)
        else:
            checked[name] = check_int(name, value, minimum=minimum.get(name, 1))
    heads = checked.get("heads", DEFAULTS["heads"])
    d_model = checked.get("d_model", DEFAULTS["d_model"])
    if d_model % heads:
        raise ValueError(f"d_model must be divisible by heads = {heads}, got {d_model}")
    return checked


def train(
    encoding: str,
    *,
    steps: int = DEFAULTS["steps"],
    d_model: int = DEFAULTS["d_model"],
    layers: int = DEFAULTS["layers"],
    heads: int = DEFAULTS["heads"],
    length: int = DEFAULTS["length"],
    vocab: int = DEFAULTS["vocab"],
    batch: int = DEFAULTS["batch"],
    seed: int = DEFAULTS["seed"],
    lr: float = DEFAULTS["lr"],
) -> Result:
    """Train a :class:`Reverser` with one positional term and evaluate it on held-out data.

    Args:
        encoding: ``"posenc"`` (posenc's sinusoidal encoding), ``"none"`` (no positions) or
            ``"seed001"`` (seed 001's buggy table, fixed).
        steps: optimiser steps, an integer >= 1.
        d_model: model width, an integer >= 1 divisible by ``heads``.
        layers: encoder layers, an integer >= 1.
        heads: attention heads, an integer >= 1.
        length: tokens per sequence, an integer >= 2.
        vocab: number of distinct tokens, an integer >= 2.
        batch: sequences per training step, an integer >= 1.
        seed: seeds the weights, the training batches and the evaluation set (int >= 0).
        lr: AdamW learning rate, a positive finite number (cosine decay to 0 over ``steps``).

    Returns:
        a :class:`Result` with token and sequence accuracy on ``EVAL_SEQUENCES`` held-out
        sequences and the seconds taken. The caller's global RNG state and
        deterministic-algorithms setting are left as they were.

    >>> r = train("posenc", steps=2, d_model=8, layers=1, heads=2, length=4, vocab=5, batch=4)
    >>> r.encoding, 0.0 <= r.token_accuracy <= 1.0
    ('posenc', True)
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}, got {encoding!r}")
    c = check_settings(
        steps=steps,
        d_model=d_model,
        layers=layers,
        heads=heads,
        length=length,
        vocab=vocab,
        batch=batch,
        seed=seed,
        lr=lr,
    )
    deterministic = torch.are_deterministic_algorithms_enabled()
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.use_deterministic_algorithms(True)
        try:
            torch.manual_seed(c["seed"])
            model = Reverser(
                _position_term(encoding, c["length"], c["d_model"]),
                vocab=c["vocab"],
                d_model=c["d_model"],
                layers=c["layers"],
                heads=c["heads"],
            )
            data = torch.Generator().manual_seed(c["seed"])
            evaluation = torch.Generator().manual_seed(2**31 + c["seed"])
            held_out = _batch(evaluation, EVAL_SEQUENCES, c["length"], c["vocab"])
            optimiser = torch.optim.AdamW(model.parameters(), lr=c["lr"], weight_decay=0.0)
            schedule = torch.optim.lr_scheduler.LambdaLR(
                optimiser, lambda step: 0.5 * (1.0 + math.cos(math.pi * step / c["steps"]))
            )
            loss_fn = nn.CrossEntropyLoss()
            model.train()
            for _ in range(c["steps"]):
                tokens = _batch(data, c["batch"], c["length"], c["vocab"])
                logits = model(tokens)
                loss = loss_fn(logits.reshape(-1, c["vocab"]), tokens.flip(1).reshape(-1))
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                optimiser.step()
                schedule.step()
            model.eval()
            with torch.no_grad():
                right = model(held_out).argmax(-1) == held_out.flip(1)
        finally:
            torch.use_deterministic_algorithms(deterministic)
    return Result(
        encoding,
        float(right.float().mean()),
        float(right.all(dim=1).float().mean()),
        time.perf_counter() - start,
    )


def run(encoding: str, **settings: Any) -> float:
    """Held-out token accuracy (a float in [0, 1]) of :func:`train` with the same arguments.

    >>> run("none", steps=1, d_model=8, layers=1, heads=2, length=4, vocab=5, batch=2) <= 1.0
    True
    """
    return train(encoding, **settings).token_accuracy


def format_table(results: Sequence[Result]) -> str:
    """The results side by side, one row per encoding."""
    lines = [f"{'encoding':<10} {'token acc':>9} {'seq acc':>8} {'seconds':>8}"]
    for r in results:
        lines.append(
            f"{r.encoding:<10} {r.token_accuracy:>9.3f} {r.sequence_accuracy:>8.3f}"
            f" {r.seconds:>8.1f}"
        )
    return "\n".join(lines)


_HELP = {
    "steps": "optimiser steps",
    "d_model": "model width",
    "layers": "encoder layers",
    "heads": "attention heads",
    "length": "tokens per sequence",
    "vocab": "distinct tokens",
    "batch": "sequences per step",
    "seed": "seed of weights and data",
    "lr": "peak learning rate (AdamW, cosine decay)",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Train one model per encoding and print their accuracies side by side."""
    parser = argparse.ArgumentParser(
        description="Train a transformer encoder to reverse sequences with posenc's encoding, "
        "with none and with seed 001's buggy table; print their accuracies side by side."
    )
    for name, default in DEFAULTS.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=type(default),
            default=default,
            metavar="X" if name == "lr" else "N",
            help=f"{_HELP[name]} (default {default})",
        )
    parser.add_argument(
        "--encodings",
        nargs="+",
        choices=ENCODINGS,
        default=list(ENCODINGS),
        metavar="NAME",
        help=f"which to train, among {', '.join(ENCODINGS)} (default all)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="intra-op threads (default: PyTorch's); 1 is best on cores shared with other work",
    )
    args = parser.parse_args(argv)
    settings = {name: getattr(args, name) for name in DEFAULTS}
    try:
        if args.threads is not None:
            torch.set_num_threads(check_int("threads", args.threads, minimum=1))
        check_settings(**settings)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    print(
        "Task: reverse {length} tokens from a vocabulary of {vocab} (seed {seed})\n"
        "Model: d_model={d_model}, layers={layers}, heads={heads}; "
        "{steps} steps of {batch} sequences, lr={lr}".format(**settings)
    )
    results = [train(encoding, **settings) for encoding in args.encodings]
    print(format_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
