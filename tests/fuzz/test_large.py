"""Requests too large to allocate are refused before allocating, naming the argument and the
bytes needed (a ``ValueError``), not by a ``MemoryError`` or an allocator's ``RuntimeError``.

Every size here is far beyond any machine's memory (hundreds of TiB), so a call that tries to
allocate fails at once; the test never depends on how long anything takes.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import posenc
from posenc import analysis

HAS_TORCH = importlib.util.find_spec("torch") is not None
BYTES = re.compile(r"\d\s*(bytes?|[KMGTPE]i?B)\b")


def _pt() -> Any:
    import posenc.torch

    return posenc.torch


def _torch() -> Any:
    import torch

    return torch


def case(case_id: str, call: Callable[[], Any], names: tuple[str, ...], *, torch: bool = False):
    marks = [pytest.mark.skip(reason="needs torch")] if torch and not HAS_TORCH else []
    return pytest.param(call, names, id=case_id, marks=marks)


ZEROS = np.broadcast_to(np.float64(0.0), (10**7,))  # 10**7 positions, no memory

CASES = [
    case("sinusoidal", lambda: posenc.sinusoidal(10**7, 10**6), ("positions", "d_model")),
    case("sinusoidal-d_model", lambda: posenc.sinusoidal(3, 2**40), ("d_model",)),
    case("frequencies", lambda: posenc.frequencies(2**40), ("d_model",)),
    case("rotary_cos_sin", lambda: posenc.rotary_cos_sin(10**7, 10**7), ("positions", "head_dim")),
    case("grid", lambda: posenc.sinusoidal_grid((10**7, 10**7), 8), ("shape",)),
    case(
        "grid-extra",
        lambda: posenc.sinusoidal_grid((2, 2), 8, extra_tokens=10**15),
        ("extra_tokens",),
    ),
    case("timestep", lambda: posenc.timestep_embedding(ZEROS, 10**7), ("timesteps", "dim")),
    case("cu_seqlens", lambda: posenc.positions_from_cu_seqlens([0, 10**15]), ("cu_seqlens",)),
    case("alibi_slopes", lambda: posenc.alibi_slopes(2**60), ("heads",)),
    case("alibi_slopes-total", lambda: posenc.alibi_slopes(2, total_heads=2**60), ("total_heads",)),
    case(
        "alibi_bias",
        lambda: posenc.alibi_bias(2, 10**7, 10**7),
        ("heads", "query_positions", "key_positions"),
    ),
    case(
        "relative_positions",
        lambda: posenc.relative_positions(10**7, 10**7),
        ("query_positions", "key_positions"),
    ),
    case(
        "t5_bias",
        lambda: posenc.t5_bias(np.zeros((32, 2)), 10**7, 10**7),
        ("table", "query_positions", "key_positions"),
    ),
    case(
        "kerple_bias",
        lambda: posenc.kerple_bias(10**7, 10**7, r1=1.0, r2=1.0),
        ("query_positions", "key_positions"),
    ),
    case(
        "fire_distance",
        lambda: posenc.fire_distance(10**7, 10**7),
        ("query_positions", "key_positions"),
    ),
    case("sandwich_bias", lambda: posenc.sandwich_bias(2**60, 2, 2), ("heads",)),
    case(
        "sandwich_bias-dim",
        lambda: posenc.sandwich_bias(2, 10**4, 10**4, dim=10**6),
        ("query_positions", "key_positions", "dim"),
    ),
    case(
        "relative_sinusoid_table",
        lambda: posenc.relative_sinusoid_table(10**7, 10**6),
        ("length", "d_model"),
    ),
    case("xpos_scales", lambda: posenc.xpos_scales(10**7, 10**6), ("positions", "head_dim")),
    case(
        "deberta_relative_positions",
        lambda: posenc.deberta_relative_positions(10**7, 10**7),
        ("query_positions", "key_positions"),
    ),
    case("relative_shift_index", lambda: posenc.relative_shift_index(10**7), ("query_length",)),
    case(
        "relative_key_index",
        lambda: posenc.relative_key_index(10**7, 10**7, left=4, right=4),
        ("query_positions", "key_positions"),
    ),
    case("disentangled_index", lambda: posenc.disentangled_index([0], 2**62), ("att_span",)),
    case(
        "bias_profile",
        lambda: analysis.bias_profile("alibi", heads=10**5, distance=2**20),
        ("heads", "distance"),
    ),
    case("shift_matrix", lambda: analysis.shift_matrix(1, 10**7), ("d_model",)),
    case("similarity", lambda: analysis.similarity(3, 2**40), ("d_model",)),
    case(
        "distinct_rows",
        lambda: analysis.distinct_rows(10**12, d_model=10**6),
        ("table_or_length", "d_model"),
    ),
    case(
        "precision_report", lambda: analysis.precision_report(100, 4, samples=2**42), ("samples",)
    ),
    case(
        "odd_exponent_table",
        lambda: analysis.odd_exponent_table(10**7, 10**7),
        ("positions", "d_model"),
    ),
    case("float32_recipe", lambda: analysis.float32_recipe(10**7, 10**7), ("positions", "d_model")),
    case(
        "torch-sinusoidal",
        lambda: _pt().sinusoidal(10**7, 10**7),
        ("positions", "d_model"),
        torch=True,
    ),
    case(
        "torch-rotary_cos_sin",
        lambda: _pt().rotary_cos_sin(10**7, 10**7),
        ("positions", "head_dim"),
        torch=True,
    ),
    case("torch-timestep", lambda: _pt().TimestepEmbedding(2**40), ("dim",), torch=True),
    case(
        "torch-relative_key_index",
        lambda: _pt().relative_key_index(10**7, 10**7, left=4, right=4),
        ("query_positions", "key_positions"),
        torch=True,
    ),
    case(
        "SinusoidalPositionalEncoding",
        lambda: _pt().SinusoidalPositionalEncoding(8, max_len=10**13),
        ("max_len",),
        torch=True,
    ),
    case(
        "SinusoidalPositionalEncoding.encoding",
        lambda: _pt().SinusoidalPositionalEncoding(8).encoding(10**13),
        ("length_or_positions",),
        torch=True,
    ),
    case(
        "TransformerEmbedding",
        lambda: _pt().TransformerEmbedding(10**12, 8),
        ("vocab_size",),
        torch=True,
    ),
    case(
        "RotaryEmbedding",
        lambda: _pt().RotaryEmbedding(8, max_len=10**13),
        ("max_len",),
        torch=True,
    ),
    case(
        "SinusoidalGridEncoding",
        lambda: _pt().SinusoidalGridEncoding(8, grid_shape=(10**7, 10**7)),
        ("grid_shape",),
        torch=True,
    ),
    case(
        "MarianPositions",
        lambda: _pt().hf.MarianPositions(8, num_positions=10**13),
        ("num_positions",),
        torch=True,
    ),
    case(
        "MarianPositions.forward",
        lambda: _pt().hf.MarianPositions(8)((1, 10**13)),
        ("input_ids_shape",),
        torch=True,
    ),
    case(
        "M2M100Positions",
        lambda: _pt().hf.M2M100Positions(8, 1, num_positions=10**13),
        ("num_positions",),
        torch=True,
    ),
    case(
        "WhisperEncoderPositions-embedding_dim",
        lambda: _pt().hf.WhisperEncoderPositions(3, 2**50),
        ("embedding_dim",),
        torch=True,
    ),
    case(
        "WhisperEncoderPositions",
        lambda: _pt().hf.WhisperEncoderPositions(10**13, 8),
        ("num_embeddings",),
        torch=True,
    ),
]


@pytest.mark.parametrize(("call", "names"), CASES)
def test_too_large_is_refused_before_allocating(call, names) -> None:
    with pytest.raises(ValueError, match="|".join(names)) as info:  # not MemoryError
        call()
    message = str(info.value)
    assert BYTES.search(message), f"{message!r} does not say how many bytes were needed"


def test_the_message_says_what_was_refused() -> None:
    with pytest.raises(MemoryError) as info:  # also a MemoryError, for code that catches one
        posenc.sinusoidal(10**7, 10**6)
    error = info.value
    assert error.names == ("positions", "d_model")
    assert error.shape == (10**7, 10**6)
    assert error.needed == 4 * 10**13 > error.limit


OFFSETS = [
    pytest.param(
        lambda: _pt().hf.M2M100Positions(8, 1)(
            _torch().tensor([[2, 3]]), past_key_values_length=10**12
        ),
        (1, 2, 8),
        id="M2M100Positions.forward",
        marks=[] if HAS_TORCH else [pytest.mark.skip(reason="needs torch")],
    ),
    pytest.param(
        lambda: posenc.sinusoidal(np.array([10**15, 10**15 + 1]), 8), (2, 8), id="sinusoidal"
    ),
]


@pytest.mark.parametrize(("call", "shape"), OFFSETS)
def test_a_far_offset_allocates_only_the_rows_asked_for(call, shape) -> None:
    """Nothing is allocated in proportion to an offset or a position: far rows are computed."""
    assert tuple(call().shape) == shape
