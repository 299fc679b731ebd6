"""Tests of the NumPy RoPE core: ``posenc.rotary_cos_sin`` and ``apply_rotary`` (the scalings:
``tests/rope/test_scaling.py``).

References are written here independently of posenc: angles and frequencies with Python's
``math`` module one value at a time, rotations pair by pair. The comparisons with the real
framework functions (transformers, rotary-embedding-torch, torchtune) are in
``tests/references/test_rotary.py``.
"""

from __future__ import annotations

import importlib.util
import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc import (
    apply_rotary,
    rope_frequencies,
    rope_scaling,
    rotary_cos_sin,
)
from tests.configs import DYNAMIC, LLAMA3_ROPE_SCALING, LONGROPE, YARN
from tests.rope.formulas import (
    half_to_interleaved,
    plain_omega,
    reference_rotation,
    reference_tables,
    rng_array,
)
from tests.tolerance import assert_close_ulp

PAIRS = ("half", "interleaved")


# -- cos/sin tables ----------------------------------------------------------------------------


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize(("head_dim", "base"), [(2, 10000.0), (8, 10000.0), (64, 500000.0)])
def test_cos_sin_float64_match_formula(pairs, head_dim, base):
    positions = [0, 1, 2, 7, 100, 4095, 12345, -3]
    cos, sin = rotary_cos_sin(positions, head_dim, base=base, pairs=pairs, dtype=np.float64)
    ref_cos, ref_sin = reference_tables(positions, plain_omega(head_dim, base), pairs)
    assert cos.dtype == sin.dtype == np.float64
    assert cos.shape == (len(positions), head_dim)
    # float64 angles: a few roundings of the largest angle (4 float64 ulps of it)
    assert_close_ulp(cos, ref_cos, ulps=4, scale=12346)
    assert_close_ulp(sin, ref_sin, ulps=4, scale=12346)


@pytest.mark.parametrize("pairs", PAIRS)
def test_cos_sin_float32_is_the_float64_table_rounded_once(pairs):
    positions = np.arange(0, 3_000_000, 7919)
    cos32, sin32 = rotary_cos_sin(positions, 16, pairs=pairs)
    cos64, sin64 = rotary_cos_sin(positions, 16, pairs=pairs, dtype=np.float64)
    assert cos32.dtype == np.float32
    np.testing.assert_array_equal(cos32, cos64.astype(np.float32))
    np.testing.assert_array_equal(sin32, sin64.astype(np.float32))
    ref_cos, ref_sin = reference_tables(positions, plain_omega(16), pairs)
    # half a float32 ulp (<= 3e-8 for |v| <= 1) plus the float64 angle error (p * 2e-16)
    np.testing.assert_allclose(cos32, ref_cos, rtol=0, atol=3e-8 + 3e6 * 2e-16 * 4)
    np.testing.assert_allclose(sin32, ref_sin, rtol=0, atol=3e-8 + 3e6 * 2e-16 * 4)


def test_cos_sin_shapes_dtypes_and_fractional_positions():
    cos, sin = rotary_cos_sin(5, 8)
    assert cos.shape == sin.shape == (5, 8)
    assert rotary_cos_sin([[0, 1, 2], [3, 4, 5]], 8)[0].shape == (2, 3, 8)
    assert rotary_cos_sin([], 8)[0].shape == (0, 8)
    assert rotary_cos_sin(0, 8)[0].shape == (0, 8)
    assert rotary_cos_sin(3, 10, rotary_dim=4)[0].shape == (3, 4)
    assert rotary_cos_sin(3, 8, dtype=np.float16)[0].dtype == np.float16
    cos, sin = rotary_cos_sin([0.5, -2.25], 4, dtype=np.float64)
    ref_cos, ref_sin = reference_tables([0.5, -2.25], plain_omega(4), "half")
    # float64 angles of |p| <= 2.25: the angle's rounding and cos/sin's, an ulp each
    assert_close_ulp(cos, ref_cos, ulps=2, scale=2.25)
    assert_close_ulp(sin, ref_sin, ulps=2, scale=2.25)
    np.testing.assert_array_equal(rotary_cos_sin(4, 6)[0], rotary_cos_sin([0, 1, 2, 3], 6)[0])


