"""Multi-axis RoPE through ``posenc.torch``: ``RotaryEmbedding(sections=...)`` and
``posenc.torch.multi_axis_cos_sin``.

References: the NumPy core (``posenc.multi_axis_cos_sin``, float64, and its float32 tables bit
for bit), rotations by ``posenc.apply_rotary`` in float64, and through the torch path the real
Qwen2-VL text rotary of transformers (``(3, b, s)`` ids from ``get_rope_index``'s rule) and
diffusers' ``FluxPosEmbed`` with ``apply_rotary_emb``. The conformance suite
(``test_conformance.py``: threads, torch.compile, meta device, state_dict) has the module in
two multi-axis configurations.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from posenc import multi_axis_frequencies  # noqa: E402
from tests.references.hf.test_multi_axis import (  # noqa: E402
    THETA,
    assert_rotation_within_recipe,
    diffusers_module,
    excess,
    largest_angles,
    qwen_text_rotary,
    rotation_bound,
    transformers_model,
)
from tests.tolerance import assert_close_ulp  # noqa: E402

PAIRS = ("half", "interleaved")
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}
# name -> (head_dim, keyword arguments of multi_axis_cos_sin)
CONFIGS = {
    "qwen2-vl sectioned": (32, {"sections": [4, 6, 6], "base": THETA}),
    "qwen3-vl interleaved": (32, {"sections": [6, 5, 5], "order": "interleaved"}),
    "pixtral dealt": (16, {"sections": [4, 4], "schedule": "dealt"}),
    "flux per_axis": (32, {"sections": [4, 6, 6], "schedule": "per_axis"}),
    "per-axis bases": (16, {"sections": [2, 6], "schedule": "per_axis", "base": (100.0, 1e4)}),
    "yarn": (16, {"sections": [4, 2, 2], "scaling": YARN}),
    "yarn per_axis": (16, {"sections": [4, 2, 2], "schedule": "per_axis", "scaling": YARN}),
    "partial": (32, {"sections": [4, 2, 2], "scaling": {"partial_rotary_factor": 0.5}}),
    "mixed matrix": (
        8,
        {"frequencies": np.array([[1.0, 0.3, 0.0, 0.02], [0.5, 0.0, 0.0, 0.07]])},
    ),
}


def coordinates(shape, high=5000, seed=0, n_axes=3):
    return np.random.default_rng(seed).integers(-high, high, size=(*shape, n_axes))


def n_axes_of(kwargs):
    return len(kwargs["sections"]) if "sections" in kwargs else kwargs["frequencies"].shape[0]


def assert_rotation_close(actual, expected) -> None:
    """A float32 rotation against the float64 one: cos and sin rounded once each, two
    products and a sum, at the magnitude of the rotated values (4 float32 ulps)."""
    assert_close_ulp(actual, expected, ulps=4, dtype=torch.float32, what="rotated")


def randn(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


def core_rotation(x, positions, head_dim, per_batch=True, **kwargs):
    """The rotation of x (b, h, s, d) by the NumPy core's float64 tables."""
    cos, sin = posenc.multi_axis_cos_sin(positions, head_dim, dtype=np.float64, **kwargs)
    if per_batch:
        cos, sin = cos[:, None], sin[:, None]  # (b, 1, s, r)
    pairs = kwargs.get("pairs", "half")
    out = posenc.apply_rotary(x.double().numpy(), cos, sin, pairs=pairs)
    return torch.from_numpy(out)


# -- the functional API against the NumPy core ----------------------------------------------------


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_functional_equals_numpy_core(name, pairs):
    head_dim, kwargs = CONFIGS[name]
    positions = coordinates((2, 40), n_axes=n_axes_of(kwargs), seed=len(name))
    ours = pt.multi_axis_cos_sin(torch.from_numpy(positions), head_dim, pairs=pairs, **kwargs)
    core = posenc.multi_axis_cos_sin(positions, head_dim, pairs=pairs, **kwargs)
    for mine, theirs in zip(ours, core, strict=True):
        assert mine.dtype == torch.float32
        assert torch.equal(mine, torch.from_numpy(theirs))  # float32: bit for bit
    ours = pt.multi_axis_cos_sin(positions, head_dim, pairs=pairs, dtype=torch.float64, **kwargs)
    core = posenc.multi_axis_cos_sin(positions, head_dim, pairs=pairs, dtype=np.float64, **kwargs)
    for mine, theirs in zip(ours, core, strict=True):  # torch's and NumPy's sin/cos: last bit
        assert_close_ulp(mine, torch.from_numpy(theirs), ulps=2, dtype=torch.float64)


