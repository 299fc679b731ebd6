"""Vision towers whose config gives no RoPE keys: the 2-D layout their rotary class builds.

transformers marks these config classes ``default_rope_type = "axial"``; their ``config.json``
blocks (``vision_config``) often carry no ``rope_theta``, no ``rope_parameters`` and no
``model_type``. The comparisons with transformers' own classes are in
``tests/references/hf/test_vision_configs.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from posenc import rope_plan
from tests.tolerance import assert_close_ulp

QWEN2_VL_VISION = {"model_type": "qwen2_vl_vision", "embed_dim": 64, "num_heads": 4}


def test_a_vision_config_without_rope_keys_is_axial() -> None:
    layer = rope_plan(QWEN2_VL_VISION).layer()
    assert layer.rope_type == "axial"
    assert layer.axes == ("height", "width")
    assert layer.sections == (4, 4)
    assert (layer.base, layer.head_dim, layer.rotary_dim) == (10000.0, 16, 16)
    # each axis its own schedule over head_dim / 2 channels: 10000^(-2k/8), k = 0..3
    expected = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    got = layer.axis_frequencies().frequencies[0, :4]
    # frequencies from two float64 formulas: an ulp or two of each ω, relative
    assert_close_ulp(got, expected, ulps=4, scale=expected)


def test_rope_theta_alone_builds_the_axial_layout_not_one_axis() -> None:
    layer = rope_plan({**QWEN2_VL_VISION, "rope_theta": 500.0}).layer()
    assert (layer.rope_type, layer.axes, layer.base) == ("axial", ("height", "width"), 500.0)
    flat = {**QWEN2_VL_VISION, "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}}
    assert rope_plan(flat).layer() == layer


def test_the_class_default_base_applies_where_the_file_gives_none() -> None:
    lfm3 = {"model_type": "lfm3_vl_vision", "hidden_size": 64, "num_attention_heads": 4}
    plan = rope_plan(lfm3)
    assert plan.layer().base == 1e6
    assert any(
        "rope_theta not given: 1e+06, the default of lfm3_vl_vision" in n for n in plan.notes
    )
    assert rope_plan({**lfm3, "rope_theta": 5.0}).layer().base == 5.0


def test_vision_reads_the_block_and_infers_its_model_type_from_the_composite() -> None:
    block = {"depth": 3, "embed_dim": 64, "num_heads": 4, "hidden_size": 3584}
    composite = {"model_type": "qwen2_vl", "vision_config": block, "text_config": {}}
    plan = rope_plan(composite, vision=True)
    assert plan.model_type == "qwen2_vl_vision"
    assert len(plan) == 3  # depth
    assert plan.layer() == rope_plan(QWEN2_VL_VISION).layer()
    assert any("read as 'qwen2_vl_vision', the vision tower of 'qwen2_vl'" in n for n in plan.notes)
    # a block that repeats the composite's model_type is read the same way
    same = {**composite, "vision_config": {**block, "model_type": "qwen2_vl"}}
    assert rope_plan(same, vision=True).layer() == plan.layer()


def test_vision_reads_the_thinker_of_omni_models() -> None:
    block = {"depth": 1, "hidden_size": 64, "num_heads": 4}
    omni = {"model_type": "qwen2_5_omni", "thinker_config": {"vision_config": block}}
    plan = rope_plan(omni, vision=True)
    assert plan.model_type == "qwen2_5_omni_vision_encoder"
    assert plan.source == "config.thinker_config.vision_config.rope_parameters"


def test_a_composite_names_its_vision_tower_even_without_rope_keys() -> None:
    composite = {
        "model_type": "qwen2_vl",
        "vision_config": {"depth": 1, "embed_dim": 64, "num_heads": 4},
        "text_config": {"head_dim": 8, "rope_theta": 10000.0},
    }
    notes = rope_plan(composite).notes
    assert any("rope_plan(config, vision=True)" in n for n in notes), notes


def test_a_tower_that_does_not_rotate_says_so() -> None:
    glm_image = {"model_type": "glm_image_vision", "depth": 2, "hidden_size": 64, "num_heads": 4}
    plan = rope_plan(glm_image)
    assert len(plan) == 2
    assert not any(layer.uses_positions for layer in plan)
    with pytest.raises(ValueError, match=r"no rotary embedding: it adds learned position"):
        plan.layer()
    composite = {"model_type": "glm_image", "vision_config": glm_image, "text_config": {}}
    assert not any("vision=True" in n for n in rope_plan(composite, vision=True).notes)


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        ({"model_type": "qwen2_vl", "text_config": {}}, ValueError, r"config has no vision_config"),
        ({"model_type": "qwen2_vl", "vision_config": 3}, ValueError, r"has no vision_config"),
        ([1, 2], TypeError, r"config must be a transformers config"),
    ],
)
def test_vision_without_a_vision_config_is_refused(config: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        rope_plan(config, vision=True)


@pytest.mark.parametrize(
    "vision",
    [
        # CLIP's tower adds learned absolute positions: no RoPE, not a default one
        {"model_type": "clip_vision_model", "hidden_size": 768, "num_attention_heads": 12},
        # Florence-2's DaViT gives its sizes per stage (lists), which mean no head size here
        {"model_type": "florence_vision", "embed_dim": [128, 256], "num_heads": [4, 8]},
    ],
    ids=["clip", "florence2"],
)
def test_a_vision_tower_without_rope_settings_has_no_plan(vision: dict) -> None:
    config = {"model_type": "composite", "vision_config": vision}
    with pytest.raises(ValueError, match=r"config.vision_config has no RoPE settings"):
        rope_plan(config, vision=True)


def test_vision_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match=r"vision must be true or false, got 'yes'"):
        rope_plan(QWEN2_VL_VISION, vision="yes")  # type: ignore[arg-type]


def test_a_vision_tower_value_is_checked_by_key() -> None:
    with pytest.raises(TypeError, match=r"config.vision_config.num_heads must be an integer"):
        rope_plan(
            {"model_type": "qwen2_vl", "vision_config": {**QWEN2_VL_VISION, "num_heads": "4"}},
            vision=True,
        )
    with pytest.raises(ValueError, match=r"rope_theta must be a positive finite number"):
        rope_plan({**QWEN2_VL_VISION, "rope_theta": -1.0})
