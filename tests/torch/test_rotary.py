"""Tests of ``posenc.torch.RotaryEmbedding``, ``rotary_cos_sin`` and ``apply_rotary``.

References are the NumPy core (``posenc.rotary_cos_sin``, float64) and rotations written here.
"""

from __future__ import annotations

import copy
import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")


from posenc import apply_rotary as np_apply_rotary  # noqa: E402
from posenc import rotary_cos_sin as np_cos_sin  # noqa: E402
from posenc.torch import RotaryEmbedding, apply_rotary, cast_exact, rotary_cos_sin  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402

PAIRS = ("half", "interleaved")
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
DYNAMIC = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 16}
LONGROPE = {
    "rope_type": "longrope",
    "short_factor": [1.0, 1.5, 2.0, 3.0],
    "long_factor": [2.0, 4.0, 8.0, 16.0],
    "original_max_position_embeddings": 16,
    "factor": 4.0,
}


def reference(x, positions, *, seq_axis=-2, per_batch=False, **kwargs):
    """Rotation of x by the NumPy core in float64: the float64 result as a tensor.

    ``positions``: (s,) or, with ``per_batch``, (b, s); ``seq_axis``: where s is in x.
    """
    head_dim = x.shape[-1]
    cos, sin = np_cos_sin(np.asarray(positions), head_dim, dtype=np.float64, **kwargs)
    shape = [1] * x.dim()
    shape[seq_axis], shape[-1] = cos.shape[-2], cos.shape[-1]
    if per_batch:
        shape[0] = cos.shape[0]
    pairs = kwargs.get("pairs", "half")
    out = np_apply_rotary(x.double().numpy(), cos.reshape(shape), sin.reshape(shape), pairs=pairs)
    return torch.from_numpy(out)


