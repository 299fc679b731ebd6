"""posenc.rope_plan on multi-axis configs: M-RoPE text layers and 2-D vision towers.

Each layer's tables come from :func:`posenc.multi_axis_cos_sin` with the frequency matrix of
its layout; these tests check the layouts and tables against the explicit recipes of
docs/multi-axis.md. The comparisons with the real rotary classes of transformers are in
``tests/torch/hf/test_rope_coverage.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import grid_positions, multi_axis_cos_sin, rope_plan
from tests.tolerance import assert_close_ulp

QWEN3_VL = {
    "model_type": "qwen3_vl_text",
    "head_dim": 128,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 5e6,
        "mrope_section": [24, 20, 20],
        "mrope_interleaved": True,
    },
}


def vision(model_type: str, **sizes: object) -> dict:
    return {
        "model_type": model_type,
        "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0},
        **sizes,
    }


def mrope_ids(rng: np.random.Generator, tokens: int) -> np.ndarray:
    """(t, h, w) ids with distinct values on every axis, shape (2, tokens, 3)."""
    return rng.integers(0, 5000, size=(2, tokens, 3))


def test_multi_axis_sections_are_data() -> None:
    layer = rope_plan(QWEN3_VL).layer()
    assert layer.multi_axis
    assert layer.axes == ("temporal", "height", "width")
    assert layer.sections == (24, 20, 20)
    assert layer.interleaved_sections
    omega = 5e6 ** (-np.arange(0, 128, 2) / 128)
    # frequencies from two float64 formulas: an ulp or two of each ω, relative
    assert_close_ulp(layer.frequencies, omega, ulps=4, scale=omega)
    v4 = {"head_dim": 128, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    assert rope_plan(v4).layer().sections == (16, 24, 24)
    default = rope_plan({**QWEN3_VL, "rope_parameters": {"rope_theta": 5e6}}).layer()
    assert default.sections == (24, 20, 20)  # the model's own default
    axial = {"head_dim": 64, "rope_parameters": {"rope_type": "axial", "rope_theta": 100.0}}
    assert rope_plan(axial).layer().axes == ("height", "width")


def test_mrope_layer_tables_are_multi_axis_cos_sin_of_its_layout() -> None:
    layer = rope_plan(QWEN3_VL).layer()
    ids = mrope_ids(np.random.default_rng(0), 9)
    expected = multi_axis_cos_sin(ids, 128, sections=(24, 20, 20), order="interleaved", base=5e6)
    for ours, theirs in zip(layer.cos_sin(ids), expected, strict=True):
        np.testing.assert_array_equal(ours, theirs)
    assert layer.axis_frequencies().frequencies.shape == (3, 64)
    hf_layout = np.moveaxis(ids, -1, 0)  # (3, b, s), as Hugging Face passes them
    with pytest.raises(ValueError, match=r"np\.moveaxis\(ids, 0, -1\)|moveaxis"):
        layer.cos_sin(hf_layout)


def test_text_tokens_of_an_mrope_layer_are_1d_rope() -> None:
    layer = rope_plan({**QWEN3_VL, "rope_parameters": {"rope_theta": 5e6}}).layer()
    one_d = rope_plan({"head_dim": 128, "rope_theta": 5e6}).layer()
    text = np.repeat(np.arange(50)[:, None], 3, axis=1)
    for ours, theirs in zip(layer.cos_sin(text), one_d.cos_sin(np.arange(50)), strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_an_mrope_config_without_the_interleave_flag_uses_the_model_layout() -> None:
    # Cosmos3-Edge's configs give mrope_section only; its rotary class interleaves them.
    config = {
        "model_type": "cosmos3_edge_text",
        "head_dim": 128,
        "rope_parameters": {"rope_theta": 1e8, "mrope_section": [24, 20, 20]},
    }
    assert rope_plan(config).layer().interleaved_sections
    assert not rope_plan({**config, "model_type": "qwen2_vl_text"}).layer().interleaved_sections


def test_interleaved_sections_give_the_first_axis_the_other_pairs() -> None:
    # Qwen3-VL's recomposition places H and W pairs only: T takes every other pair.
    config = {"model_type": "qwen4_exp_text", "head_dim": 256, "rope_theta": 1e4}
    layer = rope_plan(config).layer()
    assert (layer.rotary_dim, layer.sections) == (256, (107, 11, 10))
    assert any("[0] = 11 is not read" in note for note in layer.notes)
    axis = layer.axis_frequencies().axis
    assert list(axis[:6]) == [0, 1, 2, 0, 1, 2]
    assert set(axis[33:]) == {0}


def test_sectioned_sections_must_fill_the_rotated_part() -> None:
    config = {"model_type": "glm4v_text", "head_dim": 128, "rope_theta": 1e4}
    with pytest.raises(ValueError, match=r"\[8, 12, 12\] gives 32 rotary pairs, but 128"):
        rope_plan(config)
    partial = {**config, "partial_rotary_factor": 0.5}
    layer = rope_plan(partial).layer()
    assert (layer.rotary_dim, layer.pairs) == (64, "interleaved")


def test_mrope_type_needs_its_sections() -> None:
    with pytest.raises(ValueError, match=r"'mrope' needs 'mrope_section'"):
        rope_plan({"head_dim": 64, "rope_scaling": {"type": "mrope"}})


def test_two_axes_taking_turns_neomme() -> None:
    config = {
        "model_type": "neomme",
        "head_dim": 64,
        "rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.25},
    }
    layer = rope_plan(config).layer()
    assert (layer.axes, layer.sections, layer.interleaved_sections) == (
        ("height", "width"),
        (4, 4),
        True,
    )
    rows_cols = np.array([[3, 7], [10, 2]])
    expected = multi_axis_cos_sin(
        rows_cols, 64, sections=(4, 4), order="interleaved", rotary_dim=16
    )
    np.testing.assert_array_equal(layer.cos_sin(rows_cols)[0], expected[0])


@pytest.mark.parametrize(
    ("config", "head_dim"),
    [
        # Qwen2-VL's tower: embed_dim (its hidden_size is the merger's output width)
        (vision("qwen2_vl_vision", embed_dim=1280, hidden_size=3584, num_heads=16), 80),
        (vision("qwen2_5_vl_vision", hidden_size=1280, num_heads=16), 80),
        # SAM 2 video: the memory attention's head
        (
            vision(
                "sam2_video",
                memory_attention_hidden_size=256,
                memory_attention_downsample_rate=1,
                memory_attention_num_attention_heads=1,
            ),
            256,
        ),
    ],
)
def test_vision_head_dim_spellings(config: dict, head_dim: int) -> None:
    layer = rope_plan(config).layer()
    assert (layer.head_dim, layer.rotary_dim, layer.sections) == (
        head_dim,
        head_dim,
        (head_dim // 4, head_dim // 4),
    )


def test_qwen_vision_tower_is_the_per_axis_recipe() -> None:
    layer = rope_plan(vision("qwen2_vl_vision", embed_dim=1280, num_heads=16)).layer()
    assert (layer.schedule, layer.interleaved_sections, layer.pairs) == ("per_axis", False, "half")
    positions = grid_positions((8, 12), merge=2)
    expected = multi_axis_cos_sin(positions, 80, sections=(20, 20), schedule="per_axis")
    for ours, theirs in zip(layer.cos_sin(positions), expected, strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_pixtral_deals_one_schedule_to_rows_and_columns() -> None:
    layer = rope_plan(vision("pixtral", head_dim=64)).layer()
    positions = grid_positions((5, 7))
    expected = multi_axis_cos_sin(positions, 64, sections=(16, 16), schedule="dealt")
    np.testing.assert_array_equal(layer.cos_sin(positions)[1], expected[1])


@pytest.mark.parametrize(
    ("model_type", "order"), [("step3p5_vision", "sectioned"), ("kimi_k25_vision", "interleaved")]
)
def test_width_first_layouts_take_h_w_coordinates(model_type: str, order: str) -> None:
    """The model passes (h, w) and lays out the width pairs first: the same table as the
    recipe over (w, h) coordinates."""
    layer = rope_plan(vision(model_type, hidden_size=1024, num_attention_heads=16)).layer()
    assert layer.axes == ("height", "width")
    assert layer.slot_order == (1, 0)
    hw = grid_positions((6, 4))
    expected = multi_axis_cos_sin(
        hw[:, ::-1], 64, sections=(16, 16), schedule="per_axis", order=order
    )
    np.testing.assert_array_equal(layer.cos_sin(hw)[1], expected[1])
    matrix = layer.axis_frequencies().frequencies
    assert matrix[1, 0] == 1.0
    assert matrix[0, 0] == 0.0


def test_three_axis_vision_tower_rotates_part_of_the_head() -> None:
    layer = rope_plan(
        vision("minimax_m3_vl_vision", hidden_size=1280, num_attention_heads=16)
    ).layer()
    assert (layer.axes, layer.sections, layer.rotary_dim) == (
        ("temporal", "height", "width"),
        (13, 13, 13),
        78,
    )
    assert layer.cos_sin(np.zeros((4, 3)))[0].shape == (4, 78)


def test_a_default_rope_type_model_with_a_2d_rotary_class() -> None:
    config = {
        "model_type": "llama4_vision_model",
        "hidden_size": 768,
        "num_attention_heads": 16,
        "rope_theta": 10000.0,
    }
    layer = rope_plan(config).layer()
    assert (layer.multi_axis, layer.pairs, layer.slot_order) == (True, "interleaved", (1, 0))
    assert any("rotary class is 2-D" in note for note in layer.notes)


def test_a_composite_config_names_its_vision_tower() -> None:
    composite = {
        "model_type": "qwen2_vl",
        "vision_config": vision("qwen2_vl_vision", embed_dim=1280, num_heads=16),
        "text_config": QWEN3_VL,
    }
    plan = rope_plan(composite)
    assert plan.source == "config.text_config.rope_parameters"
    assert any("rope_plan(config.vision_config)" in note for note in plan.notes)
    assert rope_plan(composite["vision_config"]).layer().axes == ("height", "width")


def test_axial_layers_take_rope_theta_only() -> None:
    config = vision("qwen2_vl_vision", embed_dim=1280, num_heads=16)
    config["rope_parameters"]["factor"] = 2.0
    with pytest.raises(ValueError, match=r"takes rope_theta only, got factor"):
        rope_plan(config)


@settings(deadline=None, max_examples=25)
@given(
    heads=st.integers(1, 8),
    quarter=st.integers(1, 24),
    start=st.integers(0, 10**6),
)
def test_axial_frequencies_are_one_schedule_per_axis(heads: int, quarter: int, start: int) -> None:
    head_dim = 4 * quarter
    layer = rope_plan(
        vision("qwen3_vl_vision", hidden_size=head_dim * heads, num_heads=heads)
    ).layer()
    matrix = layer.axis_frequencies().frequencies
    own = 10000.0 ** (-np.arange(quarter) / quarter)  # base^(-2k/(head_dim/2))
    # frequencies from two float64 formulas: an ulp or two of each ω, relative
    assert_close_ulp(matrix[0, :quarter], own, ulps=4, scale=own)
    assert_close_ulp(matrix[1, quarter:], own, ulps=4, scale=own)
    assert not matrix[0, quarter:].any()
    assert not matrix[1, :quarter].any()
    cos, _ = layer.cos_sin(np.array([[start, 0]]))
    np.testing.assert_allclose(cos[0, quarter : 2 * quarter], 1.0)  # w = 0: the width pairs rest


def test_a_model_that_rotates_before_the_heads_split() -> None:
    config = {
        "model_type": "efficientloftr",
        "hidden_size": 256,
        "num_attention_heads": 8,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 4},
    }
    layer = rope_plan(config).layer()
    assert (layer.head_dim, layer.rotary_dim, layer.sections, layer.pairs) == (
        256,
        256,
        (64, 64),
        "interleaved",
    )
    assert layer.interleaved_sections
    with pytest.raises(ValueError, match=r"must give hidden_size, an integer >= 4, got None"):
        rope_plan({**config, "hidden_size": None, "head_dim": 32})
