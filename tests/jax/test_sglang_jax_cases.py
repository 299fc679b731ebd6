"""The cases of sglang-jax's ``test/layers/test_rotary_embedding.py`` (the cases, not the code),
written after its phases stopped being rounded to bfloat16: head size 128, θ 1,000,000,
bfloat16 queries (3 heads) and keys (2 heads) at positions 0, 127, 1023 and 4095, GPT-NeoX
pairs; M-RoPE with sections [16, 24, 24], sectioned and interleaved; YaRN with factor 4 from
8192 positions. sglang-jax holds its output to its own float32-phase formula; here it is held
to the float64 rotation of the same inputs, rounded to bfloat16 (within one bfloat16 unit in
the last place of each value), and shown apart from the rotation by bfloat16 phases, the
former defect."""

from __future__ import annotations

import numpy as np
import pytest

from tests.jax.helpers import import_jax

jax, jnp = import_jax()

import posenc  # noqa: E402
import posenc.jax as pj  # noqa: E402

HEAD, BASE = 128, 1_000_000.0
POSITIONS = np.array([0, 127, 1023, 4095])
SECTIONS = (16, 24, 24)
MROPE_POSITIONS = np.array([[0, 127, 1023, 4095], [0, 63, 511, 2047], [0, 31, 255, 1023]])


def _qk(tokens: int) -> tuple[jax.Array, jax.Array]:
    rng = np.random.default_rng(42)
    q = rng.standard_normal((tokens, 3, HEAD), dtype=np.float32)
    k = rng.standard_normal((tokens, 2, HEAD), dtype=np.float32)
    return jnp.asarray(q, jnp.bfloat16), jnp.asarray(k, jnp.bfloat16)


def _within_a_bf16_ulp(got: jax.Array, x: jax.Array, cos: np.ndarray, sin: np.ndarray) -> None:
    """``got`` (bfloat16) against the float64 rotation of ``x`` by float64 ``cos``/``sin``."""
    exact = posenc.apply_rotary(np.asarray(x.astype(jnp.float32), np.float64), cos, sin)
    values = np.asarray(got.astype(jnp.float32), np.float64)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64) * 2**16  # bf16
    assert np.all(np.abs(values - exact) <= ulp), float(np.max(np.abs(values - exact) / ulp))


def _bf16_phase_rotation(x: jax.Array, positions: np.ndarray) -> np.ndarray:
    """The former defect: phases ``p·ω`` rounded to bfloat16 before cos and sin."""
    omega = posenc.rope_frequencies(HEAD, base=BASE)[0]
    phase = np.asarray(jnp.asarray(positions[:, None] * omega, jnp.bfloat16).astype(jnp.float32))
    cos, sin = np.cos(np.concatenate([phase] * 2, -1)), np.sin(np.concatenate([phase] * 2, -1))
    return posenc.apply_rotary(
        np.asarray(x.astype(jnp.float32), np.float64), cos[:, None], sin[:, None]
    )


@pytest.mark.parametrize(
    "scaling",
    [None, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}],
    ids=["default", "yarn"],
)
def test_rotary_embedding_computes_the_exact_phase(scaling: dict | None) -> None:
    """``test_rotary_embedding_computes_phase_in_float32`` and its YaRN twin."""
    rope = pj.get_rope(HEAD, HEAD, 32768, BASE, is_neox_style=True, rope_scaling=scaling)
    q, k = _qk(POSITIONS.size)
    q_rot, k_rot = jax.jit(rope)(jnp.asarray(POSITIONS), q, k)
    cos, sin = posenc.rotary_cos_sin(POSITIONS, HEAD, base=BASE, scaling=scaling, dtype=np.float64)
    for x, got in ((q, q_rot), (k, k_rot)):
        assert got.dtype == jnp.bfloat16
        _within_a_bf16_ulp(got, x, cos[:, None], sin[:, None])
    if scaling is None:
        defect = _bf16_phase_rotation(q, POSITIONS)
        assert not np.array_equal(np.asarray(q_rot.astype(jnp.float32), np.float64), defect)


@pytest.mark.parametrize(
    ("order", "sections"), [("sectioned", SECTIONS), ("interleaved", (24, 20, 20))]
)
def test_mrotary_embedding_computes_the_exact_phase(order: str, sections: tuple) -> None:
    """``test_mrotary_embedding_computes_phase_in_float32``: (t, h, w) positions, sections
    [16, 24, 24] one block per axis, and interleaved. Interleaved, [16, 24, 24] asks for 24
    height and 24 width pairs where every third of the 64 pairs gives 21: sglang-jax's slices
    give each axis 21 without a word, posenc refuses it by name
    (:func:`test_sections_interleaving_cannot_hold_are_refused`), so the interleaved case runs
    with Qwen3-VL's [24, 20, 20]. The 3 padding tokens after the 4 real ones have no
    counterpart: the tables here cover the real tokens, and only those are rotated."""
    q, k = _qk(POSITIONS.size + 3)
    coords = jnp.asarray(MROPE_POSITIONS.T)  # (tokens, 3)
    cos, sin = pj.multi_axis_cos_sin(coords, HEAD, sections=sections, order=order, base=BASE)
    rotate = jax.jit(lambda x: pj.apply_rotary(x[:4], cos[:, None], sin[:, None]))
    cos64, sin64 = posenc.multi_axis_cos_sin(
        MROPE_POSITIONS.T, HEAD, sections=sections, order=order, base=BASE, dtype=np.float64
    )
    for x in (q, k):
        got = rotate(x)
        _within_a_bf16_ulp(got, x[:4], cos64[:, None], sin64[:, None])


def test_sections_interleaving_cannot_hold_are_refused() -> None:
    with pytest.raises(ValueError, match=r"sections\[1\] = 24 is more than order='interleaved'"):
        pj.multi_axis_cos_sin(
            jnp.asarray(MROPE_POSITIONS.T), HEAD, sections=SECTIONS, order="interleaved"
        )