@pytest.mark.parametrize("dim", [2, 6, 64])
def test_half_and_interleaved_tables_are_permutations(dim):
    positions = [[0, 3], [11, 1000]]
    half = rotary_cos_sin(positions, dim, pairs="half", dtype=np.float64)
    inter = rotary_cos_sin(positions, dim, pairs="interleaved", dtype=np.float64)
    order = half_to_interleaved(dim)
    for h, i in zip(half, inter, strict=True):
        np.testing.assert_array_equal(i, h[..., order])


def test_partial_rotary_dim_uses_the_rotary_dim_frequencies():
    # frequencies are those of a head of rotary_dim channels, not of head_dim
    cos, _ = rotary_cos_sin([1], 64, rotary_dim=16, dtype=np.float64)
    np.testing.assert_array_equal(cos, rotary_cos_sin([1], 16, dtype=np.float64)[0])
    scaled = rotary_cos_sin([1], 64, scaling={"partial_rotary_factor": 0.25}, dtype=np.float64)
    np.testing.assert_array_equal(scaled[0], cos)
    # int(head_dim * factor) truncates, as in transformers: int(10 * 0.5) = 5 would be odd
    assert rotary_cos_sin([1], 12, scaling={"partial_rotary_factor": 0.5})[0].shape == (1, 6)


# -- apply_rotary --------------------------------------------------------------------------------


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("dim", [2, 8, 12])
def test_apply_rotary_matches_explicit_pair_rotations(pairs, dim):
    positions = np.array([0, 1, 5, 77, 4096])
    x = rng_array(2, 3, positions.size, dim, seed=dim)
    cos, sin = rotary_cos_sin(positions, dim, pairs=pairs, dtype=np.float64)
    out = apply_rotary(x, cos, sin, pairs=pairs)
    expected = reference_rotation(x, positions, plain_omega(dim), pairs)
    assert out.shape == x.shape
    assert out.dtype == np.float64
    # float64 angles up to 4096 (4 ulps of them), times |x|
    assert_close_ulp(out, expected, ulps=4, scale=4097 * np.abs(x).max())


def test_apply_rotary_interleaved_is_half_with_permuted_channels():
    dim = 10
    x = rng_array(4, 6, dim, seed=1)
    order = half_to_interleaved(dim)
    half = apply_rotary(x, *rotary_cos_sin(6, dim, dtype=np.float64), pairs="half")
    inter = apply_rotary(
        x[..., order], *rotary_cos_sin(6, dim, pairs="interleaved", dtype=np.float64),
        pairs="interleaved",
    )  # fmt: skip
    np.testing.assert_array_equal(inter, half[..., order])
    # and the two layouts really differ (the permutation is not the identity): the half
    # tables are not laid out for interleaved pairs
    with pytest.raises(ValueError, match="laid out for pairs='half'"):
        apply_rotary(x, *rotary_cos_sin(6, dim), pairs="interleaved")


@pytest.mark.parametrize("pairs", PAIRS)
def test_apply_rotary_partial_passes_the_rest_through(pairs):
    x = rng_array(3, 5, 12, seed=2).astype(np.float32)
    cos, sin = rotary_cos_sin(5, 12, rotary_dim=4, pairs=pairs, dtype=np.float64)
    out = apply_rotary(x, cos, sin, pairs=pairs)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out[..., 4:], x[..., 4:])
    np.testing.assert_array_equal(out[..., :4], apply_rotary(x[..., :4], cos, sin, pairs=pairs))
    assert not np.array_equal(out[:, 1:, :4], x[:, 1:, :4])


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_apply_rotary_computes_in_float64_and_rounds_once(dtype):
    x = rng_array(7, 8, seed=3).astype(dtype)
    cos, sin = rotary_cos_sin(7, 8, dtype=np.float64)
    out = apply_rotary(x, cos, sin)
    assert out.dtype == dtype
    exact = reference_rotation(x.astype(np.float64)[None], np.arange(7), plain_omega(8), "half")[0]
    np.testing.assert_array_equal(out, exact.astype(dtype))


