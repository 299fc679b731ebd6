"""Train a small transformer encoder to copy a sequence with a shift, at positions it has seen
and at positions it has not.

The task: the output at position ``p`` is the input token at position ``p - shift`` (the
first ``shift`` outputs are not scored). Each sequence of ``length`` random tokens starts at a
random position; during training every sequence lies inside positions ``0 ..
train_positions - 1``. The trained model is then scored on held-out sequences twice: inside
those positions (*seen positions*) and inside ``train_positions .. test_positions - 1``, where
no training sequence ever was (*unseen positions*).

Copying with a shift is a *relative* lookup: "the token ``shift`` places back". With the
paper's sinusoidal encoding, ``PE[p - k]`` is a fixed linear map (a rotation per channel pair)
of ``PE[p]``, the same for every ``p``, so attention can learn the lookup once and use it at
any position. Three models are trained with the same data, initial weights and schedule; only
the term added to the token embeddings differs:

- ``posenc``: :class:`posenc.torch.SinusoidalPositionalEncoding` (the paper's table);
- ``none``: nothing. A ``torch.nn.TransformerEncoder`` without positions is
  permutation-equivariant: it sees a bag of tokens and can do no better than guess a frequent
  token of the sequence (about 0.2 token accuracy here);
- ``odd-exponent``: a table with the odd-exponent cosine bug (cos uses ``base^((2i+1)/d)``,
  :func:`posenc.analysis.odd_exponent_table`, a bug found in tutorial code), as a fixed
  buffer. Its cosine columns turn at a different speed from their sines, so no fixed linear map
  takes ``PE[p]`` to ``PE[p - k]``.

What it shows (the table below, five random seeds): the buggy table learns the positions it was
trained on almost as well as posenc's (token accuracy 0.990 against 1.000), but its model does
not carry the shift to positions it has not seen (0.236, close to the 0.197 of no positions at
all), while posenc's model does, though not perfectly (0.921). With a shorter budget the bug
also learns more slowly at the positions it has seen. When every training sequence starts at
position 0 (``--train-positions 16``), the task needs only those 16 absolute positions and the
buggy table trains exactly as well as the correct one (1.000 both): the bug breaks the
*relation* between positions, not their distinctness. Both runs are in examples/README.md.

Usage (from the repository root, with posenc and PyTorch installed)::

    python examples/order_matters.py                 # the full run: 5 seeds x 3 encodings
    python examples/order_matters.py --seeds 1       # one seed: three trainings
    python examples/order_matters.py --steps 300 --seeds 10 --encodings posenc odd-exponent

It runs on one thread unless ``--threads N`` asks for more: these models are too small to gain
from a second thread, and a thread that waits for a core busy with other work slows training
down many times over. While a model trains, a progress line goes to stderr at least every
5 seconds (``[posenc, seed 0] step 400/800``); the table goes to stdout.

Runtime, measured once each with ``time`` on a 2-core machine that other jobs kept busy
(load average about 6), PyTorch 2.13 CPU, one thread: the full run took 4 min 39 s of wall
time (80 s of CPU time), ``--seeds 1`` took 59 s (19 s of CPU time). On idle cores the wall
time approaches the CPU time. The full run printed::

    Task: copy 16 tokens (vocabulary 16) shifted by 3; trained at positions 0-63, tested at 64-255
    Model: d_model=64, layers=1, heads=4; 800 steps of 32 sequences, lr=0.005; seeds 0-4
    token accuracy: mean ± standard deviation over 5 random seeds (min-max)
    encoding       seen positions               unseen positions             seconds
    posenc         1.000 ± 0.000 (1.000-1.000)  0.921 ± 0.032 (0.885-0.972)     14.2
    none           0.197 ± 0.001 (0.195-0.199)  0.197 ± 0.005 (0.192-0.204)     21.0
    odd-exponent   0.990 ± 0.003 (0.985-0.994)  0.236 ± 0.014 (0.222-0.259)     19.3

Everything is seeded (weights, training batches, evaluation sets) and run with
``torch.use_deterministic_algorithms(True)``, so a rerun on the same machine and thread count
prints the same accuracies.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch import nn

from posenc.torch import SinusoidalPositionalEncoding

ENCODINGS = ("posenc", "none", "odd-exponent")

#: Defaults of :func:`train` and of the script; the test suite uses smaller ones.
DEFAULTS: dict[str, Any] = {
    "steps": 800,
    "d_model": 64,
    "layers": 1,
    "heads": 4,
    "length": 16,
    "vocab": 16,
    "shift": 3,
    "train_positions": 64,
    "test_positions": 256,
    "batch": 32,
    "seed": 0,
    "lr": 5e-3,
}

#: Random seeds per encoding in the script's default run.
SEEDS = 5

#: Sequences in each held-out evaluation set (seen positions, unseen positions).
EVAL_SEQUENCES = 1024

#: The script reports its progress on stderr at least this often (seconds) while it trains.
PROGRESS_SECONDS = 5.0


class Result(NamedTuple):
    """Outcome of one training run.

    Attributes:
        encoding: which positional term was added (one of :data:`ENCODINGS`).
        seed: the random seed of weights and data.
        seen_accuracy: fraction of scored output tokens that are right on held-out sequences
            at the positions used in training, in [0, 1].
        unseen_accuracy: the same on held-out sequences at positions never used in training.
        seconds: wall-clock time of training and evaluation.
    """

    encoding: str
    seed: int
    seen_accuracy: float
    unseen_accuracy: float
    seconds: float


class _FixedTable(nn.Module):
    """Adds rows of a fixed ``(n, d)`` table (a non-trainable buffer) to ``(b, s, d)`` input."""

    table: torch.Tensor

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("table", table)

    def forward(self, x: torch.Tensor, *, positions: torch.Tensor) -> torch.Tensor:
        return x + self.table[positions]


class _NoPositions(nn.Module):
    """Adds nothing: the encoder sees a bag of tokens."""

    def forward(self, x: torch.Tensor, *, positions: torch.Tensor) -> torch.Tensor:
        return x


class Copier(nn.Module):
    """Token embedding + positional term + ``nn.TransformerEncoder`` + a linear read-out.

    ``forward(tokens, positions)`` maps integer tokens ``(b, s)`` at integer positions
    ``(b, s)`` to logits ``(b, s, vocab)`` (float32). The token embedding is not scaled by
    sqrt(d_model): ``nn.Embedding`` starts with unit-variance entries, the same scale as the
    encoding's values in [-1, 1].
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

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.position(self.embed(tokens), positions=positions)
        out: torch.Tensor = self.head(self.encoder(x))
        return out


