"""Table build: time to produce an L x d float32 sinusoidal table, and its error.

Run from the repository root::

    PYTHONPATH=src:. python -m benchmarks.tables [--quick]

Full run: L x d = 8192 x 1024, 9 repeats; ``--quick``: 1024 x 256, 3 repeats. Rows:

- hardware references on a tensor of the table's shape and dtype: ``x.clone()``,
  ``buf.copy_(x)`` and ``torch.empty(L, d).fill_(1.0)`` (writing the table, nothing else);
- the PyTorch tutorial recipe (angles in float32: ``div_term = exp(arange(0, d, 2) *
  -(log(10000)/d))``), re-typed from the PyTorch tutorial;
- the same recipe computed in float64, then cast to float32 (accurate, the slow way);
- ``positional_encodings.torch_encodings.PositionalEncoding1D`` (its cache cleared per call);
- posenc: ``posenc.torch.sinusoidal(L, d)``, the module's table build
  (``SinusoidalPositionalEncoding(d, max_len=L)``), the same table in bfloat16, and the NumPy
  core ``posenc.sinusoidal(L, d)`` next to NumPy's ``np.empty`` + ``fill``.

Ratio columns: time / time of the tutorial recipe and of ``empty`` + ``fill_`` (besides clone
and copy_), all measured in this run. The note gives each method's max absolute error against
the direct float64 table (posenc must stay within 3e-8).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import posenc
from benchmarks.harness import Table, Timing, measure, run_alone

FULL = (8192, 1024)
QUICK = (1024, 256)


def tutorial_recipe(length: int, d_model: int, torch: Any) -> Any:
    """The PyTorch tutorial recipe's table (re-typed from the tutorial), in the default fp32."""
    pe = torch.zeros(length, d_model)
    position = torch.arange(0, length, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def float64_then_cast(length: int, d_model: int, torch: Any) -> Any:
    """The same recipe in float64, cast to float32 at the end (error ~3e-8, but slow)."""
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    position = torch.arange(0, length, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.to(torch.float32)


def max_error(result: Any, exact: np.ndarray) -> float:
    """Max |result - exact| of a NumPy array or torch tensor holding the table."""
    values = result if isinstance(result, np.ndarray) else result.double().numpy()
    return float(np.abs(values.reshape(exact.shape).astype(np.float64) - exact).max())


def run(table: Table, *, quick: bool) -> None:
    """Add the table-build rows to ``table`` (see the module docstring)."""
    length, d_model = QUICK if quick else FULL
    repeats = 3 if quick else 9
    group = f"table {length}x{d_model} fp32"
    exact = posenc.sinusoidal(length, d_model, dtype=np.float64)  # the direct float64 build

    def timed(fn: Callable[[], Any]) -> Timing:
        return measure(fn, repeats=repeats, warmup=1 if quick else 2)

    def error_note(result: Any) -> str:
        return f"max err {max_error(result, exact):.2g}"

    np_fill = timed(lambda: np.empty((length, d_model), dtype=np.float32).fill(1.0))
    np_refs = {"empty+fill_": np_fill}
    try:
        import torch
    except ImportError:
        print("tables: torch is not installed; only the NumPy rows are measured")
        refs: dict[str, Timing] = {}
    else:
        x = torch.randn(length, d_model)
        buf = torch.empty_like(x)
        t_clone = timed(x.clone)
        t_copy = timed(lambda: buf.copy_(x))
        t_fill = timed(lambda: torch.empty(length, d_model).fill_(1.0))
        t_recipe = timed(lambda: tutorial_recipe(length, d_model, torch))
        refs = {
            "clone": t_clone,
            "copy_": t_copy,
            "tutorial recipe": t_recipe,
            "empty+fill_": t_fill,
        }
        np_refs = {"tutorial recipe": t_recipe, "empty+fill_": np_fill}
        table.add(group, "x.clone()", t_clone, refs)
        table.add(group, "buf.copy_(x)", t_copy, refs)
        table.add(group, "torch.empty + fill_ (writing the table)", t_fill, refs)
        recipe = tutorial_recipe(length, d_model, torch)
        table.add(group, "tutorial recipe, fp32", t_recipe, refs, error_note(recipe))
        cast = float64_then_cast(length, d_model, torch)
        t_cast = timed(lambda: float64_then_cast(length, d_model, torch))
        table.add(group, "float64 then cast (torch)", t_cast, refs, error_note(cast))
        try:
            from positional_encodings.torch_encodings import PositionalEncoding1D
        except ImportError as exc:
            print(f"tables: positional-encodings skipped ({exc})")
        else:
            peer = PositionalEncoding1D(d_model)
            shape_only = torch.zeros(1, length, d_model)

            def peer_build() -> Any:
                peer.cached_penc = None  # its cache would make later calls free
                return peer(shape_only)

            t_peer = timed(peer_build)
            table.add(group, "positional-encodings 1D", t_peer, refs, error_note(peer_build()))

        from posenc.torch import SinusoidalPositionalEncoding
        from posenc.torch import sinusoidal as torch_sinusoidal

        ours = torch_sinusoidal(length, d_model)
        t_ours = timed(lambda: torch_sinusoidal(length, d_model))
        table.add(group, "posenc.torch.sinusoidal", t_ours, refs, error_note(ours))
        module = SinusoidalPositionalEncoding(d_model, max_len=length)
        t_module = timed(lambda: SinusoidalPositionalEncoding(d_model, max_len=length))
        table.add(group, "posenc module build (max_len=L)", t_module, refs, error_note(module.pe))
        bf16 = torch_sinusoidal(length, d_model, dtype=torch.bfloat16)
        t_bf16 = timed(lambda: torch_sinusoidal(length, d_model, dtype=torch.bfloat16))
        table.add(
            group, "posenc.torch.sinusoidal, bfloat16", t_bf16, refs, error_note(bf16) + " (bf16)"
        )
    ours_np = posenc.sinusoidal(length, d_model)
    t_np = timed(lambda: posenc.sinusoidal(length, d_model))
    table.add(group, "np.empty + fill (NumPy's writing speed)", np_fill, np_refs)
    table.add(
        group,
        "posenc.sinusoidal (NumPy, 1 thread)",
        t_np,
        np_refs,
        error_note(ours_np) + "; x empty+fill_ vs NumPy's",
    )


if __name__ == "__main__":
    run_alone(run, __doc__)