def test_apply_rotary_broadcasts_tables_per_batch():
    x = rng_array(2, 3, 4, 6, seed=4)  # (b, h, s, d)
    positions = np.array([[0, 1, 2, 3], [10, 11, 12, 13]])
    cos, sin = rotary_cos_sin(positions, 6, dtype=np.float64)  # (b, s, r)
    out = apply_rotary(x, cos[:, None], sin[:, None])
    for b in range(2):
        expected = reference_rotation(x[b], positions[b], plain_omega(6), "half")
        # float64 angles up to 13 (4 ulps of them), times |x|
        assert_close_ulp(out[b], expected, ulps=4, scale=14 * np.abs(x).max())


def _rotate_numpy(x: np.ndarray, position: int, pairs: str) -> np.ndarray:
    cos, sin = rotary_cos_sin([position], x.shape[-1], pairs=pairs, dtype=np.float64)
    return apply_rotary(x[None], cos, sin, pairs=pairs)[0]


def _rotate_torch(x: np.ndarray, position: int, pairs: str) -> np.ndarray:
    import torch

    from posenc.torch import RotaryEmbedding

    rope = RotaryEmbedding(x.shape[-1], pairs=pairs)
    return rope.rotate(torch.from_numpy(x)[None, None, None], positions=[position])[0, 0, 0].numpy()


FRONTENDS = [
    pytest.param(_rotate_numpy, id="numpy"),
    pytest.param(
        _rotate_torch,
        id="torch",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("torch") is None, reason="the torch front-end needs torch"
        ),
    ),
]


@pytest.mark.parametrize("rotate", FRONTENDS)
@given(
    st.integers(0, 50_000),
    st.integers(0, 50_000),
    st.integers(-10_000, 10_000),
    st.sampled_from(PAIRS),
    st.integers(0, 2**31),
)
def test_rotation_preserves_norm_and_scores_depend_only_on_distance(
    rotate, m, n, shift, pairs, seed
):
    """Both front-ends, in float64: |R(m)q| = |q| and R(m)q · R(n)k depends on m - n only."""
    dim = 16
    q, k = rng_array(2, dim, seed=seed)
    qm, kn = rotate(q, m, pairs), rotate(k, n, pairs)
    # cos² + sin² = 1 within 2 ulps; the norms sum 16 squares
    assert math.isclose(np.linalg.norm(qm), np.linalg.norm(q), rel_tol=1e-14)
    scale = np.linalg.norm(q) * np.linalg.norm(k)
    # float64 angles up to 6e4: each within an ulp of it (1.5e-11)
    moved = rotate(q, m + shift, pairs) @ rotate(k, n + shift, pairs)
    assert abs(qm @ kn - moved) <= 1e-10 * scale


def test_score_check_detects_mismatched_pair_layouts():
    # the relative-position test above can fail: half tables applied as interleaved pairs
    # (a layout bug, which apply_rotary refuses) give scores that depend on more than m - n
    dim = 16
    q, k = rng_array(2, dim, seed=5)

    def wrong(x, p):  # x·cos + rotate(x)·sin with half tables and interleaved pairs
        cos, sin = rotary_cos_sin([p], dim, pairs="half", dtype=np.float64)
        turned = np.empty_like(x)
        turned[0::2], turned[1::2] = -x[1::2], x[0::2]
        return x * cos[0] + turned * sin[0]

    assert abs(wrong(q, 3) @ wrong(k, 1) - wrong(q, 1003) @ wrong(k, 1001)) > 1e-3
    with pytest.raises(ValueError, match="does not match cos/sin"):
        apply_rotary(q[None], *rotary_cos_sin([3], dim, pairs="half"), pairs="interleaved")


