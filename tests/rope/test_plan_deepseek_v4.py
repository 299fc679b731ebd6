"""DeepSeek-V4's plan: its rope parameters are keyed by branch (``main`` for the sliding-window
layers, ``compress`` for the compressed ones), its ``config.json`` spells them flat (one
``rope_scaling`` and a ``compress_rope_theta``, per-layer ``compress_ratios``), and YaRN applies
to the compressed layers only. The closed-form checks are those of MaxText's
``tests/unit/deepseek_v4_rope_test.py`` (the case, not its code), with V4-Flash's numbers:
rope dim 64, compressed θ 160,000 with YaRN (factor 16, β_fast 32, β_slow 1, original context
65,536), main θ 10,000 without."""

from __future__ import annotations

import math

import numpy as np
import pytest

import posenc

#: V4-Flash's settings as its config.json writes them (sizes cut to four layers).
FLASH_JSON = {
    "model_type": "deepseek_v4",
    "head_dim": 512,
    "qk_rope_head_dim": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "hidden_size": 1024,
    "compress_ratios": [0, 4, 128, 4],
    "rope_theta": 10000.0,
    "compress_rope_theta": 160000.0,
    "rope_scaling": {
        "type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
        "beta_fast": 32, "beta_slow": 1,
    },
    "max_position_embeddings": 1048576,
}  # fmt: skip

#: The same model as transformers 5.x's DeepseekV4Config holds it: nested by branch.
FLASH_NESTED = {
    "model_type": "deepseek_v4",
    "head_dim": 512,
    "num_hidden_layers": 4,
    "layer_types": [
        "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
        "compressed_sparse_attention",
    ],
    "rope_parameters": {
        "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.125},
        "compress": {
            "rope_type": "yarn", "rope_theta": 160000.0, "partial_rotary_factor": 0.125,
            "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32,
            "beta_slow": 1, "attention_factor": 1.0,
        },
    },
    "max_position_embeddings": 1048576,
}  # fmt: skip


@pytest.mark.parametrize("config", [FLASH_JSON, FLASH_NESTED], ids=["config.json", "nested"])
def test_each_layer_gets_its_branch(config: dict) -> None:
    plan = posenc.rope_plan(config)
    assert [layer.layer_type for layer in plan] == ["main", "compress", "compress", "compress"]
    main, compress = plan[0], plan[1]
    assert (main.rope_type, main.base, main.rotary_dim, main.pairs) == (
        "default", 10000.0, 64, "interleaved"
    )  # fmt: skip
    assert (compress.rope_type, compress.base, compress.rotary_dim) == ("yarn", 160000.0, 64)
    assert compress.attention_factor == 1.0  # V4 does not scale cos/sin by YaRN's mscale
    assert main.head_dim == compress.head_dim == 512


def test_the_config_json_and_the_nested_form_give_the_same_tables() -> None:
    flat, nested = posenc.rope_plan(FLASH_JSON), posenc.rope_plan(FLASH_NESTED)
    positions = np.array([0, 1, 4095, 65535, 1048575])
    for a, b in zip(flat, nested, strict=True):
        for x, y in zip(a.cos_sin(positions), b.cos_sin(positions), strict=True):
            np.testing.assert_array_equal(x, y)


def test_the_default_rope_type_is_the_unscaled_schedule_bit_for_bit() -> None:
    """MaxText: the default rope type equals the unscaled baseline."""
    main = posenc.rope_plan(FLASH_NESTED).layer("main")
    np.testing.assert_array_equal(main.frequencies, posenc.rope_frequencies(64, base=10000.0)[0])


def _correction_band(truncate: bool) -> tuple[float, float]:
    def dim_at(rotations: float) -> float:
        return 64 * math.log(65536 / (rotations * 2 * math.pi)) / (2 * math.log(160000.0))

    low, high = dim_at(32), dim_at(1)
    return (math.floor(low), math.ceil(high)) if truncate else (low, high)


