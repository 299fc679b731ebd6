"""Position-dependent attention temperature: each kind's published formula in float64, the
temperature each config gives its layers in the plan, and bad input. Against transformers'
own function (Ministral 3's ``get_llama_4_attn_scale``): tests/references/hf/test_temperature.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import posenc

POSITIONS = np.array([0, 1, 8190, 8191, 8192, 16383, 16384, 10**6, 2**53])


def test_llama4_is_one_plus_attn_scale_times_log1p_of_the_floor() -> None:
    got = posenc.attention_temperature(POSITIONS, "llama4", attn_scale=0.1, floor_scale=8192)
    want = [1 + 0.1 * math.log1p(math.floor((p + 1) / 8192)) for p in POSITIONS.tolist()]
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert got[3] > got[2] == 1.0  # position 8191 is the first past the floor


def test_llama4_beta_steps_at_each_multiple_of_the_original_length() -> None:
    got = posenc.attention_temperature(
        POSITIONS, "llama4_beta", beta=0.1, original_max_position_embeddings=16384
    )
    want = [1 + 0.1 * math.log(1 + math.floor(p / 16384)) for p in POSITIONS.tolist()]
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert got[5] == 1.0 < got[6]


def test_log_scaling_grows_with_the_log_of_the_length_past_its_floor() -> None:
    """Inkling2-loop's ``τ = 1 + 0.1·ln(max((p+1)/8192, 1))``."""
    got = posenc.attention_temperature(POSITIONS, "log", alpha=0.1, n_floor=8192)
    want = [1 + 0.1 * math.log(max((p + 1) / 8192, 1.0)) for p in POSITIONS.tolist()]
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_a_length_gives_positions_from_zero_and_constant_is_constant() -> None:
    np.testing.assert_array_equal(posenc.attention_temperature(3, "constant", scale=2.0), [2] * 3)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: posenc.attention_temperature(3, "nope"), ValueError, "kind must be one of"),
        (lambda: posenc.attention_temperature(3, "log", alpha=0.1), TypeError, "n_floor"),
        (lambda: posenc.attention_temperature(3, "log", alpha=0.1, n_floor=0), ValueError,
         "n_floor of kind 'log' must be a finite number > 0"),
        (lambda: posenc.attention_temperature(3, "log", alpha=math.nan, n_floor=8), ValueError,
         "alpha of kind 'log' must be a finite number"),
        (lambda: posenc.attention_temperature(3, "constant", scale="2"), TypeError, "scale"),
        (lambda: posenc.attention_temperature([0.5], "constant", scale=2.0), TypeError,
         "positions must be integers"),
        (lambda: posenc.attention_temperature([-1], "constant", scale=2.0), ValueError,
         "positions must lie in"),
        (lambda: posenc.attention_temperature(-1, "constant", scale=2.0), ValueError,
         "positions must be an integer >= 0"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_by_name(call, error: type, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        call()


def _config(model_type: str, **extra: object) -> dict:
    return {"model_type": model_type, "head_dim": 8, "num_hidden_layers": 4, **extra}


def test_llama4_puts_its_temperature_on_the_layers_without_rope() -> None:
    plan = posenc.rope_plan(_config(
        "llama4_text", rope_theta=5e5, no_rope_layers=[1, 1, 1, 0],
        attn_temperature_tuning=True, floor_scale=8192, attn_scale=0.1,
    ))  # fmt: skip
    assert [layer.temperature is not None for layer in plan] == [False, False, False, True]
    scale = plan[3].temperature.at([0, 10**6])  # type: ignore[union-attr]
    np.testing.assert_array_equal(
        scale, posenc.attention_temperature([0, 10**6], "llama4", attn_scale=0.1, floor_scale=8192)
    )
    off = posenc.rope_plan(_config(
        "llama4_text", rope_theta=5e5, no_rope_layers=[1, 1, 1, 0], attn_temperature_tuning=False,
    ))  # fmt: skip
    assert all(layer.temperature is None for layer in off)


def test_ministral3_scales_the_queries_of_every_layer() -> None:
    rope = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 16384,
            "rope_theta": 1e6, "llama_4_scaling_beta": 0.1}  # fmt: skip
    plan = posenc.rope_plan(_config("ministral3", rope_parameters=rope))
    kinds = {layer.temperature.kind for layer in plan if layer.temperature is not None}
    assert kinds == {"llama4_beta"}
    assert len([layer for layer in plan if layer.temperature]) == 4
    assert dict(plan[0].temperature.params) == {  # type: ignore[union-attr]
        "beta": 0.1,
        "original_max_position_embeddings": 16384.0,
    }


def test_log_scaling_is_on_the_non_sliding_layers() -> None:
    plan = posenc.rope_plan(_config(
        "inkling_text", rope_theta=1e4, log_scaling_n_floor=8192, log_scaling_alpha=0.1,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    ))  # fmt: skip
    assert [layer.temperature is not None for layer in plan] == [False, True, False, True]


def test_ergo_s_full_layers_scale_q_and_k_by_the_root_of_its_scale() -> None:
    plan = posenc.rope_plan(_config(
        "ergo", layer_types=["sliding_attention", "full_attention"] * 2, global_attention_scale=4.0,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 1e6},
                         "full_attention": None},
    ))  # fmt: skip
    full = plan.layer("full_attention")
    assert not full.uses_positions
    assert full.temperature is not None
    assert full.temperature.scales == "queries and keys"
    np.testing.assert_array_equal(full.temperature.at(2), [2.0, 2.0])
    assert plan.layer("sliding_attention").temperature is None


def test_a_model_without_temperature_has_none() -> None:
    plan = posenc.rope_plan(_config("llama", rope_theta=1e4))
    assert all(layer.temperature is None for layer in plan)
