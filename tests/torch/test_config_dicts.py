"""The torch front-end takes a rope_parameters dict copied from a config as written: its
rope_theta is the base unless the caller passes a different one."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from posenc.torch.hf import LlamaRotary  # noqa: E402
from tests.configs import LLAMA3_ROPE_PARAMETERS as LLAMA3  # noqa: E402


def test_rotary_embedding_takes_rope_theta_as_the_base():
    rope = pt.RotaryEmbedding(128, scaling=LLAMA3)
    assert rope.base == 500000.0
    q = torch.ones(1, 1, 3, 128, dtype=torch.float64)
    got, _ = rope(q, q)
    cos, sin = posenc.rotary_cos_sin(3, 128, base=500000.0, scaling=LLAMA3, dtype=np.float64)
    half = torch.cat([-q[..., 64:], q[..., :64]], dim=-1)
    expected = q * torch.from_numpy(cos) + half * torch.from_numpy(sin)
    torch.testing.assert_close(got, expected)


def test_functional_and_hf_rotary_take_rope_theta_as_the_base():
    cos, _ = pt.rotary_cos_sin(3, 128, scaling=LLAMA3, dtype=torch.float64)
    expected, _ = posenc.rotary_cos_sin(3, 128, base=500000.0, scaling=LLAMA3, dtype=np.float64)
    np.testing.assert_array_equal(cos.numpy(), expected)
    assert LlamaRotary(128, scaling=LLAMA3).base == 500000.0


def test_torch_conflict_needs_both():
    with pytest.raises(ValueError, match=r"differs from base = 10000\.0"):
        pt.RotaryEmbedding(128, base=10000.0, scaling=LLAMA3)


def test_a_multi_axis_shape_error_lists_each_shape_once():
    rope = pt.RotaryEmbedding(8, sections=(2, 1, 1))
    q = torch.ones(1, 2, 54, 8)
    with pytest.raises(ValueError, match=r"positions must have shape") as info:
        rope(q, q, positions=torch.zeros(2, 54, 3, dtype=torch.long))
    message = str(info.value)
    assert message.count("(1, 54, 3)") == 1, message
    q = torch.ones(2, 2, 54, 8)
    with pytest.raises(ValueError, match=r"\(b, s, 3\) = \(2, 54, 3\) or \(1, 54, 3\)"):
        rope(q, q, positions=torch.zeros(3, 54, 3, dtype=torch.long))
