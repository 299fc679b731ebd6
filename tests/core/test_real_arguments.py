"""Real-number arguments beyond float64's range: a ``ValueError`` naming the argument.

A Python int or ``Fraction`` too large for a float64 (``10**400``) once raised Python's
``OverflowError`` from inside the conversion. Every real-number parameter goes through one
conversion (``posenc/_checks.py``), so each front-end names the argument, shows the value in
a few characters and says what is allowed; the torch front-ends are checked in
``tests/torch/test_real_arguments.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import posenc
from posenc import analysis

#: Numbers no float64 holds: ints and fractions, both signs.
HUGE = [10**400, -(10**400), Fraction(10**400), Fraction(-(10**401), 3)]

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
TABLE = posenc.sinusoidal(10, 8, dtype=np.float64)


def _types(x: Any) -> np.ndarray:
    return np.array([[0, 1, 1, 1, 1, 0]])


#: (argument named in the message, call with the huge value x)
CALLS: list[tuple[str, Callable[[Any], Any]]] = [
    ("base", lambda x: posenc.sinusoidal(3, 4, base=x)),
    ("base", lambda x: posenc.frequencies(4, base=x)),
    ("base", lambda x: posenc.rotary_cos_sin(3, 4, base=x)),
    ("base", lambda x: posenc.rope_frequencies(8, base=x)),
    ("base", lambda x: posenc.multi_axis_frequencies((4, 4), base=x)),
    ("base", lambda x: posenc.sinusoidal_grid((2, 2), 8, base=x)),
    ("interpolation_scale", lambda x: posenc.sinusoidal_grid((2, 2), 8, interpolation_scale=x)),
    ("offset", lambda x: posenc.sinusoidal_grid((2, 2), 8, offset=x)),
    ("max_period", lambda x: posenc.timestep_embedding([1], 4, max_period=x)),
    ("downscale_freq_shift", lambda x: posenc.timestep_embedding([1], 4, downscale_freq_shift=x)),
    ("scale", lambda x: posenc.timestep_embedding([1], 4, scale=x)),
    ("positions", lambda x: posenc.sinusoidal(x, 4)),
    ("scaling['factor']", lambda x: posenc.rope_frequencies(8, scaling={**YARN, "factor": x})),
    (
        "scaling['beta_fast']",
        lambda x: posenc.rope_frequencies(8, scaling={**YARN, "beta_fast": x}),
    ),
    ("scaling['rope_theta']", lambda x: posenc.rope_scaling({**YARN, "rope_theta": x})),
    ("config.rope_theta", lambda x: posenc.rope_plan({"head_dim": 8, "rope_theta": x})),
    ("factor", lambda x: posenc.rope_plan({"head_dim": 8, "rope_scaling": {**YARN, "factor": x}})),
    (
        "tokens_per_second",
        lambda x: posenc.multimodal_positions(_types(x), tokens_per_second=x),
    ),
    ("base", lambda x: analysis.wavelengths(8, base=x)),
    ("base", lambda x: analysis.precision_report(10, 8, base=x)),
    ("base", lambda x: analysis.check_shift(TABLE, 1, base=x)),
    ("k", lambda x: analysis.shift_matrix(x, 8)),
    ("tolerance", lambda x: analysis.identify(TABLE, tolerance=x)),
    ("bases", lambda x: analysis.identify(TABLE, bases=[x])),
]


@pytest.mark.parametrize("value", HUGE, ids=["int", "-int", "fraction", "-fraction"])
@pytest.mark.parametrize(("name", "call"), CALLS, ids=[f"{i}-{c[0]}" for i, c in enumerate(CALLS)])
def test_a_number_beyond_float64_is_refused_by_name(name, call, value) -> None:
    # ints may meet an integer range first (the position limit); the value is abbreviated
    with pytest.raises(ValueError, match=r"got about -?\d(\.\d+)?e\+40[01]\b") as info:
        call(value)
    message = str(info.value)
    assert name in message
    assert len(message) < 400, message


def test_the_message_names_value_and_range() -> None:
    message = (
        "base must be a positive finite number, got about 1e+400 (int), beyond float64's "
        "range (finite numbers within +-1.8e+308)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        posenc.sinusoidal(3, 4, base=10**400)
    with pytest.raises(ValueError, match=r"got about -3\.33e\+400 \(Fraction\)"):
        posenc.timestep_embedding([1], 4, scale=Fraction(-(10**401), 3))


@pytest.mark.parametrize("value", [Fraction(1, 10**400), 10**300, Fraction(10**300, 7)])
def test_numbers_within_range_still_work(value) -> None:
    """Tiny and large-but-finite values convert as before (and meet the usual range checks)."""
    out = posenc.timestep_embedding([1], 4, scale=value)
    assert out.shape == (1, 4)


def test_huge_integers_are_abbreviated_everywhere() -> None:
    """Integers too long to print (Python refuses str() beyond 4300 digits) are summarised."""
    with pytest.raises(ValueError, match=r"d_model must be an integer >= 1, got about -1e\+5000"):
        posenc.sinusoidal(3, -(10**5000))
    with pytest.raises(ValueError, match=r"positions must be a length .* got about 1e\+5000"):
        posenc.sinusoidal(10**5000, 4)
    with pytest.raises(ValueError, match=r"offset must keep positions .* offset=about 1e\+5000"):
        posenc.positions_from_mask([[1, 1]], offset=10**5000)
