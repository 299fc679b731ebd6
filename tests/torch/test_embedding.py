"""Tests of ``posenc.torch.TransformerEmbedding`` against references built from its weights."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
from posenc.torch import TransformerEmbedding  # noqa: E402


def core(positions, d_model, **kwargs) -> torch.Tensor:
    """The NumPy core's float32 table as a tensor."""
    return torch.from_numpy(posenc.sinusoidal(positions, d_model, **kwargs))


def make(*args, **kwargs) -> TransformerEmbedding:
    torch.manual_seed(0)
    kwargs.setdefault("dropout", 0.0)
    return TransformerEmbedding(*args, **kwargs)


@pytest.mark.parametrize("convention", ["paper", "tensor2tensor", "marian"])
@pytest.mark.parametrize("d_model", [7, 8])
def test_forward_equals_scaled_embedding_plus_table(convention, d_model):
    emb = make(50, d_model, convention=convention)
    tokens = torch.randint(0, 50, (3, 11))
    expected = emb.token.weight[tokens] * math.sqrt(d_model) + core(
        11, d_model, convention=convention
    )
    out = emb(tokens)
    assert out.shape == (3, 11, d_model)
    assert out.dtype == torch.float32
    assert torch.equal(out, expected)


def test_forward_with_segments():
    emb = make(30, 8, num_segments=3)
    tokens = torch.randint(0, 30, (2, 6))
    segments = torch.tensor([[0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 1, 2]])
    expected = emb.token.weight[tokens] * math.sqrt(8) + core(6, 8) + emb.segment.weight[segments]
    assert torch.equal(emb(tokens, segments=segments), expected)
    # omitted segments are all zero
    zeros = torch.zeros_like(tokens)
    assert torch.equal(emb(tokens), emb(tokens, segments=zeros))
    expected_zero = emb.token.weight[tokens] * math.sqrt(8) + core(6, 8) + emb.segment.weight[0]
    assert torch.equal(emb(tokens), expected_zero)


def test_scale_false():
    emb = make(20, 6, scale=False)
    tokens = torch.randint(0, 20, (2, 5))
    assert torch.equal(emb(tokens), emb.token.weight[tokens] + core(5, 6))


def test_padding_idx_row_is_zero_and_gets_no_gradient():
    emb = make(20, 8, padding_idx=1)
    assert torch.equal(emb.token.weight[1], torch.zeros(8))
    tokens = torch.tensor([[1, 1, 5, 6], [7, 8, 9, 1]])
    out = emb(tokens)
    # padding tokens get the position encoding only: positions are not changed by padding
    assert torch.equal(out[0, 0], core(4, 8)[0])
    assert torch.equal(out[1, 3], core(4, 8)[3])
    (out * torch.randn_like(out)).sum().backward()
    grad = emb.token.weight.grad
    assert torch.equal(grad[1], torch.zeros(8))
    assert grad[5].abs().sum() > 0
    assert grad[9].abs().sum() > 0
    assert torch.equal(grad[2], torch.zeros(8))  # unused token


def test_explicit_positions_from_tokens_and_offset():
    emb = make(20, 8, padding_idx=1)
    tokens = np.array([[1, 1, 7, 8, 9], [5, 6, 7, 8, 1]])
    positions = posenc.positions_from_tokens(tokens, padding_idx=1)
    tok = torch.from_numpy(tokens)
    scaled = emb.token.weight[tok] * math.sqrt(8)
    assert torch.equal(emb(tok, positions=torch.from_numpy(positions)), scaled + core(positions, 8))
    assert torch.equal(emb(tok, positions=positions), scaled + core(positions, 8))  # ndarray
    assert torch.equal(
        emb(tok, positions=torch.from_numpy(positions), offset=4), scaled + core(positions + 4, 8)
    )
    assert torch.equal(emb(tok, offset=100), scaled + core(np.arange(100, 105), 8))


def test_batch_first_false():
    emb = make(30, 6, num_segments=2, batch_first=False)
    tokens = torch.randint(0, 30, (7, 3))  # (s, b)
    segments = torch.randint(0, 2, (7, 3))
    expected = (
        emb.token.weight[tokens] * math.sqrt(6)
        + core(7, 6)[:, None, :]
        + emb.segment.weight[segments]
    )
    assert torch.equal(emb(tokens, segments=segments), expected)
    expected = emb.token.weight[tokens] * math.sqrt(6) + core(np.arange(5, 12), 6)[:, None, :]
    assert torch.equal(emb(tokens, offset=5), expected + emb.segment.weight[0])


