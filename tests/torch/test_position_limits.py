"""One position limit and one rule for unsigned integers, through every PyTorch entry point.

- Positions, and positions plus an ``offset`` (``past_key_values_length`` in the Hugging Face
  drop-ins), must lie within +-2**53. Python numbers and CPU tensors raise the NumPy core's
  error; data that are not read (an accelerator, here emulated by treating CPU tensors as
  unread) give NaN rows, and ``set_data_checks(True)`` raises there too.
- Unsigned integer positions and token ids of any width are converted exactly: the same
  result as int64; uint64 values from 2**63 up fall under the position limit.
- No memory in proportion to an offset: far rows are computed on the fly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from posenc._checks import check_offset as core_check_offset  # noqa: E402
from posenc.torch import _checks, hf  # noqa: E402

LIMIT = r"within \+-2\*\*53"
D = 8


def _q(n: int) -> torch.Tensor:
    return torch.ones(1, 1, n, D)


def _tokens(n: int) -> torch.Tensor:
    return torch.arange(n).remainder(7)[None] + 2


def _coordinates(p: torch.Tensor) -> torch.Tensor:
    """(s, 3) coordinates of multi-axis RoPE: the positions on every axis (text tokens; an
    offset is added to every coordinate)."""
    return torch.stack([p, p, p], dim=-1)


def _embedding() -> pt.TransformerEmbedding:
    torch.manual_seed(0)  # the same weights every time
    return pt.TransformerEmbedding(16, D, dropout=0.0).eval()


#: Entry points taking explicit positions ``p`` (a 1-D tensor) and an ``offset``:
#: name -> (call, the argument named in errors).
WITH_OFFSET: dict[str, tuple[Callable[[Any, int], Any], str]] = {
    "SinusoidalPositionalEncoding": (
        lambda p, o: pt.SinusoidalPositionalEncoding(D)(
            torch.zeros(1, len(p), D), positions=p, offset=o
        ),
        "positions",
    ),
    "SinusoidalPositionalEncoding.encoding": (
        lambda p, o: pt.SinusoidalPositionalEncoding(D).encoding(p, offset=o),
        "length_or_positions",
    ),
    "RotaryEmbedding": (
        lambda p, o: pt.RotaryEmbedding(D)(_q(len(p)), _q(len(p)), positions=p, offset=o),
        "positions",
    ),
    "RotaryEmbedding.rotate": (
        lambda p, o: pt.RotaryEmbedding(D).rotate(_q(len(p)), positions=p, offset=o),
        "positions",
    ),
    "TransformerEmbedding": (
        lambda p, o: _embedding()(_tokens(len(p)), positions=p, offset=o),
        "positions",
    ),
    "RotaryEmbedding(sections)": (
        lambda p, o: pt.RotaryEmbedding(D, sections=[2, 1, 1])(
            _q(len(p)), _q(len(p)), positions=_coordinates(p), offset=o
        ),
        "positions",
    ),
}

#: Entry points taking positions (or timesteps) only.
WITHOUT_OFFSET: dict[str, tuple[Callable[[Any], Any], str]] = {
    "sinusoidal": (lambda p: pt.sinusoidal(p, D), "positions"),
    "rotary_cos_sin": (lambda p: pt.rotary_cos_sin(p, D), "positions"),
    "multi_axis_cos_sin": (
        lambda p: pt.multi_axis_cos_sin(_coordinates(p), D, sections=[2, 1, 1]),
        "positions",
    ),
    "TimestepEmbedding": (lambda p: pt.TimestepEmbedding(D)(p), "timesteps"),
    "timestep_embedding": (lambda p: pt.timestep_embedding(p, D), "timesteps"),
    "MarianPositions": (
        lambda p: hf.MarianPositions(D)((1, len(p)), position_ids=p),
        "position_ids",
    ),
    "WhisperEncoderPositions": (lambda p: hf.WhisperEncoderPositions(4, D)(p), "positions"),
    "LlamaRotary": (lambda p: hf.LlamaRotary(D)(torch.zeros(1), p[None]), "position_ids"),
}

ALL: dict[str, tuple[Callable[[Any], Any], str]] = {
    **{name: ((lambda p, f=f: f(p, 0)), arg) for name, (f, arg) in WITH_OFFSET.items()},
    **WITHOUT_OFFSET,
}


def _tensors(result: Any) -> list[torch.Tensor]:
    return list(result) if isinstance(result, tuple) else [result]


def _rows_nan(result: Any) -> list[bool]:
    """Per position: whether its row is NaN in every output (the last axis is channels; RoPE
    outputs of shape (1, 1, s, d) and embeddings of shape (1, s, d) are read per s)."""
    first = _tensors(result)[0].detach()
    return first.isnan().all(dim=-1).reshape(-1).tolist()


def _assert_same(a: Any, b: Any) -> None:
    for x, y in zip(_tensors(a), _tensors(b), strict=True):
        assert x.dtype == y.dtype
        assert torch.equal(x, y)


@pytest.fixture
def unread() -> Iterator[None]:
    """Treat CPU tensors like an accelerator's: their data are not read unless
    ``set_data_checks(True)``."""
    original = _checks.data_checked
    _checks.data_checked = lambda tensor: _checks._DATA_CHECKS[0]  # type: ignore[assignment]
    try:
        yield
    finally:
        _checks.data_checked = original  # type: ignore[assignment]


# -- unsigned positions --------------------------------------------------------------------------

UNSIGNED = [torch.uint8, torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("dtype", UNSIGNED, ids=str)
@pytest.mark.parametrize("name", sorted(ALL))
def test_unsigned_positions_give_the_int64_result(name: str, dtype: torch.dtype) -> None:
    call, _ = ALL[name]
    values = [0, 3, 200] if dtype == torch.uint8 else [0, 3, 60_000]
    _assert_same(call(torch.tensor(values, dtype=dtype)), call(torch.tensor(values)))


@pytest.mark.parametrize("name", sorted(WITH_OFFSET))
def test_unsigned_positions_plus_an_offset(name: str) -> None:
    call, _ = WITH_OFFSET[name]
    values = [0, 3, 60_000]
    _assert_same(call(torch.tensor(values, dtype=torch.uint16), 9), call(torch.tensor(values), 9))


@pytest.mark.parametrize("name", sorted(ALL))
def test_uint64_beyond_int64_raises_the_limit_error(name: str) -> None:
    call, argument = ALL[name]
    with pytest.raises(ValueError, match=f"{argument} must lie {LIMIT}"):
        call(torch.tensor([1, 2**63 + 5], dtype=torch.uint64))


@pytest.mark.parametrize("name", sorted(ALL))
def test_unread_uint64_beyond_int64_gives_nan_rows(name: str, unread: None) -> None:
    call, argument = ALL[name]
    positions = torch.tensor([2, 2**64 - 1, 2**63, 5], dtype=torch.uint64)
    assert _rows_nan(call(positions)) == [False, True, True, False]
    with pt.set_data_checks(True), pytest.raises(ValueError, match=f"{argument} must lie {LIMIT}"):
        call(positions)


# -- positions + offset ----------------------------------------------------------------------------

BEYOND = [
    ([0, 2**53], 1),
    ([2**52, 0], 2**53),
    ([0.5, 2.0**53], 2**53),
]


@pytest.mark.parametrize(("positions", "offset"), BEYOND, ids=repr)
@pytest.mark.parametrize("name", sorted(WITH_OFFSET))
def test_positions_plus_offset_beyond_the_limit_raise(
    name: str, positions: list, offset: int
) -> None:
    call, argument = WITH_OFFSET[name]
    with pytest.raises(ValueError, match=rf"{argument} \+ offset must lie {LIMIT}"):
        call(torch.tensor(positions), offset)


@pytest.mark.parametrize("name", sorted(WITH_OFFSET))
def test_unread_positions_plus_offset_beyond_the_limit_give_nan_rows(
    name: str, unread: None
) -> None:
    call, argument = WITH_OFFSET[name]
    positions = torch.tensor([0, 2**53 - 9, 2**53 - 8, 2**63 - 1, -(2**63)])
    assert _rows_nan(call(positions, 8)) == [False, False, False, True, True]
    with (
        pt.set_data_checks(True),
        pytest.raises(ValueError, match=rf"{argument} \+ offset must lie {LIMIT}"),
    ):
        call(positions, 9)


@pytest.mark.parametrize("name", sorted(WITH_OFFSET))
def test_positions_plus_offset_up_to_the_limit_are_encoded(name: str) -> None:
    call, _ = WITH_OFFSET[name]
    _assert_same(call(torch.tensor([-(2**53), 0]), 2**53), call(torch.tensor([0, 2**53]), 0))


@pytest.mark.parametrize("name", sorted(WITH_OFFSET))
@pytest.mark.parametrize("offset", [2**53 + 1, 2**63 - 1, 2**64])
def test_an_offset_beyond_the_limit_is_refused_with_explicit_positions(
    name: str, offset: int
) -> None:
    call, _ = WITH_OFFSET[name]
    with pytest.raises(ValueError, match=r"offset must keep positions within 2\*\*53"):
        call(torch.tensor([-5, -1]), offset)


@given(
    st.lists(
        st.integers(-(2**54), 2**54) | st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=4
    ),
    st.integers(0, 2**54) | st.sampled_from([1, 2**53, 2**53 + 1]),
)
def test_the_sum_is_judged_exactly_before_int64_could_wrap(positions: list, offset: int) -> None:
    """Encoded exactly when every ``p + offset`` (as a Python int) is within the limit and
    the offset is at most 2**53; a ValueError otherwise, never a wrapped position."""
    module = pt.SinusoidalPositionalEncoding(D)
    sums = [p + offset for p in positions]
    if offset <= 2**53 and all(abs(v) <= 2**53 for v in sums):
        expected = torch.from_numpy(posenc.sinusoidal(sums, D))
        assert torch.equal(module.encoding(torch.tensor(positions), offset=offset), expected)
    else:
        with pytest.raises(ValueError, match=r"(offset must keep|must lie within)"):
            module.encoding(torch.tensor(positions), offset=offset)


@given(
    st.integers(-2, 2**54) | st.sampled_from([2**53 - 2, 2**53 - 1, 2**53, 2**53 + 1]),
    st.integers(0, 3),
    st.integers(0, 2),
)
def test_a_plain_int_offset_is_judged_like_the_numpy_core(
    offset: int, length: int, first: int
) -> None:
    """``offset`` shifting positions ``first .. first + length - 1``: accepted exactly when the
    NumPy core accepts it, and refused with its error otherwise (the plain-int fast path)."""
    largest = first + length - 1
    try:
        expected = core_check_offset("offset", offset, largest)
    except ValueError as exc:
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            _checks.check_offset(offset, length, first=first)
    else:
        assert _checks.check_offset(offset, length, first=first) == expected


# -- lengths and bare numbers -------------------------------------------------------------------

LENGTH_OR_POSITIONS = {
    "sinusoidal": (lambda p: pt.sinusoidal(p, D), "positions"),
    "rotary_cos_sin": (lambda p: pt.rotary_cos_sin(p, D), "positions"),
    "SinusoidalPositionalEncoding.encoding": (
        lambda p: pt.SinusoidalPositionalEncoding(D).encoding(p),
        "length_or_positions",
    ),
}


@pytest.mark.parametrize("length", [2**53 + 2, 2**63, 2**64, np.uint64(2**63)], ids=repr)
@pytest.mark.parametrize("name", sorted(LENGTH_OR_POSITIONS))
def test_a_length_beyond_the_limit_is_refused(name: str, length: object) -> None:
    call, argument = LENGTH_OR_POSITIONS[name]
    with pytest.raises(ValueError, match=rf"{argument} must be a length of at most 2\*\*53 \+ 1"):
        call(length)


@pytest.mark.parametrize("value", [3.0, np.float64(0.0)], ids=repr)
@pytest.mark.parametrize("name", sorted(LENGTH_OR_POSITIONS))
def test_a_bare_whole_number_is_neither_a_length_nor_positions(name: str, value: object) -> None:
    call, argument = LENGTH_OR_POSITIONS[name]
    with pytest.raises(ValueError, match=rf"{argument} must be an int L .* or an array"):
        call(value)


def test_the_core_and_torch_agree_on_lists_beyond_int64() -> None:
    for positions in ([2**70], [-(2**63) - 1]):
        with pytest.raises(ValueError, match=f"positions must lie {LIMIT}"):
            posenc.sinusoidal(positions, D)
        with pytest.raises(ValueError, match=f"positions must lie {LIMIT}"):
            pt.sinusoidal(positions, D)


# -- token ids ----------------------------------------------------------------------------------

IDS = [torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.int8, torch.int16, torch.int32]


@pytest.mark.parametrize("dtype", IDS, ids=str)
def test_token_ids_of_any_integer_dtype_are_exact(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    emb = pt.TransformerEmbedding(50, D, num_segments=2, dropout=0.0).eval()
    tokens = torch.tensor([[1, 7, 49], [3, 0, 2]])
    segments = torch.tensor([[0, 1, 1], [1, 0, 0]])
    _assert_same(emb(tokens.to(dtype), segments=segments.to(dtype)), emb(tokens, segments=segments))
    m2m = hf.M2M100Positions(D, padding_idx=1)
    _assert_same(m2m(tokens.to(dtype)), m2m(tokens))
    _assert_same(hf.fairseq_positions(tokens.to(dtype), 1), hf.fairseq_positions(tokens, 1))


def test_uint64_token_ids_beyond_int64_are_out_of_the_vocabulary() -> None:
    emb = pt.TransformerEmbedding(50, D)
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, 49\]"):
        emb(torch.tensor([[1, 2**63 + 1]], dtype=torch.uint64))


# -- Hugging Face past_key_values_length ---------------------------------------------------

IDS_2 = torch.tensor([[5, 1, 6]])  # padding_idx 1 in the middle

#: The drop-ins taking ``past_key_values_length``: name -> call(past).
WITH_PAST: dict[str, Callable[[Any], Any]] = {
    "MarianPositions": lambda past: hf.MarianPositions(D)((1, 3), past_key_values_length=past),
    "M2M100Positions": lambda past: hf.M2M100Positions(D, 1)(IDS_2, past_key_values_length=past),
    "M2M100Positions.inputs_embeds": lambda past: hf.M2M100Positions(D, 1)(
        inputs_embeds=torch.zeros(1, 3, D), past_key_values_length=past
    ),
    "fairseq_positions": lambda past: hf.fairseq_positions(IDS_2, 1, past),
}

BAD_PAST = [
    (-1, ValueError, "past_key_values_length must be"),
    (2**60, ValueError, r"past_key_values_length must keep positions within 2\*\*53"),
    (2**63 - 1, ValueError, r"past_key_values_length must keep positions within 2\*\*53"),
    (torch.tensor(-1), ValueError, "past_key_values_length must be"),
    (torch.tensor(2**60), ValueError, r"past_key_values_length must keep positions within 2\*\*53"),
    (
        torch.tensor(1.5),
        TypeError,
        "past_key_values_length must be an int >= 0 or an integer tensor",
    ),
    (
        torch.tensor(2.0),
        TypeError,
        "past_key_values_length must be an int >= 0 or an integer tensor",
    ),
    (torch.tensor([1, 2]), ValueError, "past_key_values_length must hold one value"),
    (2.0, TypeError, "past_key_values_length must be"),
]


@pytest.mark.parametrize(("past", "kind", "pattern"), BAD_PAST, ids=repr)
@pytest.mark.parametrize("name", sorted(WITH_PAST))
def test_a_bad_past_length_raises(name: str, past: Any, kind: type, pattern: str) -> None:
    with pytest.raises(kind, match=pattern):
        WITH_PAST[name](past)


@pytest.mark.parametrize("name", sorted(WITH_PAST))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.uint64], ids=str)
def test_a_past_length_tensor_equals_the_int(name: str, dtype: torch.dtype) -> None:
    _assert_same(WITH_PAST[name](torch.tensor(7, dtype=dtype)), WITH_PAST[name](7))


@pytest.mark.parametrize(
    "name", ["MarianPositions", "M2M100Positions", "M2M100Positions.inputs_embeds"]
)
def test_an_unread_negative_past_length_gives_nan_rows(name: str, unread: None) -> None:
    out = WITH_PAST[name](torch.tensor(-4))
    rows = _rows_nan(out)
    if name == "M2M100Positions":  # the padding token keeps its zero row
        assert rows == [True, False, True]
        assert not bool(out[0, 1].any())
    else:
        assert rows == [True, True, True]
    with (
        pt.set_data_checks(True),
        pytest.raises(ValueError, match="past_key_values_length must be"),
    ):
        WITH_PAST[name](torch.tensor(-4))


def test_unread_fairseq_positions_of_a_negative_past_cannot_be_encoded(unread: None) -> None:
    positions = hf.fairseq_positions(IDS_2, 1, torch.tensor(-4))
    assert positions[0, 1] == 1  # padding keeps padding_idx
    assert bool((positions[0, [0, 2]] > 2**53).all())
    assert _rows_nan(pt.sinusoidal(positions, D)) == [True, False, True]


@pytest.mark.parametrize("past", [10**12, 2**53 - 4])
def test_m2m100_far_past_lengths_allocate_nothing_in_proportion(past: int) -> None:
    module = hf.M2M100Positions(D, 1, num_positions=16)
    out = module(IDS_2, past_key_values_length=past)
    positions = posenc.positions_from_tokens(IDS_2.numpy(), 1, offset=past)
    expected = pt.sinusoidal(torch.from_numpy(positions), D, convention="tensor2tensor")
    expected[0, 1] = 0  # the padding row
    assert torch.equal(out, expected)
    assert module.sinusoidal.pe.shape[0] <= 32  # the cache did not grow towards the offset
