"""``identify``'s offset search: exact for every accepted ``max_offset``, refused beyond.

Offsets ``0 .. max_offset - 1`` are searched exhaustively up to :data:`MAX_OFFSET_LIMIT`
(``2**24``): a table with a first position in range gives its exact base and offset (or an
honest ``ambiguous``). A larger ``max_offset`` is refused, naming the limit. A table whose
first position is ``max_offset`` or more is reported as such, not as "off the unit circle".
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import posenc
from posenc import describe
from posenc.analysis import MAX_OFFSET_LIMIT, identify

LIMIT = 2**24

# (convention, d_model, base, dtype): families whose offsets the phases pin down
TABLES = [
    ("paper", 4, 100.0, np.float32),
    ("paper", 4, 10000.0, np.float64),
    ("paper", 8, 100.0, np.float32),
    ("paper", 16, 10000.0, np.float32),
    ("paper", 64, 500000.0, np.float64),
    ("tensor2tensor", 8, 10000.0, np.float32),
    ("tensor2tensor", 16, 100.0, np.float64),
    ("marian", 32, 10000.0, np.float32),
    ("paper", 7, 10000.0, np.float32),
]


def test_the_limit_is_public():
    assert MAX_OFFSET_LIMIT == LIMIT


@pytest.mark.slow
@pytest.mark.parametrize(("convention", "d_model", "base", "dtype"), TABLES)
@pytest.mark.parametrize("offset", [0, 12_345_677, LIMIT - 1])
def test_exact_base_and_offset_at_the_limit(convention, d_model, base, dtype, offset):
    table = posenc.sinusoidal(
        np.arange(offset, offset + 40), d_model, base=base, convention=convention, dtype=dtype
    )
    r = identify(table, max_offset=LIMIT)
    assert r.matched
    assert r.base == base
    assert r.offset == offset
    assert r.convention == convention


def test_the_documented_example_is_exact():
    # once: base 10000.00001775 (no offset was found for base 10000 itself)
    r = identify(posenc.sinusoidal(50, 16), max_offset=LIMIT)
    assert (r.outcome, r.base, r.offset) == ("match", 10000.0, 0)


@pytest.mark.parametrize("max_offset", [LIMIT + 1, 2**40, 2**64])
def test_a_max_offset_beyond_the_limit_is_refused(max_offset):
    with pytest.raises(ValueError, match=r"max_offset must be an integer in \[1, 2\*\*24\]"):
        identify(posenc.sinusoidal(50, 16), max_offset=max_offset)


@pytest.mark.slow
def test_the_search_memory_is_bounded_at_the_limit():
    """The most branches: d_model = 2, whose only frequency is 1 (one candidate per 2π)."""
    table = posenc.sinusoidal(np.arange(LIMIT - 10, LIMIT), 2, dtype=np.float64)
    tracemalloc.start()
    try:
        r = identify(table, max_offset=LIMIT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.matched
    assert peak < 256 * 2**20, f"identify used {peak / 2**20:.0f} MiB at max_offset = 2**24"


@pytest.mark.parametrize(
    ("d_model", "convention", "dtype", "max_offset", "offset", "rows"),
    [
        (1, "paper", np.float16, 1, 1, 20),  # once: "off the unit circle"
        (2, "paper", np.float64, 1, 5, 3),  # once: ValueError: min() arg is an empty sequence
        (4, "paper", np.float32, 10, 100, 1),  # once: the same ValueError
        # once the same ValueError with one row; two rows now, as one row of d = 8 also places a
        # far musicgen candidate (its layout differs), which makes the outcome "no_fit"
        (8, "paper", np.float32, 100, 1000, 2),
    ],
)
def test_a_first_position_beyond_max_offset_is_said(
    d_model, convention, dtype, max_offset, offset, rows
):
    positions = np.arange(offset, offset + rows)
    table = posenc.sinusoidal(positions, d_model, convention=convention, dtype=dtype)
    r = identify(table, max_offset=max_offset)
    assert not r.matched
    assert r.outcome == "no_offset"
    assert r.max_offset == max_offset
    sentence = describe(r)
    assert f"first position may be max_offset = {max_offset} or more" in sentence
    assert "off the unit circle" not in sentence
    assert identify(table, max_offset=offset + 1).matched


def test_no_fit_says_which_first_positions_were_searched():
    table = posenc.sinusoidal(np.arange(2**20 + 5, 2**20 + 45), 16, convention="tensor2tensor")
    r = identify(table)
    assert not r.matched
    assert describe(r).endswith("(first positions searched: 0..1048575).")
    found = identify(table, max_offset=2**21)
    assert (found.base, found.offset) == (10000.0, 2**20 + 5)


def test_scaled_tables_are_still_off_the_unit_circle():
    r = identify(2 * posenc.sinusoidal(20, 8))
    assert r.outcome == "off_circle"
    assert "off the unit circle" in describe(r)
