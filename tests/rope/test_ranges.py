"""Degenerate frequency parameters: a ``ValueError`` naming the parameter and its range.

Each case once broke deep inside the formulas (a division by zero, an overflow) or returned
NaN or infinite frequencies. The check lives in the core (``_frequencies``,
``_rope/scaling.py``), so every front-end raises the same error; the torch front-ends are
checked in ``tests/torch/test_rope_ranges.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import posenc

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
LONGROPE = {
    "rope_type": "longrope",
    "short_factor": [1.0, 1.0],
    "long_factor": [2.0, 2.0],
    "original_max_position_embeddings": 1,
    "factor": 4.0,
}
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64}

#: (head_dim, base, scaling, seq_len, message): the rope cases, shared with the torch tests.
ROPE_CASES = [
    (8, 1.0, YARN, None, r"base must be > 1 for rope_type 'yarn' .*got 1\.0"),
    (8, 0.5, YARN, None, r"base must be > 1 for rope_type 'yarn' .*got 0\.5"),
    (
        4,
        10000.0,
        LONGROPE,
        None,
        r"scaling\['original_max_position_embeddings'\] must be >= 2 for rope_type 'longrope'"
        r".*got 1",
    ),
    (4, 10000.0, DYNAMIC, 10**300, r"seq_len must be a length of at most 2\*\*53 \+ 1"),
    (
        4,
        1e300,
        {**DYNAMIC, "factor": 1e300},
        2**40,
        r"rope_type 'dynamic' .*scaling\['factor'\] = 1e\+300.*overflows",
    ),
    (8, 1e-300, None, None, r"base must be a number >= 2\*\*-970 .*got 1e-300"),
    (
        8,
        10000.0,
        {"rope_type": "linear", "factor": 1e-300},
        None,
        r"rope_type 'linear' .*scaling\['factor'\] = 1e-300.* frequencies up to 1e\+300",
    ),
    (
        8,
        10000.0,
        {**YARN, "mscale": -1000.0, "mscale_all_dim": 1.0},
        None,
        r"scaling\['mscale'\] = -1000\.0 and scaling\['mscale_all_dim'\] = 1\.0 give an "
        r"attention factor of -120\.9: it must be a positive finite number",
    ),
    (
        8,
        10000.0,
        {**YARN, "max_position_embeddings": 10**400, "factor": None},
        None,
        r"scaling\['max_position_embeddings'\] must be an integer in \[1, 2\*\*53\]",
    ),
]


@pytest.mark.parametrize(("head_dim", "base", "scaling", "seq_len", "message"), ROPE_CASES)
def test_numpy_rope_front_ends_name_the_parameter(head_dim, base, scaling, seq_len, message):
    calls = [
        lambda: posenc.rope_frequencies(head_dim, base=base, scaling=scaling, seq_len=seq_len),
        lambda: posenc.rotary_cos_sin(
            [0, 1], head_dim, base=base, scaling=scaling, seq_len=seq_len
        ),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("convention", ["paper", "tensor2tensor", "marian"])
@pytest.mark.parametrize("base", [1e-300, 1e-310])  # 1e-310: once NaN columns (1/base = inf)
def test_sinusoidal_base_range(convention, base):
    message = rf"base must be a number >= 2\*\*-970 .*got {base!r}"
    for call in (
        lambda: posenc.frequencies(8, base=base, convention=convention),
        lambda: posenc.sinusoidal(3, 8, base=base, convention=convention),
    ):
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("convention", ["paper", "tensor2tensor"])
def test_the_smallest_base_gives_finite_tables_at_the_largest_positions(convention):
    base = 2.0**-970
    assert np.all(np.isfinite(posenc.frequencies(64, base=base, convention=convention)))
    table = posenc.sinusoidal([0, 2**53, -(2**53)], 8, base=base, convention=convention)
    assert np.all(np.isfinite(table))
    cos, sin = posenc.rotary_cos_sin([2**53], 8, base=base)
    assert np.all(np.isfinite(cos))
    assert np.all(np.isfinite(sin))


def test_the_largest_sequence_length_is_accepted():
    omega, _ = posenc.rope_frequencies(4, scaling=DYNAMIC, seq_len=2**53 + 1)
    assert np.all(np.isfinite(omega))
    assert np.all(omega > 0)
    with pytest.raises(ValueError, match=r"seq_len must be a length of at most 2\*\*53 \+ 1"):
        posenc.rope_frequencies(4, scaling=DYNAMIC, seq_len=2**53 + 2)


def test_ordinary_parameters_are_unchanged():
    # bases in (1, 2) for yarn, factors below 1, short lengths: still accepted
    posenc.rope_frequencies(8, base=1.5, scaling=YARN)
    posenc.rope_frequencies(8, scaling={"rope_type": "linear", "factor": 0.25})
    posenc.rope_frequencies(4, scaling={**LONGROPE, "original_max_position_embeddings": 2})
    posenc.rope_frequencies(4, scaling={**LONGROPE, "attention_factor": 1.0})
    assert posenc.frequencies(4, base=0.5, convention="tensor2tensor").tolist() == [1.0, 2.0]


@pytest.mark.parametrize("factor", [4.0, 1e16, 1e100])
@pytest.mark.parametrize("seq_len", [None, 1, 64])
def test_dynamic_up_to_its_original_length_is_the_unscaled_rope(factor, seq_len):
    # factor * L / L - (factor - 1) is 1 in exact arithmetic; in floats it rounded to 0 for
    # factors of 2**53 and more, and the unscaled table was refused as overflowing
    omega, attention = posenc.rope_frequencies(
        8, scaling={**DYNAMIC, "factor": factor}, seq_len=seq_len
    )
    assert np.array_equal(omega, posenc.rope_frequencies(8)[0])
    assert attention == 1.0