def test_the_yarn_correction_band_of_the_compressed_layers_is_pairs_15_to_25() -> None:
    """Derived: ``dim·ln(L / (β·2π)) / (2·ln θ)`` for β 32 and 1 is 15.45 and 24.71, floored
    and ceiled (``truncate``) to pairs 15 and 25."""
    assert _correction_band(True) == (15, 25)
    low, high = _correction_band(False)
    assert 15.4 < low < 15.5
    assert 24.7 < high < 24.8


@pytest.mark.parametrize("truncate", [True, False])
def test_yarn_keeps_the_fast_pairs_divides_the_slow_ones_and_ramps_between(truncate: bool) -> None:
    """MaxText: YaRN leaves the high-frequency pairs untouched, divides the low-frequency ones
    by the factor, and ramps monotonically between."""
    config = {**FLASH_NESTED, "rope_parameters": dict(FLASH_NESTED["rope_parameters"])}
    config["rope_parameters"]["compress"] = {
        **FLASH_NESTED["rope_parameters"]["compress"], "truncate": truncate
    }  # fmt: skip
    scaled = posenc.rope_plan(config).layer("compress").frequencies
    plain = posenc.rope_frequencies(64, base=160000.0)[0]
    low, high = _correction_band(truncate)
    pairs = np.arange(32)
    fast, slow = pairs < math.floor(low), pairs > math.ceil(high)
    np.testing.assert_array_equal(scaled[fast], plain[fast])
    np.testing.assert_allclose(scaled[slow], plain[slow] / 16, rtol=1e-15)
    ratio = scaled / plain
    assert np.all(np.diff(ratio) <= 0)  # from 1 down to 1/16, never back
    assert ratio[16] < 1
    assert ratio[24] > 1 / 16


def test_the_plan_notes_where_transformers_reads_truncate_elsewhere() -> None:
    """transformers 5 reads YaRN's ``truncate`` from the top level of ``rope_parameters`` (for
    V4 it holds only ``main`` and ``compress``: absent, so True); the plan follows the layer's
    own setting and says so."""
    config = {**FLASH_NESTED, "rope_parameters": dict(FLASH_NESTED["rope_parameters"])}
    config["rope_parameters"]["compress"] = {
        **FLASH_NESTED["rope_parameters"]["compress"], "truncate": False
    }  # fmt: skip
    plan = posenc.rope_plan(config)
    notes = " ".join(plan.notes)
    assert "truncate=False" in notes, plan.notes
    assert "'compress' layers" in notes, plan.notes
    assert not any("truncate" in n for n in posenc.rope_plan(FLASH_NESTED).notes)


def test_compressed_positions_are_the_first_token_of_each_closed_window() -> None:
    """An entry compressing tokens ``n·r .. n·r + r − 1`` sits at ``n·r`` (``write_pos + 1 −
    ratio``, the position of its window's last token plus one, less the ratio)."""
    np.testing.assert_array_equal(posenc.compressed_positions(10, 4), [0, 4])
    np.testing.assert_array_equal(posenc.compressed_positions(17, 4, emitted=2), [8, 12])
    assert posenc.compressed_positions(3, 4).shape == (0,)
    with pytest.raises(ValueError, match="ratio must be an integer >= 1, got 0"):
        posenc.compressed_positions(8, 0)
    with pytest.raises(ValueError, match="emitted"):
        posenc.compressed_positions(8, 4, emitted=3)


@pytest.mark.parametrize(
    ("ratios", "error", "message"),
    [
        ([0, 4], ValueError, "compress_ratios has 2 entries, fewer than num_hidden_layers = 4"),
        ([0, 4, 5, 4], ValueError, r"compress_ratios\[2\] must be one of \(0, 4, 128\)"),
        ("0,4", TypeError, "compress_ratios must be a list of integers"),
        ([0, 4.5, 128, 4], TypeError, r"compress_ratios\[1\] must be an integer"),
    ],
)
def test_bad_compress_ratios_are_refused_by_name(ratios: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        posenc.rope_plan({**FLASH_JSON, "compress_ratios": ratios})


def test_the_next_token_prediction_layers_ratios_are_cut_as_transformers_cuts_them() -> None:
    plan = posenc.rope_plan({**FLASH_JSON, "compress_ratios": [0, 4, 128, 4, 4]})
    assert len(plan) == 4
