"""The position limit of the NumPy core, the same for every function that takes positions.

Every position must lie within +-2**53, where float64 holds integers exactly. A length ``L``
means positions ``0 .. L-1``, so ``L`` may be at most ``2**53 + 1``; an ``offset`` (and a
``pad_position``, a ``padding_idx``) must keep every position it produces within the limit.
Unsigned integers are exact whatever their width: values the limit allows give the int64
result, larger ones (uint64 values from ``2**63`` up included) raise the limit's error.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import analysis

LIMIT = r"within \+-2\*\*53"

#: The functions that take "an int L or positions", called with their other arguments.
LENGTH_OR_POSITIONS = {
    "sinusoidal": lambda p: posenc.sinusoidal(p, 4),
    "rotary_cos_sin": lambda p: posenc.rotary_cos_sin(p, 4),
    "similarity": lambda p: analysis.similarity(p, 4),
    "float32_recipe": lambda p: analysis.float32_recipe(p, 4),
    "odd_exponent_table": lambda p: analysis.odd_exponent_table(p, 4),
}

#: The functions that take positions (or timesteps) of any shape; multi-axis RoPE takes one
#: coordinate per axis, here one axis.
POSITIONS = {
    **LENGTH_OR_POSITIONS,
    "timestep_embedding": lambda p: posenc.timestep_embedding(p, 4),
    "multi_axis_cos_sin": lambda p: posenc.multi_axis_cos_sin(
        np.expand_dims(np.asarray(p), -1), 4, sections=(2,)
    ),
}

TOO_LONG = [2**53 + 2, 2**63 - 1, 2**63, 2**64, np.int64(2**63 - 1), np.uint64(2**63)]


@pytest.mark.parametrize("length", TOO_LONG, ids=repr)
@pytest.mark.parametrize("name", sorted(LENGTH_OR_POSITIONS))
def test_a_length_beyond_the_limit_is_refused(name: str, length: object) -> None:
    with pytest.raises(ValueError, match=r"positions must be a length of at most 2\*\*53 \+ 1"):
        LENGTH_OR_POSITIONS[name](length)


@pytest.mark.parametrize("value", [3.0, -2.0, np.float64(3.0), np.float32(1.0)], ids=repr)
@pytest.mark.parametrize("name", sorted(LENGTH_OR_POSITIONS))
def test_a_bare_whole_number_is_neither_a_length_nor_positions(name: str, value: object) -> None:
    """``3`` is a length and ``[3.0]`` one position; ``3.0`` alone would be read either way."""
    with pytest.raises(ValueError, match=r"positions must be an int L .* or an array"):
        LENGTH_OR_POSITIONS[name](value)


def test_a_fractional_number_or_a_zero_dimensional_array_is_one_position() -> None:
    expected = posenc.sinusoidal([3.0], 4)[0]
    np.testing.assert_array_equal(posenc.sinusoidal(np.array(3.0), 4), expected)
    np.testing.assert_array_equal(posenc.sinusoidal(np.array(3), 4), expected)
    np.testing.assert_array_equal(posenc.sinusoidal(2.5, 4), posenc.sinusoidal([2.5], 4)[0])


BEYOND = [
    np.array([1, 2**63 + 5], dtype=np.uint64),
    np.array([2**64 - 1], dtype=np.uint64),
    [2**70],
    [-(2**63) - 1, 0],
    [2**64],
]


@pytest.mark.parametrize("positions", BEYOND, ids=repr)
@pytest.mark.parametrize("name", sorted(POSITIONS))
def test_positions_beyond_int64_raise_the_limit_error(name: str, positions: object) -> None:
    argument = "timesteps" if name == "timestep_embedding" else "positions"
    with pytest.raises(ValueError, match=f"{argument} must lie {LIMIT}"):
        POSITIONS[name](positions)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("name", sorted(POSITIONS))
def test_unsigned_positions_are_exact(name: str, dtype: type) -> None:
    values = [0, 1, 200] if dtype == np.uint8 else [0, 1, 60_000]
    if dtype == np.uint64:
        values.append(2**53)
    got, want = POSITIONS[name](np.array(values, dtype=dtype)), POSITIONS[name](values)
    for a, b in zip(_arrays(got), _arrays(want), strict=True):
        np.testing.assert_array_equal(a, b)


def _arrays(result: object) -> list[np.ndarray]:
    """The arrays of a result: a table, a (cos, sin) pair or a ``Similarity``."""
    if isinstance(result, tuple):
        return [np.asarray(a) for a in result]
    return [np.asarray(getattr(result, "matrix", result))]


# -- position ids ---------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [2**53, 2**62, 2**63 - 1, 2**64])
def test_mask_offsets_that_leave_the_limit_are_refused(offset: int) -> None:
    with pytest.raises(ValueError, match=r"offset must keep positions within 2\*\*53"):
        posenc.positions_from_mask([[0, 1, 1]], offset=offset)


def test_mask_offsets_up_to_the_limit_are_exact() -> None:
    out = posenc.positions_from_mask([[0, 1, 1]], offset=2**53 - 1)
    assert out.tolist() == [[0, 2**53 - 1, 2**53]]
    # a row without real tokens produces no position, whatever the offset
    assert posenc.positions_from_mask([[0, 0]], offset=2**53).tolist() == [[0, 0]]


@pytest.mark.parametrize("pad_position", [2**53 + 1, 2**63])
def test_a_pad_position_beyond_the_limit_is_refused(pad_position: int) -> None:
    with pytest.raises(ValueError, match=r"pad_position must be an integer in \[0, 2\*\*53\]"):
        posenc.positions_from_mask([[0, 1]], pad_position=pad_position)


@pytest.mark.parametrize(
    ("padding_idx", "offset"),
    [(1, 2**53), (1, 2**63 - 1), (1, 2**64), (2**63 - 1, 0), (2**53 - 1, 1)],
)
def test_token_offsets_that_leave_the_limit_are_refused(padding_idx: int, offset: int) -> None:
    with pytest.raises(
        ValueError, match=r"(offset|padding_idx) must keep positions within 2\*\*53"
    ):
        posenc.positions_from_tokens([[5, 5]], padding_idx, offset=offset)


def test_token_offsets_up_to_the_limit_are_exact() -> None:
    out = posenc.positions_from_tokens([[5, 1, 5]], 1, offset=2**53 - 3)
    assert out.tolist() == [[2**53 - 1, 1, 2**53]]


@given(st.integers(1, 600), st.integers(0, 2**53 - 600))
def test_counts_never_wrap_in_narrow_dtypes(length: int, offset: int) -> None:
    """A uint8 mask of 600 ones counts to 600 (not 600 mod 256), from any allowed offset."""
    ones = np.ones((1, length), dtype=np.uint8)
    expected = offset + np.arange(length, dtype=np.int64)
    assert posenc.positions_from_mask(ones, offset=offset)[0].tolist() == expected.tolist()
    tokens = np.full((1, length), 7, dtype=np.uint8)
    fairseq = posenc.positions_from_tokens(tokens, 0, offset=offset)[0]
    assert fairseq.tolist() == (expected + 1).tolist()


def test_cu_seqlens_beyond_int64_are_refused() -> None:
    cu = np.array([0, 2**64 - 1], dtype=np.uint64)
    with pytest.raises(ValueError, match=re.escape("cu_seqlens must lie within")):
        posenc.positions_from_cu_seqlens(cu)
