"""Flax NNX modules: SinusoidalEncoding (x + PE) and RotaryEmbedding ((batch, seq, heads,
head_dim), explicit positions, from a plan's layer), against the functions they wrap."""

from __future__ import annotations

import numpy as np
import pytest

from tests.jax.helpers import import_jax, same_bits

jax, jnp = import_jax()

from flax import nnx  # noqa: E402

import posenc  # noqa: E402
import posenc.jax as pj  # noqa: E402
from tests.configs import LLAMA3  # noqa: E402


def test_sinusoidal_encoding_adds_the_table_in_the_inputs_dtype() -> None:
    pe = pj.SinusoidalEncoding(8, convention="tensor2tensor")
    x = jnp.ones((2, 3, 8), dtype=jnp.bfloat16)
    table = pj.sinusoidal(3, 8, convention="tensor2tensor", dtype=jnp.bfloat16)
    assert same_bits(pe(x), x + table)
    assert same_bits(
        pe(x, offset=5),
        x + pj.sinusoidal(np.arange(5, 8), 8, convention="tensor2tensor", dtype=jnp.bfloat16),
    )
    per_row = np.array([[0, 1, 2], [4, 5, 6]])
    row = pj.sinusoidal(per_row[1], 8, convention="tensor2tensor", dtype=jnp.bfloat16)
    assert same_bits(pe(x, positions=per_row)[1], x[1] + row)


def test_sinusoidal_encoding_with_a_traced_offset() -> None:
    pe = pj.SinusoidalEncoding(16)
    x = jnp.zeros((1, 4, 16))
    got = nnx.jit(lambda m, x, o: m(x, offset=o))(pe, x, 1000)
    want = posenc.sinusoidal(np.arange(1000, 1004), 16, dtype=np.float64)
    assert np.abs(np.asarray(got[0]) - want).max() <= 2.0**-24


def test_rotary_embedding_rotates_queries_and_keys_like_the_functions() -> None:
    rope = pj.RotaryEmbedding(8, base=500.0, pairs="interleaved", rotary_dim=4)
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.standard_normal((2, 3, 4, 8)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((2, 3, 1, 8)), jnp.float32)
    positions = np.array([[0, 1, 2], [7, 8, 9]])
    q_rot, k_rot = jax.jit(lambda q, k: rope(q, positions, k=k))(q, k)
    cos, sin = pj.rotary_cos_sin(positions, 8, base=500.0, pairs="interleaved", rotary_dim=4)
    want = jax.jit(
        lambda q: pj.apply_rotary(q, cos[:, :, None], sin[:, :, None], pairs="interleaved")
    )(q)
    assert same_bits(q_rot, want)
    assert k_rot.shape == k.shape
    assert same_bits(q_rot[..., 4:], q[..., 4:])  # partial rotation: the rest pass through


def test_rotary_embedding_from_a_plan_layer_under_jit() -> None:
    layer = pj.rope_plan(LLAMA3).layer()
    rope = pj.RotaryEmbedding.from_layer(layer)
    q = jnp.ones((1, 2, 1, layer.head_dim), jnp.bfloat16)
    positions = jnp.asarray([[70_000, 70_001]])
    got = nnx.jit(lambda m, q, p: m(q, p))(rope, q, positions)
    known = jax.jit(lambda q: rope(q, np.asarray(positions)))(q)
    # traced tables within an ulp of the known ones; bf16 outputs: at most one bf16 ulp apart
    diff = np.abs(np.asarray(got, np.float32) - np.asarray(known, np.float32))
    assert diff.max() <= 2.0**-7 * 2
    assert got.dtype == jnp.bfloat16


def test_multi_axis_rotary_embedding() -> None:
    rope = pj.RotaryEmbedding(8, sections=(2, 1, 1), base=1e4)
    positions = np.array([[[0, 0, 0], [1, 2, 3]]])
    q = jnp.ones((1, 2, 1, 8))
    cos, sin = posenc.multi_axis_cos_sin(positions, 8, sections=(2, 1, 1), base=1e4)
    want = posenc.apply_rotary(np.ones((1, 2, 1, 8)), cos[:, :, None], sin[:, :, None])
    got = jax.jit(lambda q: rope(q, positions))(q)
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=1e-6)
    # a frequency matrix (an array) is a setting, not data: the module goes through nnx.jit
    matrix = posenc.multi_axis_frequencies((2, 1, 1), base=1e4)
    by_matrix = pj.RotaryEmbedding(8, frequencies=matrix)
    traced = nnx.jit(lambda m, q, p: m(q, p))(by_matrix, q, jnp.asarray(positions))
    np.testing.assert_allclose(np.asarray(traced), want, rtol=0, atol=1e-6)


def test_module_shape_errors_name_the_argument() -> None:
    rope = pj.RotaryEmbedding(8)
    with pytest.raises(ValueError, match=r"x must have shape \(batch, seq, heads, head_dim\)"):
        rope(jnp.ones((2, 3, 8)), np.arange(3))
    with pytest.raises(ValueError, match=r"positions must have shape \(s\) = \(3\)"):
        rope(jnp.ones((1, 3, 1, 8)), np.arange(4))
    with pytest.raises(ValueError, match="x must have shape"):
        pj.SinusoidalEncoding(8)(jnp.ones((2, 3, 6)))
    with pytest.raises(TypeError, match=r"layer must be a posenc\.RopeLayer"):
        pj.RotaryEmbedding.from_layer({"rope_type": "default"})
