"""The three per-layer schemas of rope settings, read by one module (``config_values``):
parameter sets nested by layer type (``None`` for a type without RoPE), sets keyed by another
label (DeepSeek-V4's ``main``/``compress``), and per-layer lists (``layer_rope_theta``)."""

from __future__ import annotations

import pytest

import posenc

#: LFM3's layout: convolution blocks between attention layers of two kinds.
LFM3 = {
    "model_type": "lfm3",
    "head_dim": 16,
    "layer_types": ["conv", "full_attention", "conv", "sliding_attention"],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {
            "rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5
        },
    },
}  # fmt: skip


def test_layer_types_that_are_not_attention_need_no_parameter_set() -> None:
    """LFM3's nested parameters name its attention types only: its conv layers get a plan
    entry without positions (the plan had no layers at all)."""
    plan = posenc.rope_plan(LFM3)
    assert [layer.layer_type for layer in plan] == LFM3["layer_types"]
    assert [layer.uses_positions for layer in plan] == [False, True, False, True]
    assert plan[1].rope_type == "proportional"
    assert plan[3].base == 10000.0
