"""posenc's RoPE against the REAL framework implementations it claims to reproduce.

- transformers: every ``ROPE_INIT_FUNCTIONS`` scaling (inverse frequencies and attention
  factor), ``LlamaRotaryEmbedding`` + ``apply_rotary_pos_emb`` (``pairs="half"``) and GPT-NeoX's
  partial rotation;
- rotary-embedding-torch: ``RotaryEmbedding.rotate_queries_or_keys`` (``pairs="interleaved"``);
- torchtune: ``RotaryPositionalEmbeddings`` (interleaved), ``Llama3ScaledRoPE`` and Qwen2's
  half-pair RoPE. torchtune's package ``__init__`` imports torchao, datasets and more; these
  modules need only torch, so they are loaded from the installed torchtune's files directly
  (``pip install --no-deps torchtune`` is enough).

Each library is optional: a test whose library is missing is skipped with a reason.

Tolerances (tests/tolerance.py): transformers computes inverse frequencies in float32, a
few roundings of each frequency's own magnitude (measured <= ~1.5e-7 relative; 4 ulps of each
allowed), and its attention factors in Python floats (the same float64 formulas: 1e-15
relative). All three compute angles p·ω in float32, whose error grows with the position p:
tables are compared with :func:`~tests.tolerance.assert_close_float32_recipe` (2 float32
ulps at the scale of the largest angle + 1, times the attention factor), rotated vectors with
two such products summed at the magnitude of the rotated values. Where the reference's own
arithmetic is the same as posenc's (HF's ``apply_rotary_pos_emb`` fed posenc's cos/sin), the
outputs must be bitwise equal.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc.torch as pt  # noqa: E402
from posenc import rope_frequencies  # noqa: E402
from tests.tolerance import assert_close_float32_recipe, assert_close_ulp  # noqa: E402

HF_REASON = "transformers (with a working model import) is needed for {}"
LUCIDRAINS_REASON = "rotary-embedding-torch is not installed"


def assert_frequencies_close(omega, inv_freq) -> None:
    """Inverse frequencies computed in float32: a few roundings of each one's own magnitude."""
    theirs = inv_freq.double().numpy()
    assert_close_ulp(omega, theirs, ulps=4, dtype=np.float32, scale=theirs, what="frequencies")


def assert_rotated_close(actual, expected, *, max_angle) -> None:
    """A rotation with a float32 recipe's tables: x·cos + rotate(x)·sin, two products of a
    table entry with a value up to the rotated magnitude (pair norms are kept)."""
    magnitude = float(expected.abs().max())
    assert_close_float32_recipe(
        actual, expected, max_angle=max_angle, magnitude=magnitude, terms=2, what="rotated"
    )


def randn(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator)


# ---------------------------------------------------------------------------------------------
# transformers
# ---------------------------------------------------------------------------------------------

HEAD_DIM = 64
MAX_POSITIONS = 2048

