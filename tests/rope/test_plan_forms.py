"""posenc.rope_plan on rotary forms outside the plain sectioned / interleaved layouts.

- ERNIE 4.5 VL's M-RoPE: height and width take turns over the first pairs (one shared
  schedule), then time takes the last block; its pairs are neighbours (``2k, 2k+1``).
- Gemma 4's vision tower: each axis rotates its own block of channels with its own
  ``rotate_half`` (``[x, x, y, y]``: pairs ``(i, i + head_dim/4)`` inside each half).
- HunYuan-VL's XD-RoPE: sectioned M-RoPE over (position, width, height, image_index), the
  sections repeated over both halves of the doubled table as HunYuan-VL's own code does; the
  note names the axes transformers' split by ``2·sections`` mixes.
- NanoChat's rotation by −θ: refused by name.

The expected tables here are built by hand from the recipes of the model code; the
comparisons with the transformers modules themselves are in
``tests/references/hf/test_rope_forms.py``.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import multi_axis_cos_sin, rope_plan, rotary_cos_sin
from tests.tolerance import assert_close_ulp


def ernie(sections: list[int], head_dim: int = 16, base: float = 500.0) -> dict:
    return {
        "model_type": "ernie4_5_vl_moe_text",
        "head_dim": head_dim,
        "rope_parameters": {"rope_type": "default", "rope_theta": base, "mrope_section": sections},
    }


def ernie_frequencies(sections: list[int], head_dim: int, base: float) -> np.ndarray:
    """The (t, h, w) x pairs matrix of Ernie4_5_VLMoeTextRotaryEmbedding: pair k < hw turns
    with h (k even) or w (k odd), the last sections[2] with t, all at base^(-2k/head_dim)."""
    n = head_dim // 2
    omega = base ** (-2.0 * np.arange(n) / head_dim)
    hw = sections[0] + sections[1]
    matrix = np.zeros((3, n))
    for k in range(n):
        axis = 0 if k >= hw else (1 if k % 2 == 0 else 2)
        matrix[axis, k] = omega[k]
    return matrix


@settings(max_examples=25, deadline=None)
@given(
    half=st.integers(1, 6),
    t=st.integers(1, 6),
    ids=st.lists(st.tuples(*[st.integers(0, 5000)] * 3), min_size=1, max_size=6),
)
def test_ernie_vl_tables_are_the_hand_built_ones(half: int, t: int, ids: list) -> None:
    sections = [half, half, t]
    head_dim = 2 * sum(sections)
    layer = rope_plan(ernie(sections, head_dim)).layer()
    assert layer.axes == ("temporal", "height", "width")
    assert layer.pairs == "interleaved"
    positions = np.array(ids)
    expected = multi_axis_cos_sin(
        positions,
        head_dim,
        frequencies=ernie_frequencies(sections, head_dim, 500.0),
        pairs="interleaved",
    )
    for ours, theirs in zip(layer.cos_sin(positions), expected, strict=True):
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(
        layer.axis_frequencies().frequencies, ernie_frequencies(sections, head_dim, 500.0)
    )


def test_ernie_vl_default_sections_and_its_text_tokens_are_1d_rope() -> None:
    plan = rope_plan({"model_type": "ernie4_5_vl_moe_text", "head_dim": 128, "rope_theta": 1e4})
    layer = plan.layer()
    assert (layer.sections, layer.order) == ((20, 22, 22), "turns_then_last")
    text = np.repeat(np.arange(7)[:, None], 3, axis=1)
    expected = rotary_cos_sin(7, 128, pairs="interleaved")
    for ours, theirs in zip(layer.cos_sin(text), expected, strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_ernie_vl_needs_as_many_height_pairs_as_width_pairs() -> None:
    with pytest.raises(ValueError, match=r"mrope_section\[0\] and mrope_section\[1\].*4 and 2"):
        rope_plan(ernie([4, 2, 2]))


def gemma4_vision(head_dim: int = 16) -> dict:
    return {
        "model_type": "gemma4_vision",
        "head_dim": head_dim,
        "num_hidden_layers": 2,
        "rope_parameters": {"rope_type": "axial", "rope_theta": 100.0},
    }


def test_gemma4_vision_tables_are_h_h_w_w() -> None:
    layer = rope_plan(gemma4_vision(16)).layer()
    assert (layer.axes, layer.sections, layer.pairs) == (("width", "height"), (4, 4), "half")
    assert layer.pairs_per_axis
    assert layer.pairs_source.endswith("gemma4.modeling_gemma4.apply_multidimensional_rope")
    patches = np.array([[0, 0], [3, 7], [11, 2], [40, 41], [-1, -1]])  # (x, y); -1: padding
    cos, sin = layer.cos_sin(patches)
    assert cos.shape == (5, 16)
    x_cos, x_sin = rotary_cos_sin(patches[:, 0], 8, base=100.0)  # [xΩ, xΩ], Ω over 8 channels
    y_cos, y_sin = rotary_cos_sin(patches[:, 1], 8, base=100.0)
    assert_close_ulp(cos, np.concatenate([x_cos, y_cos], axis=-1), ulps=1)
    assert_close_ulp(sin, np.concatenate([x_sin, y_sin], axis=-1), ulps=1)


def test_gemma4_vision_through_its_composite_config() -> None:
    composite = {"model_type": "gemma4", "vision_config": gemma4_vision(32)}
    layer = rope_plan(composite, vision=True).layer()
    assert layer.pairs_per_axis
    assert layer.rotary_dim == 32
    assert "pairs_per_axis=True" in repr(layer)


def hunyuan_vl(sections: list[int], base: float = 1e4) -> dict:
    """A HunYuan-VL config as its checkpoints write it (rope_type xdrope, NTK-alpha)."""
    return {
        "model_type": "hunyuan_vl",
        "text_config": {
            "model_type": "hunyuan_vl_text",
            "head_dim": 2 * sum(sections),
            "rope_scaling": {"type": "xdrope", "alpha": 8.0, "xdrope_section": sections},
            "rope_theta": base,
        },
    }


def xdrope_by_hand(positions: np.ndarray, sections: list[int], base: float) -> np.ndarray:
    """HunYuan-VL's own recipe: per axis the doubled angles [pΩ, pΩ], split by the section
    list repeated, block i taken from axis i mod n_axes (float64)."""
    dim = 2 * sum(sections)
    omega = base ** (-np.arange(0, dim, 2) / dim)
    doubled = positions[..., :, None] * np.concatenate([omega, omega])  # (..., axes, dim)
    bounds = np.cumsum([0, *(sections * 2)])
    n = len(sections)
    blocks = [doubled[..., i % n, a:b] for i, (a, b) in enumerate(itertools.pairwise(bounds))]
    return np.concatenate(blocks, axis=-1)


def test_hunyuan_vl_xdrope_is_sectioned_m_rope_over_its_axes() -> None:
    sections = [1, 1, 3, 3]
    layer = rope_plan(hunyuan_vl(sections)).layer()
    assert (layer.rope_type, layer.order, layer.schedule, layer.pairs) == (
        "ntk_alpha", "sectioned", "shared", "half",
    )  # fmt: skip
    assert layer.axes == ("position", "width", "height", "image_index")
    assert layer.sections == (1, 1, 3, 3)
    positions = np.array([[7, 7, 7, 7], [9, 0, 2, 1], [10, 1, 2, 1], [5000, 11, 40, 3]])
    base = 1e4 * 8.0 ** (16 / 14)  # NTK-alpha: base · alpha^(dim/(dim-2))
    theta = xdrope_by_hand(positions, sections, base)
    cos, sin = layer.cos_sin(positions, dtype=np.float64)
    assert_close_ulp(cos, np.cos(theta), ulps=4, scale=np.maximum(np.abs(theta), 1))
    assert_close_ulp(sin, np.sin(theta), ulps=4, scale=np.maximum(np.abs(theta), 1))
    note = layer.notes[-1]
    assert "[2 * s for s in mrope_section]" in note
    assert "pairs 0-1 turns with position and channel k + 8 with height" in note
    assert "pairs 2-3: width and image_index; pairs 4-7: height and image_index" in note


def test_hunyuan_vl_with_three_axes_and_without_sections() -> None:
    three = rope_plan({"model_type": "hunyuan_vl_text", "head_dim": 12,
                       "rope_parameters": {"mrope_section": [2, 2, 2]}}).layer()  # fmt: skip
    assert three.axes == ("width", "height", "image_index")
    plain = rope_plan({"model_type": "hunyuan_vl_text", "head_dim": 12, "rope_theta": 1e4}).layer()
    assert plain.axes == ()  # no sections: 1-D RoPE
    with pytest.raises(ValueError, match=r"xdrope_section must give at least 3 sections.*got 2"):
        rope_plan({"model_type": "hunyuan_vl_text", "head_dim": 8,
                   "rope_parameters": {"xdrope_section": [2, 2]}})  # fmt: skip


def test_forms_without_a_table_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"'nanochat'.*by -θ"):
        rope_plan({"model_type": "nanochat", "head_dim": 16, "rope_theta": 1e4})


def test_a_layer_s_order_and_interleaved_sections_agree() -> None:
    layer = rope_plan(ernie([3, 3, 2])).layer()
    with pytest.raises(ValueError, match=r"interleaved_sections=True contradicts order"):
        dataclasses.replace(layer, interleaved_sections=True)


def _kolibri(model_type: str, layer_types: list[str], sliding_window: int | None) -> dict:
    return {
        "model_type": model_type, "head_dim": 8, "num_hidden_layers": len(layer_types),
        "layer_types": layer_types, "sliding_window": sliding_window,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }  # fmt: skip


def test_kolibri_s_global_layers_use_no_positions_beside_sliding_ones() -> None:
    """Kolibri 1: ``if self.sliding_window is None or self.is_sliding`` rotate; with a window,
    the other layers are global NoPE."""
    types = ["sliding_attention", "full_attention", "sliding_attention"]
    plan = rope_plan(_kolibri("kolibri1", types, 513))
    assert [layer.uses_positions for layer in plan] == [True, False, True]
    assert "NoPE" in plan.layer("full_attention").notes[0]
    unwindowed = rope_plan(_kolibri("kolibri1", types, None))
    assert all(layer.uses_positions for layer in unwindowed)


def test_kolibri_1_1_s_indexed_layers_use_no_positions() -> None:
    types = ["sliding_attention", "indexed_attention", "sliding_attention"]
    plan = rope_plan(_kolibri("kolibri1_1", types, 513))
    assert [layer.uses_positions for layer in plan] == [True, False, True]
    assert "NoPE" in plan.layer("indexed_attention").notes[0]


def _granite_swa(thetas: object) -> dict:
    return {
        "model_type": "granite_swa", "head_dim": 8, "num_hidden_layers": 4,
        "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                        "sliding_attention"],
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "layer_rope_theta": thetas,
    }  # fmt: skip


def test_a_per_layer_list_of_bases_gives_each_layer_its_base_and_zero_no_rope() -> None:
    """GraniteSWA (transformers 5.25): ``layer_rope_theta``, one base per layer, 0 for NoPE,
    over the rope parameters' ``rope_theta``."""
    plan = rope_plan(_granite_swa([10000.0, 0, 500000.0, 10000]))
    assert [layer.uses_positions for layer in plan] == [True, False, True, True]
    assert [layer.base for layer in plan if layer.uses_positions] == [1e4, 5e5, 1e4]
    np.testing.assert_array_equal(plan[2].frequencies, rotary_cos_sin_frequencies(8, 5e5))
    assert "layer_rope_theta[1] is 0" in plan[1].notes[0]


def rotary_cos_sin_frequencies(dim: int, base: float) -> np.ndarray:
    return base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)


@pytest.mark.parametrize(
    ("thetas", "error", "message"),
    [
        ([1e4, 1e4], ValueError, "layer_rope_theta has 2 entries"),
        ([1e4, -1.0, 1e4, 1e4], ValueError, r"layer_rope_theta\[1\]"),
        ([1e4, float("nan"), 1e4, 1e4], ValueError, r"layer_rope_theta\[1\]"),
        ("10000", TypeError, "layer_rope_theta must be a list"),
    ],
)
def test_bad_per_layer_bases_are_refused_by_name(thetas: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        rope_plan(_granite_swa(thetas))