def _position_term(encoding: str, positions: int, d_model: int) -> nn.Module:
    """The term added to the embeddings, for positions ``0 .. positions - 1``."""
    if encoding == "posenc":
        return SinusoidalPositionalEncoding(d_model)
    if encoding == "odd-exponent":
        from posenc.analysis import odd_exponent_table

        return _FixedTable(torch.from_numpy(odd_exponent_table(positions, d_model)))
    return _NoPositions()


def _batch(
    generator: torch.Generator, size: int, c: dict[str, Any], low: int, high: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``size`` random sequences (tokens, positions), each inside positions ``low .. high-1``."""
    tokens = torch.randint(0, c["vocab"], (size, c["length"]), generator=generator)
    start = torch.randint(low, high - c["length"] + 1, (size, 1), generator=generator)
    return tokens, start + torch.arange(c["length"])


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
    >>> check_settings(length=16, shift=16)
    Traceback (most recent call last):
    ...
    ValueError: shift must be smaller than length = 16, got 16
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
    c = {**DEFAULTS, **checked}
    if c["d_model"] % c["heads"]:
        raise ValueError(f"d_model must be divisible by heads = {c['heads']}, got {c['d_model']}")
    if c["shift"] >= c["length"]:
        raise ValueError(f"shift must be smaller than length = {c['length']}, got {c['shift']}")
    if c["train_positions"] < c["length"]:
        raise ValueError(
            f"train_positions must be >= length = {c['length']}, got {c['train_positions']}"
        )
    if c["test_positions"] < c["train_positions"] + c["length"]:
        raise ValueError(
            "test_positions must be >= train_positions + length = "
            f"{c['train_positions'] + c['length']}, got {c['test_positions']}"
        )
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
    shift: int = DEFAULTS["shift"],
    train_positions: int = DEFAULTS["train_positions"],
    test_positions: int = DEFAULTS["test_positions"],
    batch: int = DEFAULTS["batch"],
    seed: int = DEFAULTS["seed"],
    lr: float = DEFAULTS["lr"],
    progress: Callable[[str], None] | None = None,
) -> Result:
    """Train a :class:`Copier` with one positional term and evaluate it on held-out data.

    Args:
        encoding: ``"posenc"`` (posenc's sinusoidal encoding), ``"none"`` (no positions) or
            ``"odd-exponent"`` (a fixed table with the odd-exponent cosine bug).
        steps: optimiser steps, an integer >= 1.
        d_model: model width, an integer >= 1 divisible by ``heads``.
        layers: encoder layers, an integer >= 1.
        heads: attention heads, an integer >= 1.
        length: tokens per sequence, an integer >= 2.
        vocab: number of distinct tokens, an integer >= 2.
        shift: the output at position ``p`` is the input at ``p - shift``; 1 <= shift < length.
        train_positions: training sequences lie inside positions ``0 .. train_positions-1``
            (an integer >= ``length``); so does the "seen positions" evaluation set.
        test_positions: the "unseen positions" evaluation set lies inside positions
            ``train_positions .. test_positions-1`` (an integer >= train_positions + length).
        batch: sequences per training step, an integer >= 1.
        seed: seeds the weights, the training batches and the evaluation sets (int >= 0).
        lr: AdamW learning rate, a positive finite number (cosine decay to 0 over ``steps``).
        progress: ``None``, or a function called with a line of text when training starts,
            every :data:`PROGRESS_SECONDS` seconds of training (``"step 400/800"``) and when
            the run is done.

    Returns:
        a :class:`Result` with the token accuracy on ``EVAL_SEQUENCES`` held-out sequences at
        seen and at unseen positions, and the seconds taken. The caller's global RNG state and
        deterministic-algorithms setting are left as they were.

    >>> r = train("posenc", steps=2, d_model=8, heads=2, length=4, vocab=5, shift=1,
    ...           train_positions=6, test_positions=12, batch=4)
    >>> r.encoding, 0.0 <= r.seen_accuracy <= 1.0, 0.0 <= r.unseen_accuracy <= 1.0
    ('posenc', True, True)
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}, got {encoding!r}")
    c = {
        **DEFAULTS,
        **check_settings(
            steps=steps,
            d_model=d_model,
            layers=layers,
            heads=heads,
            length=length,
            vocab=vocab,
            shift=shift,
            train_positions=train_positions,
            test_positions=test_positions,
            batch=batch,
            seed=seed,
            lr=lr,
        ),
    }
    k = c["shift"]
    report = progress if progress is not None else (lambda line: None)
    deterministic = torch.are_deterministic_algorithms_enabled()
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.use_deterministic_algorithms(True)
        try:
            torch.manual_seed(c["seed"])
            model = Copier(
                _position_term(encoding, c["test_positions"], c["d_model"]),
                vocab=c["vocab"],
                d_model=c["d_model"],
                layers=c["layers"],
                heads=c["heads"],
            )
            data = torch.Generator().manual_seed(c["seed"])
            evaluation = torch.Generator().manual_seed(2**31 + c["seed"])
            seen = _batch(evaluation, EVAL_SEQUENCES, c, 0, c["train_positions"])
            unseen = _batch(
                evaluation, EVAL_SEQUENCES, c, c["train_positions"], c["test_positions"]
            )
            optimiser = torch.optim.AdamW(model.parameters(), lr=c["lr"], weight_decay=0.0)
            schedule = torch.optim.lr_scheduler.LambdaLR(
                optimiser, lambda step: 0.5 * (1.0 + math.cos(math.pi * step / c["steps"]))
            )
            loss_fn = nn.CrossEntropyLoss()
            model.train()
            report("training")
            last_report = time.perf_counter()
            for step in range(1, c["steps"] + 1):
                tokens, positions = _batch(data, c["batch"], c, 0, c["train_positions"])
                logits = model(tokens, positions)[:, k:]
                loss = loss_fn(logits.reshape(-1, c["vocab"]), tokens[:, :-k].reshape(-1))
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                optimiser.step()
                schedule.step()
                if time.perf_counter() - last_report >= PROGRESS_SECONDS or step == c["steps"]:
                    report(f"step {step}/{c['steps']}")
                    last_report = time.perf_counter()
            model.eval()
            accuracy = []
            with torch.no_grad():
                for tokens, positions in (seen, unseen):
                    right = model(tokens, positions)[:, k:].argmax(-1) == tokens[:, :-k]
                    accuracy.append(float(right.float().mean()))
        finally:
            torch.use_deterministic_algorithms(deterministic)
    seconds = time.perf_counter() - start
    report(f"done in {seconds:.1f} s")
    return Result(encoding, c["seed"], accuracy[0], accuracy[1], seconds)


def run(encoding: str, **settings: Any) -> float:
    """Token accuracy at unseen positions (a float in [0, 1]) of :func:`train` with the same
    arguments.

    >>> run("none", steps=1, d_model=8, heads=2, length=4, vocab=5, shift=1,
    ...     train_positions=4, test_positions=8, batch=2) <= 1.0
    True
    """
    return train(encoding, **settings).unseen_accuracy


def _summary(values: Sequence[float]) -> str:
    """``mean ± sd (min-max)`` of several values; the value itself for one."""
    if len(values) == 1:
        return f"{values[0]:.3f}"
    spread = statistics.stdev(values)
    return f"{statistics.mean(values):.3f} ± {spread:.3f} ({min(values):.3f}-{max(values):.3f})"


def format_table(results: Sequence[Result]) -> str:
    """One row per encoding (in order of first appearance): token accuracy at seen and at
    unseen positions, as mean ± standard deviation (min-max) over the results' seeds, and the
    mean seconds per run.

    >>> print(format_table([Result("none", 0, 0.2, 0.19, 1.0), Result("none", 1, 0.2, 0.21, 3.0)]))
    encoding       seen positions               unseen positions             seconds
    none           0.200 ± 0.000 (0.200-0.200)  0.200 ± 0.014 (0.190-0.210)      2.0
    """
    by_encoding: dict[str, list[Result]] = {}
    for r in results:
        by_encoding.setdefault(r.encoding, []).append(r)
    width = 28 if any(len(rs) > 1 for rs in by_encoding.values()) else 16
    lines = [
        f"{'encoding':<14} {'seen positions':<{width}} {'unseen positions':<{width}} {'seconds':>7}"
    ]
    for name, rs in by_encoding.items():
        seen = _summary([r.seen_accuracy for r in rs])
        unseen = _summary([r.unseen_accuracy for r in rs])
        seconds = statistics.mean(r.seconds for r in rs)
        lines.append(f"{name:<14} {seen:<{width}} {unseen:<{width}} {seconds:>7.1f}")
    return "\n".join(lines)


_HELP = {
    "steps": "optimiser steps",
    "d_model": "model width",
    "layers": "encoder layers",
    "heads": "attention heads",
    "length": "tokens per sequence",
    "vocab": "distinct tokens",
    "shift": "the output at position p is the input at p - shift",
    "train_positions": "training sequences lie inside positions 0 .. N-1",
    "test_positions": "unseen-position tests lie inside train-positions .. N-1",
    "batch": "sequences per step",
    "seed": "first random seed of weights and data",
    "lr": "peak learning rate (AdamW, cosine decay)",
}


def _reporter(encoding: str, seed: int) -> Callable[[str], None]:
    """Progress lines ``[posenc, seed 0] step 400/800`` on stderr, flushed at once."""

    def report(line: str) -> None:
        print(f"[{encoding}, seed {seed}] {line}", file=sys.stderr, flush=True)

    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Train one model per encoding and seed; print their accuracies side by side."""
    parser = argparse.ArgumentParser(
        description="Train a transformer encoder to copy sequences with a shift, with posenc's "
        "encoding, with none and with a table that has the odd-exponent cosine bug; print "
        "their token accuracies at positions seen in training and at unseen positions."
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
        "--seeds",
        type=int,
        default=SEEDS,
        metavar="N",
        help=f"random seeds per encoding: seed, seed+1, ... (default {SEEDS})",
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
        help="intra-op threads (default 1: these models are small, and a second thread that "
        "waits for a core busy with other work slows training down many times over)",
    )
    args = parser.parse_args(argv)
    settings = {name: getattr(args, name) for name in DEFAULTS}
    try:
        threads = 1 if args.threads is None else check_int("threads", args.threads, minimum=1)
        seeds = check_int("seeds", args.seeds, minimum=1)
        check_settings(**settings)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    torch.set_num_threads(threads)
    first = settings["seed"]
    seed_range = f"seed {first}" if seeds == 1 else f"seeds {first}-{first + seeds - 1}"
    print(
        "Task: copy {length} tokens (vocabulary {vocab}) shifted by {shift}; "
        "trained at positions 0-{last_train}, tested at {train_positions}-{last_test}\n"
        "Model: d_model={d_model}, layers={layers}, heads={heads}; "
        "{steps} steps of {batch} sequences, lr={lr}; {seed_range}".format(
            **settings,
            last_train=settings["train_positions"] - 1,
            last_test=settings["test_positions"] - 1,
            seed_range=seed_range,
        ),
        flush=True,
    )
    print(
        f"training {seeds * len(args.encodings)} models; progress on stderr",
        file=sys.stderr,
        flush=True,
    )
    results = [
        train(encoding, **{**settings, "seed": first + i}, progress=_reporter(encoding, first + i))
        for i in range(seeds)
        for encoding in args.encodings
    ]
    if seeds > 1:
        print(f"token accuracy: mean ± standard deviation over {seeds} random seeds (min-max)")
    print(format_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
