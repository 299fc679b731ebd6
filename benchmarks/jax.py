"""posenc.jax: jitted RoPE against a plain ``jnp`` recipe and a copy, and the table build.

Run from the repository root::

    PYTHONPATH=src:. python -m benchmarks --only jax [--quick]

Full run: ``x`` of shape (batch, seq, heads, head_dim) = (8, 2048, 16, 64), float32 and
bfloat16, 21 rounds; ``--quick``: (2, 256, 4, 64), float32 only, 3 rounds. Every function
is jitted and timed after its compilation (the warm-up calls), each call ending in
``block_until_ready``;
the rotations are timed in turns, one call each per round (medians per function), so that a
shared machine's changing load falls on all of them alike.

Rows, per dtype:

- ``x + 0``: a jitted copy of ``x`` (read once, write once; the zero is an argument, or XLA
  would return ``x`` itself): memory speed, the reference;
- the plain recipe: ``x * cos + rotate_half(x) * sin`` in ``jnp`` with float32 tables
  ``(seq, 1, head_dim)`` passed in (Hugging Face's formula, as JAX users write it);
- ``pj.apply_rotary`` with the same tables passed in (traced: the layout check makes rows of a
  wrong layout NaN), and with one column per pair (``rotary_dim=``: no check);
- ``pj.RotaryEmbedding`` called with known positions (the tables are constants of the graph).

Ratio columns: time / time of ``x + 0`` and of the plain recipe, measured in this run
(target: at most 1.3x the copy, never slower than the recipe). Table build: ``(8192, 128)``
cos/sin tables from known positions (the NumPy core, float64 rounded once), from traced
positions (the float32 double-float engine, jitted), and the float32 recipe
``cos(p * inv_freq)`` jitted (whose angles are off by ~1e-3 at these positions).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.harness import Table, Timing, measure, run_alone

FULL = (8, 2048, 16, 64)
QUICK = (2, 256, 4, 64)
TABLE_POSITIONS = 8192


def interleaved(calls: dict[str, Callable[[], Any]], repeats: int) -> dict[str, Timing]:
    """Time the calls in turns, one call each per round (after two warm-up rounds): a load
    that comes and goes on a shared machine falls on all of them alike, so their ratios
    hold better than those of timings taken one after the other."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(repeats + 2):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            if round_ >= 2:
                times[name].append(time.perf_counter() - start)
    return {
        name: Timing(statistics.median(t), min(t), max(t), repeats) for name, t in times.items()
    }


def run(table: Table, *, quick: bool) -> None:
    import jax
    import jax.numpy as jnp

    import posenc.jax as pj

    shape = QUICK if quick else FULL
    repeats = 3 if quick else 21
    _, seq, _, head_dim = shape

    def timed(fn: Callable[..., Any], *args: Any) -> Timing:
        return measure(lambda: jax.block_until_ready(fn(*args)), repeats=repeats, warmup=2)

    def ready(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        return lambda: jax.block_until_ready(fn(*args))

    def rotate_half(x: Any) -> Any:
        x1, x2 = jnp.split(x, 2, axis=-1)
        return jnp.concatenate((-x2, x1), axis=-1)

    @jax.jit
    def recipe(x: Any, cos: Any, sin: Any) -> Any:
        return (x * cos + rotate_half(x) * sin).astype(x.dtype)

    # the zero is an argument: a constant 0 would let XLA return x itself, copying nothing
    copy = jax.jit(lambda x, zero: x + zero)
    apply = jax.jit(lambda x, c, s: pj.apply_rotary(x, c, s))
    per_pair = jax.jit(lambda x, c, s: pj.apply_rotary(x, c, s, rotary_dim=head_dim))
    rope = pj.RotaryEmbedding(head_dim, base=10000.0)
    positions = np.arange(seq)
    module = jax.jit(lambda x: rope(x, positions))

    cos, sin = pj.rotary_cos_sin(seq, head_dim)
    cos, sin = cos[:, None], sin[:, None]  # (seq, 1, head_dim), float32
    half = head_dim // 2
    rng = np.random.default_rng(0)
    for dtype in (jnp.float32,) if quick else (jnp.float32, jnp.bfloat16):
        name = jnp.dtype(dtype).name
        x = jnp.asarray(rng.standard_normal(shape, dtype=np.float32), dtype=dtype)
        zero = jnp.zeros((), dtype=dtype)
        timings = interleaved(
            {
                "x + 0 (jitted copy)": ready(copy, x, zero),
                "plain jnp rotate_half recipe": ready(recipe, x, cos, sin),
                "pj.apply_rotary (tables passed in)": ready(apply, x, cos, sin),
                "pj.apply_rotary (one column per pair)": ready(
                    per_pair, x, cos[..., :half], sin[..., :half]
                ),
                "pj.RotaryEmbedding (known positions)": ready(module, x),
            },
            repeats,
        )
        refs = {
            "x + 0": timings["x + 0 (jitted copy)"],
            "jnp recipe": timings["plain jnp rotate_half recipe"],
        }
        group = f"jax rope {name} {shape}"
        for what, timing in timings.items():
            table.add(group, what, timing, refs)

    # the table build
    length = 1024 if quick else TABLE_POSITIONS
    dim = 128
    ints = jnp.arange(length, dtype=jnp.int32)
    traced = jax.jit(lambda p: pj.rotary_cos_sin(p, dim))
    inv_freq = jnp.asarray(1.0 / 10000.0 ** (np.arange(0, dim, 2) / dim), jnp.float32)

    @jax.jit
    def float32_recipe(p: Any) -> Any:
        angles = p.astype(jnp.float32)[:, None] * inv_freq
        emb = jnp.concatenate((angles, angles), axis=-1)
        return jnp.cos(emb), jnp.sin(emb)

    refs = {"float32 recipe": timed(float32_recipe, ints)}
    group = f"jax table build ({length}, {dim})"
    table.add(group, "float32 recipe cos(p * inv_freq), jitted", refs["float32 recipe"], refs)
    table.add(group, "pj.rotary_cos_sin, traced positions (jitted)", timed(traced, ints), refs)
    table.add(
        group,
        "pj.rotary_cos_sin, known positions (NumPy core)",
        measure(lambda: jax.block_until_ready(pj.rotary_cos_sin(length, dim)), repeats=repeats),
        refs,
    )
    table.note(
        f"jax: {jax.__version__} on {jax.devices()[0].platform}; jitted functions timed after "
        "compiling; ratios to `x + 0` (memory speed) and to the plain jnp recipe."
    )


if __name__ == "__main__":
    run_alone(run, __doc__)