@settings(max_examples=30)
@given(
    st.lists(
        st.tuples(*[st.integers(-(2**40), 2**40)] * 3) | st.tuples(*[st.floats(-1e6, 1e6)] * 3),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from(sorted(set(CONFIGS) - {"mixed matrix", "per-axis bases", "pixtral dealt"})),
)
def test_functional_equals_core_bitwise_for_any_coordinates(positions, name):
    head_dim, kwargs = CONFIGS[name]
    array = np.array(positions)
    ours = pt.multi_axis_cos_sin(torch.from_numpy(array), head_dim, **kwargs)
    core = posenc.multi_axis_cos_sin(array, head_dim, **kwargs)
    for mine, theirs in zip(ours, core, strict=True):
        assert torch.equal(mine, torch.from_numpy(theirs))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_functional_16_bit_tables_are_rounded_once(dtype):
    positions = coordinates((64,), high=70000)
    cos, sin = pt.multi_axis_cos_sin(positions, 16, sections=[4, 2, 2], dtype=dtype)
    ref = posenc.multi_axis_cos_sin(positions, 16, sections=[4, 2, 2], dtype=np.float64)
    assert cos.dtype == dtype
    assert torch.equal(cos, pt.cast_exact(torch.from_numpy(ref[0]), dtype))
    assert torch.equal(sin, pt.cast_exact(torch.from_numpy(ref[1]), dtype))


def test_functional_defaults_device_and_length_dependent_scaling():
    ids = torch.tensor([[0, 0, 0], [3, 1, 2]])
    cos, _ = pt.multi_axis_cos_sin(ids, 8, sections=[2, 1, 1])
    assert cos.dtype == torch.get_default_dtype()
    assert cos.shape == (2, 8)
    assert torch.equal(cos, pt.multi_axis_cos_sin(ids.tolist(), 8, sections=[2, 1, 1])[0])
    assert pt.multi_axis_cos_sin(ids, 8, sections=[2, 1, 1], device="meta")[0].is_meta
    far = coordinates((5,), high=40)
    # dynamic: the largest coordinate + 1, as the core
    ours = pt.multi_axis_cos_sin(far, 8, sections=[2, 1, 1], scaling=DYNAMIC)[0]
    core = posenc.multi_axis_cos_sin(far, 8, sections=[2, 1, 1], scaling=DYNAMIC)[0]
    assert torch.equal(ours, torch.from_numpy(core))
    assert not torch.equal(ours, pt.multi_axis_cos_sin(far, 8, sections=[2, 1, 1])[0])


# -- the module against the core ------------------------------------------------------------------


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("name", ["qwen2-vl sectioned", "qwen3-vl interleaved", "flux per_axis"])
def test_module_equals_core_rotation(name, pairs):
    head_dim, kwargs = CONFIGS[name]
    rope = pt.RotaryEmbedding(head_dim, pairs=pairs, **kwargs)
    q, k = randn(2, 4, 9, head_dim, seed=1), randn(2, 2, 9, head_dim, seed=2)
    positions = coordinates((2, 9), seed=3)
    q_rot, k_rot = rope(q, k, positions=torch.from_numpy(positions))
    for x, rotated in ((q, q_rot), (k, k_rot)):
        expected = core_rotation(x, positions, head_dim, pairs=pairs, **kwargs)
        assert_rotation_close(rotated, expected)
    # the module's tables are the functional ones
    cos, sin = pt.multi_axis_cos_sin(positions, head_dim, pairs=pairs, **kwargs)
    assert torch.equal(q_rot, pt.apply_rotary(q, cos[:, None], sin[:, None], pairs=pairs))


def test_positions_shapes_offset_and_sequence_dimension():
    rope = pt.RotaryEmbedding(16, sections=[4, 2, 2])
    q = randn(2, 3, 6, 16, seed=4)
    shared = torch.from_numpy(coordinates((6,), high=100, seed=5))
    by_s = rope.rotate(q, positions=shared)
    assert torch.equal(by_s, rope.rotate(q, positions=shared[None]))
    assert torch.equal(by_s, rope.rotate(q, positions=shared[None].expand(2, 6, 3)))
    # offset: added to every coordinate
    assert torch.equal(
        rope.rotate(q, positions=shared, offset=9), rope.rotate(q, positions=shared + 9)
    )
    # (b, s, h, d) with seq_dim=1
    bshd = pt.RotaryEmbedding(16, sections=[4, 2, 2], seq_dim=1)
    assert torch.equal(bshd.rotate(q.transpose(1, 2), positions=shared).transpose(1, 2), by_s)


@pytest.mark.parametrize("schedule", ["shared", "per_axis"])
def test_default_positions_are_text_tokens(schedule):
    """Without positions every token is text: ``offset + i`` on every axis, from the cache;
    with the shared schedule that is 1-D RoPE, bit for bit."""
    rope = pt.RotaryEmbedding(16, sections=[4, 2, 2], schedule=schedule, max_len=4)
    q = randn(1, 2, 11, 16, seed=6)
    text = torch.arange(3, 14)[:, None].expand(11, 3)
    by_default = rope.rotate(q, offset=3)
    assert rope.cos_cached.shape[0] >= 14  # the cache grew
    assert torch.equal(by_default, rope.rotate(q, positions=text))
    plain = pt.RotaryEmbedding(16).rotate(q, offset=3)
    assert torch.equal(by_default, plain) == (schedule == "shared")


def test_length_dependent_scaling_in_the_module():
    rope = pt.RotaryEmbedding(8, sections=[2, 1, 1], scaling=DYNAMIC)
    q = randn(1, 1, 40, 8, seed=7)
    ids = coordinates((40,), high=30, seed=8)
    ids = np.abs(ids)
    got = rope.rotate(q, positions=torch.from_numpy(ids))
    expected = core_rotation(q, ids, 8, per_batch=False, sections=[2, 1, 1], scaling=DYNAMIC)
    assert_rotation_close(got, expected)
    # default positions beyond the original length: the frequencies of that length
    long = rope.rotate(q)
    text = np.repeat(np.arange(40)[:, None], 3, axis=1)
    expected = core_rotation(q, text, 8, per_batch=False, sections=[2, 1, 1], scaling=DYNAMIC)
    assert_rotation_close(long, expected)


def test_repr_and_state_dict():
    rope = pt.RotaryEmbedding(16, sections=[4, 2, 2], order="interleaved", base=1e6)
    assert "sections=[4, 2, 2], order='interleaved'" in repr(rope)
    assert rope.state_dict() == {}
    matrix = multi_axis_frequencies([4, 4], schedule="dealt")
    assert "frequencies of shape (2, 8)" in repr(pt.RotaryEmbedding(16, frequencies=matrix))


# -- errors ---------------------------------------------------------------------------------------


def test_hugging_face_layout_is_named_in_the_error():
    rope = pt.RotaryEmbedding(16, sections=[4, 2, 2])
    q = torch.zeros(2, 1, 5, 16)
    hf_ids = torch.zeros(3, 2, 5, dtype=torch.int64)
    with pytest.raises(ValueError, match=re.escape("pass position_ids.permute(1, 2, 0)")):
        rope(q, q, positions=hf_ids)
    with pytest.raises(ValueError, match=re.escape("(s, 3) = (5, 3) or (b, s, 3) = (2, 5, 3)")):
        rope(q, q, positions=torch.zeros(5, 2))
    with pytest.raises(ValueError, match=re.escape("pass position_ids.permute(1, 2, 0)")):
        pt.multi_axis_cos_sin(hf_ids, 16, sections=[4, 2, 2])
    with pytest.raises(ValueError, match=re.escape("positions must have shape (..., 3)")):
        pt.multi_axis_cos_sin(torch.zeros(5), 16, sections=[4, 2, 2])


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"order": "interleaved"}, TypeError, "order need sections= "),
        ({"schedule": "dealt", "order": "sectioned"}, TypeError, "order and schedule need"),
        ({"sections": [4, 2, 1]}, ValueError, "give 7 rotary pairs"),
        ({"sections": [4, 2, 2], "order": "diagonal"}, ValueError, "order must be"),
        ({"sections": [2, 2], "base": (1.0, 2.0)}, TypeError, "needs schedule='per_axis'"),
        ({"frequencies": np.ones((2, 8)), "base": 100.0}, TypeError, "not both"),
        ({"sections": [4, 2, 2], "rotary_dim": 6}, ValueError, "give 8 rotary pairs"),
    ],
)
def test_module_configuration_errors(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        pt.RotaryEmbedding(16, **kwargs)


def test_functional_errors_are_the_core_errors():
    with pytest.raises(TypeError, match="got the number 5"):
        pt.multi_axis_cos_sin(5, 8, sections=[2, 1, 1])
    with pytest.raises(TypeError, match="needs sections"):
        pt.multi_axis_cos_sin(torch.zeros(2, 3), 8)
    for bad, message in (
        ([[0, 0, float("nan")]], "must be finite"),
        ([[2**60, 0, 0]], "2\\*\\*53"),
    ):
        with pytest.raises(ValueError, match=message):
            posenc.multi_axis_cos_sin(np.array(bad), 8, sections=[2, 1, 1])
        with pytest.raises(ValueError, match=message):
            pt.multi_axis_cos_sin(torch.tensor(bad), 8, sections=[2, 1, 1])
        rope = pt.RotaryEmbedding(8, sections=[2, 1, 1])
        with pytest.raises(ValueError, match=message):
            rope.rotate(torch.zeros(1, 8), positions=torch.tensor(bad))


@pytest.mark.slow
def test_unread_coordinates_give_nan_rows():
    """Traced code reads no data: a token with an unencodable coordinate gets a NaN row."""
    torch._dynamo.reset()
    ids = torch.tensor([[3, 1, 2], [2**60, 0, 0], [0, 0, -(2**60)], [7, 7, 7]])
    rope = pt.RotaryEmbedding(8, sections=[2, 1, 1])
    rotated = torch.compile(rope.rotate, fullgraph=True, backend="eager")(
        torch.ones(1, 4, 8), positions=ids
    )
    assert rotated[0].isnan().all(dim=-1).tolist() == [False, True, True, False]
    assert torch.equal(
        rotated[0, [0, 3]], rope.rotate(torch.ones(1, 2, 8), positions=ids[[0, 3]])[0]
    )


@pytest.mark.slow
def test_inductor_over_changing_lengths():
    """The real code generator, ``dynamic=True``, explicit (b, s, 3) ids: within one ulp of
    eager, at most two compilations."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    rope = pt.RotaryEmbedding(16, sections=[4, 2, 2], order="interleaved")
    compiled = torch.compile(rope, fullgraph=True, dynamic=True)
    for n in (5, 9, 14, 23):
        q = randn(2, 2, n, 16, seed=n)
        ids = torch.from_numpy(coordinates((2, n), high=3000, seed=n))
        got, want = compiled(q, q, positions=ids)[0], rope(q, q, positions=ids)[0]
        ulp = torch.finfo(torch.float32).eps * torch.maximum(got.abs(), want.abs()).clamp(min=1)
        assert bool(((got - want).abs() <= ulp).all()), n
    assert counters["stats"]["unique_graphs"] <= 2, dict(counters["stats"])


# -- real references through the torch path -------------------------------------------------------


def test_qwen2_vl_text_rotary_through_the_module():
    """Qwen2-VL: (3, b, s) ids as get_rope_index lays them out, the module's rotation equals
    transformers' rotary class + apply_rotary_pos_emb."""
    models, _ = transformers_model("qwen2_vl")
    rotary, head_dim, section = qwen_text_rotary("qwen2_vl-small")
    types = np.array([[0] * 3 + [1] * 6 + [0] * 4 + [2] * 8 + [0] * 2] * 2)
    ids = posenc.multimodal_positions(
        types, image_grids=[[1, 4, 6]] * 2, video_grids=[[2, 4, 4]] * 2, spatial_merge=2
    ).positions
    ids[1] += 1500  # far positions for the second row: angles where float32 errs
    hf_ids = torch.from_numpy(np.moveaxis(ids, -1, 0))  # (3, b, s)
    cos, sin = rotary(torch.zeros(1), hf_ids)
    q = randn(2, 2, ids.shape[1], head_dim, seed=9)
    theirs, _ = models.apply_rotary_pos_emb(q, q, cos, sin)
    rope = pt.RotaryEmbedding(head_dim, sections=section, base=THETA)
    ours, _ = rope(q, q, positions=hf_ids.permute(1, 2, 0))
    angles = largest_angles(ids, head_dim, sections=section, base=THETA)
    assert_rotation_within_recipe(ours, theirs, q, angles)
    wrong = pt.RotaryEmbedding(head_dim, sections=section[::-1], base=THETA)
    wrong_rotated = wrong(q, q, positions=hf_ids.permute(1, 2, 0))[0]
    assert excess(wrong_rotated, theirs, rotation_bound(q, angles)) > 0


def test_flux_through_the_module():
    """Flux: FluxPosEmbed(ids) applied by diffusers' apply_rotary_emb equals the module's
    per-axis rotation with interleaved pairs."""
    flux = diffusers_module("transformers.transformer_flux")
    embeddings = diffusers_module("embeddings")
    axes_dim = [16, 56, 56]
    ids = np.concatenate([np.zeros((4, 3), dtype=np.int64), posenc.grid_positions((1, 6, 5))])
    ids[:, 0] = np.arange(ids.shape[0]) * 3
    tables = flux.FluxPosEmbed(theta=10000, axes_dim=axes_dim)(torch.from_numpy(ids))
    x = randn(1, 2, ids.shape[0], 128, seed=10)  # (b, heads, s, d)
    theirs = embeddings.apply_rotary_emb(x, tables)
    kwargs = {"sections": [d // 2 for d in axes_dim], "schedule": "per_axis"}
    rope = pt.RotaryEmbedding(128, pairs="interleaved", **kwargs)
    ours = rope.rotate(x, positions=torch.from_numpy(ids))
    angles = largest_angles(ids, 128, pairs="interleaved", **kwargs)
    assert_rotation_within_recipe(ours, theirs, x, angles)
    wrong = pt.RotaryEmbedding(128, pairs="half", **kwargs).rotate(
        x, positions=torch.from_numpy(ids)
    )
    assert excess(wrong, theirs, rotation_bound(x, angles)) > 0


# -- CUDA -----------------------------------------------------------------------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@needs_cuda
def test_cuda_forward_never_synchronises_and_equals_cpu():
    device = torch.device("cuda")
    rope = pt.RotaryEmbedding(64, sections=[8, 12, 12], order="interleaved").to(device)
    q = randn(2, 4, 128, 64).to(device)
    ids = torch.from_numpy(coordinates((2, 128), high=4000)).to(device)
    rope(q, q)  # grow the cache first
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        on_device = rope(q, q, positions=ids)[0]
        rope(q, q, offset=7)
        pt.multi_axis_cos_sin(ids, 64, sections=[8, 12, 12])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    cpu = pt.RotaryEmbedding(64, sections=[8, 12, 12], order="interleaved")
    expected = cpu(q.cpu(), q.cpu(), positions=ids.cpu())[0]
    # the same tables; the device may fuse the products and the sum differently
    assert_rotation_close(on_device, expected)
    cos = pt.multi_axis_cos_sin(ids, 64, sections=[8, 12, 12])[0]
    assert torch.equal(cos.cpu(), pt.multi_axis_cos_sin(ids.cpu(), 64, sections=[8, 12, 12])[0])