# rope_parameters exactly as they appear in Hugging Face configs (rope_theta included).
HF_SCALINGS = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "linear": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0},
    "yarn": {
        "rope_type": "yarn",
        "factor": 8.0,
        "original_max_position_embeddings": 256,
        "rope_theta": 10000.0,
    },
    "yarn-deepseek": {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 512,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": 0.707,
        "mscale_all_dim": 1.0,
        "rope_theta": 10000.0,
    },
    "yarn-untruncated": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 512,
        "beta_fast": 16.0,
        "beta_slow": 2.0,
        "truncate": False,
        "attention_factor": 1.25,
        "rope_theta": 1e6,
    },
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 256,
        "rope_theta": 500000.0,
    },
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.05 * i for i in range(HEAD_DIM // 2)],
        "long_factor": [1.0 + 0.5 * i for i in range(HEAD_DIM // 2)],
        "original_max_position_embeddings": 512,
        "rope_theta": 10000.0,
    },
}


def hf_llama():
    return pytest.importorskip(
        "transformers.models.llama.modeling_llama", reason=HF_REASON.format("Llama")
    )


def llama_config(name: str):
    module = hf_llama()
    return module.LlamaConfig(
        hidden_size=2 * HEAD_DIM,
        num_attention_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        rope_parameters=dict(HF_SCALINGS[name]),
    )


def posenc_scaling(config) -> dict:
    """What a user passes to posenc: the config's rope_parameters (+ max_position_embeddings,
    which transformers reads from the config itself for dynamic, yarn and longrope)."""
    params = dict(config.rope_parameters)
    params["max_position_embeddings"] = config.max_position_embeddings
    if params["rope_type"] == "dynamic":  # its one length is the model's
        params.pop("original_max_position_embeddings", None)
    return params


@pytest.mark.parametrize("name", [n for n in HF_SCALINGS if n != "default"])
@pytest.mark.parametrize("seq_len", [None, 100, 512, 513, 5000])
def test_rope_init_functions(name, seq_len):
    rope_utils = pytest.importorskip(
        "transformers.modeling_rope_utils", reason=HF_REASON.format("ROPE_INIT_FUNCTIONS")
    )
    config = llama_config(name)
    params = config.rope_parameters
    inv_freq, attention = rope_utils.ROPE_INIT_FUNCTIONS[params["rope_type"]](
        config, "cpu", seq_len=seq_len
    )
    omega, ours = rope_frequencies(
        HEAD_DIM, base=params["rope_theta"], scaling=posenc_scaling(config), seq_len=seq_len
    )
    assert inv_freq.dtype == torch.float32
    assert_frequencies_close(omega, inv_freq)
    assert math.isclose(ours, float(attention), rel_tol=1e-15)


def test_default_rope_parameters():
    module = hf_llama()
    config = llama_config("default")
    inv_freq, attention = module.LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    omega, ours = rope_frequencies(HEAD_DIM, scaling=config.rope_parameters)
    assert_frequencies_close(omega, inv_freq)
    assert ours == attention == 1.0


def test_longrope_frequencies_depend_on_the_length_as_in_transformers():
    rope_utils = pytest.importorskip(
        "transformers.modeling_rope_utils", reason=HF_REASON.format("ROPE_INIT_FUNCTIONS")
    )
    config = llama_config("longrope")
    short = rope_utils.ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=512)[0]
    long = rope_utils.ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=513)[0]
    assert not torch.allclose(short, long)  # the case distinction is real
    for seq_len, ref in ((512, short), (513, long)):
        omega = rope_frequencies(HEAD_DIM, scaling=posenc_scaling(config), seq_len=seq_len)[0]
        assert_frequencies_close(omega, ref)


def llama_positions():
    # two rows: one from 0, one far beyond the original length (dynamic/longrope switch)
    return torch.stack([torch.arange(0, 24), torch.arange(3000, 3024)])


@pytest.mark.parametrize("name", list(HF_SCALINGS))
def test_llama_rotary_embedding_cos_sin(name):
    module = hf_llama()
    config = llama_config(name)
    hf_rope = module.LlamaRotaryEmbedding(config)  # fresh: no dynamic history
    position_ids = llama_positions()
    x = torch.zeros(2, 24, 2 * HEAD_DIM)
    cos_ref, sin_ref = hf_rope(x, position_ids)
    params = config.rope_parameters
    cos, sin = pt.rotary_cos_sin(
        position_ids,
        HEAD_DIM,
        base=params["rope_theta"],
        scaling=posenc_scaling(config),
        dtype=torch.float32,
    )
    assert cos.dtype == cos_ref.dtype == torch.float32
    factor = hf_rope.attention_scaling
    assert_close_float32_recipe(cos, cos_ref, max_angle=3024, magnitude=factor, what="cos")
    assert_close_float32_recipe(sin, sin_ref, max_angle=3024, magnitude=factor, what="sin")