@pytest.mark.parametrize("batch_first", [True, False])
def test_one_dimensional_tokens(batch_first):
    emb = make(30, 6, num_segments=2, batch_first=batch_first)
    tokens = torch.tensor([4, 8, 15, 16, 23])
    segments = torch.tensor([0, 0, 1, 1, 1])
    expected = emb.token.weight[tokens] * math.sqrt(6) + core(5, 6) + emb.segment.weight[segments]
    out = emb(tokens, segments=segments)
    assert out.shape == (5, 6)
    assert torch.equal(out, expected)


def test_dropout_and_modes():
    emb = TransformerEmbedding(30, 32, dropout=0.5)
    tokens = torch.randint(0, 30, (8, 64))
    emb.eval()
    clean = emb.token.weight[tokens] * math.sqrt(32) + core(64, 32)
    assert torch.equal(emb(tokens), clean)
    emb.train()
    torch.manual_seed(1)
    out = emb(tokens)
    dropped = out == 0
    assert 0.4 < dropped.double().mean().item() < 0.6
    assert torch.equal(out[~dropped], 2 * clean[~dropped])


def test_gradients_reach_token_and_segment_weights():
    emb = make(10, 4, num_segments=2)
    tokens = torch.tensor([[1, 2, 3]])
    emb(tokens, segments=torch.tensor([[0, 1, 1]])).sum().backward()
    expected = torch.zeros(10, 4)
    expected[[1, 2, 3]] = math.sqrt(4)
    assert torch.equal(emb.token.weight.grad, expected)
    assert torch.equal(emb.segment.weight.grad, torch.tensor([[1.0] * 4, [2.0] * 4]))


def test_state_dict_has_weights_but_no_table():
    emb = make(10, 4, num_segments=2, max_len=16)
    assert set(emb.state_dict()) == {"token.weight", "segment.weight"}
    assert set(make(10, 4).state_dict()) == {"token.weight"}
    other = make(10, 4, num_segments=2, max_len=1024)
    torch.nn.init.zeros_(other.token.weight)
    other.load_state_dict(emb.state_dict(), strict=True)
    tokens = torch.randint(0, 10, (2, 30))
    assert torch.equal(other(tokens), emb(tokens))
    assert other.position.pe.shape == (1024, 4)


def test_meta_device_init():
    with torch.device("meta"):
        emb = TransformerEmbedding(10, 8, num_segments=2, max_len=16)
    assert emb.token.weight.device.type == "meta"
    assert emb.segment.weight.device.type == "meta"
    assert emb.position.pe.device.type == "meta"
    emb.to_empty(device="cpu")
    assert torch.equal(emb.position.pe, core(16, 8))
    torch.manual_seed(2)
    emb.token.reset_parameters()
    emb.segment.reset_parameters()
    tokens = torch.randint(0, 10, (2, 20))
    expected = emb.token.weight[tokens] * math.sqrt(8) + core(20, 8) + emb.segment.weight[0]
    assert torch.equal(emb.eval()(tokens), expected)


def test_factory_dtype():
    emb = make(10, 8, dtype=torch.bfloat16, max_len=4)
    assert emb.token.weight.dtype == torch.bfloat16
    assert emb.position.pe.dtype == torch.bfloat16
    assert emb(torch.tensor([[1, 2, 3]])).dtype == torch.bfloat16