def randn(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


#: float64 tables: torch's and NumPy's sin/cos each within an ulp of the exact value.
TABLE64_ULPS = 2
#: A rotation in float32 (or float64) against the float64 reference: cos and sin rounded once
#: each, two products and a sum, at the magnitude of the rotated values.
ROTATION_ULPS = 4


def assert_close_to(actual, expected, *, ulps, scale=None):
    """Within ``ulps`` ulps of ``actual``'s dtype (tests/tolerance.py) of max|expected|, or
    of ``scale``."""
    assert_close_ulp(actual, expected, ulps=ulps, dtype=actual.dtype, scale=scale)


# -- functional -----------------------------------------------------------------------------------


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("scaling", [None, YARN])
def test_functional_cos_sin_equal_numpy_core(pairs, scaling):
    positions = torch.tensor([[0, 3, 70], [5, 1000, 123456]])
    kwargs = {"pairs": pairs, "scaling": scaling}
    cos, sin = rotary_cos_sin(positions, 16, dtype=torch.float32, **kwargs)
    ref = np_cos_sin(positions.numpy(), 16, dtype=np.float32, **kwargs)
    assert cos.dtype == sin.dtype == torch.float32
    assert torch.equal(cos, torch.from_numpy(ref[0]))
    assert torch.equal(sin, torch.from_numpy(ref[1]))
    # float64: torch's and NumPy's sin/cos may differ in the last bit
    cos, sin = rotary_cos_sin(positions, 16, dtype=torch.float64, **kwargs)
    ref = np_cos_sin(positions.numpy(), 16, dtype=np.float64, **kwargs)
    assert cos.dtype == torch.float64
    assert_close_to(cos, torch.from_numpy(ref[0]), ulps=TABLE64_ULPS)
    assert_close_to(sin, torch.from_numpy(ref[1]), ulps=TABLE64_ULPS)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_functional_cos_sin_half_precision_rounded_once(dtype):
    cos, sin = rotary_cos_sin(5000, 8, dtype=dtype, rotary_dim=6)
    ref_cos, ref_sin = np_cos_sin(5000, 8, dtype=np.float64, rotary_dim=6)
    assert cos.dtype == dtype
    assert torch.equal(cos, cast_exact(torch.from_numpy(ref_cos), dtype))
    assert torch.equal(sin, cast_exact(torch.from_numpy(ref_sin), dtype))


def test_functional_cos_sin_lengths_devices_and_defaults():
    cos, sin = rotary_cos_sin(4, 6)
    assert cos.shape == (4, 6)
    assert cos.dtype == torch.get_default_dtype()
    assert torch.equal(cos, rotary_cos_sin(torch.arange(4), 6)[0])
    assert torch.equal(sin, rotary_cos_sin([0, 1, 2, 3], 6, device="cpu")[1])
    # length-dependent scalings default to the largest position + 1
    long = torch.arange(40)
    assert torch.equal(
        rotary_cos_sin(long, 8, scaling=DYNAMIC)[0],
        rotary_cos_sin(long, 8, scaling=DYNAMIC, seq_len=40)[0],
    )


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("rotary_dim", [8, 4])
def test_functional_apply_equals_numpy_reference(pairs, rotary_dim):
    x = randn(2, 3, 5, 8, dtype=torch.float64)
    cos, sin = rotary_cos_sin(
        torch.arange(5), 8, pairs=pairs, rotary_dim=rotary_dim, dtype=torch.float64
    )
    out = apply_rotary(x, cos, sin, pairs=pairs)
    expected = np_apply_rotary(x.numpy(), cos.numpy(), sin.numpy(), pairs=pairs)
    assert out.dtype == torch.float64
    assert_close_to(out, torch.from_numpy(expected), ulps=ROTATION_ULPS)
    assert torch.equal(out[..., rotary_dim:], x[..., rotary_dim:])


def test_functional_apply_equals_hf_formula_bitwise_in_float32():
    # q*cos + rotate_half(q)*sin, written out: same float32 operations, same bits
    q = randn(1, 2, 6, 8)
    cos, sin = rotary_cos_sin(6, 8, dtype=torch.float32)
    rotated_half = torch.cat((-q[..., 4:], q[..., :4]), dim=-1)
    assert torch.equal(apply_rotary(q, cos, sin), q * cos + rotated_half * sin)


# -- module against the core ----------------------------------------------------------------------


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("rotary_dim", [None, 4])
@pytest.mark.parametrize("scaling", [None, YARN])
def test_forward_equals_core(pairs, rotary_dim, scaling):
    rope = RotaryEmbedding(8, pairs=pairs, rotary_dim=rotary_dim, scaling=scaling)
    q, k = randn(2, 4, 7, 8, seed=1), randn(2, 1, 7, 8, seed=2)
    q_rot, k_rot = rope(q, k)
    kwargs = {"pairs": pairs, "rotary_dim": rotary_dim, "scaling": scaling}
    assert q_rot.shape == q.shape
    assert k_rot.shape == k.shape
    assert_close_to(q_rot, reference(q, range(7), **kwargs), ulps=ROTATION_ULPS)
    assert_close_to(k_rot, reference(k, range(7), **kwargs), ulps=ROTATION_ULPS)


@pytest.mark.parametrize("seq_dim", [1, -3])
def test_forward_sequence_before_heads(seq_dim):
    rope = RotaryEmbedding(8, seq_dim=seq_dim, pairs="interleaved")
    q = randn(2, 7, 3, 8, seed=3)  # (b, s, h, d)
    q_rot, k_rot = rope(q, q)
    assert torch.equal(q_rot, k_rot)
    assert_close_to(
        q_rot, reference(q, range(7), seq_axis=-3, pairs="interleaved"), ulps=ROTATION_ULPS
    )
    # equals the (b, h, s, d) layout transposed
    default = RotaryEmbedding(8, pairs="interleaved")
    assert torch.equal(default.rotate(q.transpose(1, 2)).transpose(1, 2), q_rot)


def test_forward_three_and_two_dimensional_inputs():
    rope = RotaryEmbedding(6)
    x = randn(3, 5, 6, seed=4)  # (b, s, d)
    assert_close_to(rope.rotate(x), reference(x, range(5)), ulps=ROTATION_ULPS)
    assert_close_to(rope.rotate(x[0]), reference(x[0], range(5)), ulps=ROTATION_ULPS)


@pytest.mark.parametrize("pairs", PAIRS)
def test_explicit_and_per_batch_positions(pairs):
    rope = RotaryEmbedding(8, pairs=pairs)
    q = randn(2, 3, 4, 8, seed=5)
    positions = torch.tensor([[0, 1, 2, 3], [7, 8, 9, 100_000]])
    q_rot, _ = rope(q, q, positions=positions)
    expected = reference(q, positions, per_batch=True, pairs=pairs)
    assert_close_to(q_rot, expected, ulps=ROTATION_ULPS)
    # (s,) positions and Hugging Face style (1, s) position ids
    shared = torch.tensor([5, 6, 7, 8])
    by_1d = rope(q, q, positions=shared)[0]
    assert torch.equal(by_1d, rope(q, q, positions=shared[None])[0])
    assert torch.equal(by_1d, rope(q, q, offset=5)[0])
    assert torch.equal(rope(q, q, positions=shared - 5, offset=5)[0], by_1d)
    # (b, s) positions with the sequence before the heads
    rope_bshd = RotaryEmbedding(8, pairs=pairs, seq_dim=1)
    out = rope_bshd.rotate(q.transpose(1, 2), positions=positions).transpose(1, 2)
    assert torch.equal(out, q_rot)


def test_float_and_negative_positions():
    rope = RotaryEmbedding(4)
    x = randn(1, 1, 3, 4, dtype=torch.float64)
    positions = torch.tensor([-2.5, 0.25, 3.0], dtype=torch.float64)
    assert_close_to(
        rope.rotate(x, positions=positions), reference(x, positions.numpy()), ulps=ROTATION_ULPS
    )


def test_float64_inputs_use_float64_tables():
    rope = RotaryEmbedding(8)
    x = randn(1, 2, 5, 8, dtype=torch.float64)
    assert_close_to(rope.rotate(x), reference(x, range(5)), ulps=ROTATION_ULPS)
    assert rope.cos_cached.dtype == torch.float64
    # float64 angles up to 1004: their rounding is an ulp of the angle, times |x|
    scale = 1005 * float(x.abs().max())
    assert_close_to(
        rope.rotate(x, offset=1000), reference(x, range(1000, 1005)), ulps=2, scale=scale
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_rotate_in_float32_and_round_once(dtype):
    rope = RotaryEmbedding(8)
    q = randn(2, 2, 50, 8, dtype=dtype, seed=6)
    q_rot, k_rot = rope(q, q)
    assert q_rot.dtype == k_rot.dtype == dtype
    expected = rope.rotate(q.float()).to(dtype)
    assert torch.equal(q_rot, expected)
    assert rope.cos_cached.dtype == torch.float32  # never 16-bit tables


# -- properties -----------------------------------------------------------------------------------


def test_float32_norms_preserved():
    rope = RotaryEmbedding(64)
    x = randn(2, 4, 300, 64)
    # per row, as above in float32 (measured <= 1.3 ulps under ATen's three CPU kernel sets)
    norms = x.norm(dim=-1)
    assert_close_ulp(rope.rotate(x).norm(dim=-1), norms, ulps=4, scale=norms)


@pytest.mark.parametrize("pairs", PAIRS)
def test_token_by_token_decoding_equals_full_sequence(pairs):
    rope = RotaryEmbedding(8, pairs=pairs, rotary_dim=6)
    q, k = randn(2, 4, 12, 8, seed=7), randn(2, 2, 12, 8, seed=8)
    full_q, full_k = RotaryEmbedding(8, pairs=pairs, rotary_dim=6)(q, k)
    for t in range(12):
        step_q, step_k = rope(q[:, :, t : t + 1], k[:, :, t : t + 1], offset=t)
        assert torch.equal(step_q, full_q[:, :, t : t + 1])
        assert torch.equal(step_k, full_k[:, :, t : t + 1])


@pytest.mark.parametrize("chunks", [(5, 1, 1, 9), (3, 13), (16,)])
def test_chunked_prefill_equals_full_sequence(chunks):
    rope = RotaryEmbedding(8, max_len=2)
    x = randn(1, 2, 16, 8, seed=9)
    full = RotaryEmbedding(8).rotate(x)
    start = 0
    for size in chunks:
        part = rope.rotate(x[:, :, start : start + size], offset=start)
        assert torch.equal(part, full[:, :, start : start + size])
        start += size


# -- cache ----------------------------------------------------------------------------------------


def test_cache_is_not_in_state_dict_and_grows_geometrically():
    rope = RotaryEmbedding(8)
    assert rope.state_dict() == {}
    assert rope.cos_cached.shape == (0, 8)
    rope.rotate(randn(1, 1, 5, 8))
    assert rope.cos_cached.shape == (5, 8)
    rope.rotate(randn(1, 1, 1, 8), offset=5)
    assert rope.cos_cached.shape == (10, 8)  # doubled
    rope.rotate(randn(1, 1, 3, 8), offset=6)
    assert rope.cos_cached.shape == (10, 8)  # served from the cache
    cos, sin = np_cos_sin(10, 8)
    assert torch.equal(rope.cos_cached, torch.from_numpy(cos))
    assert torch.equal(rope.sin_cached, torch.from_numpy(sin))
    assert RotaryEmbedding(8, max_len=32).cos_cached.shape == (32, 8)


def test_far_jumps_and_explicit_positions_do_not_grow_the_cache():
    rope = RotaryEmbedding(8, max_len=4)
    x = randn(1, 1, 2, 8)
    out = rope.rotate(x, offset=1_000_000)
    assert rope.cos_cached.shape == (4, 8)
    assert_close_to(out, reference(x, [1_000_000, 1_000_001]), ulps=ROTATION_ULPS)
    rope.rotate(x, positions=[100, 200])
    assert rope.cos_cached.shape == (4, 8)


@pytest.mark.parametrize(
    "cast",
    [
        lambda m: m.double(),
        lambda m: m.to(torch.float64),
        lambda m: m.half(),
        lambda m: m.to("cpu"),
        lambda m: copy.deepcopy(m),
    ],
)
def test_module_casts_rebuild_tables_from_float64(cast):
    rope = RotaryEmbedding(8, max_len=6, scaling=YARN)
    rope = cast(rope)
    dtype = rope.cos_cached.dtype
    assert dtype in (torch.float32, torch.float64)
    expected = np_cos_sin(6, 8, scaling=YARN, dtype=np.float64)
    assert torch.equal(rope.cos_cached, torch.from_numpy(expected[0]).to(dtype))
    assert torch.equal(rope.sin_cached, torch.from_numpy(expected[1]).to(dtype))


def test_meta_initialisation_and_to_empty():
    with torch.device("meta"):
        rope = RotaryEmbedding(8, max_len=5)
    assert rope.cos_cached.device.type == "meta"
    rope = rope.to_empty(device="cpu")
    assert torch.equal(rope.cos_cached, torch.from_numpy(np_cos_sin(5, 8)[0]))


def test_save_and_load_roundtrip():
    rope = RotaryEmbedding(8, pairs="interleaved", scaling=YARN, max_len=3)
    buffer = io.BytesIO()
    torch.save(rope, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    x = randn(1, 2, 9, 8)
    assert torch.equal(loaded.rotate(x), rope.rotate(x))
    fresh = RotaryEmbedding(8, pairs="interleaved", scaling=YARN)
    fresh.load_state_dict(rope.state_dict())
    assert torch.equal(fresh.rotate(x), rope.rotate(x))


def test_gradients_flow_through_the_rotation():
    rope = RotaryEmbedding(8)
    q = randn(1, 1, 4, 8).requires_grad_()
    q_rot, _ = rope(q, q.detach())
    (q_rot**2).sum().backward()
    # a rotation is orthogonal: d|Rq|^2/dq = 2q
    # cos and sin rounded once each: RᵀR = 1 within 2 ulps of the largest |2q|
    assert_close_ulp(q.grad, 2 * q.detach(), ulps=2)


# -- length-dependent scalings --------------------------------------------------------------------


def test_dynamic_scaling_recomputes_for_the_current_length():
    rope = RotaryEmbedding(8, scaling=DYNAMIC)
    short = randn(1, 1, 16, 8)
    assert_close_to(rope.rotate(short), reference(short, range(16)), ulps=ROTATION_ULPS)
    long = randn(1, 1, 40, 8, seed=1)
    out = rope.rotate(long)
    expected = reference(long, range(40), scaling=DYNAMIC, seq_len=40)
    assert_close_to(out, expected, ulps=ROTATION_ULPS)
    assert not torch.allclose(out, RotaryEmbedding(8).rotate(long), atol=1e-3)
    assert rope.cos_cached.shape[0] <= 32  # beyond the original length: not cached
    # decoding one token at position 40: frequencies of length 41
    step = rope.rotate(long[:, :, :1], offset=40)
    assert_close_to(
        step, reference(long[:, :, :1], [40], scaling=DYNAMIC, seq_len=41), ulps=ROTATION_ULPS
    )
    # explicit seq_len overrides the default
    fixed = rope.rotate(short, seq_len=64)
    assert_close_to(
        fixed, reference(short, range(16), scaling=DYNAMIC, seq_len=64), ulps=ROTATION_ULPS
    )
    # positions: the largest + 1
    positions = torch.arange(30, 46)
    by_positions = rope.rotate(short, positions=positions)
    assert_close_to(
        by_positions, reference(short, range(30, 46), scaling=DYNAMIC), ulps=ROTATION_ULPS
    )


def test_longrope_switches_factor_sets_and_keeps_the_attention_factor():
    rope = RotaryEmbedding(8, scaling=LONGROPE)
    x = randn(1, 1, 24, 8)
    short = rope.rotate(x[:, :, :16])
    assert_close_to(short, reference(x[:, :, :16], range(16), scaling=LONGROPE), ulps=ROTATION_ULPS)
    long = rope.rotate(x)
    assert_close_to(long, reference(x, range(24), scaling=LONGROPE), ulps=ROTATION_ULPS)
    assert rope.cos_cached.shape[0] >= 24  # the long set is cached too
    again = rope.rotate(x[:, :, :16])  # back below the original length: the short set
    assert torch.equal(again, short)
    step = rope.rotate(x[:, :, 23:], offset=23)
    assert torch.equal(step, long[:, :, 23:])


# -- torch.compile ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_torch_compile_fullgraph_matches_eager():
    torch._dynamo.reset()
    rope = RotaryEmbedding(8, max_len=4, scaling=YARN)
    compiled = torch.compile(rope, fullgraph=True)
    q, k = randn(2, 2, 10, 8), randn(2, 1, 10, 8, seed=1)
    q_rot, k_rot = compiled(q, k)  # longer than the cache: computed on the fly
    assert rope.cos_cached.shape == (4, 8)  # no buffer mutation while compiled
    eager_q, eager_k = RotaryEmbedding(8, scaling=YARN)(q, k)
    assert torch.equal(q_rot, eager_q)
    assert torch.equal(k_rot, eager_k)


@pytest.mark.slow
def test_torch_compile_fullgraph_dynamic_scaling_over_changing_lengths():
    """dynamic NTK picks its frequencies by the length: each length past the original one
    (16) has its own, inside one graph with a symbolic length (dynamic=True), 1-D and
    multi-axis; explicit positions and a tensor offset, with seq_len=."""
    from torch._dynamo.utils import counters

    def same(got, want):
        return all(torch.equal(a, b) for a, b in zip(got, want, strict=True))

    torch._dynamo.reset()
    counters.clear()
    rope = RotaryEmbedding(8, scaling=DYNAMIC)
    mrope = RotaryEmbedding(8, scaling=DYNAMIC, sections=[2, 1, 1])
    compiled = torch.compile(rope, fullgraph=True, dynamic=True, backend="eager")
    compiled_m = torch.compile(mrope, fullgraph=True, dynamic=True, backend="eager")
    for n, offset in ((9, 0), (20, 0), (27, 3)):
        q, k = randn(1, 2, n, 8, seed=n), randn(1, 1, n, 8, seed=n + 1)
        assert same(compiled(q, k, offset=offset), rope(q, k, offset=offset)), n
        assert same(compiled_m(q, k, offset=offset), mrope(q, k, offset=offset)), n
    q, k = randn(1, 2, 22, 8), randn(1, 1, 22, 8, seed=1)
    positions = torch.arange(40, 62)  # explicit positions need seq_len= (no read in a graph)
    want = rope(q, k, positions=positions, seq_len=70)
    assert same(compiled(q, k, positions=positions, seq_len=70), want)
    # a tensor offset, whose value the graph does not read, needs it too
    assert same(
        compiled(q, k, offset=torch.tensor(30), seq_len=52), rope(q, k, offset=30, seq_len=52)
    )
    with pytest.raises(Exception, match="with a tensor offset, pass seq_len="):
        compiled(q, k, offset=torch.tensor(30))
    assert counters["stats"]["unique_graphs"] <= 6, dict(counters["stats"])


# -- repr and errors ------------------------------------------------------------------------------


def test_repr():
    assert repr(RotaryEmbedding(8)) == (
        "RotaryEmbedding(head_dim=8, rotary_dim=8, pairs='half', base=10000.0, seq_dim=-2)"
    )
    text = repr(RotaryEmbedding(8, scaling={"rope_type": "linear", "factor": 2}, rotary_dim=4))
    assert "rotary_dim=4" in text
    assert "scaling=RopeScaling(rope_type='linear', factor=2.0)" in text


def _q(*shape, dtype=torch.float32, device=None):
    return torch.zeros(*shape, dtype=dtype, device=device)


def _nested():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the nested tensor API is a prototype
        return torch.nested.nested_tensor([_q(2, 3, 8), _q(2, 5, 8)])


ERRORS = [
    (lambda: RotaryEmbedding(7), ValueError, "rotary_dim must be even .* got 7"),
    (lambda: RotaryEmbedding(8, pairs="x"), ValueError, "pairs must be 'half' or 'interleaved'"),
    (lambda: RotaryEmbedding(8, seq_dim=-1), ValueError, "seq_dim must not be -1"),
    (lambda: RotaryEmbedding(8, seq_dim=1.0), TypeError, "seq_dim must be an integer"),
    (lambda: RotaryEmbedding(8, base=-1.0), ValueError, "base must be a positive finite number"),
    (
        lambda: RotaryEmbedding(8, scaling={"rope_type": "ntk"}),
        ValueError,
        r"scaling\['rope_type'\] must be one of",
    ),
    (lambda: RotaryEmbedding(8)(_q(1, 2, 3, 8), None), TypeError, "k must be a torch.Tensor"),
    (
        lambda: RotaryEmbedding(8)(_q(1, 2, 3, 8), _q(1, 2, 3, 8, dtype=torch.int64)),
        TypeError,
        "k must be a floating-point tensor, got dtype torch.int64",
    ),
    (
        lambda: RotaryEmbedding(8)(_q(1, 2, 3, 6), _q(1, 2, 3, 6)),
        ValueError,
        r"q must have shape \(\.\.\., s, d\) with d = head_dim = 8 channels last, got shape",
    ),
    (
        lambda: RotaryEmbedding(8)(_q(1, 2, 3, 8, dtype=torch.float8_e4m3fn), _q(1, 2, 3, 8)),
        TypeError,
        r"q must be a float16, bfloat16, float32 or float64 tensor, got dtype torch.float8_e4m3fn",
    ),
    (
        lambda: RotaryEmbedding(8)(_q(1, 2, 3, 8).to_sparse(), _q(1, 2, 3, 8)),
        TypeError,
        r"q must be a dense tensor, got layout torch.sparse_coo; pass q.to_dense\(\)",
    ),
    (
        lambda: RotaryEmbedding(8).rotate(_q(1, 2, 3, 8).to_sparse()),
        TypeError,
        r"x must be a dense tensor, got layout torch.sparse_coo; pass x.to_dense\(\)",
    ),
    (
        lambda: RotaryEmbedding(8)(_nested(), _nested()),
        TypeError,
        r"q must be a dense tensor, got a nested tensor; rotate each of its tensors",
    ),
    (
        lambda: RotaryEmbedding(8)(_q(1, 2, 3, 8, device="meta"), _q(1, 2, 3, 8)),
        ValueError,
        r"q and k must be on one device, got meta and cpu",
    ),
    (
        lambda: RotaryEmbedding(8).rotate(_q(1, 3, 8), positions=torch.arange(3).to_sparse()),
        TypeError,
        r"positions must be a dense tensor, got layout torch.sparse_coo",
    ),
    (
        lambda: apply_rotary(_q(2, 8).to_sparse(), _q(2, 8), _q(2, 8)),
        TypeError,
        r"x must be a dense tensor, got layout torch.sparse_coo",
    ),
    (
        lambda: RotaryEmbedding(8)(_q(1, 2, 3, 8), _q(1, 2, 4, 8)),
        ValueError,
        "q and k must have the same number of dimensions and the same sequence length",
    ),
    (
        lambda: RotaryEmbedding(8, seq_dim=-3).rotate(_q(3, 8)),
        ValueError,
        "seq_dim = -3 is not a dimension before the last of a 2-D input",
    ),
    (
        lambda: RotaryEmbedding(8).rotate(_q(2, 1, 3, 8), positions=[0, 1]),
        ValueError,
        r"positions must have shape \(s,\) = \(3,\) or \(b, s\) = \(2, 3\) or \(1, 3\)",
    ),
    (
        lambda: RotaryEmbedding(8).rotate(_q(3, 8), positions=[[0, 1, 2]]),
        ValueError,
        r"positions must have shape \(s,\) = \(3,\) for inputs of shape \(3, 8\)",
    ),
    (
        lambda: RotaryEmbedding(8).rotate(_q(1, 3, 8), positions=[0.0, float("nan"), 1.0]),
        ValueError,
        "positions must be finite",
    ),
    (
        lambda: RotaryEmbedding(8).rotate(_q(1, 3, 8), positions=[True, False, True]),
        TypeError,
        "positions must contain integers or real numbers",
    ),
    (lambda: RotaryEmbedding(8).rotate(_q(1, 3, 8), offset=-1), ValueError, "offset must be"),
    (lambda: RotaryEmbedding(8).rotate(_q(1, 3, 8), seq_len=-1), ValueError, "seq_len must be"),
    (
        lambda: apply_rotary(_q(2, 8), _q(2, 8), _q(2, 6)),
        ValueError,
        r"cos and sin must have the same shape, got \(2, 8\) and \(2, 6\)",
    ),
    (
        lambda: apply_rotary(_q(2, 8), _q(3, 8), _q(3, 8)),
        ValueError,
        r"cos/sin of shape \(3, 8\) must broadcast against x\[\.\.\., :8\] of shape \(2, 8\)",
    ),
    (
        lambda: apply_rotary(_q(2, 4), _q(2, 8), _q(2, 8)),
        ValueError,
        r"cos must have an even number of channels <= x.shape\[-1\] = 4",
    ),
    (
        lambda: apply_rotary(_q(2, 4), _q(2, 4), _q(2, 4), pairs="full"),
        ValueError,
        "pairs must be 'half' or 'interleaved'",
    ),
    (lambda: apply_rotary([1.0], _q(2, 4), _q(2, 4)), TypeError, "x must be a torch.Tensor"),
    (
        lambda: rotary_cos_sin(3, 8, dtype=torch.int32),
        TypeError,
        "dtype must be one of torch.float16",
    ),
    (lambda: rotary_cos_sin(3, 8, rotary_dim=5), ValueError, "rotary_dim must be even"),
]


@pytest.mark.parametrize(("call", "error", "message"), ERRORS)
def test_errors_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()
