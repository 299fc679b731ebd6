"""posenc.jax functions: known positions give the NumPy core's tables bit for bit (every
convention, every rope type, every dtype, bfloat16 rounded once), traced positions the same
values within the ulp bound; apply_rotary against the NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

from tests.jax.helpers import import_jax, same_bits, ulp_errors

jax, jnp = import_jax()

import ml_dtypes  # noqa: E402

import posenc  # noqa: E402
import posenc.jax as pj  # noqa: E402
from tests.configs import DYNAMIC, GEMMA3, LLAMA3_ROPE_PARAMETERS, LONGROPE, YARN  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.float32, np.float16, BF16]

#: one scaling per rope type (every type of posenc.ROPE_TYPES)
SCALINGS = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": DYNAMIC,
    "yarn": YARN,
    "llama3": LLAMA3_ROPE_PARAMETERS,
    "longrope": LONGROPE,
    "proportional": {"rope_type": "proportional", "partial_rotary_factor": 0.25},
    "ntk_alpha": {"rope_type": "ntk_alpha", "alpha": 1000.0},
}


def test_every_rope_type_is_covered() -> None:
    assert set(SCALINGS) == set(posenc.ROPE_TYPES)


def bf16_round_once(values: np.ndarray) -> np.ndarray:
    """float64 → bfloat16 rounded once to nearest-even, from the candidates around a cast
    (never the front-end's own rounding)."""
    near = values.astype(np.float32).astype(BF16)
    bits = np.abs(near).view(np.uint16).astype(np.int32)
    candidates = np.stack([np.maximum(bits - 1, 0), bits, bits + 1], axis=-1).astype(np.uint16)
    magnitudes = candidates.view(BF16).astype(np.float64)
    distance = np.abs(magnitudes - np.abs(values)[..., None])
    best = distance == distance.min(axis=-1, keepdims=True)
    score = 2 * best + (best & (candidates % 2 == 0))
    chosen = np.take_along_axis(candidates, score.argmax(axis=-1)[..., None], -1)[..., 0]
    chosen = np.where(np.signbit(values), chosen | 0x8000, chosen).astype(np.uint16)
    return chosen.view(BF16)


def core_in(make, dtype):
    """The core's table in ``dtype``: its own for float16/32, float64 rounded once for bf16."""
    if np.dtype(dtype) == BF16:
        out = make(np.float64)
        return (
            tuple(bf16_round_once(t) for t in out)
            if isinstance(out, tuple)
            else bf16_round_once(out)
        )
    return make(dtype)


def test_bf16_reference_rounds_once() -> None:
    # 1 + 2**-8 + 2**-30: a float32 cast gives the tie 1 + 2**-8, which rounds to even (1.0);
    # rounded once, the value is above the tie: 1 + 2**-7
    value = np.array([1 + 2.0**-8 + 2.0**-30])
    assert float(bf16_round_once(value)[0]) == 1 + 2.0**-7
    assert float(pj.sinusoidal(np.zeros(1), 1, dtype=jnp.bfloat16)[0, 0]) == 0.0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("convention", sorted(posenc.CONVENTIONS))
def test_sinusoidal_known_positions_are_the_core_table(convention: str, dtype) -> None:
    positions = np.array([0, 1, 7, 4095, 65519, 1_000_003])
    got = pj.sinusoidal(positions, 11, convention=convention, dtype=dtype)
    want = core_in(
        lambda t: posenc.sinusoidal(positions, 11, convention=convention, dtype=t), dtype
    )
    assert same_bits(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("rope_type", sorted(SCALINGS))
@pytest.mark.parametrize("pairs", ["half", "interleaved"])
def test_rotary_known_positions_are_the_core_tables(rope_type: str, pairs: str, dtype) -> None:
    scaling = SCALINGS[rope_type]
    positions = np.array([[0, 3, 511, 4096, 70_000]])
    got = pj.rotary_cos_sin(positions, 8, scaling=scaling, pairs=pairs, dtype=dtype)
    want = core_in(
        lambda t: posenc.rotary_cos_sin(positions, 8, scaling=scaling, pairs=pairs, dtype=t),
        dtype,
    )
    assert all(same_bits(g, w) for g, w in zip(got, want, strict=True))


def test_length_gives_positions_from_zero_and_partial_rotation() -> None:
    cos, sin = pj.rotary_cos_sin(5, 8, rotary_dim=4)
    assert cos.shape == (5, 4)
    assert same_bits(sin, posenc.rotary_cos_sin(5, 8, rotary_dim=4)[1])


@pytest.mark.parametrize("rope_type", sorted(SCALINGS))
def test_traced_positions_within_one_ulp_of_every_rope_type(rope_type: str) -> None:
    scaling = SCALINGS[rope_type]
    positions = np.array([0, 1, 2, 1000, 4095, 4096, 65_535, 99_999, 2**20 - 1, 2**20])
    seq_len = 4096 if rope_type in ("dynamic", "longrope") else None

    @jax.jit
    def tables(p):
        return pj.rotary_cos_sin(p, 8, scaling=scaling, seq_len=seq_len)

    got = tables(jnp.asarray(positions, dtype=jnp.int32))
    want = posenc.rotary_cos_sin(positions, 8, scaling=scaling, seq_len=seq_len, dtype=np.float64)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == jnp.float32
        assert ulp_errors(g, w).max() <= 1.0


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=lambda d: np.dtype(d).name)
def test_traced_16_bit_tables_are_the_exact_value_rounded_once(dtype) -> None:
    positions = np.arange(0, 2**20, 4099)
    got = jax.jit(lambda p: pj.rotary_cos_sin(p, 32, base=5e5, dtype=dtype))(positions)
    want = core_in(lambda t: posenc.rotary_cos_sin(positions, 32, base=5e5, dtype=t), dtype)
    assert all(same_bits(g, w) for g, w in zip(got, want, strict=True))


@pytest.mark.slow
def test_traced_sinusoidal_follows_every_layout() -> None:
    positions = np.array([[0, 5], [77, 2**19 + 3]])
    for convention in sorted(posenc.CONVENTIONS):
        got = jax.jit(lambda p, c=convention: pj.sinusoidal(p, 9, convention=c))(positions)
        want = posenc.sinusoidal(positions, 9, convention=convention, dtype=np.float64)
        assert got.shape == (2, 2, 9)
        assert ulp_errors(got, want).max() <= 1.0, convention


def test_traced_real_positions_within_one_ulp() -> None:
    rng = np.random.default_rng(0)
    positions = (rng.random(256) * 2**20).astype(np.float32)
    got = jax.jit(lambda p: pj.rotary_cos_sin(p, 64))(positions)
    want = posenc.rotary_cos_sin(positions.astype(np.float64), 64, dtype=np.float64)
    assert max(ulp_errors(g, w).max() for g, w in zip(got, want, strict=True)) <= 1.0


def test_traced_positions_beyond_the_digits_give_nan_and_uint32_is_exact() -> None:
    got = jax.jit(lambda p: pj.rotary_cos_sin(p, 4)[0])(jnp.array([3.0, 2.0**32, -(2.0**33)]))
    assert not bool(jnp.isnan(got[0]).any())
    assert bool(jnp.isnan(got[1:]).all())
    big = np.array([2**32 - 1, 2**31 + 7], dtype=np.uint32)
    cos, sin = jax.jit(lambda p: pj.rotary_cos_sin(p, 4))(big)
    want = posenc.rotary_cos_sin(big, 4, dtype=np.float64)
    assert max(ulp_errors(g, w).max() for g, w in zip((cos, sin), want, strict=True)) <= 1.0


def test_negative_traced_positions() -> None:
    positions = np.array([-1, -7, -(2**20)])
    got = jax.jit(lambda p: pj.rotary_cos_sin(p, 8))(positions)
    want = posenc.rotary_cos_sin(positions, 8, dtype=np.float64)
    assert max(ulp_errors(g, w).max() for g, w in zip(got, want, strict=True)) <= 1.0


def test_multi_axis_known_and_traced() -> None:
    positions = np.array([[0, 0, 0], [3, 1, 2], [900, 40, 41]])
    kwargs = {"sections": (2, 1, 1), "base": 1e4}
    assert all(
        same_bits(g, w)
        for g, w in zip(
            pj.multi_axis_cos_sin(positions, 8, dtype=BF16, **kwargs),
            core_in(lambda t: posenc.multi_axis_cos_sin(positions, 8, dtype=t, **kwargs), BF16),
            strict=True,
        )
    )
    got = jax.jit(lambda p: pj.multi_axis_cos_sin(p, 8, order="interleaved", **kwargs))(positions)
    want = posenc.multi_axis_cos_sin(positions, 8, order="interleaved", dtype=np.float64, **kwargs)
    assert max(ulp_errors(g, w).max() for g, w in zip(got, want, strict=True)) <= 1.0


def test_plan_layers_known_and_traced() -> None:
    plan = pj.rope_plan(GEMMA3)
    positions = np.array([0, 9, 5000])
    for kind in ("sliding_attention", "full_attention"):
        layer = plan.layer(kind)
        known = pj.layer_cos_sin(layer, positions)
        assert same_bits(known[0], layer.cos_sin(positions)[0])
        traced = jax.jit(lambda p, lay=layer: pj.layer_cos_sin(lay, p))(positions)
        want = layer.cos_sin(positions, dtype=np.float64)
        assert max(ulp_errors(g, w).max() for g, w in zip(traced, want, strict=True)) <= 1.0


def test_multi_axis_plan_layer_traced() -> None:
    config = {
        "model_type": "qwen2_vl",
        "head_dim": 16,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [4, 2, 2]},
    }
    layer = pj.rope_plan(config).layer()
    assert layer.multi_axis
    positions = np.array([[0, 0, 0], [5, 2, 3]])
    got = jax.jit(lambda p: pj.layer_cos_sin(layer, p))(positions)
    want = layer.cos_sin(positions, dtype=np.float64)
    assert max(ulp_errors(g, w).max() for g, w in zip(got, want, strict=True)) <= 1.0


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_apply_rotary_matches_the_numpy_reference(pairs: str, rotary_dim) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 3, 8)).astype(np.float32)
    cos, sin = posenc.rotary_cos_sin(np.arange(5), 8, rotary_dim=rotary_dim, pairs=pairs)
    want = posenc.apply_rotary(x.astype(np.float64), cos[:, None], sin[:, None], pairs=pairs)
    got = jax.jit(lambda x: pj.apply_rotary(x, cos[:, None], sin[:, None], pairs=pairs))(x)
    # float32 arithmetic: two products and a sum, against the float64 reference
    assert np.abs(np.asarray(got) - want).max() <= 4 * 2.0**-24 * np.abs(x).max()
    assert got.dtype == jnp.float32
    assert got.shape == x.shape


