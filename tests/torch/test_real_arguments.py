"""Real-number arguments beyond float64's range through the torch front-ends.

The cases of ``tests/core/test_real_arguments.py``: the conversion lives in the core, so every
module and function raises the same ``ValueError`` naming the argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import posenc.torch as pt  # noqa: E402
from posenc.torch import hf  # noqa: E402
from tests.core.test_real_arguments import HUGE  # noqa: E402

CALLS: list[tuple[str, Callable[[Any], Any]]] = [
    ("base", lambda x: pt.SinusoidalPositionalEncoding(8, base=x)),
    ("dropout", lambda x: pt.SinusoidalPositionalEncoding(8, dropout=x)),
    ("base", lambda x: pt.RotaryEmbedding(8, base=x)),
    ("base", lambda x: pt.TransformerEmbedding(10, 8, base=x)),
    ("dropout", lambda x: pt.TransformerEmbedding(10, 8, dropout=x)),
    ("interpolation_scale", lambda x: pt.SinusoidalGridEncoding(8, interpolation_scale=x)),
    ("base", lambda x: pt.SinusoidalGridEncoding(8, base=x)),
    ("max_period", lambda x: pt.TimestepEmbedding(8, max_period=x)),
    ("scale", lambda x: pt.TimestepEmbedding(8, scale=x)),
    ("downscale_freq_shift", lambda x: pt.TimestepEmbedding(8, downscale_freq_shift=x)),
    ("base", lambda x: pt.sinusoidal(3, 4, base=x)),
    ("base", lambda x: pt.rotary_cos_sin(3, 4, base=x)),
    ("scale", lambda x: pt.timestep_embedding(torch.tensor([1.0]), 4, scale=x)),
    ("base", lambda x: hf.LlamaRotary(8, base=x)),
    ("base", lambda x: hf.MarianPositions(8, base=x)),
]


@pytest.mark.parametrize("value", HUGE, ids=["int", "-int", "fraction", "-fraction"])
@pytest.mark.parametrize(("name", "call"), CALLS, ids=[f"{i}-{c[0]}" for i, c in enumerate(CALLS)])
def test_a_number_beyond_float64_is_refused_by_name(name, call, value) -> None:
    with pytest.raises(ValueError, match=r"beyond float64's range") as info:
        call(value)
    assert name in str(info.value)


@pytest.mark.parametrize("module", [pt.SinusoidalPositionalEncoding, pt.RotaryEmbedding])
@pytest.mark.parametrize("max_len", [2**53 + 2, 2**64, 10**400])
def test_max_len_beyond_the_position_limit_is_refused_by_name(module, max_len) -> None:
    """The cache rows 0 .. max_len-1 are positions: at most 2**53 + 1 of them."""
    with pytest.raises(ValueError, match=r"max_len must be a length of at most 2\*\*53 \+ 1"):
        module(4, max_len=max_len)
