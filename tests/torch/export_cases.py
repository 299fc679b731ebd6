"""The modules that tests/torch/test_export.py and test_export_onnx.py export, as cases.

Each case wraps one posenc module in a small ``nn.Module`` whose inputs are all tensors (the
positions and the offset included, so that one graph serves prefill and decode), with the
sequence length dynamic up to ``MAX_LENGTH``. ``inputs(length, offset)`` makes a call of that
length whose positions start at ``offset``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

import posenc.torch as pt
from posenc.torch import hf

MAX_LENGTH = 2**16
#: the length dimension every case declares
LENGTH = torch.export.Dim("length", min=1, max=MAX_LENGTH)
BATCH = torch.export.Dim("batch", min=1, max=64)

HEAD_DIM, HEADS, D_MODEL = 64, 2, 64
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


class RopeAt(nn.Module):
    """``RotaryEmbedding`` at explicit positions."""

    def __init__(self, rope: nn.Module) -> None:
        super().__init__()
        self.rope = rope

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Any:
        return self.rope(q, k, positions=positions)


class RopeFrom(nn.Module):
    """``RotaryEmbedding`` at ``offset + 0 .. s-1`` (a KV cache of ``offset`` tokens)."""

    def __init__(self, rope: nn.Module) -> None:
        super().__init__()
        self.rope = rope

    def forward(self, q: torch.Tensor, k: torch.Tensor, offset: torch.Tensor) -> Any:
        return self.rope(q, k, offset=offset)


class AddFrom(nn.Module):
    """An absolute encoding added at ``offset + 0 .. s-1``."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor, offset: torch.Tensor) -> Any:
        return self.module(x, offset=offset)


class AddAt(nn.Module):
    """An absolute encoding (or embedding) at explicit positions."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> Any:
        return self.module(x, positions=positions)


class One(nn.Module):
    """A module called with one tensor."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> Any:
        return self.module(x)


class Two(nn.Module):
    """A module called with two tensors (the Hugging Face rotary modules: ``x``, ids)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> Any:
        return self.module(x, ids)


class Marian(nn.Module):
    """``MarianPositions`` as a decoder calls it: the ids' shape and the cache length."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, input_ids: torch.Tensor, past: torch.Tensor) -> Any:
        return self.module(input_ids.shape, past)


