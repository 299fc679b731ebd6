"""Configs and dicts as users write them: Hugging Face rope parameters taken as written, and
every value read from a config checked for type, finiteness and range, naming its key."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import posenc
from tests.configs import LLAMA3_ROPE_PARAMETERS as LLAMA3

# -- a rope_parameters dict copied from a config: its rope_theta is the base -----------------


def test_rope_frequencies_takes_rope_theta_as_the_base():
    omega, _ = posenc.rope_frequencies(128, scaling=LLAMA3)
    expected, _ = posenc.rope_frequencies(128, base=500000.0, scaling=LLAMA3)
    np.testing.assert_array_equal(omega, expected)
    assert omega[1] == pytest.approx(500000.0 ** (-2 / 128))


def test_rotary_cos_sin_takes_rope_theta_as_the_base():
    cos, sin = posenc.rotary_cos_sin(5, 128, scaling=LLAMA3)
    cos_b, sin_b = posenc.rotary_cos_sin(5, 128, base=500000.0, scaling=LLAMA3)
    np.testing.assert_array_equal(cos, cos_b)
    np.testing.assert_array_equal(sin, sin_b)


def test_multi_axis_takes_rope_theta_as_the_base():
    made = posenc.multi_axis_frequencies((2, 1, 1), scaling={"rope_theta": 100.0})
    expected = posenc.multi_axis_frequencies((2, 1, 1), base=100.0)
    np.testing.assert_array_equal(made.frequencies, expected.frequencies)


def test_a_conflict_needs_both():
    with pytest.raises(ValueError, match=r"rope_theta'\] = 500000.0 differs from base = 10000.0"):
        posenc.rope_frequencies(128, base=10000.0, scaling=LLAMA3)


def test_default_base_without_rope_theta():
    omega, _ = posenc.rope_frequencies(8)
    np.testing.assert_allclose(omega, [1.0, 0.1, 0.01, 0.001])


# -- every value read from a config is checked, naming its key --------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from posenc._rope.config_values import TOP_KEYS  # noqa: E402
from posenc._rope.records import records  # noqa: E402

#: Valid parameters of each registered rope_type, to which one hostile value is added.
VALID = {
    "default": {},
    "linear": {"factor": 2.0},
    "dynamic": {"factor": 2.0, "original_max_position_embeddings": 64},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 64},
    "llama3": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
    "longrope": {
        "short_factor": [1.0] * 8,
        "long_factor": [2.0] * 8,
        "original_max_position_embeddings": 64,
        "factor": 4.0,
    },
    "proportional": {"factor": 1.0, "partial_rotary_factor": 0.5},
    "ntk_alpha": {"alpha": 2.0},
}

HOSTILE = [
    float("nan"),
    float("inf"),
    -float("inf"),
    1e308,
    1e300,
    -1.0,
    0.0,
    1e-300,
    True,
    "8",
    8.5,
    [],
    {},
    2**64,
    10**400,
]

hostile = st.one_of(
    st.sampled_from(HOSTILE),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=3),
    st.lists(st.floats(allow_nan=True), max_size=3),
)


def _outcome(call: Any) -> Any:
    """What ``call()`` returns, or the exception it raises (any kind: the test judges it)."""
    try:
        return call()
    except Exception as exc:
        return exc


def _refused_by_name(exc: BaseException, *names: str) -> bool:
    return isinstance(exc, TypeError | ValueError) and any(n in str(exc) for n in names)


def test_every_rope_type_is_in_the_hostile_table():
    assert {r.name for r in records()} == set(VALID)


@pytest.mark.parametrize("record", records(), ids=lambda r: r.name)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_hostile_scaling_values_are_refused_by_name_or_give_finite_tables(record, data):
    key = data.draw(
        st.sampled_from([*record.keys, "rope_theta", "partial_rotary_factor"]), label="key"
    )
    value = data.draw(hostile, label="value")
    params = {"rope_type": record.name, **VALID[record.name], key: value}
    # rope_theta is the base: messages of the scaled base name it as such
    names = (key, "base") if key == "rope_theta" else (key,)
    outcome = _outcome(
        lambda: (
            posenc.rope_frequencies(16, scaling=params, seq_len=1000),
            posenc.rotary_cos_sin(200, 16, scaling=params, dtype=np.float16),
        )
    )
    if isinstance(outcome, BaseException):
        assert _refused_by_name(outcome, *names), f"{key}={value!r}: {outcome!r}"
        return
    (omega, attention), (cos, sin) = outcome
    assert np.isfinite(omega).all()
    assert 0 < attention <= 2**15
    assert np.isfinite(cos).all()
    assert np.isfinite(sin).all()


CONFIG = {
    "model_type": "llama",
    "head_dim": 8,
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_hidden_layers": 4,
    "max_position_embeddings": 128,
    "rope_theta": 10000.0,
}


@pytest.mark.parametrize("key", sorted(TOP_KEYS))
@settings(max_examples=25, deadline=None)
@given(value=hostile)
def test_hostile_top_level_values_are_refused_by_name(key, value):
    config = {**CONFIG, key: value}
    plan = _outcome(lambda: posenc.rope_plan(config))
    if isinstance(plan, BaseException):
        assert _refused_by_name(plan, key), f"{key}={value!r}: {plan!r}"
        return
    for layer in plan.kinds.values():
        assert np.isfinite(layer.frequencies).all()


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"mrope_section": [2.9, 1.5, 1]}, TypeError, r"mrope_section\[0\] must be an integer"),
        ({"mrope_section": "211"}, TypeError, r"mrope_section must be a list of integers"),
        ({"mrope_section": [float("inf"), 1, 1]}, TypeError, r"mrope_section\[0\]"),
        ({"mrope_section": [True, 1, 2]}, TypeError, r"mrope_section\[0\]"),
        ({"qk_rope_head_dim": 8.5}, TypeError, r"config.qk_rope_head_dim must be an integer"),
        ({"qk_rope_head_dim": "8"}, TypeError, r"config.qk_rope_head_dim must be an integer"),
        ({"layer_types": {"full_attention": 1}}, TypeError, r"config.layer_types must be a list"),
        ({"no_rope_layer_interval": 0}, ValueError, r"config.no_rope_layer_interval must be"),
        ({"no_rope_layers": [1, 0]}, ValueError, r"no_rope_layers has 2 entries but config"),
        ({"mrope_interleaved": "yes"}, TypeError, r"mrope_interleaved must be true or false"),
        ({"rotary_pct": 1.5}, ValueError, r"config.rotary_pct must be a number in \(0, 1\]"),
    ],
)
def test_malformed_config_values_are_refused(change, error, message):
    config = {**CONFIG, "model_type": "qwen2_vl_text", "num_hidden_layers": 4, **change}
    if "mrope_section" in change:
        config["rope_parameters"] = {
            "rope_type": "default",
            "mrope_section": change.pop("mrope_section"),
        }
        config.pop("mrope_section")
    with pytest.raises(error, match=message):
        posenc.rope_plan(config)


@pytest.mark.parametrize(
    "change",
    [{"max_position_embeddings": 1200.0}, {"num_hidden_layers": 4.0}, {"head_dim": np.float64(8)}],
)
def test_integral_floats_are_read_as_integers(change):
    """transformers writes some integer fields as floats (MusicFlamingoConfig's
    max_position_embeddings is 1200.0): an integral value is the integer it names."""
    ((name, value),) = change.items()
    plan = posenc.rope_plan({**CONFIG, name: value})
    same = posenc.rope_plan({**CONFIG, name: int(value)})
    assert repr(plan) == repr(same)
    assert plan.layers == same.layers
    read = plan.layers[0].head_dim
    assert read == (8 if name != "head_dim" else int(value))
    assert type(read) is int


@pytest.mark.parametrize("value", [1200.5, float("nan"), float("inf"), True, "1200", 2.0**60])
def test_non_integral_values_of_integer_fields_are_still_refused(value):
    with pytest.raises((TypeError, ValueError), match="max_position_embeddings must be an int"):
        posenc.rope_plan({**CONFIG, "max_position_embeddings": value})


def test_music_flamingo_config_as_transformers_writes_it():
    """Its max_position_embeddings is 1200.0 (transformers sets it to the rope_theta)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.MusicFlamingoConfig()
    assert isinstance(config.max_position_embeddings, float)  # else this test tests nothing
    plan = posenc.rope_plan(config)  # its angles come from timestamps: the harness says so
    assert plan.kinds


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"attention_factor": 1e308},
            r"scaling\['attention_factor'\] must be a number in \(0, 2\*\*15\]",
        ),
        ({"beta_fast": 1e308}, r"scaling\['beta_fast'\] must be a number in \[2\*\*-64, 2\*\*64\]"),
        (
            {"beta_slow": 1e-308},
            r"scaling\['beta_slow'\] must be a number in \[2\*\*-64, 2\*\*64\]",
        ),
    ],
)
def test_yarn_values_that_broke_the_tables_are_refused(params, message):
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    with pytest.raises(ValueError, match=message):
        posenc.rotary_cos_sin(4, 16, scaling={**yarn, **params})


