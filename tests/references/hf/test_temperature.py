"""Attention temperature against transformers: Ministral 3's ``get_llama_4_attn_scale`` (the
same function as Mistral 4's), float32, equal to posenc's float64 scale rounded to float32
within the error of its float32 log, at positions to 2**24; and the plan of transformers'
Llama 4, Ministral 3 and Mistral 4 configs records each one's temperature."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from tests.references import require

torch = pytest.importorskip("torch")
transformers = require("transformers")

POSITIONS = np.array([0, 1, 16383, 16384, 32767, 32768, 10**5, 10**6, 2**24 - 1])


@pytest.mark.parametrize("model", ["ministral3", "mistral4"])
def test_llama4_beta_is_get_llama_4_attn_scale(model: str) -> None:
    modeling = require(f"transformers.models.{model}.modeling_{model}")
    theirs = modeling.get_llama_4_attn_scale(torch.from_numpy(POSITIONS)[None], 0.1, 16384)
    ours = posenc.attention_temperature(
        POSITIONS, "llama4_beta", beta=0.1, original_max_position_embeddings=16384
    )
    assert theirs.shape == (1, 1, POSITIONS.size, 1)
    # their float32 division and log: a few float32 ulps of the scale
    np.testing.assert_allclose(theirs.flatten().double().numpy(), ours, rtol=4 * 2.0**-23)


@pytest.mark.parametrize(
    ("config", "kind"),
    [
        (lambda: transformers.Llama4TextConfig(num_hidden_layers=4), "llama4"),
        (lambda: transformers.Ministral3Config(num_hidden_layers=2), "llama4_beta"),
        (lambda: transformers.Mistral4Config(num_hidden_layers=2), "llama4_beta"),
    ],
)
def test_the_plans_of_transformers_configs_record_their_temperature(config, kind: str) -> None:  # type: ignore[no-untyped-def]
    built = config()
    plan = posenc.rope_plan(built)
    found = {layer.temperature.kind for layer in plan if layer.temperature is not None}
    assert found == {kind}