class M2M100(nn.Module):
    """``M2M100Positions`` from token ids and the cache length."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, input_ids: torch.Tensor, past: torch.Tensor) -> Any:
        return self.module(input_ids, None, past)


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[int, int], tuple[torch.Tensor, ...]]
    dynamic: tuple[Any, ...]


def _qk(length: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(length)
    shape = (1, HEADS, length, HEAD_DIM)
    return torch.randn(shape, generator=g), torch.randn(shape, generator=g)


def _x(length: int) -> torch.Tensor:
    return torch.randn(1, length, D_MODEL, generator=torch.Generator().manual_seed(length))


def _rope_at(length: int, offset: int) -> tuple[torch.Tensor, ...]:
    return (*_qk(length), torch.arange(offset, offset + length))


def _rope_from(length: int, offset: int) -> tuple[torch.Tensor, ...]:
    return (*_qk(length), torch.tensor(offset))


def _coordinates(length: int, offset: int) -> torch.Tensor:
    """``(1, s, 3)`` (t, h, w) ids: text up to the middle, then an image grid of width 4."""
    i = torch.arange(length)
    t = torch.where(i < length // 2, i, torch.full_like(i, length // 2))
    h = torch.where(i < length // 2, i, length // 2 + (i - length // 2) // 4)
    w = torch.where(i < length // 2, i, length // 2 + (i - length // 2) % 4)
    return (torch.stack((t, h, w), dim=-1) + offset)[None]


def _tokens(length: int) -> torch.Tensor:
    return torch.randint(2, 100, (1, length), generator=torch.Generator().manual_seed(length))


_QK = {2: LENGTH}
_ROPE_AT = (_QK, _QK, {0: LENGTH})
_ROPE_FROM = (_QK, _QK, None)

CASES = {
    case.name: case
    for case in [
        Case("rope_half", lambda: RopeAt(pt.RotaryEmbedding(HEAD_DIM)), _rope_at, _ROPE_AT),
        Case(
            "rope_half_offset",
            lambda: RopeFrom(pt.RotaryEmbedding(HEAD_DIM)),
            _rope_from,
            _ROPE_FROM,
        ),
        Case(
            "rope_interleaved",
            lambda: RopeAt(pt.RotaryEmbedding(HEAD_DIM, pairs="interleaved")),
            _rope_at,
            _ROPE_AT,
        ),
        Case(
            "rope_interleaved_offset",
            lambda: RopeFrom(pt.RotaryEmbedding(HEAD_DIM, pairs="interleaved")),
            _rope_from,
            _ROPE_FROM,
        ),
        Case(
            "rope_rotary_dim",
            lambda: RopeAt(pt.RotaryEmbedding(HEAD_DIM, rotary_dim=32)),
            _rope_at,
            _ROPE_AT,
        ),
        Case(
            "rope_yarn",
            lambda: RopeFrom(pt.RotaryEmbedding(HEAD_DIM, scaling=YARN)),
            _rope_from,
            _ROPE_FROM,
        ),
        Case(
            "rope_llama3",
            lambda: RopeAt(pt.RotaryEmbedding(HEAD_DIM, scaling=LLAMA3)),
            _rope_at,
            _ROPE_AT,
        ),
        Case(
            "rope_sections",
            lambda: RopeAt(pt.RotaryEmbedding(HEAD_DIM, sections=[16, 8, 8])),
            lambda n, o: (*_qk(n), _coordinates(n, o)),
            (_QK, _QK, {1: LENGTH}),
        ),
        Case(
            "rope_sections_offset",
            lambda: RopeFrom(pt.RotaryEmbedding(HEAD_DIM, sections=[16, 8, 8])),
            _rope_from,
            _ROPE_FROM,
        ),
        Case(
            "sinusoidal",
            lambda: AddFrom(pt.SinusoidalPositionalEncoding(D_MODEL)),
            lambda n, o: (_x(n), torch.tensor(o)),
            ({1: LENGTH}, None),
        ),
        Case(
            "sinusoidal_positions",
            lambda: AddAt(pt.SinusoidalPositionalEncoding(D_MODEL)),
            lambda n, o: (_x(n), torch.arange(o, o + n)),
            ({1: LENGTH}, {0: LENGTH}),
        ),
        Case(
            "transformer_embedding",
            lambda: AddAt(pt.TransformerEmbedding(100, D_MODEL)),
            lambda n, o: (_tokens(n), torch.arange(o, o + n)),
            ({1: LENGTH}, {0: LENGTH}),
        ),
        Case(
            "grid",
            lambda: One(pt.SinusoidalGridEncoding(D_MODEL, grid_shape=(4, 4))),
            lambda n, o: (torch.randn(n, 16, D_MODEL),),
            ({0: BATCH},),
        ),
        Case(
            "timestep",
            lambda: One(pt.TimestepEmbedding(D_MODEL)),
            lambda n, o: (torch.linspace(0, 1000, n, dtype=torch.float64).float() + o,),
            ({0: LENGTH},),
        ),
        Case(
            "hf_llama_rotary",
            lambda: Two(hf.LlamaRotary(HEAD_DIM, scaling=LLAMA3)),
            lambda n, o: (torch.zeros(1), torch.arange(o, o + n)[None]),
            (None, {1: LENGTH}),
        ),
        Case(
            "hf_multi_axis_rotary",
            lambda: Two(hf.MultiAxisRotary(HEAD_DIM, sections=[16, 8, 8])),
            lambda n, o: (torch.zeros(1), _coordinates(n, o).permute(2, 0, 1)),
            (None, {2: LENGTH}),
        ),
        Case(
            "hf_marian",
            lambda: Marian(hf.MarianPositions(D_MODEL)),
            lambda n, o: (torch.zeros(1, n, dtype=torch.long), torch.tensor(o)),
            ({1: LENGTH}, None),
        ),
        Case(
            "hf_m2m100",
            lambda: M2M100(hf.M2M100Positions(D_MODEL, 1)),
            lambda n, o: (_tokens(n), torch.tensor(o)),
            ({1: LENGTH}, None),
        ),
        Case(
            "hf_whisper",
            lambda: One(hf.WhisperEncoderPositions(1500, D_MODEL)),
            lambda n, o: (torch.arange(o, o + n),),
            ({0: LENGTH},),
        ),
    ]
}


def outputs(result: Any) -> list[torch.Tensor]:
    """A module's result as a list of tensors."""
    return list(result) if isinstance(result, (tuple, list)) else [result]


def assert_within_one_ulp(got: Any, want: Any) -> None:
    """Every element of ``got`` within one unit in the last place (of float32) of ``want``."""
    for g, w in zip(outputs(got), outputs(want), strict=True):
        g = np.asarray(g.detach() if isinstance(g, torch.Tensor) else g)
        w = np.asarray(w.detach())
        assert g.shape == w.shape
        assert g.dtype == w.dtype
        ulp = np.spacing(np.abs(w).astype(np.float32)).astype(np.float64)
        error = np.abs(g.astype(np.float64) - w.astype(np.float64))
        assert np.all(error <= ulp), (
            f"largest error {error.max()}, one ulp there {ulp.flat[error.argmax()]}"
        )


def input_ranges(program: Any) -> set[tuple[int, int]]:
    """The ranges an exported program allows for the dynamic sizes of its inputs."""
    ranges = set()
    for node in program.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" else None
        for size in getattr(value, "shape", ()):
            if isinstance(size, torch.SymInt):
                r = program.range_constraints[size.node.expr]
                ranges.add((int(r.lower), int(r.upper)))
    return ranges
