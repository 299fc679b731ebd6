"""Attention biases against the frameworks: x-transformers, attention-gym, torchscale and
rotary-embedding-torch (transformers: tests/references/hf/test_bias.py, which
``make test-compat`` also runs under the newest transformers)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import posenc
from tests.references import require
from tests.tolerance import assert_close_float32_recipe, assert_close_ulp

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


# -- ALiBi ------------------------------------------------------------------------------------


def test_x_transformers_alibi_is_the_distance_form_with_queries_at_the_end() -> None:
    xt = require("x_transformers.x_transformers")
    for heads in (1, 6, 8, 12):
        module = xt.AlibiPositionalBias(heads=heads, total_heads=heads)
        want = module(5, 9)
        got = pt.alibi_bias(heads, np.arange(4, 9), 9, form="distance")
        # their float32 slope times the distance: 2 roundings of each value's own magnitude
        assert_close_ulp(got, want, ulps=2, scale=want, what=f"{heads} heads")


def test_x_transformers_alibi_on_the_first_heads_of_a_larger_attention() -> None:
    xt = require("x_transformers.x_transformers")
    module = xt.AlibiPositionalBias(heads=3, total_heads=8)
    want = module(5, 9)
    got = pt.alibi_bias(3, np.arange(4, 9), 9, total_heads=8)
    assert got.shape == want.shape == (8, 5, 9)
    assert_close_ulp(got, want, ulps=2, scale=want, what="total_heads")
    mod = pt.alibi_score_mod(3, total_heads=8, query_offset=4)
    h, qi, ki = torch.arange(8)[:, None, None], torch.arange(5)[:, None], torch.arange(9)
    assert_close_ulp(mod(torch.zeros(8, 5, 9), 0, h, qi, ki), want, ulps=2, scale=want)


def test_attention_gym_alibi_score_mod_is_the_relative_form() -> None:
    gym = require("attn_gym.mods.alibi", "attn-gym is not installed")
    heads, q, k = 8, 6, 6
    index = torch.arange(q)[:, None], torch.arange(k)[None, :]
    score = torch.zeros(heads, q, k)
    want = torch.stack(
        [gym.generate_alibi_bias(heads)(score[h], 0, torch.tensor(h), *index) for h in range(heads)]
    )
    got = pt.alibi_bias(heads, q, k, form="relative")
    assert_close_ulp(got, want, ulps=2, scale=want)  # as above: slope, then product


# -- buckets ----------------------------------------------------------------------------------


def test_x_transformers_relative_position_bias_uses_t5_buckets() -> None:
    xt = require("x_transformers.x_transformers")
    for causal in (False, True):
        module = xt.RelativePositionBias(
            scale=1.0, causal=causal, num_buckets=32, max_distance=128, heads=4
        )
        bias = pt.T5RelativeBias(4, bidirectional=not causal, convention="transformers")
        bias.table.weight.data.copy_(module.relative_attention_bias.weight.data)
        assert torch.equal(bias(np.arange(290, 300), 300), module(10, 300))


# -- relative tables, Sandwich, xPos ----------------------------------------------------------


def test_sandwich_equals_the_attention_gym_score_mod() -> None:
    gym = require("attn_gym.mods.sandwich", "attn-gym is not installed")
    heads, length = 4, 20
    mod = gym.generate_sandwich_bias(heads, length, d_bar=16)
    qi, ki = torch.arange(length)[:, None], torch.arange(length)[None, :]
    want = torch.stack(
        [mod(torch.zeros(length, length), 0, torch.tensor(h), qi, ki) for h in range(heads)]
    )
    got = pt.sandwich_bias(heads, length, length, dim=16)
    # theirs: float32 sums of 8 cosines of angles below 20 (a float32 recipe, 8 terms), each
    # head's sum scaled by heads / (8·(h + 1)) <= heads / 8
    assert_close_float32_recipe(
        got, want, max_angle=length - 1, magnitude=heads / 8, terms=8, what="sandwich"
    )


def test_xpos_scales_equal_rotary_embedding_torch() -> None:
    ret = require("rotary_embedding_torch")
    rotary = ret.RotaryEmbedding(dim=16, use_xpos=True)
    length = 37
    want = rotary.get_scale(torch.arange(length).float())  # centred: p - L // 2
    ours = posenc.xpos_scales(np.arange(length) - length // 2, 16, scale_base=rotary.scale_base)
    # theirs: float32 powers of float32 ratios, a few roundings of each scale's own magnitude
    # (measured <= 1.1 ulps)
    assert_close_ulp(want, ours, ulps=4, dtype=torch.float32, scale=ours, what="xpos scales")


def test_xpos_scales_equal_the_pair_norms_of_torchscale_xpos() -> None:
    xpos = require("torchscale.component.xpos_relative_position")
    length, dim = 37, 16
    out = xpos.XPOS(dim)(torch.ones(1, length, dim), offset=0, downscale=False)
    norms = out[0].reshape(length, dim // 2, 2).double().norm(dim=-1) / math.sqrt(2)
    start = -length // 2  # torchscale's first position
    ours = posenc.xpos_scales(np.arange(start, start + length), dim, pairs="half")[:, : dim // 2]
    assert_close_ulp(norms, ours, ulps=4, dtype=torch.float32, scale=ours, what="norms")
