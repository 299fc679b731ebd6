"""Arguments of the PyTorch front-end refused by name: devices, the Hugging Face drop-ins'
own argument names, token ids, and the edge cases that must match the NumPy core (a
one-channel timestep embedding, an empty sequence with interleaved pairs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from posenc.torch import hf  # noqa: E402

D = 8

# -- device ---------------------------------------------------------------------------------

#: Every entry point taking ``device=``: name -> call(device).
WITH_DEVICE: dict[str, Callable[[Any], Any]] = {
    "sinusoidal(length)": lambda device: pt.sinusoidal(3, D, device=device),
    "sinusoidal(list)": lambda device: pt.sinusoidal([1, 2], D, device=device),
    "sinusoidal(empty tensor)": lambda device: pt.sinusoidal(
        torch.zeros(0, dtype=torch.long), D, device=device
    ),
    "rotary_cos_sin": lambda device: pt.rotary_cos_sin(3, D, device=device),
    "multi_axis_cos_sin": lambda device: pt.multi_axis_cos_sin(
        [[0, 1, 2]], D, sections=[2, 1, 1], device=device
    ),
    "SinusoidalPositionalEncoding": lambda device: pt.SinusoidalPositionalEncoding(
        D, device=device
    ),
    "SinusoidalPositionalEncoding.encoding(length)": lambda device: pt.SinusoidalPositionalEncoding(
        D
    ).encoding(3, device=device),
    "SinusoidalPositionalEncoding.encoding(positions)": lambda device: (
        pt.SinusoidalPositionalEncoding(D).encoding(torch.tensor([1, 2]), device=device)
    ),
    "RotaryEmbedding": lambda device: pt.RotaryEmbedding(D, device=device),
    "SinusoidalGridEncoding": lambda device: pt.SinusoidalGridEncoding(
        D, grid_shape=(2, 2), device=device
    ),
    "SinusoidalGridEncoding.encoding": lambda device: pt.SinusoidalGridEncoding(
        D, grid_shape=(2, 2)
    ).encoding(device=device),
    "TransformerEmbedding": lambda device: pt.TransformerEmbedding(10, D, device=device),
    "hf.MarianPositions": lambda device: hf.MarianPositions(D, device=device),
    "hf.M2M100Positions": lambda device: hf.M2M100Positions(D, 1, device=device),
    "hf.WhisperEncoderPositions": lambda device: hf.WhisperEncoderPositions(3, D, device=device),
}

BAD_DEVICES = [
    ("nope", ValueError),
    ("cpu:x", ValueError),
    ("CPU", ValueError),
    (-1, ValueError),
    (1.5, TypeError),
    (["cpu"], TypeError),
    ({"a": 1}, TypeError),
    (True, TypeError),
]


@pytest.mark.parametrize(("device", "kind"), BAD_DEVICES, ids=repr)
@pytest.mark.parametrize("name", sorted(WITH_DEVICE))
def test_a_bad_device_is_refused_by_name(name: str, device: Any, kind: type) -> None:
    with pytest.raises(kind, match=r"^device must be None, a torch\.device, a string") as info:
        WITH_DEVICE[name](device)
    assert repr(device) in str(info.value)


def _missing_device() -> str:
    """A device torch knows but this machine does not have."""
    if not torch.cuda.is_available():
        return "cuda:0"
    return f"cuda:{torch.cuda.device_count()}"


@pytest.mark.parametrize("name", sorted(WITH_DEVICE))
def test_a_device_this_machine_lacks_is_refused_by_name(name: str) -> None:
    missing = _missing_device()
    with pytest.raises(
        ValueError, match=rf"^device must be a device this machine has.*'{missing}'"
    ):
        WITH_DEVICE[name](missing)


@pytest.mark.parametrize("device", [None, "cpu", torch.device("cpu"), "cpu:0"], ids=repr)
@pytest.mark.parametrize("name", sorted(WITH_DEVICE))
def test_a_good_device_is_used(name: str, device: Any) -> None:
    result = WITH_DEVICE[name](device)
    tensors = result if isinstance(result, tuple) else (result,)
    for t in tensors:
        if isinstance(t, torch.Tensor):
            assert t.device.type == "cpu"


def test_the_meta_device_is_accepted() -> None:
    assert pt.sinusoidal(3, D, device="meta").device.type == "meta"
    assert pt.SinusoidalPositionalEncoding(D, max_len=4, device="meta").pe.device.type == "meta"


# -- MarianPositions.forward: its own argument names ------------------------------------------

BAD_SHAPES = [
    (None, TypeError),
    ("ab", TypeError),
    (5, TypeError),
    ((1,), ValueError),
    ((1, 2.5), TypeError),
    ((1, "3"), TypeError),
    ((1, True), TypeError),
    ((1, -3), ValueError),
    ((-1, 3), ValueError),
    ((1, 2**62), ValueError),
    ((1, 2**53 + 5), ValueError),
]


@pytest.mark.parametrize("with_position_ids", [False, True])
@pytest.mark.parametrize(("shape", "kind"), BAD_SHAPES, ids=repr)
def test_marian_refuses_a_bad_input_ids_shape(shape: Any, kind: type, with_position_ids) -> None:
    module = hf.MarianPositions(D)
    position_ids = torch.arange(3) if with_position_ids else None
    with pytest.raises(kind, match=r"^input_ids_shape must be \(b, s\)"):
        module(shape, position_ids=position_ids)


def test_marian_refuses_a_table_too_large_by_its_argument_names() -> None:
    with pytest.raises(ValueError, match=r"^input_ids_shape and embedding_dim ask for"):
        hf.MarianPositions(D)((1, 2**50))


@pytest.mark.parametrize("shape", [(2, 3), [2, 3], torch.Size([2, 3]), (np.int64(2), 3)])
def test_marian_accepts_the_shapes_hf_passes(shape: Any) -> None:
    module = hf.MarianPositions(D)
    assert torch.equal(module(shape, 2), module.sinusoidal.encoding(3, offset=2))


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"position_ids": torch.tensor([2**60])}, r"^position_ids must lie"),
        ({"position_ids": torch.tensor([1.5, float("nan")])}, r"^position_ids must be finite"),
        ({"position_ids": torch.tensor([True])}, r"^position_ids must hold integers"),
        ({"past_key_values_length": 2**53}, r"^past_key_values_length must keep"),
        ({"past_key_values_length": -1}, r"^past_key_values_length must be"),
    ],
    ids=repr,
)
def test_marian_errors_use_the_hf_argument_names(kwargs: dict[str, Any], pattern: str) -> None:
    with pytest.raises((ValueError, TypeError), match=pattern):
        hf.MarianPositions(D)((1, 3), **kwargs)


# -- M2M100Positions / fairseq_positions ------------------------------------------------------

BAD_EMBEDS = [
    (torch.zeros(3), ValueError),
    (torch.zeros(2, 3), ValueError),
    (torch.zeros(1, 3, D + 1), ValueError),
    (torch.zeros(1, 3, D, dtype=torch.long), TypeError),
    (np.zeros((1, 3, D), dtype=np.float32), TypeError),
    ("x", TypeError),
]


@pytest.mark.parametrize(("embeds", "kind"), BAD_EMBEDS, ids=lambda v: type(v).__name__)
def test_m2m100_refuses_bad_inputs_embeds(embeds: Any, kind: type) -> None:
    with pytest.raises(kind, match=r"^inputs_embeds must be"):
        hf.M2M100Positions(D, 1)(inputs_embeds=embeds)


def test_m2m100_refuses_a_padding_idx_beyond_the_limit_by_name() -> None:
    with pytest.raises(ValueError, match=r"^padding_idx must keep positions within 2\*\*53"):
        hf.M2M100Positions(D, 2**60)
    module = hf.M2M100Positions(D, 2**53 - 1)  # room for one real token, not for three
    with pytest.raises(ValueError, match=r"^padding_idx must keep positions within 2\*\*53"):
        module(torch.tensor([[5, 6, 7]]))
    with pytest.raises(ValueError, match=r"^padding_idx must keep positions within 2\*\*53"):
        module(inputs_embeds=torch.zeros(1, 3, D))
    with pytest.raises(ValueError, match=r"^padding_idx must keep positions within 2\*\*53"):
        hf.fairseq_positions(torch.tensor([[5, 6, 7]]), 2**53 - 1)


@pytest.mark.parametrize("embeds", [False, True])
def test_m2m100_blames_past_key_values_length_for_a_huge_cache(embeds: bool) -> None:
    module = hf.M2M100Positions(D, 1)
    inputs = {"inputs_embeds": torch.zeros(1, 3, D)} if embeds else {"input_ids": IDS}
    with pytest.raises(ValueError, match=r"^past_key_values_length must keep positions"):
        module(**inputs, past_key_values_length=2**53 - 3)


def test_m2m100_refuses_a_table_too_large_by_its_argument_names() -> None:
    with pytest.raises(ValueError, match=r"^padding_idx, num_positions and embedding_dim ask"):
        hf.M2M100Positions(D, 1, num_positions=2**50)
    with pytest.raises(ValueError, match=r"^padding_idx, num_positions and embedding_dim ask"):
        hf.M2M100Positions(D, 2**53 - 1, num_positions=np.int32(0))  # 2**53 rows
    with pytest.raises(ValueError, match=r"^num_positions and embedding_dim ask for"):
        hf.MarianPositions(D, num_positions=2**50)
    with pytest.raises(ValueError, match=r"^num_embeddings and embedding_dim ask for"):
        hf.WhisperEncoderPositions(2**50, D)


IDS = torch.tensor([[4, 5, 1], [1, 6, 7]])
ODD_IDS = [IDS.to(torch.bool), IDS.to(torch.complex64), IDS.float(), IDS.to(torch.float16)]


@pytest.mark.parametrize("ids", ODD_IDS, ids=lambda t: str(t.dtype))
def test_token_ids_of_a_non_integer_dtype_are_refused(ids: torch.Tensor) -> None:
    pattern = rf"^input_ids must be an integer tensor of token ids, got dtype {ids.dtype}"
    with pytest.raises(TypeError, match=pattern):
        hf.fairseq_positions(ids, 1)
    with pytest.raises(TypeError, match=pattern):
        hf.M2M100Positions(D, 1)(ids)
    with pytest.raises(
        TypeError, match=rf"^tokens must be an integer tensor of token ids, got dtype {ids.dtype}"
    ):
        pt.TransformerEmbedding(10, D)(ids)


@pytest.mark.parametrize("ids", [None, "x", [[1, 2]], np.array([[1, 2]])], ids=repr)
def test_token_ids_that_are_not_a_tensor_are_refused(ids: Any) -> None:
    with pytest.raises(TypeError, match=r"^input_ids must be a torch\.Tensor of integer token ids"):
        hf.fairseq_positions(ids, 1)
    if ids is not None:  # M2M100Positions: None means "use inputs_embeds"
        with pytest.raises(TypeError, match=r"^input_ids must be a torch\.Tensor of integer"):
            hf.M2M100Positions(D, 1)(ids)
    with pytest.raises(TypeError, match=r"^tokens must be a torch\.Tensor of integer token ids"):
        pt.TransformerEmbedding(10, D)(ids)


#: (ids dtype, padding_idx): a padding_idx the dtype cannot hold, which used to wrap into it.
WRAPS = [
    (torch.uint8, 257),  # wraps to 1
    (torch.uint8, 256 + 4),  # wraps to 4
    (torch.int8, 128 + 5),  # wraps to -123
    (torch.int16, 2**16 + 1),
    (torch.int32, 2**32 + 1),
    (torch.uint16, 2**16 + 6),
    (torch.uint32, 2**32 + 1),
]


@pytest.mark.parametrize(("dtype", "padding_idx"), WRAPS, ids=repr)
def test_padding_idx_is_compared_exactly(dtype: torch.dtype, padding_idx: int) -> None:
    values = [[4, 5, 1], [1, 6, -123 if dtype == torch.int8 else 7]]
    ids = torch.tensor(values).to(dtype)
    want = posenc.positions_from_tokens(ids.to(torch.int64).numpy(), padding_idx)
    assert hf.fairseq_positions(ids, padding_idx).tolist() == want.tolist()
    assert (want != padding_idx).all()  # no token is padding
    module = hf.M2M100Positions(D, padding_idx)
    expected = pt.sinusoidal(torch.from_numpy(want), D, convention="tensor2tensor")
    assert torch.equal(module(ids), expected)  # no zero row


def test_padding_idx_inside_the_dtype_still_marks_padding() -> None:
    ids = torch.tensor([[4, 5, 1], [1, 6, 7]], dtype=torch.uint8)
    assert hf.fairseq_positions(ids, 1).tolist() == [[2, 3, 1], [1, 2, 3]]


# -- timestep embedding with one channel ----------------------------------------------------


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("shift", [0.0, 1.0])
def test_a_one_channel_timestep_embedding_matches_the_core(flip: bool, shift: float) -> None:
    t = torch.tensor([0.0, 1.0, 999.0])
    kwargs = {"flip_sin_to_cos": flip, "downscale_freq_shift": shift}
    want = torch.from_numpy(posenc.timestep_embedding(t.numpy(), 1, **kwargs))
    assert torch.equal(pt.timestep_embedding(t, 1, **kwargs), want)
    assert torch.equal(pt.TimestepEmbedding(1, **kwargs)(t), want)
    assert pt.TimestepEmbedding(1)(torch.zeros(0)).shape == (0, 1)


# -- an empty sequence with interleaved pairs -----------------------------------------------


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
@pytest.mark.parametrize(
    "kwargs",
    [{}, {"offset": 5}, {"positions": torch.zeros(0, dtype=torch.long)}],
    ids=["default", "offset", "positions"],
)
def test_an_empty_sequence_rotates_to_an_empty_result(pairs: str, kwargs: dict) -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        rope = pt.RotaryEmbedding(6, pairs=pairs)
        q = torch.zeros(2, 3, 0, 6, dtype=dtype)
        k = torch.zeros(2, 1, 0, 6, dtype=dtype)
        q_rot, k_rot = rope(q, k, **kwargs)
        assert (q_rot.shape, k_rot.shape) == (q.shape, k.shape)
        assert q_rot.dtype == k_rot.dtype == dtype
        assert rope.rotate(q, **kwargs).shape == q.shape
        seq_first = pt.RotaryEmbedding(6, pairs=pairs, seq_dim=1)
        x = torch.zeros(2, 0, 3, 6, dtype=dtype)
        assert seq_first.rotate(x, **kwargs).shape == x.shape
        partial = pt.RotaryEmbedding(8, pairs=pairs, rotary_dim=4)
        x = torch.zeros(1, 2, 0, 8, dtype=dtype)
        assert partial.rotate(x, **kwargs).shape == x.shape