ERRORS = [
    pytest.param(
        {},
        {"tokens": torch.zeros(2, 3)},
        TypeError,
        "tokens must be an integer tensor of token ids, got dtype torch.float32",
        id="float-tokens",
    ),
    pytest.param(
        {},
        {"tokens": torch.ones(2, 3, dtype=torch.bool)},
        TypeError,
        "tokens must be an integer tensor of token ids, got dtype torch.bool",
        id="bool-tokens",
    ),
    pytest.param(
        {},
        {"tokens": [[1, 2]]},
        TypeError,
        "tokens must be a torch.Tensor of integer token ids, got list",
        id="list-tokens",
    ),
    pytest.param(
        {},
        {"tokens": torch.tensor([[-1, 2]])},
        ValueError,
        "tokens must lie in [0, 9], got values from -1 to 2",
        id="negative-token",
    ),
    pytest.param(
        {},
        {"tokens": torch.tensor([[10, 2]])},
        ValueError,
        "tokens must lie in [0, 9], got values from 2 to 10",
        id="token-too-big",
    ),
    pytest.param(
        {},
        {"tokens": torch.zeros(1, 2, 3, dtype=torch.long)},
        ValueError,
        "tokens must have shape (b, s), (s, b) or (s,), got (1, 2, 3)",
        id="tokens-3d",
    ),
    pytest.param(
        {},
        {"tokens": torch.tensor([[1, 2]]), "segments": torch.tensor([[0, 0]])},
        ValueError,
        "segments were given but num_segments is 0; set num_segments",
        id="segments-without-num",
    ),
    pytest.param(
        {"num_segments": 2},
        {"tokens": torch.tensor([[1, 2]]), "segments": torch.tensor([0, 0])},
        ValueError,
        "segments must have the shape of tokens (1, 2), got (2,)",
        id="segments-shape",
    ),
    pytest.param(
        {"num_segments": 2},
        {"tokens": torch.tensor([[1, 2]]), "segments": torch.tensor([[0, 2]])},
        ValueError,
        "segments must lie in [0, 1], got values from 0 to 2",
        id="segments-too-big",
    ),
    pytest.param(
        {"num_segments": 2},
        {"tokens": torch.tensor([[1, 2]]), "segments": torch.tensor([[0, -1]])},
        ValueError,
        "segments must lie in [0, 1], got values from -1 to 0",
        id="segments-negative",
    ),
    pytest.param(
        {"num_segments": 2},
        {"tokens": torch.tensor([[1, 2]]), "segments": torch.tensor([[0.0, 1.0]])},
        TypeError,
        "segments must be an integer tensor of segment ids, got dtype torch.float32",
        id="segments-float",
    ),
    pytest.param(
        {},
        {"tokens": torch.tensor([[1, 2]]), "positions": torch.arange(3)},
        ValueError,
        "positions must have shape (s,) = (2,) or (b, s) = (1, 2)",
        id="positions-shape",
    ),
    pytest.param(
        {},
        {"tokens": torch.tensor([[1, 2]]), "offset": -1},
        ValueError,
        "offset must be an integer >= 0, got -1",
        id="offset",
    ),
]


@pytest.mark.parametrize(("init", "call", "exc", "message"), ERRORS)
def test_forward_errors(init, call, exc, message):
    emb = make(10, 4, **init)
    call = dict(call)
    tokens = call.pop("tokens")
    with pytest.raises(exc, match=re.escape(message)):
        emb(tokens, **call)


INIT_ERRORS = [
    pytest.param(
        {"padding_idx": 10}, ValueError, "padding_idx must be in [0, 9], got 10", id="padding_idx"
    ),
    pytest.param(
        {"padding_idx": -1},
        ValueError,
        "padding_idx must be an integer >= 0, got -1",
        id="padding_idx-neg",
    ),
    pytest.param({"scale": 2.0}, TypeError, "scale must be True or False, got 2.0", id="scale"),
    pytest.param({"scale": 1}, TypeError, "scale must be True or False, got 1", id="scale-int"),
    pytest.param(
        {"vocab_size": 0}, ValueError, "vocab_size must be an integer >= 1, got 0", id="vocab_size"
    ),
    pytest.param(
        {"d_model": 0}, ValueError, "d_model must be an integer >= 1, got 0", id="d_model"
    ),
    pytest.param(
        {"num_segments": -1},
        ValueError,
        "num_segments must be an integer >= 0, got -1",
        id="num_segments",
    ),
    pytest.param(
        {"dropout": 2}, ValueError, "dropout must be a number in [0, 1], got 2.0", id="dropout"
    ),
    pytest.param(
        {"convention": "bert"},
        ValueError,
        "convention must be one of 'marian', 'musicgen', 'paper', 'tensor2tensor', got 'bert'",
        id="convention",
    ),
    pytest.param(
        {"batch_first": "no"},
        TypeError,
        "batch_first must be True or False, got 'no'",
        id="batch_first",
    ),
]


@pytest.mark.parametrize(("kwargs", "exc", "message"), INIT_ERRORS)
def test_init_errors(kwargs, exc, message):
    args = {"vocab_size": 10, "d_model": 4, **kwargs}
    with pytest.raises(exc, match=re.escape(message)):
        TransformerEmbedding(args.pop("vocab_size"), args.pop("d_model"), **args)