def test_apply_rotary_accepts_lists_and_checks_rotary_dim():
    cos, sin = rotary_cos_sin([2], 4, dtype=np.float64)
    out = apply_rotary([[1.0, 2.0, 3.0, 4.0]], cos.tolist(), sin.tolist(), rotary_dim=4)
    np.testing.assert_allclose(out, apply_rotary(np.array([[1.0, 2.0, 3.0, 4.0]]), cos, sin))


ERRORS = [
    # rotary_cos_sin
    (lambda: rotary_cos_sin(4, 7), ValueError, "rotary_dim must be even .* got 7 .*head_dim is 7"),
    (lambda: rotary_cos_sin(4, 1), ValueError, "head_dim must be an integer >= 2, got 1"),
    (lambda: rotary_cos_sin(4, 8.0), TypeError, "head_dim must be an integer >= 2, got 8.0"),
    (lambda: rotary_cos_sin(4, 8, rotary_dim=10), ValueError, "rotary_dim must be <= head_dim"),
    (lambda: rotary_cos_sin(4, 8, rotary_dim=3), ValueError, "rotary_dim must be even .* got 3"),
    (lambda: rotary_cos_sin(4, 8, rotary_dim=0), ValueError, "rotary_dim must be an integer >= 2"),
    (lambda: rotary_cos_sin(4, 8, pairs="neox"), ValueError, "pairs must be 'half' or 'interl"),
    (lambda: rotary_cos_sin(4, 8, pairs=None), TypeError, "pairs must be 'half' or 'interleaved'"),
    (lambda: rotary_cos_sin(4, 8, base=0), ValueError, "base must be a positive finite number"),
    (lambda: rotary_cos_sin(4, 8, dtype=np.int32), TypeError, "dtype must be one of float16"),
    (lambda: rotary_cos_sin([np.nan], 8), ValueError, "positions must be finite"),
    (lambda: rotary_cos_sin([True], 8), TypeError, "positions must contain integers"),
    (lambda: rotary_cos_sin([2**60], 8), ValueError, r"positions must lie within \+-2\*\*53"),
    (lambda: rotary_cos_sin(4, 8, seq_len=-1), ValueError, "seq_len must be an integer >= 0"),
    (
        lambda: rotary_cos_sin(4, 8, rotary_dim=4, scaling={"partial_rotary_factor": 0.25}),
        ValueError,
        r"rotary_dim = 4 disagrees with scaling\['partial_rotary_factor'\] = 0.25",
    ),
    (
        lambda: rotary_cos_sin(4, 8, base=10000.0, scaling={"rope_theta": 500000.0}),
        ValueError,
        r"scaling\['rope_theta'\] = 500000.0 differs from base = 10000.0; pass base=500000.0",
    ),
    # scaling dicts
    (lambda: rope_scaling([("rope_type", "linear")]), TypeError, "scaling must be None, a dict"),
    (lambda: rope_scaling({"rope_type": "ntk"}), ValueError, r"scaling\['rope_type'\] must be one"),
    (lambda: rope_scaling({"rope_type": 3}), TypeError, r"scaling\['rope_type'\] must be a string"),
    (lambda: rope_scaling({"type": "su"}), ValueError, r"scaling\['rope_type'\] must be one of"),
    (
        lambda: rope_scaling({"rope_type": "linear", "type": "yarn", "factor": 2.0}),
        ValueError,
        r"scaling\['rope_type'\] = 'linear' and scaling\['type'\] = 'yarn' disagree",
    ),
    (lambda: rope_scaling({1: 2}), TypeError, "scaling keys must be strings"),
    (
        lambda: rope_scaling({"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0}),
        ValueError,
        r"scaling\['low_freq_factor'\] is not a parameter of rope_type 'linear' "
        r"\(its parameters: factor\)",
    ),
    (
        lambda: rope_scaling({"factor": 2.0}),
        ValueError,
        r"scaling\['factor'\] is not a parameter of rope_type 'default' \(its parameters: none\)",
    ),
    (
        lambda: rope_scaling({**LLAMA3_ROPE_SCALING, "mrope_section": [1, 2]}),
        ValueError,
        r"scaling\['mrope_section'\] is not a parameter of rope_type 'llama3'",
    ),
    (
        lambda: rope_scaling({"rope_type": "linear"}),
        ValueError,
        r"scaling\['factor'\] is required for rope_type 'linear'",
    ),
    (
        lambda: rope_scaling({"rope_type": "linear", "factor": 0}),
        ValueError,
        r"scaling\['factor'\] must be a positive finite number, got 0.0",
    ),
    (
        lambda: rope_scaling({"rope_type": "linear", "factor": "2"}),
        TypeError,
        r"scaling\['factor'\] must be a positive finite number, got '2'",
    ),
    (
        lambda: rope_scaling({"rope_type": "dynamic", "factor": 2.0}),
        ValueError,
        r"scaling\['original_max_position_embeddings'\] \(or scaling\['max_position_embeddings'\]\)"
        " is required for rope_type 'dynamic'",
    ),
    (
        lambda: rope_scaling({**DYNAMIC, "max_position_embeddings": 1024}),
        ValueError,
        "rope_type 'dynamic' takes one length",
    ),
    (
        lambda: rope_scaling(
            {k: v for k, v in LLAMA3_ROPE_SCALING.items() if k != "low_freq_factor"}
        ),
        ValueError,
        r"scaling\['low_freq_factor'\] is required for rope_type 'llama3'",
    ),
    (
        lambda: rope_scaling({**LLAMA3_ROPE_SCALING, "high_freq_factor": 1.0}),
        ValueError,
        r"scaling\['high_freq_factor'\] must be greater than scaling\['low_freq_factor'\]",
    ),
    (
        lambda: rope_scaling({**LLAMA3_ROPE_SCALING, "original_max_position_embeddings": 8192.0}),
        TypeError,
        r"scaling\['original_max_position_embeddings'\] must be an integer >= 1, got 8192.0",
    ),
    (
        lambda: rope_scaling({"rope_type": "yarn", "factor": 4.0}),
        ValueError,
        r"scaling\['original_max_position_embeddings'\] is required for rope_type 'yarn'",
    ),
    (
        lambda: rope_scaling({"rope_type": "yarn", "original_max_position_embeddings": 4}),
        ValueError,
        r"scaling\['factor'\] \(or scaling\['max_position_embeddings'\], to derive it\)",
    ),
    (
        lambda: rope_scaling({**YARN, "beta_fast": -1}),
        ValueError,
        r"scaling\['beta_fast'\] must be a positive finite number, got -1.0",
    ),
    (
        lambda: rope_scaling({**YARN, "truncate": 1}),
        TypeError,
        r"scaling\['truncate'\] must be True or False, got 1",
    ),
    (
        lambda: rope_scaling({**YARN, "mscale": float("inf")}),
        ValueError,
        r"scaling\['mscale'\] must be a finite number, got inf",
    ),
    (
        lambda: rope_scaling({**LONGROPE, "short_factor": "1, 2"}),
        TypeError,
        r"scaling\['short_factor'\] must be a list of positive numbers",
    ),
    (
        lambda: rope_scaling({**LONGROPE, "long_factor": [1.0, 0.0]}),
        ValueError,
        r"scaling\['long_factor'\]\[1\] must be a positive finite number, got 0.0",
    ),
    (
        lambda: rope_scaling({**LONGROPE, "long_factor": []}),
        ValueError,
        r"scaling\['long_factor'\] must be a non-empty list",
    ),
    (
        lambda: rope_scaling({k: v for k, v in LONGROPE.items() if k != "factor"}),
        ValueError,
        r"scaling\['factor'\] \(or scaling\['attention_factor'\], or "
        r"scaling\['max_position_embeddings'\]\) is required for rope_type 'longrope'",
    ),
    (
        lambda: rope_scaling({"partial_rotary_factor": 1.5}),
        ValueError,
        r"scaling\['partial_rotary_factor'\] must be a number in \(0, 1\], got 1.5",
    ),
    # rope_frequencies
    (lambda: rope_frequencies(7), ValueError, "dim must be even .* got 7"),
    (lambda: rope_frequencies(0), ValueError, "dim must be an integer >= 2, got 0"),
    (
        lambda: rope_frequencies(2, scaling=DYNAMIC),
        ValueError,
        "dim must be >= 4 for rope_type 'dynamic'",
    ),
    (
        lambda: rope_frequencies(16, scaling=LONGROPE),
        ValueError,
        r"scaling\['short_factor'\] must have dim/2 = 8 entries \(one per rotated pair\), got 4",
    ),
    # apply_rotary
    (
        lambda: apply_rotary(np.ones((2, 4)), *rotary_cos_sin(3, 4)),
        ValueError,
        r"cos/sin of shape \(3, 4\) must broadcast against x\[\.\.\., :4\] of shape \(2, 4\)",
    ),
    (
        lambda: apply_rotary(np.ones((2, 4)), *rotary_cos_sin(2, 6)),
        ValueError,
        r"cos must have an even number of channels <= x.shape\[-1\] = 4, got shape \(2, 6\)",
    ),
    (
        lambda: apply_rotary(np.ones((2, 4), dtype=int), *rotary_cos_sin(2, 4)),
        TypeError,
        "x must be a floating-point array, got dtype int",
    ),
    (
        lambda: apply_rotary(np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 2))),
        ValueError,
        r"cos and sin must have the same shape, got \(2, 4\) and \(2, 2\)",
    ),
    (
        lambda: apply_rotary(np.ones((2, 4)), *rotary_cos_sin(2, 4), rotary_dim=2),
        ValueError,
        r"rotary_dim = 2 must be cos.shape\[-1\] = 4 \(tables laid out for pairs\) or "
        r"2 \* cos.shape\[-1\] = 8 \(one column per pair\)",
    ),
    (
        lambda: apply_rotary(np.ones((2, 4)), *rotary_cos_sin(2, 4), pairs="full"),
        ValueError,
        "pairs must be 'half' or 'interleaved', got 'full'",
    ),
    (
        lambda: apply_rotary(np.float64(1.0), np.ones(2), np.ones(2)),
        ValueError,
        "x and cos must have a channel dimension",
    ),
]


