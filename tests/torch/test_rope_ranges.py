"""Degenerate frequency parameters through the torch front-ends: the NumPy core's errors.

The cases are those of ``tests/rope/test_ranges.py``; the check lives in the core, so the
functional API, ``RotaryEmbedding`` and the Hugging Face drop-in raise the same message.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import posenc.torch as pt  # noqa: E402
from posenc.torch import hf  # noqa: E402
from tests.rope.test_ranges import ROPE_CASES  # noqa: E402


@pytest.mark.parametrize(("head_dim", "base", "scaling", "seq_len", "message"), ROPE_CASES)
def test_torch_rope_front_ends_name_the_parameter(head_dim, base, scaling, seq_len, message):
    q = torch.zeros(1, 2, head_dim)

    def module():
        rope = pt.RotaryEmbedding(head_dim, base=base, scaling=scaling)
        return rope(q, q, seq_len=seq_len)

    def drop_in():
        params = {"rope_type": "default", **(scaling or {}), "rope_theta": base}
        params = {k: v for k, v in params.items() if v is not None}
        config = {"rope_parameters": params, "head_dim": head_dim, "num_attention_heads": 1}
        rotary = hf.LlamaRotary.from_config(config)
        return rotary(q, torch.tensor([[0, 1]]))

    calls = [
        lambda: pt.rotary_cos_sin(2, head_dim, base=base, scaling=scaling, seq_len=seq_len),
        module,
    ]
    if seq_len is None:  # the drop-in takes its length from the positions
        calls.append(drop_in)
    for call in calls:
        with pytest.raises(ValueError, match=message):
            call()


def test_torch_sinusoidal_base_range():
    with pytest.raises(ValueError, match=r"base must be a number >= 2\*\*-970"):
        pt.sinusoidal(3, 8, base=1e-300, convention="tensor2tensor")
    with pytest.raises(ValueError, match=r"base must be a number >= 2\*\*-970"):
        pt.SinusoidalPositionalEncoding(8, base=1e-300, convention="tensor2tensor")
