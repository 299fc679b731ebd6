"""posenc.rope_plan on configs written as dicts (config.json), every spelling transformers uses.

The comparisons with the real rotary modules of transformers are in
``tests/torch/hf/test_rope_coverage.py``; these tests need NumPy only.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import rope_plan
from tests.configs import GEMMA3, LLAMA3
from tests.tolerance import assert_close_ulp

LLAMA_V4 = {**LLAMA3, "num_hidden_layers": 2}  # the v4 spelling (rope_scaling), two layers


def omega(dim: int, base: float) -> np.ndarray:
    return base ** (-np.arange(0, dim, 2) / dim)


def test_v4_rope_scaling_and_rope_theta() -> None:
    plan = rope_plan(LLAMA_V4)
    assert len(plan) == 2
    assert plan.model_type == "llama"
    layer = plan.layer()
    assert layer.rope_type == "llama3"
    assert layer.base == 500000.0
    assert (layer.head_dim, layer.rotary_dim, layer.pairs) == (64, 64, "half")
    want, _ = posenc.rope_frequencies(64, base=500000.0, scaling=LLAMA_V4["rope_scaling"])
    np.testing.assert_array_equal(layer.frequencies, want)
    assert plan.source == "config.rope_scaling"
    assert layer.scaling is not None
    assert layer.scaling.max_position_embeddings == 131072


def test_v5_flat_rope_parameters_without_scaling() -> None:
    config = {"head_dim": 8, "rope_parameters": {"rope_type": "default", "rope_theta": 100.0}}
    layer = rope_plan(config).layer()
    assert layer.scaling is None
    assert layer.attention_factor == 1.0
    # frequencies from two float64 formulas: an ulp or two of each ω, relative
    assert_close_ulp(layer.frequencies, omega(8, 100.0), ulps=4, scale=omega(8, 100.0))
    assert rope_plan(config).layers == ()  # the config does not say how many layers


def test_nested_per_layer_type() -> None:
    plan = rope_plan(GEMMA3)
    assert [layer.rope_type for layer in plan] == ["default"] * 5 + ["linear"]
    assert plan[0] is plan[4]
    assert plan[0].base == 10000.0
    full = plan.layer("full_attention")
    # frequencies from two float64 formulas: an ulp or two of each ω, relative
    assert_close_ulp(full.frequencies, omega(16, 1e6) / 8, ulps=4, scale=omega(16, 1e6) / 8)
    cos, _ = full.cos_sin([3])
    expected = np.cos(3 * np.concatenate([full.frequencies] * 2))
    # the float64 table rounded once to float32: half an ulp of each value (<= 1)
    assert_close_ulp(cos[0], expected, ulps=1)
    assert set(plan.kinds) == {"sliding_attention", "full_attention"}
    assert "sliding_attention x5" in repr(plan)


def test_ambiguous_layer_type_names_the_types() -> None:
    plan = rope_plan(GEMMA3)
    with pytest.raises(ValueError, match=r"pass layer_type= one of \['full_attention', 'sl"):
        plan.layer()
    with pytest.raises(ValueError, match=r"layer_type must be one of .* got 'global'"):
        plan.layer("global")


def test_v4_gemma3_spelling_rope_local_base_freq() -> None:
    config = {
        "model_type": "gemma3_text",
        "head_dim": 16,
        "num_hidden_layers": 6,
        "sliding_window_pattern": 6,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    }
    plan = rope_plan(config)
    ours = [(x.layer_type, x.rope_type, x.base) for x in plan]
    want = [(x.layer_type, x.rope_type, x.base) for x in rope_plan(GEMMA3)]
    assert ours == want


def test_v4_modernbert_spelling() -> None:
    config = {
        "model_type": "modernbert",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 4,
        "global_attn_every_n_layers": 3,
        "global_rope_theta": 160000.0,
        "local_rope_theta": 10000.0,
    }
    plan = rope_plan(config)
    assert [x.layer_type for x in plan] == [
        "full_attention",
        "sliding_attention",
        "sliding_attention",
        "full_attention",
    ]
    assert [x.base for x in plan] == [160000.0, 10000.0, 10000.0, 160000.0]


def test_no_rope_layers_smollm3_and_llama4() -> None:
    base = {"head_dim": 8, "rope_theta": 10000.0, "num_hidden_layers": 8}
    listed = rope_plan({**base, "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0]})
    interval = rope_plan({**base, "no_rope_layer_interval": 4})
    for plan in (listed, interval):
        assert [x.uses_positions for x in plan] == [True, True, True, False] * 2
        assert "no_rope_layers[3] is 0" in plan[3].notes[0]
        assert plan.layer().uses_positions  # the layers that rotate share one plan
    with pytest.raises(ValueError, match="does not rotate"):
        listed[3].cos_sin(4)
    with pytest.raises(TypeError, match=r"no_rope_layers must be a list of integers in \[0, 1\]"):
        rope_plan({**base, "no_rope_layers": "all"})


def test_a_none_parameter_set_and_non_attention_layers_do_not_rotate() -> None:
    beam = {
        "head_dim": 8,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {"sliding_attention": {"rope_theta": 10000.0}, "full_attention": None},
    }
    assert [x.uses_positions for x in rope_plan(beam)] == [True, False]
    hybrid = {
        "head_dim": 8,
        "rope_theta": 10000.0,
        "layer_types": ["linear_attention", "linear_attention", "full_attention"],
    }
    plan = rope_plan(hybrid)
    assert [x.uses_positions for x in plan] == [False, False, True]
    assert plan.layer() is plan[2]
    absolute = {"head_dim": 8, "rope_theta": 10000.0, "position_embedding_type": "absolute"}
    assert not rope_plan(absolute).layer("full_attention").uses_positions


@pytest.mark.parametrize(
    ("spelling", "rotary_dim"),
    [
        ({"partial_rotary_factor": 0.25}, 16),
        ({"rotary_pct": 0.5, "model_type": "gpt_neox"}, 32),
        ({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.75}}, 48),
        ({"rotary_dim": 24, "model_type": "gptj"}, 24),
        ({"rotary_dim": 24, "model_type": "minimax_m3_vl_text"}, 64),  # not read there
    ],
)
def test_partial_rotation_spellings(spelling: dict, rotary_dim: int) -> None:
    layer = rope_plan({"head_dim": 64, "rope_theta": 10000.0, **spelling}).layer()
    assert (layer.head_dim, layer.rotary_dim) == (64, rotary_dim)
    want = omega(rotary_dim, 10000.0)
    # frequencies from two float64 formulas: an ulp or two of each ω, relative
    assert_close_ulp(layer.frequencies, want, ulps=4, scale=want)
    assert layer.cos_sin(2)[0].shape == (2, rotary_dim)


def test_gpt_neox_base_spelling() -> None:
    layer = rope_plan({"head_dim": 8, "rotary_emb_base": 500.0}).layer()
    # frequencies from two float64 formulas: an ulp or two of each ω, relative
    assert_close_ulp(layer.frequencies, omega(8, 500.0), ulps=4, scale=omega(8, 500.0))


def test_head_dim_from_hidden_size_and_per_layer_overrides() -> None:
    config = {
        "hidden_size": 128,
        "num_attention_heads": 8,
        "rope_theta": 10000.0,
        "layer_types": ["sliding_attention", "full_attention", "full_attention"],
        "per_layer_config": {"02": {"head_dim": 32}},
    }
    assert [x.head_dim for x in rope_plan(config)] == [16, 16, 32]
    gemma4 = {**config, "global_head_dim": 64, "per_layer_config": {}}
    assert [x.rotary_dim for x in rope_plan(gemma4)] == [16, 64, 64]
    with pytest.raises(ValueError, match=r"config must give head_dim, or hidden_size and num"):
        rope_plan({"rope_theta": 10000.0})


def test_deepseek_latent_attention_and_rope_interleave() -> None:
    config = {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "rope_theta": 10000.0,
    }
    layer = rope_plan(config).layer()
    assert (layer.head_dim, layer.rotary_dim, layer.pairs) == (64, 64, "interleaved")
    assert layer.pairs_source.endswith("modeling_deepseek_v3.apply_rotary_pos_emb_interleave")
    assert rope_plan({**config, "rope_interleave": False}).layer().pairs == "half"
    assert rope_plan({**config, "model_type": "cohere"}).layer().pairs == "interleaved"
    assert rope_plan({**config, "model_type": "llama"}).layer().pairs == "half"


def test_composite_config_reads_the_text_config() -> None:
    composite = {"model_type": "qwen2_vl", "vision_config": {"depth": 2}, "text_config": LLAMA_V4}
    plan = rope_plan(composite)
    assert plan.source == "config.text_config.rope_scaling"
    assert plan.layer().rope_type == "llama3"
    with pytest.raises(ValueError, match=r"config has no RoPE settings"):
        rope_plan({"model_type": "bert", "hidden_size": 64})


def test_config_objects_are_read_by_attribute() -> None:
    config = SimpleNamespace(
        head_dim=32, rope_parameters={"rope_theta": 10.0, "rope_type": "default"}
    )
    assert rope_plan(config).layer().rotary_dim == 32

    class Config:  # head_dim a property, as in some transformers configs
        def __init__(self) -> None:
            self.rope_parameters = {"rope_type": "default", "rope_theta": 10000.0}

        def to_dict(self) -> dict:
            return {"rope_parameters": self.rope_parameters}

        @property
        def head_dim(self) -> int:
            return 24

    assert rope_plan(Config()).layer().head_dim == 24
    with pytest.raises(TypeError, match="config must be a transformers config"):
        rope_plan(42)


def test_inert_keys_are_reported_and_unknown_keys_named() -> None:
    params = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096}
    config = {"head_dim": 64, "rope_parameters": {**params, "llama_4_scaling_beta": 0.1}}
    layer = rope_plan(config).layer()
    assert layer.inert == (("llama_4_scaling_beta", 0.1),)
    assert "get_llama_4_attn_scale" in " ".join(layer.notes)
    plain = rope_plan({"head_dim": 64, "rope_parameters": params}).layer()
    np.testing.assert_array_equal(layer.frequencies, plain.frequencies)
    bad = {"head_dim": 64, "rope_parameters": {**params, "betta_fast": 32}}
    with pytest.raises(ValueError, match=r"config.rope_parameters: scaling\['betta_fast'\] is not"):
        rope_plan(bad)
    nested = {"head_dim": 64, "rope_parameters": {"full_attention": {"rope_type": "magic"}}}
    with pytest.raises(ValueError, match=r"\['full_attention'\]: scaling\['rope_type'\] must be"):
        rope_plan(nested)


def test_new_types_through_the_plan() -> None:
    gemma4 = {
        "head_dim": 32,
        "rope_parameters": {
            "rope_type": "proportional",
            "partial_rotary_factor": 0.25,
            "rope_theta": 1e6,
        },
    }
    layer = rope_plan(gemma4).layer()
    assert (layer.head_dim, layer.rotary_dim) == (32, 32)
    assert (layer.frequencies[4:] == 0).all()
    assert (layer.frequencies[:4] > 0).all()
    assert layer.cos_sin(3)[0].shape == (3, 32)
    hunyuan = {"head_dim": 128, "rope_scaling": {"type": "dynamic", "alpha": 1000.0}}
    layer = rope_plan(hunyuan).layer()
    assert layer.rope_type == "ntk_alpha"
    new_base = 10000.0 * 1000.0 ** (128 / 126)
    # frequencies from two float64 formulas: a few ulps of each ω, relative
    want = omega(128, new_base)
    assert_close_ulp(layer.frequencies, want, ulps=4, scale=want)


def test_length_dependent_types_take_the_length() -> None:
    config = {
        "head_dim": 16,
        "max_position_embeddings": 1024,
        "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
    }
    layer = rope_plan(config).layer()
    short, _ = layer.frequencies_at(512)
    np.testing.assert_array_equal(short, layer.frequencies)
    longer, _ = layer.frequencies_at(4096)
    assert (longer[1:] < layer.frequencies[1:]).all()


@given(
    head_dim=st.integers(1, 64).map(lambda n: 2 * n),
    base=st.floats(1.5, 1e7),
    layers=st.integers(1, 6),
)
def test_plain_rope_of_any_size(head_dim: int, base: float, layers: int) -> None:
    plan = rope_plan({"head_dim": head_dim, "rope_theta": base, "num_hidden_layers": layers})
    assert len(plan) == layers
    assert all(layer is plan[0] for layer in plan)
    # base^(-2k/d) by two float64 formulas: the exponent's rounding is |ln base| ulps of ω
    want = omega(head_dim, base)
    assert_close_ulp(plan[0].frequencies, want, ulps=4 + abs(math.log(base)), scale=want)


def test_flat_parameters_shared_by_several_layer_types() -> None:
    gemma2 = {
        "head_dim": 16,
        "rope_theta": 10000.0,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
    }
    plan = rope_plan(gemma2)
    assert set(plan.kinds) == {"sliding_attention", "full_attention"}
    assert plan.layer() == plan.layer("sliding_attention")  # the same RoPE: no need to choose
    assert plan.layer().layer_type == "sliding_attention"


def test_bad_values_are_named_with_where_they_are() -> None:
    both = {"head_dim": 8, "rope_scaling": {"type": "linear", "rope_type": "yarn", "factor": 2}}
    with pytest.raises(ValueError, match=r"config.rope_scaling: 'rope_type' = 'yarn' and 'type'"):
        rope_plan(both)
    with pytest.raises(ValueError, match=r"config.rope_parameters: rope_theta must be a positive"):
        rope_plan({"head_dim": 8, "rope_parameters": {"rope_theta": -1.0}})
    with pytest.raises(ValueError, match=r"partial_rotary_factor'\] = 0.5 rotates .* = 5 channels"):
        rope_plan({"head_dim": 10, "rope_theta": 1e4, "partial_rotary_factor": 0.5})
    with pytest.raises(TypeError, match=r"config.layer_types must be a list of strings"):
        rope_plan({"head_dim": 8, "rope_theta": 1e4, "layer_types": "full_attention"})


def test_frequencies_are_read_only() -> None:
    layer = rope_plan(GEMMA3).layer("full_attention")
    with pytest.raises(ValueError, match="read-only"):
        layer.frequencies[0] = 1.0


def test_v4_gemma3_without_the_pattern_uses_the_model_default() -> None:
    config = {"head_dim": 8, "num_hidden_layers": 12, "rope_theta": 1e6}
    plan = rope_plan({**config, "rope_local_base_freq": 1e4})
    assert [x.base for x in plan].count(1e6) == 2  # layers 6 and 12 are global


def test_gpt2_style_names_in_a_config_json() -> None:
    """GPT-J and CodeGen's config.json spell the sizes n_embd, n_head and n_layer."""
    config = {
        "model_type": "gptj",
        "n_embd": 64,
        "n_head": 4,
        "n_layer": 3,
        "n_positions": 2048,
        "rotary_dim": 8,
    }
    plan = rope_plan(config)
    assert len(plan.layers) == 3
    layer = plan.layer()
    assert (layer.head_dim, layer.rotary_dim, layer.pairs) == (16, 8, "interleaved")


@pytest.mark.parametrize("layers", ["2", 2.5, True, [2]])
def test_a_layer_count_that_is_not_an_integer_is_refused(layers):
    config = {"head_dim": 8, "rope_theta": 1e4, "num_hidden_layers": layers}
    with pytest.raises((TypeError, ValueError), match="num_hidden_layers must be an integer"):
        rope_plan(config)


def test_a_numpy_integer_layer_count_gives_its_layers():
    plan = rope_plan({"head_dim": 8, "rope_theta": 1e4, "num_hidden_layers": np.int64(3)})
    assert len(plan.layers) == 3


def test_layer_types_and_num_hidden_layers_must_agree() -> None:
    """Three layer types for two layers is a malformed config, not a three-layer plan."""
    config = {**LLAMA_V4, "num_hidden_layers": 2, "layer_types": ["full_attention"] * 3}
    with pytest.raises(ValueError, match=r"layer_types.*3.*num_hidden_layers.*2"):
        rope_plan(config)