def test_apply_rotary_one_column_per_pair_and_bf16() -> None:
    x = jnp.asarray(np.random.default_rng(2).standard_normal((4, 8)), dtype=jnp.bfloat16)
    cos, sin = pj.rotary_cos_sin(4, 8)
    laid_out, per_pair = jax.jit(
        lambda x: (
            pj.apply_rotary(x, cos, sin),
            pj.apply_rotary(x, cos[:, :4], sin[:, :4], rotary_dim=8),
        )
    )(x)
    assert laid_out.dtype == jnp.bfloat16
    assert same_bits(laid_out, per_pair)
    # rounded once from float32 arithmetic on the bf16 inputs
    wide = jax.jit(lambda x: pj.apply_rotary(x.astype(jnp.float32), cos, sin))(x)
    assert same_bits(laid_out, wide.astype(jnp.bfloat16))


def test_traced_tables_of_the_wrong_layout_give_nan_rows() -> None:
    cos, sin = pj.rotary_cos_sin(3, 4, pairs="half")
    out = jax.jit(lambda c, s: pj.apply_rotary(jnp.ones((3, 4)), c, s, pairs="interleaved"))(
        cos, sin
    )
    assert bool(jnp.isnan(out[1:]).all())  # row 0 (all angles 0) fits every layout
    assert not bool(jnp.isnan(out[0]).any())


def test_x64_mode_computes_float64_angles() -> None:
    with jax.enable_x64(True):
        positions = jnp.asarray([0, 3, 2**40], dtype=jnp.int64)
        got = jax.jit(lambda p: pj.rotary_cos_sin(p, 8, dtype=jnp.float64))(positions)
        want = posenc.rotary_cos_sin(np.asarray(positions), 8, dtype=np.float64)
        assert got[0].dtype == jnp.float64
        np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=0, atol=1e-9)
        single = jax.jit(lambda p: pj.rotary_cos_sin(p, 8))(positions)
        assert same_bits(single[1], posenc.rotary_cos_sin(np.asarray(positions), 8)[1])
