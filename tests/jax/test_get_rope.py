"""get_rope: vLLM's / sglang-jax's factory signature, called with (positions, q, k)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.jax.helpers import import_jax, same_bits

jax, jnp = import_jax()

import posenc  # noqa: E402
import posenc.jax as pj  # noqa: E402
from tests.configs import YARN  # noqa: E402


@pytest.mark.parametrize("neox", [True, False])
def test_flattened_heads_rotate_like_apply_rotary(neox: bool) -> None:
    rope = pj.get_rope(16, 8, 4096, 1e4, is_neox_style=neox, rope_scaling=YARN)
    rng = np.random.default_rng(0)
    positions = np.array([0, 5, 3000])
    q = jnp.asarray(rng.standard_normal((3, 4 * 16)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((3, 2, 16)), jnp.float32)
    q_rot, k_rot = jax.jit(lambda q, k: rope(positions, q, k))(q, k)
    pairs = "half" if neox else "interleaved"
    cos, sin = pj.rotary_cos_sin(positions, 8, scaling=YARN, pairs=pairs)
    want = jax.jit(
        lambda q: pj.apply_rotary(q.reshape(3, 4, 16), cos[:, None], sin[:, None], pairs=pairs)
    )(q)
    assert same_bits(q_rot, want.reshape(3, 64))
    assert k_rot.shape == (3, 2, 16)


@pytest.mark.slow
def test_the_phase_at_position_4095_is_not_rounded_to_bfloat16() -> None:
    # sglang-jax's former defect: phases rounded to bf16 (0.83 off at position 4095); here
    # the bf16 table is the exact cos/sin rounded once, within half a bf16 ulp
    rope = pj.get_rope(128, 128, 8192, 1e4, dtype=jnp.bfloat16)
    q = jnp.zeros((1, 128), jnp.float32).at[0, 0].set(1.0)
    q_rot, _ = jax.jit(rope)(jnp.array([4095]), q, q)
    exact = np.cos(4095.0)  # pair 0 turns at ω = 1
    assert abs(float(q_rot[0, 0]) - exact) <= 2.0**-9


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        pj.get_rope(16, 7, 4096, 1e4)
    with pytest.raises(TypeError, match="is_neox_style"):
        pj.get_rope(16, 16, 4096, 1e4, is_neox_style="yes")
    rope = pj.get_rope(16, 16, 4096, 1e4)
    with pytest.raises(ValueError, match="query must have shape"):
        rope(np.arange(2), jnp.ones((2, 15)), jnp.ones((2, 16)))
    assert posenc.rope_scaling(None) is None