@pytest.mark.parametrize("name", list(HF_SCALINGS))
def test_llama_apply_rotary_pos_emb(name):
    module = hf_llama()
    config = llama_config(name)
    position_ids = llama_positions()
    q, k = randn(2, 4, 24, HEAD_DIM, seed=1), randn(2, 1, 24, HEAD_DIM, seed=2)
    hf_rope = module.LlamaRotaryEmbedding(config)
    cos_ref, sin_ref = hf_rope(q, position_ids)
    q_ref, k_ref = module.apply_rotary_pos_emb(q, k, cos_ref, sin_ref)

    params = config.rope_parameters
    rope = pt.RotaryEmbedding(HEAD_DIM, base=params["rope_theta"], scaling=posenc_scaling(config))
    q_rot, k_rot = rope(q, k, positions=position_ids)
    assert_rotated_close(q_rot, q_ref, max_angle=3024)
    assert_rotated_close(k_rot, k_ref, max_angle=3024)

    # fed posenc's tables, transformers' rotation gives posenc's output bit for bit
    cos, sin = pt.rotary_cos_sin(
        position_ids, HEAD_DIM, base=params["rope_theta"], scaling=posenc_scaling(config)
    )
    q_hf, k_hf = module.apply_rotary_pos_emb(q, k, cos, sin)
    assert torch.equal(q_hf, q_rot)
    assert torch.equal(k_hf, k_rot)


def test_llama_decoding_positions_match_hf_cache_positions():
    # prefill 10 tokens, then decode one at a time: HF passes position_ids = cache position
    module = hf_llama()
    config = llama_config("default")
    hf_rope = module.LlamaRotaryEmbedding(config)
    rope = pt.RotaryEmbedding(HEAD_DIM)
    q = randn(1, 2, 14, HEAD_DIM, seed=3)
    for start, stop in ((0, 10), (10, 11), (11, 12), (12, 14)):
        part = q[:, :, start:stop]
        cos, sin = hf_rope(part, torch.arange(start, stop)[None])
        expected = module.apply_rotary_pos_emb(part, part, cos, sin)[0]
        assert_rotated_close(rope.rotate(part, offset=start), expected, max_angle=14)


def test_gpt_neox_partial_rotation():
    neox = pytest.importorskip(
        "transformers.models.gpt_neox.modeling_gpt_neox", reason=HF_REASON.format("GPT-NeoX")
    )
    config = neox.GPTNeoXConfig(
        hidden_size=64,
        num_attention_heads=2,
        intermediate_size=64,
        num_hidden_layers=1,
        vocab_size=16,
        rotary_pct=0.25,
        max_position_embeddings=256,
    )
    assert config.rope_parameters["partial_rotary_factor"] == 0.25
    q, k = randn(2, 2, 9, 32, seed=4), randn(2, 2, 9, 32, seed=5)
    position_ids = torch.arange(9)[None].expand(2, -1)
    cos, sin = neox.GPTNeoXRotaryEmbedding(config)(q, position_ids)
    q_ref, k_ref = neox.apply_rotary_pos_emb(q, k, cos, sin)
    rope = pt.RotaryEmbedding(32, scaling=config.rope_parameters)  # rotary_dim 8 from the config
    assert rope.rotary_dim == 8
    q_rot, k_rot = rope(q, k)
    assert_rotated_close(q_rot, q_ref, max_angle=9)
    assert_rotated_close(k_rot, k_ref, max_angle=9)
    assert torch.equal(q_rot[..., 8:], q_ref[..., 8:])


# ---------------------------------------------------------------------------------------------
# rotary-embedding-torch (lucidrains): interleaved pairs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head_dim", "rotary_dim", "theta", "offset"),
    [(64, 64, 10000, 0), (64, 32, 10000, 0), (32, 16, 500000, 1000), (8, 8, 10000, 4000)],
)
def test_rotary_embedding_torch(head_dim, rotary_dim, theta, offset):
    ret = pytest.importorskip("rotary_embedding_torch", reason=LUCIDRAINS_REASON)
    reference = ret.RotaryEmbedding(dim=rotary_dim, theta=theta)
    x = randn(2, 3, 40, head_dim, seed=head_dim)  # (b, h, s, d)
    expected = reference.rotate_queries_or_keys(x, offset=offset)
    rope = pt.RotaryEmbedding(head_dim, base=theta, pairs="interleaved", rotary_dim=rotary_dim)
    out = rope.rotate(x, offset=offset)
    assert_rotated_close(out, expected, max_angle=offset + 40)
    assert torch.equal(out[..., rotary_dim:], x[..., rotary_dim:])


