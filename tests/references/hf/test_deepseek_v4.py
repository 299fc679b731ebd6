"""DeepSeek-V4's plan against transformers' ``DeepseekV4RotaryEmbedding``: each branch's
tables (``main`` plain, ``compress`` with YaRN) from the same config, read from the config
object and from the config.json spelling; and the one place where the plan follows the
model's setting rather than transformers' reading (``truncate`` in a nested set)."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from tests.references import require
from tests.rope.test_plan_deepseek_v4 import FLASH_JSON
from tests.tolerance import assert_close_ulp

torch = pytest.importorskip("torch")
transformers = require("transformers")
deepseek_v4 = require("transformers.models.deepseek_v4.modeling_deepseek_v4")

pytestmark = pytest.mark.usefixtures("one_thread")

POSITIONS = torch.tensor([[0, 1, 2, 127, 4095, 65535, 65536, 200_000, 1_048_575]])


def _config(**rope: object) -> object:
    """V4-Flash's rope settings in a tiny DeepseekV4Config (transformers builds the sets)."""
    keys = {k: v for k, v in FLASH_JSON.items() if k != "model_type"}
    scaling = {**FLASH_JSON["rope_scaling"], **rope}  # type: ignore[dict-item]
    return transformers.DeepseekV4Config(**{**keys, "rope_scaling": scaling})


def _theirs(config: object, label: str) -> tuple[np.ndarray, np.ndarray]:
    rotary = deepseek_v4.DeepseekV4RotaryEmbedding(config)
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1, dtype=torch.float32), POSITIONS, layer_type=label)
    return cos[0].double().numpy(), sin[0].double().numpy()


@pytest.mark.parametrize("label", ["main", "compress"])
@pytest.mark.parametrize("source", ["object", "config.json"])
def test_each_branch_is_the_rotary_module_s_within_its_float32_angles(
    label: str, source: str
) -> None:
    config = _config()
    plan = posenc.rope_plan(config if source == "object" else FLASH_JSON)
    layer = plan.layer(label)
    cos, sin = layer.cos_sin(POSITIONS[0].numpy(), dtype=np.float64)
    theirs = _theirs(config, label)
    # their angle p·ω in float32: half an ulp of the angle, at most
    angles = POSITIONS[0].double().numpy()[:, None] * layer.frequencies[None, :]
    scale = np.maximum(np.abs(angles), 1.0)
    for ours, their in zip((cos[:, 0::2], sin[:, 0::2]), theirs, strict=True):
        assert_close_ulp(their, ours, ulps=2, dtype=np.float32, scale=scale, what=label)


def test_a_nested_truncate_false_is_followed_by_the_plan_and_not_by_transformers() -> None:
    """transformers 5 reads ``truncate`` from the top level of ``rope_parameters``: a set's own
    ``truncate=False`` does not reach its YaRN, which truncates; the plan follows the set and
    its notes say so."""
    config = _config(truncate=False)
    assert config.rope_parameters["compress"]["truncate"] is False
    plan = posenc.rope_plan(config)
    assert any("truncate=False" in note for note in plan.notes)
    ours = plan.layer("compress").frequencies
    truncated = posenc.rope_plan(_config()).layer("compress").frequencies
    rotary = deepseek_v4.DeepseekV4RotaryEmbedding(config)
    theirs = rotary.compress_inv_freq.double().numpy()
    np.testing.assert_allclose(theirs, truncated, rtol=2e-7)  # transformers truncated
    assert np.max(np.abs(ours / truncated - 1)) > 0.05  # the band moved: 14 % apart at most
