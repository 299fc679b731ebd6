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


NAN = float("nan")

GEMMA3 = {
    "model_type": "gemma3_text",
    "head_dim": 8,
    "num_hidden_layers": 3,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
}

V4 = {
    "model_type": "deepseek_v4",
    "head_dim": 64,
    "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "compressed_sparse_attention"],
    "rope_parameters": {
        "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        "compress": {
            "rope_type": "yarn", "rope_theta": 160000.0, "partial_rotary_factor": 0.5,
            "factor": 16.0, "original_max_position_embeddings": 64,
        },
    },
}  # fmt: skip

GRANITE = {
    "model_type": "granite_swa",
    "head_dim": 8,
    "num_hidden_layers": 4,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    "layer_rope_theta": [10000.0, 0, 500.0, 10000.0],
}


def _sets(config: dict, **sets: object) -> dict:
    return {**config, "rope_parameters": {**config["rope_parameters"], **sets}}


def _set(config: dict, label: str, **params: object) -> dict:
    return _sets(config, **{label: {**config["rope_parameters"][label], **params}})


@pytest.mark.parametrize(
    ("config", "error", "message"),
    [
        # nested by layer type
        (_sets(GEMMA3, sliding_attention=NAN), TypeError,
         r"config.rope_parameters\['sliding_attention'\] must be a dict of rope parameters"),
        (_sets(GEMMA3, full_attention="linear"), TypeError,
         r"rope_parameters\['full_attention'\] must be a dict .* got 'linear' \(str\)"),
        (_sets(GEMMA3, full_attention=[8.0]), TypeError, r"rope_parameters\['full_attention'\]"),
        ({**GEMMA3, "rope_parameters": {1: {"rope_type": "default"}, "x": {}}}, TypeError,
         r"config.rope_parameters is nested by layer type: its keys must be strings, got 1"),
        (_set(GEMMA3, "full_attention", rope_theta=NAN), ValueError,
         r"rope_parameters\['full_attention'\]: rope_theta must be a positive finite number"),
        (_set(GEMMA3, "sliding_attention", rope_theta="1e4"), TypeError,
         r"rope_parameters\['sliding_attention'\]: rope_theta must be"),
        (_set(GEMMA3, "full_attention", factor=NAN), ValueError,
         r"rope_parameters\['full_attention'\].*factor"),
        ({**GEMMA3, "layer_types": ["sliding_attention", "chunked_attention", "full_attention"]},
         ValueError, r"config.layer_types\[1\] = 'chunked_attention' names no parameter set of "
         r"config.rope_parameters, which has \['full_attention', 'sliding_attention'\]"),
        ({**GEMMA3, "num_hidden_layers": 4}, ValueError,
         r"config.layer_types has 3 entries but config.num_hidden_layers is 4"),
        ({**GEMMA3, "layer_types": "sliding_attention"}, TypeError,
         r"config.layer_types must be a list of strings"),
        # keyed by another label (DeepSeek-V4: main, compress)
        ({**V4, "rope_parameters": {"main": V4["rope_parameters"]["main"],
                                    "compres": V4["rope_parameters"]["compress"]}},
         ValueError, r"config.layer_types\[1\] = 'compressed_sparse_attention' \(read as "
         r"'compress'\) names no parameter set of config.rope_parameters, which has "
         r"\['compres', 'main'\]"),
        ({**V4, "layer_types": ["sliding_attention", "mystery_attention"]}, ValueError,
         r"config.layer_types\[1\] = 'mystery_attention' names no parameter set"),
        (_sets(V4, compress=16.0), TypeError, r"rope_parameters\['compress'\] must be a dict"),
        (_set(V4, "compress", factor=NAN), ValueError, r"rope_parameters\['compress'\].*factor"),
        (_set(V4, "main", partial_rotary_factor=1.5), ValueError,
         r"rope_parameters\['main'\].*partial_rotary_factor"),
        # per-layer lists
        ({**GRANITE, "layer_rope_theta": [10000.0, NAN, 500.0, 10000.0]}, ValueError,
         r"config.layer_rope_theta\[1\] must be a finite number >= 0 \(0: no RoPE\), got nan"),
        ({**GRANITE, "layer_rope_theta": [10000.0, -1.0, 500.0, 10000.0]}, ValueError,
         r"config.layer_rope_theta\[1\] must be a finite number >= 0"),
        ({**GRANITE, "layer_rope_theta": [10000.0, "0", 500.0, 10000.0]}, TypeError,
         r"config.layer_rope_theta\[1\]"),
        ({**GRANITE, "layer_rope_theta": [10000.0, True, 500.0, 10000.0]}, TypeError,
         r"config.layer_rope_theta\[1\]"),
        ({**GRANITE, "layer_rope_theta": [10000.0, 0, 500.0]}, ValueError,
         r"config.layer_rope_theta has 3 entries but config.num_hidden_layers is 4"),
        ({**GRANITE, "layer_rope_theta": "10000"}, TypeError,
         r"config.layer_rope_theta must be a list of numbers"),
        ({**GRANITE, "layer_rope_theta": {"0": 10000.0}}, TypeError,
         r"config.layer_rope_theta must be a list of numbers"),
        ({**GRANITE, "no_rope_layers": [1, 0, 2, 1]}, ValueError, r"no_rope_layers\[2\]"),
        ({**GRANITE, "no_rope_layers": [1, 0, 1]}, ValueError,
         r"config.no_rope_layers has 3 entries but config.num_hidden_layers is 4"),
    ],
)  # fmt: skip
def test_hostile_per_layer_values_are_refused_naming_the_key(
    config: dict, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        posenc.rope_plan(config)


def test_each_schema_reads_its_layers() -> None:
    assert [x.base for x in posenc.rope_plan(GEMMA3)] == [10000.0, 10000.0, 1000000.0]
    assert [x.layer_type for x in posenc.rope_plan(V4)] == ["main", "compress"]
    granite = posenc.rope_plan(GRANITE)
    assert [x.base if x.uses_positions else None for x in granite] == [1e4, None, 500.0, 1e4]
    none = posenc.rope_plan(_sets(GEMMA3, full_attention=None))
    assert [x.uses_positions for x in none] == [True, True, False]
