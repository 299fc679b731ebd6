"""Tests of the RoPE scalings of the NumPy core (``posenc/_rope/scaling.py`` and its families):
``rope_frequencies`` under each rope type, ``rope_scaling`` specs, and the attention factor the
tables carry. References are written here independently of posenc, with Python's ``math``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from posenc import ROPE_TYPES, RopeScaling, rope_frequencies, rope_scaling, rotary_cos_sin
from tests.configs import DYNAMIC, LLAMA3_ROPE_SCALING, LONGROPE, YARN
from tests.rope.formulas import plain_omega, reference_tables
from tests.tolerance import assert_close_ulp

# -- scalings: frequencies -------------------------------------------------------------------------


def test_default_frequencies_and_rope_type_default():
    omega, attention = rope_frequencies(64, base=500000.0)
    want = plain_omega(64, 500000.0)
    # frequencies from two float64 formulas: an ulp or two of each ω, relative
    assert_close_ulp(omega, want, ulps=4, scale=want)
    assert attention == 1.0
    same = rope_frequencies(64, base=500000.0, scaling={"rope_type": "default", "rope_theta": 5e5})
    np.testing.assert_array_equal(same[0], omega)


def test_linear_divides_by_factor():
    omega, attention = rope_frequencies(32, scaling={"rope_type": "linear", "factor": 4})
    np.testing.assert_array_equal(omega, rope_frequencies(32)[0] / 4)
    assert attention == 1.0


def test_dynamic_ntk_changes_the_base_only_beyond_the_original_length():
    plain = rope_frequencies(32)[0]
    for seq_len in (None, 0, 100, 512):
        np.testing.assert_array_equal(
            rope_frequencies(32, scaling=DYNAMIC, seq_len=seq_len)[0], plain
        )
    for seq_len in (513, 2048, 100_000):
        omega, attention = rope_frequencies(32, scaling=DYNAMIC, seq_len=seq_len)
        new_base = 10000.0 * (4.0 * seq_len / 512 - 3.0) ** (32 / 30)
        # frequencies from two float64 formulas: a few ulps of each ω, relative
        want = plain_omega(32, new_base)
        assert_close_ulp(omega, want, ulps=4, scale=want)
        assert attention == 1.0
        assert omega[0] == 1.0
        assert np.all(omega[1:] < plain[1:])
    # the length may come from the model's max_position_embeddings, as in transformers
    alias = {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 512}
    np.testing.assert_array_equal(
        rope_frequencies(32, scaling=alias, seq_len=2048)[0],
        rope_frequencies(32, scaling=DYNAMIC, seq_len=2048)[0],
    )


def llama3_reference(omega, factor, low, high, original):
    out = []
    for w in omega:
        wavelength = 2 * math.pi / w
        if wavelength < original / high:
            out.append(w)
        elif wavelength > original / low:
            out.append(w / factor)
        else:
            smooth = (original / wavelength - low) / (high - low)
            out.append((1 - smooth) * w / factor + smooth * w)
    return out


def test_llama3_keeps_high_divides_low_and_blends_medium_frequencies():
    omega, attention = rope_frequencies(128, base=500000.0, scaling=LLAMA3_ROPE_SCALING)
    plain = plain_omega(128, 500000.0)
    expected = llama3_reference(plain, 8.0, 1.0, 4.0, 8192)
    # frequencies from two float64 formulas: a few ulps of each ω, relative
    assert_close_ulp(omega, expected, ulps=4, scale=expected)
    assert attention == 1.0
    ratio = np.asarray(plain) / omega
    assert ratio[0] == 1.0
    assert ratio[-1] == pytest.approx(8.0)
    assert np.any((ratio > 1.0) & (ratio < 8.0))  # some medium frequencies were blended
    assert np.all(np.diff(ratio) >= -1e-12)


def yarn_reference(dim, base, factor, original, beta_fast=32.0, beta_slow=1.0, truncate=True):
    def correction(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction(beta_fast), correction(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    out = []
    for k, w in enumerate(plain_omega(dim, base)):
        ramp = min(max((k - low) / (high - low), 0.0), 1.0)
        out.append(w * (1 - ramp) + w / factor * ramp)
    return out


@pytest.mark.parametrize("truncate", [True, False])
def test_yarn_frequencies_and_attention_factor(truncate):
    spec = {**YARN, "truncate": truncate, "beta_fast": 16, "beta_slow": 2}
    omega, attention = rope_frequencies(64, scaling=spec)
    expected = yarn_reference(64, 10000.0, 4.0, 2048, 16.0, 2.0, truncate)
    # frequencies from two float64 formulas: a few ulps of each ω, relative
    assert_close_ulp(omega, expected, ulps=4, scale=expected)
    plain = rope_frequencies(64)[0]
    assert omega[0] == plain[0]  # fastest pair: extrapolated (unchanged)
    assert omega[-1] == pytest.approx(plain[-1] / 4, rel=1e-15)  # slowest: interpolated
    assert attention == pytest.approx(0.1 * math.log(4.0) + 1.0, rel=1e-15)


def test_yarn_attention_factor_rules():
    af = rope_frequencies(64, scaling={**YARN, "mscale": 0.707, "mscale_all_dim": 1.0})[1]
    assert af == pytest.approx((0.1 * 0.707 * math.log(4) + 1) / (0.1 * math.log(4) + 1))
    # DeepSeek-V3 style: mscale == mscale_all_dim gives 1
    assert rope_frequencies(64, scaling={**YARN, "mscale": 1.0, "mscale_all_dim": 1.0})[1] == 1.0
    # mscale 0 counts as not given (as in transformers)
    zero = rope_frequencies(64, scaling={**YARN, "mscale": 0.0, "mscale_all_dim": 1.0})[1]
    assert zero == pytest.approx(0.1 * math.log(4) + 1)
    assert rope_frequencies(64, scaling={**YARN, "attention_factor": 0.5})[1] == 0.5
    assert rope_frequencies(64, scaling={**YARN, "factor": 1.0})[1] == 1.0
    # factor derived from max_position_embeddings / original_max_position_embeddings
    derived = {"rope_type": "yarn", "original_max_position_embeddings": 2048}
    derived["max_position_embeddings"] = 8192
    omega, attention = rope_frequencies(64, scaling=derived)
    np.testing.assert_array_equal(omega, rope_frequencies(64, scaling=YARN)[0])
    assert attention == rope_frequencies(64, scaling=YARN)[1]


def test_longrope_selects_factors_by_length_and_sets_attention_factor():
    plain = rope_frequencies(8)[0]
    for seq_len in (None, 0, 512):
        omega, attention = rope_frequencies(8, scaling=LONGROPE, seq_len=seq_len)
        np.testing.assert_array_equal(omega, plain / np.array(LONGROPE["short_factor"]))
        assert attention == pytest.approx(math.sqrt(1 + math.log(8.0) / math.log(512)))
    omega, _ = rope_frequencies(8, scaling=LONGROPE, seq_len=513)
    np.testing.assert_array_equal(omega, plain / np.array(LONGROPE["long_factor"]))
    no_factor = {k: v for k, v in LONGROPE.items() if k != "factor"}
    assert rope_frequencies(8, scaling={**no_factor, "max_position_embeddings": 512})[1] == 1.0
    assert rope_frequencies(8, scaling={**no_factor, "attention_factor": 1.25})[1] == 1.25


def test_cos_sin_carry_the_attention_factor():
    positions = [0, 1, 300, 5000]
    omega, attention = rope_frequencies(64, scaling=YARN)
    assert attention > 1.0
    cos, sin = rotary_cos_sin(positions, 64, scaling=YARN, dtype=np.float64)
    ref_cos, ref_sin = reference_tables(positions, list(omega), "half", attention)
    # float64 angles up to 5000 (4 ulps of them), times the attention factor
    assert_close_ulp(cos, ref_cos, ulps=4, scale=5001 * attention)
    assert_close_ulp(sin, ref_sin, ulps=4, scale=5001 * attention)


def test_length_dependent_scalings_use_largest_position_plus_one():
    positions = np.arange(1000)
    for spec in (DYNAMIC, {**LONGROPE, "original_max_position_embeddings": 512}):
        cos, _ = rotary_cos_sin(positions, 8, scaling=spec, dtype=np.float64)
        explicit = rotary_cos_sin(positions, 8, scaling=spec, dtype=np.float64, seq_len=1000)[0]
        short = rotary_cos_sin(positions, 8, scaling=spec, dtype=np.float64, seq_len=512)[0]
        np.testing.assert_array_equal(cos, explicit)
        assert not np.allclose(cos, short)
    # a short call is the unscaled table
    np.testing.assert_array_equal(
        rotary_cos_sin(512, 8, scaling=DYNAMIC)[0], rotary_cos_sin(512, 8)[0]
    )


# -- scaling specs ----------------------------------------------------------------------------


def test_rope_scaling_normalises_dicts():
    assert rope_scaling(None) is None
    spec = RopeScaling("linear", factor=2.0)
    assert rope_scaling(spec) is spec
    assert rope_scaling({"type": "linear", "factor": 2}) == spec
    assert rope_scaling({"rope_type": "linear", "type": "linear", "factor": 2.0}) == spec
    # None values are "not given" (configs serialise unset fields as null)
    assert rope_scaling({"rope_type": "linear", "factor": 2.0, "attention_factor": None}) == spec
    assert rope_scaling({}) == RopeScaling()
    assert rope_scaling(LONGROPE).short_factor == (1.0, 1.5, 2.0, 3.0)
    assert set(ROPE_TYPES) == {
        *("default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional", "ntk_alpha")
    }
    spec = rope_scaling(
        {**LLAMA3_ROPE_SCALING, "rope_theta": 500000.0, "max_position_embeddings": 131072}
    )
    assert spec.rope_theta == 500000.0
    assert "llama3" in repr(spec)
    # a RopeScaling and its dict give the same tables
    np.testing.assert_array_equal(
        rotary_cos_sin(9, 8, scaling=rope_scaling(YARN))[1], rotary_cos_sin(9, 8, scaling=YARN)[1]
    )
