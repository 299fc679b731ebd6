"""Models without a rotary module class: the plan's pair layout rotates as the model's own
rotation function does (GPT-J and CodeGen rotate pairs ``2k, 2k+1`` with ``rotate_every_two``).

The RoPE coverage test reaches models through their ``*RotaryEmbedding`` classes; these models
build their sin/cos table in the attention module instead, so they are checked here.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import posenc  # noqa: E402
from tests.tolerance import assert_close_float32_recipe  # noqa: E402

MODELS = [("gptj", "GPTJConfig"), ("codegen", "CodeGenConfig")]


def their_rotation(module_name: str, x: torch.Tensor, positions: torch.Tensor, rotary_dim: int):
    """The model's own rotation of ``x`` ``(b, s, h, rotary_dim)``, as its attention does it."""
    module = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
    table = module.create_sinusoidal_positions(int(positions.max()) + 1, rotary_dim)
    sin, cos = torch.split(table[positions], rotary_dim // 2, dim=-1)
    return module.apply_rotary_pos_emb(x, sin, cos)


@pytest.mark.parametrize(("module_name", "config_class"), MODELS)
def test_the_plan_rotates_like_the_model(module_name: str, config_class: str) -> None:
    config = getattr(transformers, config_class)(n_embd=64, n_head=4, rotary_dim=8)
    layer = posenc.rope_plan(config).layer()
    assert (layer.head_dim, layer.rotary_dim) == (16, 8)
    positions = torch.arange(100)[None]
    x = torch.randn(1, 100, 4, 8, generator=torch.Generator().manual_seed(0))
    theirs = their_rotation(module_name, x, positions, 8)
    cos, sin = layer.cos_sin(positions[0].numpy(), dtype=np.float64)
    ours = posenc.apply_rotary(x.double().numpy(), cos[:, None], sin[:, None], pairs=layer.pairs)
    # their float32 angles (up to 99), in two products x·cos + x'·sin at the magnitude of x
    magnitude = float(np.abs(x.numpy()).max())
    assert_close_float32_recipe(ours, theirs, max_angle=99, magnitude=magnitude, terms=2)
    assert layer.pairs_source.endswith(f"modeling_{module_name}.apply_rotary_pos_emb")


def test_the_other_layout_differs_from_the_model() -> None:
    """Negative control: the half layout does not reproduce GPT-J's rotation."""
    positions = torch.arange(100)[None]
    x = torch.randn(1, 100, 4, 8, generator=torch.Generator().manual_seed(0))
    theirs = their_rotation("gptj", x, positions, 8).double().numpy()
    cos, sin = posenc.rotary_cos_sin(positions[0].numpy(), 8, dtype=np.float64)
    half = posenc.apply_rotary(x.double().numpy(), cos[:, None], sin[:, None], pairs="half")
    assert np.abs(half - theirs).max() > 0.1
