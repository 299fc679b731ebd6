"""The eager fast path of the rotary apply (the rope kernel) against the formula.

The formula ``x·cos + rotate(x)·sin`` in float32 (float64 for float64 inputs), rounded once to
x's dtype, is the reference (it is also the path ``torch.compile`` traces). On the CPU both
pair layouts must give its bits; off the CPU, interleaved pairs (a complex multiplication by
the device's kernel) are within one unit in the last place. Chunking and the per-thread
pieces are exercised with small chunk sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import posenc.torch._kernels._rope as rotary  # noqa: E402
from posenc import rotary_cos_sin as np_cos_sin  # noqa: E402
from posenc.torch import RotaryEmbedding, apply_rotary, rotary_cos_sin  # noqa: E402
from posenc.torch._kernels import _workers  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402

PAIRS = ("half", "interleaved")
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def randn(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


def tables(length, head_dim, pairs, dtype=torch.float32, rotary_dim=None):
    return rotary_cos_sin(length, head_dim, pairs=pairs, dtype=dtype, rotary_dim=rotary_dim)


def formula(x, cos, sin, pairs):
    """The reference rotation (also what torch.compile traces)."""
    return rotary.rotate_formula(x, cos, sin, pairs)


def ulps(dtype):
    """One unit in the last place at 1.0 (the values here are of order 1)."""
    return torch.finfo(dtype).eps


def assert_matches_formula(out, x, cos, sin, pairs):
    """The formula's bits, for both pair layouts (see tests/torch/kernels/test_differential.py
    for every thread count and schedule)."""
    expected = formula(x, cos, sin, pairs)
    assert out.dtype == x.dtype
    assert out.shape == x.shape
    assert torch.equal(out, expected)
    rotated = cos.shape[-1]
    assert torch.equal(out[..., rotated:], x[..., rotated:])


@pytest.fixture(params=["threads", "caller"])
def small_chunks(request, monkeypatch):
    """Pieces of 1 KiB and two threads: many pieces and tasks, ragged last pieces; small
    half-pair inputs take the fast path too; handed to threads, or all on the calling thread."""
    monkeypatch.setattr(rotary, "_CHUNK_BYTES", 1024)
    monkeypatch.setattr(rotary, "_SMALL_HALF", 0)
    monkeypatch.setattr(rotary.torch, "get_num_threads", lambda: 2)
    if request.param == "threads":
        monkeypatch.setattr(_workers, "SPREAD_MIN_BYTES", 0)


# -- values ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("head_dim", "rotary_dim"), [(16, None), (16, 10), (7, 6), (64, 64)])
def test_fast_path_equals_formula(pairs, dtype, head_dim, rotary_dim, small_chunks):
    table_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    cos, sin = tables(9, head_dim, pairs, table_dtype, rotary_dim)
    x = randn(2, 3, 9, head_dim, dtype=dtype, seed=1)
    out = apply_rotary(x, cos, sin, pairs=pairs)
    assert_matches_formula(out, x, cos, sin, pairs)


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_whole_tensor_and_chunked_agree(pairs, dtype, monkeypatch):
    cos, sin = tables(64, 32, pairs)
    x = randn(4, 6, 64, 32, dtype=dtype, seed=2)
    whole = apply_rotary(x, cos, sin, pairs=pairs)  # 2 MiB chunks: one chunk
    monkeypatch.setattr(rotary, "_CHUNK_BYTES", 4096)
    for threads in (1, 2, 3):
        monkeypatch.setattr(rotary.torch, "get_num_threads", lambda t=threads: t)
        assert torch.equal(apply_rotary(x, cos, sin, pairs=pairs), whole)
    assert_matches_formula(whole, x, cos, sin, pairs)


@pytest.mark.parametrize("pairs", PAIRS)
def test_layouts_and_broadcast_tables(pairs, small_chunks):
    cos, sin = tables(10, 8, pairs)
    bshd = randn(2, 10, 3, 8, seed=3)  # (b, s, h, d), rotated as (b, h, s, d)
    x = bshd.transpose(1, 2)
    out = apply_rotary(x, cos, sin, pairs=pairs)
    assert out.stride() == x.stride()  # the output keeps the input's layout
    assert_matches_formula(out, x, cos, sin, pairs)
    # tables per batch element (b, 1, s, r), as Hugging Face's cos.unsqueeze(1)
    positions = torch.tensor([list(range(10)), [5] * 10])
    per_batch = tuple(t.unsqueeze(1) for t in rotary_cos_sin(positions, 8, pairs=pairs))
    out = apply_rotary(x, *per_batch, pairs=pairs)
    assert_matches_formula(out, x, *per_batch, pairs)
    # views with odd strides and offsets (not viewable as complex numbers)
    wide = randn(2, 3, 10, 9, seed=4)
    for view in (wide[..., 1:], wide[..., :8], wide[:, ::2, :, 1:]):
        assert_matches_formula(apply_rotary(view, cos, sin, pairs=pairs), view, cos, sin, pairs)
    # an expanded (overlapping) input
    row = randn(1, 1, 10, 8, seed=5).expand(2, 3, 10, 8)
    assert_matches_formula(apply_rotary(row, cos, sin, pairs=pairs), row, cos, sin, pairs)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=0, max_size=3),
    st.integers(1, 40),
    st.integers(1, 8),
    st.integers(0, 3),
    st.sampled_from(PAIRS),
    st.sampled_from([torch.float32, torch.bfloat16]),
    st.sampled_from([256, 1024, 8192, 1 << 21]),
    st.integers(1, 4),
    st.integers(0, 2**31),
)
def test_property_any_shape_chunking_and_threads(
    lead, length, half, extra, pairs, dtype, chunk, threads, seed
):
    head_dim = 2 * half + extra
    cos, sin = tables(length, head_dim, pairs, rotary_dim=2 * half)
    x = randn(*lead, length, head_dim, dtype=dtype, seed=seed)
    saved = rotary._CHUNK_BYTES, rotary._SMALL_HALF, rotary.torch.get_num_threads
    spread = _workers.SPREAD_MIN_BYTES
    rotary._CHUNK_BYTES, rotary._SMALL_HALF = chunk, 0
    rotary.torch.get_num_threads = lambda: threads
    _workers.SPREAD_MIN_BYTES = 0 if seed % 2 else spread
    try:
        out = apply_rotary(x, cos, sin, pairs=pairs)
    finally:
        rotary._CHUNK_BYTES, rotary._SMALL_HALF, rotary.torch.get_num_threads = saved
        _workers.SPREAD_MIN_BYTES = spread
    assert_matches_formula(out, x, cos, sin, pairs)


@pytest.mark.parametrize("pairs", PAIRS)
def test_bfloat16_rounds_the_float32_rotation_once(pairs, small_chunks):
    # against the exact rotation: within one bfloat16 unit (the float32 error is far below)
    x = randn(3, 4, 50, 16, dtype=torch.bfloat16, seed=6)
    cos, sin = tables(50, 16, pairs)
    out = apply_rotary(x, cos, sin, pairs=pairs)
    ref_cos, ref_sin = np_cos_sin(50, 16, pairs=pairs, dtype=np.float64)
    exact = formula(x.double(), torch.from_numpy(ref_cos), torch.from_numpy(ref_sin), pairs)
    error = (out.double() - exact).abs()
    assert bool((error <= exact.abs() * 2**-8 * 1.001 + 1e-6).all())
    assert bool((error > 0).any())  # the comparison is not vacuous
    # the tables of the fast path are never 16-bit
    first, _ = rotary._fast_tables(cos, sin, pairs, torch.float32)
    assert first.dtype in (torch.float32, torch.complex64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_small_half_inputs_take_the_formula_with_the_same_bits(dtype, monkeypatch):
    cos, sin = tables(3, 64, "half")
    x = randn(1, 32, 3, 64, dtype=dtype, seed=22).requires_grad_()  # 6144 elements
    small = apply_rotary(x, cos, sin)
    assert type(small.grad_fn).__name__ != "_RotationBackward"
    monkeypatch.setattr(rotary, "_SMALL_HALF", 0)
    fast = apply_rotary(x, cos, sin)
    assert type(fast.grad_fn).__name__ == "_RotationBackward"
    assert torch.equal(small, fast)
    # the module decides per tensor: a large q and a small k (one key head)
    rope = RotaryEmbedding(64)
    monkeypatch.setattr(rotary, "_SMALL_HALF", 2 * 3 * 64)
    q_rot, k_rot = rope(x.detach(), x.detach()[:, :1])
    assert torch.equal(q_rot, fast.detach())
    assert torch.equal(k_rot, fast.detach()[:, :1])


def test_empty_inputs():
    for pairs in PAIRS:
        cos, sin = tables(0, 8, pairs)
        assert cos.shape == (0, 8)
        x = torch.zeros(2, 3, 0, 8)
        assert apply_rotary(x, cos, sin, pairs=pairs).shape == x.shape
        rope = RotaryEmbedding(8, pairs=pairs)
        assert rope.rotate(torch.zeros(0, 4, 8)).shape == (0, 4, 8)


# -- gradients ------------------------------------------------------------------------------------


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("rotary_dim", [8, 6])
def test_gradcheck_float64(pairs, rotary_dim, small_chunks):
    cos, sin = tables(5, 8, pairs, torch.float64, rotary_dim)
    x = randn(1, 2, 5, 8, dtype=torch.float64, seed=7).requires_grad_()

    def rotate(x):
        return apply_rotary(x, cos, sin, pairs=pairs)

    assert type(rotate(x).grad_fn).__name__ == "_RotationBackward"  # the fast path
    assert torch.autograd.gradcheck(rotate, (x,))
    if rotary_dim < 8:
        assert torch.autograd.gradgradcheck(rotate, (x,))


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_equal_the_formula(pairs, dtype, small_chunks):
    cos, sin = tables(12, 16, pairs, rotary_dim=12)
    x = randn(2, 2, 12, 16, dtype=dtype, seed=8)
    grad = randn(2, 2, 12, 16, dtype=dtype, seed=9)
    fast_x = x.clone().requires_grad_()
    apply_rotary(fast_x, cos, sin, pairs=pairs).backward(grad)
    slow_x = x.clone().requires_grad_()
    formula(slow_x, cos, sin, pairs).backward(grad)
    assert fast_x.grad.dtype == dtype
    if pairs == "half":
        assert torch.equal(fast_x.grad, slow_x.grad)
    else:
        # each side rounds its two products and sum once (at float32 for bfloat16 inputs,
        # then the result): 2 ulps of the largest gradient
        unit = dtype if dtype == torch.bfloat16 else torch.float32
        assert_close_ulp(fast_x.grad, slow_x.grad, ulps=2, dtype=unit, what="gradient")
    # the backward pass is the inverse rotation: it undoes the forward rotation
    cos, sin = tables(12, 16, pairs, torch.float64, rotary_dim=12)
    y = apply_rotary(x.double(), cos, sin, pairs=pairs)
    first, second = rotary._fast_tables(cos, sin, pairs, torch.float64)
    back = rotary._Rotation.apply(y, first, second, pairs, True)
    # forward and inverse rotation, each two products and a sum: 8 float64 ulps of max|x|
    assert_close_ulp(back, x.double(), ulps=8, what="inverse rotation")


def test_tables_requiring_grad_use_the_formula():
    cos, sin = tables(4, 8, "half", torch.float64)
    cos.requires_grad_()
    sin.requires_grad_()
    x = randn(1, 2, 4, 8, dtype=torch.float64, seed=10).requires_grad_()
    out = apply_rotary(x, cos, sin)
    assert type(out.grad_fn).__name__ != "_RotationBackward"
    assert torch.autograd.gradcheck(lambda x: apply_rotary(x, cos, sin), (x,))
    out.sum().backward()
    assert cos.grad is not None
    assert sin.grad is not None
    # finite differences of single table entries would break the half layout: the gradients
    # of the tables themselves are checked with one column per pair
    # (tests/torch/test_rotary_layout.py)


@pytest.mark.parametrize("pairs", PAIRS)
def test_module_gradients_for_q_and_k(pairs, small_chunks):
    rope = RotaryEmbedding(8, pairs=pairs, rotary_dim=6).double()
    q = randn(1, 2, 3, 8, dtype=torch.float64, seed=11).requires_grad_()
    k = randn(1, 1, 3, 8, dtype=torch.float64, seed=12).requires_grad_()
    assert torch.autograd.gradcheck(lambda q, k: rope(q, k, offset=3), (q, k))


def test_no_grad_and_inference_mode():
    cos, sin = tables(6, 8, "interleaved")
    x = randn(2, 6, 8, seed=13).requires_grad_()
    expected = formula(x.detach(), cos, sin, "interleaved")
    with torch.no_grad():
        out = apply_rotary(x, cos, sin, pairs="interleaved")
    assert out.grad_fn is None
    # one rotation each, rounded in a different order: 2 ulps of max|value|
    assert_close_ulp(out, expected, ulps=2)
    with torch.inference_mode():
        out = RotaryEmbedding(8, pairs="interleaved").rotate(x.detach())
    assert out.is_inference()
    assert_close_ulp(out, expected, ulps=2)


# -- the module -----------------------------------------------------------------------------------


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_module_equals_formula(pairs, dtype, small_chunks):
    rope = RotaryEmbedding(16, pairs=pairs, rotary_dim=12)
    q, k = randn(2, 4, 11, 16, dtype=dtype, seed=14), randn(2, 2, 11, 16, dtype=dtype, seed=15)
    q_rot, k_rot = rope(q, k, offset=5)
    table_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    cos, sin = tables(16, 16, pairs, table_dtype, rotary_dim=12)
    cos, sin = cos[5:16], sin[5:16]
    assert_matches_formula(q_rot, q, cos, sin, pairs)
    assert_matches_formula(k_rot, k, cos, sin, pairs)


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("head_dim", [24, 64])
def test_decoding_steps_match_the_full_sequence(pairs, head_dim, monkeypatch):
    # the same bits: each step is the formula's rotation of its row
    monkeypatch.setattr(rotary, "_SMALL_HALF", 0)
    q = randn(2, 4, 12, head_dim, seed=21)
    full = RotaryEmbedding(head_dim, pairs=pairs).rotate(q)
    rope = RotaryEmbedding(head_dim, pairs=pairs)
    for t in range(12):
        step = rope.rotate(q[:, :, t : t + 1], offset=t)
        assert torch.equal(step, full[:, :, t : t + 1])


def test_module_phasor_cache_follows_the_table_cache():
    # the phasors are derived from one cache snapshot and live and die with it; only widths
    # rotated by one complex product (rows of 16 pairs) build them
    narrow = RotaryEmbedding(8, pairs="interleaved")
    narrow.rotate(randn(1, 2, 6, 8, seed=16))
    assert "phasors" not in narrow._snapshot.derived
    rope = RotaryEmbedding(32, pairs="interleaved")
    x = randn(1, 2, 6, 32, seed=16)
    rope.rotate(x)
    snapshot = rope._snapshot
    first = snapshot.derived["phasors"]
    assert snapshot.tables[0] is rope.cos_cached
    assert first.shape == (6, 16)
    assert first.dtype == torch.complex64
    rope.rotate(x[:, :, :3], offset=3)  # served from the cache: the phasors are kept
    assert rope._snapshot is snapshot
    assert rope._snapshot.derived["phasors"] is first
    out = rope.rotate(x, offset=4)  # grows the cache: a new snapshot, new phasors
    assert rope.cos_cached.shape[0] == 12
    assert rope._snapshot is not snapshot
    assert rope._snapshot.derived["phasors"].shape == (12, 16)
    cos, sin = tables(10, 32, "interleaved")
    assert_matches_formula(out, x, cos[4:10], sin[4:10], "interleaved")
    double = rope.double()  # module casts rebuild the tables: no phasors yet
    assert "phasors" not in double._snapshot.derived
    out = double.rotate(x.double())
    assert double._snapshot.derived["phasors"].dtype == torch.complex128
    cos, sin = tables(6, 32, "interleaved", torch.float64)
    assert_matches_formula(out, x.double(), cos, sin, "interleaved")
    assert rope.state_dict() == {}  # nothing of this in checkpoints


def test_functorch_vmap_uses_the_formula():
    cos, sin = tables(5, 8, "half")
    x = randn(3, 2, 5, 8, seed=17)
    out = torch.func.vmap(lambda t: apply_rotary(t, cos, sin))(x)
    assert torch.equal(out, formula(x, cos, sin, "half"))


def test_meta_tensors():
    rope = RotaryEmbedding(8, pairs="interleaved", device="meta")
    q = torch.empty(2, 3, 5, 8, device="meta")
    q_rot, k_rot = rope(q, q)
    assert q_rot.device.type == k_rot.device.type == "meta"
    assert q_rot.shape == k_rot.shape == q.shape


def test_tables_on_another_device_are_an_error():
    cos, sin = tables(3, 8, "half")
    with pytest.raises(ValueError, match=r"cos and sin must be on x's device cpu, got meta"):
        apply_rotary(torch.zeros(3, 8), cos.to("meta"), sin.to("meta"))


@pytest.mark.slow
def test_torch_compile_fullgraph_equals_eager():
    # the compiled module traces the formula (half pairs: tests/torch/test_rotary.py)
    torch._dynamo.reset()
    rope = RotaryEmbedding(16, pairs="interleaved", rotary_dim=12, max_len=32)
    q = randn(2, 3, 9, 16, dtype=torch.bfloat16, seed=18)
    k = randn(2, 1, 9, 16, dtype=torch.bfloat16, seed=19)
    compiled = torch.compile(rope, fullgraph=True)
    q_c, k_c = compiled(q, k, offset=2)
    q_e, k_e = rope(q, k, offset=2)
    for got, want in ((q_c, q_e), (k_c, k_e)):
        assert got.dtype == torch.bfloat16
        difference = (got.double() - want.double()).abs()
        assert float(difference.max()) <= 8 * ulps(torch.bfloat16)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_equals_cpu(pairs, dtype):
    # rotary_dim 32: interleaved pairs are one complex product (16 pairs a row)
    rope = RotaryEmbedding(64, pairs=pairs, rotary_dim=32)
    q = randn(2, 8, 100, 64, dtype=dtype, seed=20)
    q_gpu = q.cuda().requires_grad_()
    out = rope.cuda().rotate(q_gpu)
    cos, sin = tables(100, 64, pairs, rotary_dim=32)
    expected = formula(q, cos, sin, pairs)
    if pairs == "half":
        assert torch.equal(out.cpu(), expected)
    else:  # the device's complex product may fuse a product into the sum
        assert_close_ulp(out.detach().cpu(), expected, ulps=1, what="cuda interleaved")
    out.backward(torch.ones_like(out))
    assert q_gpu.grad is not None
    assert q_gpu.grad.dtype == dtype
