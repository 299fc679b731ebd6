"""LlamaRotary.from_config reads configs through posenc.rope_plan: per-layer-type configs,
new rope types, and a clear error when the layer type is ambiguous."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from posenc.torch.hf import LlamaRotary  # noqa: E402
from tests.tolerance import assert_close_float32_recipe  # noqa: E402

POSITIONS = torch.arange(200)[None]


def gemma3_config() -> object:
    return transformers.Gemma3TextConfig(
        hidden_size=64,
        num_attention_heads=4,
        head_dim=16,
        num_hidden_layers=6,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        },
    )


def test_from_config_asks_for_the_layer_type_of_a_per_layer_config() -> None:
    with pytest.raises(
        ValueError, match=r"pass layer_type= one of \['full_attention', 'sliding_attention'\]"
    ):
        LlamaRotary.from_config(gemma3_config())


@pytest.mark.parametrize("layer_type", ["sliding_attention", "full_attention"])
def test_from_config_per_layer_type_matches_the_gemma3_module(layer_type: str) -> None:
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    config = gemma3_config()
    theirs = Gemma3RotaryEmbedding(config)(torch.zeros(1), POSITIONS, layer_type)
    rope = LlamaRotary.from_config(config, layer_type=layer_type)
    ours = rope(torch.zeros(1, dtype=torch.float64), POSITIONS)
    for a, b in zip(ours, theirs, strict=True):
        assert_close_float32_recipe(a, b, max_angle=int(POSITIONS.max()))
    other = "full_attention" if layer_type == "sliding_attention" else "sliding_attention"
    wrong = LlamaRotary.from_config(config, layer_type=other)(torch.zeros(1), POSITIONS)
    with pytest.raises(AssertionError):  # negative control: the other layer type's table
        assert_close_float32_recipe(wrong[1], theirs[1], max_angle=int(POSITIONS.max()))


def test_from_config_errors_name_the_layer_types() -> None:
    with pytest.raises(ValueError, match=r"layer_type must be one of \['full_attention', 'sli"):
        LlamaRotary.from_config(gemma3_config(), layer_type="global")
    beam = SimpleNamespace(
        head_dim=8,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"sliding_attention": {"rope_theta": 1e4}, "full_attention": None},
    )
    with pytest.raises(ValueError, match=r"'full_attention' does not rotate"):
        LlamaRotary.from_config(beam, layer_type="full_attention")
    assert LlamaRotary.from_config(beam).head_dim == 8  # one rotating kind: no need to name it
    mrope = SimpleNamespace(
        head_dim=16, rope_parameters={"rope_theta": 1e4, "mrope_section": [2, 3, 3]}
    )
    with pytest.raises(ValueError, match=r"multi-axis .* LlamaRotary builds 1-D RoPE"):
        LlamaRotary.from_config(mrope)


def test_from_config_of_a_proportional_layer_matches_gemma4() -> None:
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding

    config = transformers.Gemma4TextConfig(
        num_hidden_layers=6, hidden_size=128, num_attention_heads=4, head_dim=32, global_head_dim=64
    )
    theirs = Gemma4TextRotaryEmbedding(config)(torch.zeros(1), POSITIONS, "full_attention")
    rope = LlamaRotary.from_config(config, layer_type="full_attention")
    assert (rope.head_dim, rope.rotary_dim) == (64, 64)
    ours = rope(torch.zeros(1, dtype=torch.float64), POSITIONS)
    for a, b in zip(ours, theirs, strict=True):
        assert_close_float32_recipe(a, b, max_angle=int(POSITIONS.max()))