def test_rotary_embedding_torch_interpolation_is_linear_scaling():
    ret = pytest.importorskip("rotary_embedding_torch", reason=LUCIDRAINS_REASON)
    reference = ret.RotaryEmbedding(dim=32, interpolate_factor=4.0)
    x = randn(1, 2, 50, 32, seed=6)
    expected = reference.rotate_queries_or_keys(x)
    rope = pt.RotaryEmbedding(32, pairs="interleaved", scaling={"rope_type": "linear", "factor": 4})
    assert_rotated_close(rope.rotate(x), expected, max_angle=50)
    # and not the unscaled rotation
    assert not torch.allclose(pt.RotaryEmbedding(32, pairs="interleaved").rotate(x), expected)


def test_rotary_embedding_torch_sequence_before_heads():
    ret = pytest.importorskip("rotary_embedding_torch", reason=LUCIDRAINS_REASON)
    reference = ret.RotaryEmbedding(dim=16, seq_before_head_dim=True)
    x = randn(2, 30, 4, 16, seed=7)  # (b, s, h, d)
    expected = reference.rotate_queries_or_keys(x)
    rope = pt.RotaryEmbedding(16, pairs="interleaved", seq_dim=1)
    assert_rotated_close(rope.rotate(x), expected, max_angle=30)


# ---------------------------------------------------------------------------------------------
# torchtune
# ---------------------------------------------------------------------------------------------


def torchtune_module(relative: str):
    """Load one torchtune source file (it imports only torch) without the package __init__."""
    spec = importlib.util.find_spec("torchtune")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torchtune is not installed (pip install --no-deps torchtune suffices)")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        pytest.skip(f"this torchtune version has no {relative}")
    name = "_posenc_test_torchtune_" + relative.replace("/", "_").removesuffix(".py")
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None
    assert module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("base", [10000, 500000])
def test_torchtune_rotary_positional_embeddings(base):
    tt = torchtune_module("modules/position_embeddings.py")
    reference = tt.RotaryPositionalEmbeddings(dim=32, max_seq_len=4096, base=base)
    x = randn(2, 20, 3, 32, seed=8)  # (b, s, h, d)
    input_pos = torch.stack([torch.arange(20), torch.arange(2000, 2020)])
    expected = reference(x, input_pos=input_pos)
    rope = pt.RotaryEmbedding(32, base=base, pairs="interleaved", seq_dim=1)
    assert_rotated_close(rope.rotate(x, positions=input_pos), expected, max_angle=2020)
    assert_rotated_close(rope.rotate(x), reference(x), max_angle=20)


def test_torchtune_llama3_scaled_rope():
    tt = torchtune_module("models/llama3_1/_position_embeddings.py")
    reference = tt.Llama3ScaledRoPE(
        dim=64,
        max_seq_len=4096,
        base=500000,
        scale_factor=8,
        low_freq_factor=1,
        high_freq_factor=4,
        old_context_len=256,
    )
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 256,
    }
    x = randn(1, 16, 2, 64, seed=9)
    input_pos = torch.arange(3000, 3016)[None]
    expected = reference(x, input_pos=input_pos)
    rope = pt.RotaryEmbedding(64, base=500000.0, pairs="interleaved", seq_dim=1, scaling=scaling)
    assert_rotated_close(rope.rotate(x, positions=input_pos), expected, max_angle=3016)
    # and the scaling matters at these positions
    plain = pt.RotaryEmbedding(64, base=500000.0, pairs="interleaved", seq_dim=1)
    assert not torch.allclose(plain.rotate(x, positions=input_pos), expected, atol=1e-2)


def test_torchtune_qwen2_half_pairs():
    tt = torchtune_module("models/qwen2/_positional_embeddings.py")
    reference = tt.Qwen2RotaryPositionalEmbeddings(dim=32, max_seq_len=4096, base=1000000.0)
    x = randn(2, 12, 2, 32, seed=10)
    input_pos = torch.stack([torch.arange(12), torch.arange(500, 512)])
    expected = reference(x, input_pos=input_pos)
    rope = pt.RotaryEmbedding(32, base=1000000.0, pairs="half", seq_dim=1)
    assert_rotated_close(rope.rotate(x, positions=input_pos), expected, max_angle=512)
