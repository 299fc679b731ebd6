"""Configs and dicts as users write them: Hugging Face rope parameters taken as written, and
every value read from a config checked for type, finiteness and range, naming its key."""

from __future__ import annotations

import numpy as np
import pytest

import posenc

LLAMA3 = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


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