def test_a_huge_ntk_alpha_is_refused_by_name():
    with pytest.raises(ValueError, match=r"scaling\['alpha'\] = 1e\+300 .* overflows float64"):
        posenc.rope_frequencies(16, scaling={"rope_type": "ntk_alpha", "alpha": 1e300})


def test_a_tiny_partial_rotary_factor_is_named():
    with pytest.raises(ValueError, match=r"scaling\['partial_rotary_factor'\] = 1e-300 rotates"):
        posenc.rotary_cos_sin(4, 16, scaling={"partial_rotary_factor": 1e-300})


def test_qwen2_5_omni_talker_uses_its_model_default_sections():
    """Qwen2_5OmniRotaryEmbedding (the talker's too) defaults mrope_section to [16, 24, 24]."""
    talker = {
        "model_type": "qwen2_5_omni_talker",
        "head_dim": 128,
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "num_hidden_layers": 2,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
    }
    layer = posenc.rope_plan(talker).layer()
    assert layer.axes == ("temporal", "height", "width")
    assert layer.sections == (16, 24, 24)
    assert not layer.interleaved_sections


@pytest.mark.parametrize("bad", ["32", 32.5, True, 0, None])
def test_a_per_layer_head_dim_is_checked_by_key(bad) -> None:  # type: ignore[no-untyped-def]
    config = {
        "hidden_size": 128,
        "num_attention_heads": 8,
        "rope_theta": 10000.0,
        "layer_types": ["sliding_attention", "full_attention", "full_attention"],
        "per_layer_config": {"02": {"head_dim": bad}},
    }
    if bad is None:  # null: the layer keeps the model's head_dim
        assert [x.head_dim for x in posenc.rope_plan(config)] == [16, 16, 16]
        return
    with pytest.raises((TypeError, ValueError), match=r"per_layer_config\[2\]\.head_dim"):
        posenc.rope_plan(config)