@pytest.mark.parametrize(("call", "error", "message"), ERRORS)
def test_errors_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_error_messages_list_the_allowed_rope_types():
    with pytest.raises(ValueError, match=re.escape("'linear', 'dynamic', 'yarn', 'llama3'")):
        rope_frequencies(8, scaling={"rope_type": "ntk"})


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
@pytest.mark.parametrize(("dim", "rotary_dim"), [(8, None), (10, 6)])
def test_the_inverse_rotation_turns_by_minus_theta_and_undoes_the_rotation(
    pairs: str, dim: int, rotary_dim: int | None
) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, dim))
    r = rotary_dim or dim
    cos, sin = rotary_cos_sin(np.arange(5) * 977, r, pairs=pairs, dtype=np.float64)  # type: ignore[arg-type]
    back = apply_rotary(x, cos, sin, pairs=pairs, inverse=True)  # type: ignore[arg-type]
    np.testing.assert_array_equal(back, apply_rotary(x, cos, -sin, pairs=pairs))  # type: ignore[arg-type]
    there = apply_rotary(x, cos, sin, pairs=pairs)  # type: ignore[arg-type]
    np.testing.assert_allclose(apply_rotary(there, cos, sin, pairs=pairs, inverse=True), x,  # type: ignore[arg-type]
                               atol=1e-15, rtol=0)  # fmt: skip
    assert not np.allclose(back, there)  # a real turn, not the identity


@pytest.mark.parametrize("inverse", [1, "True", None, np.array([True])])
def test_inverse_must_be_a_bool(inverse: object) -> None:
    cos, sin = rotary_cos_sin([0], 4)
    with pytest.raises(TypeError, match="inverse must be True or False"):
        apply_rotary(np.ones((1, 4)), cos, sin, inverse=inverse)  # type: ignore[arg-type]
