"""Tests of the module ``posenc.torch.SinusoidalPositionalEncoding``.

References are the NumPy core (``posenc.sinusoidal``, float64) and, for float16/bfloat16, the
rounding helper ``round_once`` of ``tests/torch/conftest.py`` (never ``cast_exact`` or
``Tensor.to``). The functional ``posenc.torch.sinusoidal`` is tested in ``test_functional.py``,
``cast_exact`` in ``test_cast.py``.
"""

from __future__ import annotations

import copy
import io
import math
import pickle
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import posenc  # noqa: E402
from posenc.torch import SinusoidalPositionalEncoding, sinusoidal  # noqa: E402
from tests.torch.conftest import core, round_once, same_bits  # noqa: E402

CONVENTIONS = tuple(sorted(posenc.CONVENTIONS))  # every registered convention
HALF_DTYPES = (torch.float16, torch.bfloat16)


# -- forward equals x + core table -------------------------------------------------------------


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("d_model", [1, 2, 7, 8])
def test_forward_batch_first_equals_core(convention, d_model):
    torch.manual_seed(0)
    m = SinusoidalPositionalEncoding(d_model, convention=convention)
    x = torch.randn(3, 11, d_model)
    expected = x + core(11, d_model, convention=convention)
    out = m(x)
    assert out.dtype == torch.float32
    assert out.shape == x.shape
    assert torch.equal(out, expected)


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("d_model", [5, 6])
def test_forward_sequence_first_equals_core(convention, d_model):
    torch.manual_seed(1)
    m = SinusoidalPositionalEncoding(d_model, convention=convention, batch_first=False)
    x = torch.randn(9, 2, d_model)  # (s, b, d)
    expected = x + core(9, d_model, convention=convention)[:, None, :]
    assert torch.equal(m(x), expected)


@pytest.mark.parametrize("batch_first", [True, False])
def test_forward_unbatched_equals_core(batch_first):
    x = torch.randn(7, 5)
    m = SinusoidalPositionalEncoding(5, batch_first=batch_first, convention="marian")
    assert torch.equal(m(x), x + core(7, 5, convention="marian"))
    assert torch.equal(m(x, offset=4), x + core(np.arange(4, 11), 5, convention="marian"))


@pytest.mark.parametrize("batch_first", [True, False])
def test_forward_offset_equals_core(batch_first):
    m = SinusoidalPositionalEncoding(6, batch_first=batch_first, base=500.0)
    x = torch.randn(2, 4, 6) if batch_first else torch.randn(4, 2, 6)
    table = core(np.arange(37, 41), 6, base=500.0)
    expected = x + (table if batch_first else table[:, None, :])
    assert torch.equal(m(x, offset=37), expected)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_forward_explicit_positions_equal_core(batch_first, convention):
    m = SinusoidalPositionalEncoding(7, batch_first=batch_first, convention=convention)
    x = torch.randn(2, 5, 7) if batch_first else torch.randn(5, 2, 7)
    pos = np.array([4, 0, 3, 100000, 2])
    table = core(pos, 7, convention=convention)
    expected = x + (table if batch_first else table[:, None, :])
    assert torch.equal(m(x, positions=torch.from_numpy(pos)), expected)
    assert torch.equal(m(x, positions=pos.tolist()), expected)  # list input
    shifted = core(pos + 10, 7, convention=convention)
    expected = x + (shifted if batch_first else shifted[:, None, :])
    assert torch.equal(m(x, positions=torch.from_numpy(pos), offset=10), expected)


@pytest.mark.parametrize("batch_first", [True, False])
def test_forward_per_token_positions_equal_core(batch_first):
    rng = np.random.default_rng(2)
    m = SinusoidalPositionalEncoding(6, batch_first=batch_first)
    shape = (3, 5) if batch_first else (5, 3)  # (b, s) / (s, b)
    pos = rng.integers(0, 5000, shape)
    x = torch.randn(*shape, 6)
    assert torch.equal(m(x, positions=torch.from_numpy(pos)), x + core(pos, 6))
    assert torch.equal(m(x, positions=torch.from_numpy(pos), offset=3), x + core(pos + 3, 6))


def test_forward_float_and_negative_positions_equal_core():
    m = SinusoidalPositionalEncoding(8)
    pos = np.array([0.5, -3.25, 1e5 + 0.125, -7.0])
    x = torch.randn(2, 4, 8)
    assert torch.equal(m(x, positions=torch.from_numpy(pos)), x + core(pos, 8))
    assert torch.equal(m(x, positions=torch.from_numpy(pos), offset=2), x + core(pos + 2, 8))


def test_forward_unbatched_per_token_positions():
    m = SinusoidalPositionalEncoding(4)
    x = torch.randn(3, 4)
    assert torch.equal(m(x, positions=torch.tensor([9, 1, 5])), x + core([9, 1, 5], 4))


def test_forward_empty_sequence():
    m = SinusoidalPositionalEncoding(4)
    assert m(torch.zeros(2, 0, 4)).shape == (2, 0, 4)
    assert m.encoding(0).shape == (0, 4)


def test_encoding_equals_core():
    m = SinusoidalPositionalEncoding(9, convention="tensor2tensor", max_len=8)
    assert torch.equal(m.encoding(5), core(5, 9, convention="tensor2tensor"))
    assert torch.equal(
        m.encoding(5, offset=6), core(np.arange(6, 11), 9, convention="tensor2tensor")
    )
    pos = np.array([[3, 1], [0, 77]])
    assert torch.equal(m.encoding(torch.from_numpy(pos)), core(pos, 9, convention="tensor2tensor"))
    assert torch.equal(
        m.encoding(torch.from_numpy(pos), offset=2), core(pos + 2, 9, convention="tensor2tensor")
    )
    enc = m.encoding(5)
    assert not enc.requires_grad


# -- slicing invariant ---------------------------------------------------------------------------


def test_token_by_token_equals_full_sequence():
    torch.manual_seed(3)
    x = torch.randn(2, 40, 8)
    full = SinusoidalPositionalEncoding(8)(x)
    m = SinusoidalPositionalEncoding(8)
    steps = [m(x[:, t : t + 1], offset=t) for t in range(40)]
    assert torch.equal(torch.cat(steps, dim=1), full)
    assert torch.equal(full, x + core(40, 8))


@settings(max_examples=15, deadline=None)
@given(
    chunks=st.lists(st.integers(1, 12), min_size=1, max_size=6),
    max_len=st.sampled_from([None, 0, 3, 64]),
    d_model=st.sampled_from([3, 8]),
    batch_first=st.booleans(),
)
def test_chunked_equals_full_sequence(chunks, max_len, d_model, batch_first):
    total = sum(chunks)
    seq_dim = 1 if batch_first else 0
    x = torch.randn((2, total, d_model) if batch_first else (total, 2, d_model))
    full = SinusoidalPositionalEncoding(d_model, batch_first=batch_first)(x)
    m = SinusoidalPositionalEncoding(d_model, batch_first=batch_first, max_len=max_len)
    outs, start = [], 0
    for size in chunks:
        outs.append(m(x.narrow(seq_dim, start, size), offset=start))
        start += size
    assert torch.equal(torch.cat(outs, dim=seq_dim), full)


# -- cache ---------------------------------------------------------------------------------------


def test_cache_starts_empty_and_grows_geometrically():
    m = SinusoidalPositionalEncoding(6)
    assert m.pe.shape == (0, 6)
    m(torch.zeros(1, 5, 6))
    assert m.pe.shape == (5, 6)  # max(5, 2 * 0)
    m(torch.zeros(1, 7, 6))
    assert m.pe.shape == (10, 6)  # max(7, 2 * 5)
    m(torch.zeros(1, 3, 6))
    assert m.pe.shape == (10, 6)  # fits: no growth
    m(torch.zeros(1, 1, 6), offset=10)
    assert m.pe.shape == (20, 6)  # contiguous growth
    m(torch.zeros(1, 50, 6))
    assert m.pe.shape == (50, 6)  # max(50, 40)
    m(torch.zeros(1, 10, 6), offset=45)
    assert m.pe.shape == (100, 6)  # max(55, 100)
    assert torch.equal(m.pe, core(100, 6))


def test_max_len_precomputes_rows():
    m = SinusoidalPositionalEncoding(6, max_len=16)
    assert m.pe.shape == (16, 6)
    assert torch.equal(m.pe, core(16, 6))
    assert m.pe.dtype == torch.float32
    assert list(m.parameters()) == []


def test_far_offset_jump_does_not_grow_cache_but_is_correct():
    m = SinusoidalPositionalEncoding(6, max_len=16)
    x = torch.randn(2, 4, 6)
    out = m(x, offset=1000)
    assert m.pe.shape == (16, 6)
    assert torch.equal(out, x + core(np.arange(1000, 1004), 6))
    # start == cached rows is contiguous growth, start > cached rows is not
    m(x, offset=17)
    assert m.pe.shape == (16, 6)
    m(x, offset=16)
    assert m.pe.shape == (32, 6)
    empty = SinusoidalPositionalEncoding(6)
    assert torch.equal(empty(x, offset=3), x + core(np.arange(3, 7), 6))
    assert empty.pe.shape == (0, 6)


def test_explicit_positions_do_not_grow_cache():
    m = SinusoidalPositionalEncoding(6, max_len=4)
    m(torch.zeros(1, 3, 6), positions=torch.tensor([100, 200, 300]))
    assert m.pe.shape == (4, 6)


def test_pe_not_in_state_dict_and_checkpoints_load_across_max_len():
    small = SinusoidalPositionalEncoding(8, max_len=16)
    assert "pe" not in small.state_dict()
    assert len(small.state_dict()) == 0
    big = SinusoidalPositionalEncoding(8, max_len=1024)
    big.load_state_dict(small.state_dict(), strict=True)
    assert big.pe.shape == (1024, 8)

    torch.manual_seed(4)
    model_a = torch.nn.Sequential(
        torch.nn.Linear(8, 8), SinusoidalPositionalEncoding(8, max_len=16)
    )
    model_b = torch.nn.Sequential(
        torch.nn.Linear(8, 8), SinusoidalPositionalEncoding(8, max_len=1024)
    )
    assert set(model_a.state_dict()) == {"0.weight", "0.bias"}
    model_b.load_state_dict(model_a.state_dict(), strict=True)
    x = torch.randn(2, 20, 8)
    assert torch.equal(model_a(x), model_b(x))


def _roundtrip_pickle(m):
    return pickle.loads(pickle.dumps(m))


def _roundtrip_torch_save(m):
    buffer = io.BytesIO()
    torch.save(m, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


@pytest.mark.parametrize(
    "roundtrip",
    [_roundtrip_pickle, copy.deepcopy, _roundtrip_torch_save],
    ids=["pickle", "deepcopy", "torch.save"],
)
def test_serialisation_roundtrips_give_identical_outputs(roundtrip):
    m = SinusoidalPositionalEncoding(7, max_len=5, convention="marian", base=300.0)
    x = torch.randn(2, 12, 7)
    m(x)  # grow the cache before copying
    clone = roundtrip(m)
    assert clone is not m
    assert clone.pe.shape == m.pe.shape
    assert clone._omega.dtype == torch.float64
    for kwargs in ({}, {"offset": 30}, {"positions": torch.arange(12) * 3}):
        assert torch.equal(clone(x, **kwargs), m(x, **kwargs))
    assert torch.equal(clone(x), x + core(12, 7, convention="marian", base=300.0))


def test_repr():
    text = repr(SinusoidalPositionalEncoding(16, convention="marian", batch_first=False))
    assert "d_model=16, convention='marian', base=10000.0, batch_first=False, max_len=None" in text


# -- float16 / bfloat16 ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_half_inputs_give_half_outputs_rounded_once(dtype):
    d_model, n = 64, 4096
    table64 = core(n, d_model, dtype=np.float64)
    expected = round_once(table64, dtype)
    # the table has entries where the double rounding of Tensor.to is wrong
    assert not same_bits(table64.to(dtype), expected)
    assert not same_bits(core(n, d_model).to(dtype), expected)

    m = SinusoidalPositionalEncoding(d_model)
    x = torch.zeros(1, n, d_model, dtype=dtype)
    out = m(x)
    assert out.dtype == dtype
    assert torch.equal(out[0], expected)
    assert same_bits(m.encoding(n, dtype=dtype), expected)
    assert same_bits(sinusoidal(n, d_model, dtype=dtype), expected)
    y = torch.randn(2, n, d_model).to(dtype)
    assert torch.equal(m(y), y + expected)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_half_on_the_fly_and_large_positions(dtype):
    # positions beyond the float16 range: float16 recipes build inf/nan here
    assert torch.isinf(torch.arange(69990, 70010).to(torch.float16)).any()
    d_model = 16
    pos = np.arange(65000, 70010)
    expected = round_once(core(pos, d_model, dtype=np.float64), dtype)
    m = SinusoidalPositionalEncoding(d_model, max_len=8)
    out = m(torch.zeros(pos.size, d_model, dtype=dtype), offset=65000)  # far jump: on the fly
    assert torch.isfinite(out).all()
    assert same_bits(out, expected)
    explicit = m(torch.zeros(1, pos.size, d_model, dtype=dtype), positions=torch.from_numpy(pos))
    assert same_bits(explicit[0], expected)
    assert same_bits(sinusoidal(torch.from_numpy(pos), d_model, dtype=dtype), expected)
    at_65520 = sinusoidal(torch.tensor([65520]), 2, dtype=torch.float16)
    expected_65520 = np.array([[math.sin(65520), math.cos(65520)]]).astype(np.float16)
    assert torch.equal(at_65520, torch.from_numpy(expected_65520))


def test_half_dtype_factory_kwarg():
    m = SinusoidalPositionalEncoding(64, max_len=4096, dtype=torch.bfloat16)
    assert m.pe.dtype == torch.bfloat16
    assert same_bits(m.pe, round_once(core(4096, 64, dtype=np.float64), torch.bfloat16))


@pytest.mark.parametrize(
    ("cast", "dtype"),
    [
        (lambda m: m.to(torch.bfloat16), torch.bfloat16),
        (lambda m: m.half(), torch.float16),
        (lambda m: m.bfloat16(), torch.bfloat16),
        (lambda m: m.to(dtype=torch.float16), torch.float16),
    ],
    ids=["to-bf16", "half", "bfloat16", "to-fp16"],
)
def test_module_cast_rebuilds_table_from_float64(cast, dtype):
    d_model, n = 64, 4096
    m = SinusoidalPositionalEncoding(d_model, max_len=n)
    cast(m)
    assert m.pe.dtype == dtype
    assert m.pe.shape == (n, d_model)
    expected = round_once(core(n, d_model, dtype=np.float64), dtype)
    assert not same_bits(core(n, d_model).to(dtype), expected)  # a float32 cast is wrong
    assert same_bits(m.pe, expected)
    assert m._omega.dtype == torch.float64
    assert same_bits(m(torch.zeros(n, d_model, dtype=dtype)), expected)


def test_module_double_rebuilds_table_from_float64():
    d_model, n = 32, 1000
    m = SinusoidalPositionalEncoding(d_model, max_len=n).double()
    assert m.pe.dtype == torch.float64
    assert m._omega.dtype == torch.float64
    table64 = posenc.sinusoidal(n, d_model, dtype=np.float64)
    # within one float64 ulp of the NumPy core (torch's and NumPy's sin may differ by 1 ulp)
    assert np.all(np.abs(m.pe.numpy() - table64) <= np.spacing(np.abs(table64)))
    # not a cast of the float32 table
    assert (m.pe - core(n, d_model).double()).abs().max() > 1e-9
    back = m.float()
    assert back.pe.dtype == torch.float32
    assert torch.equal(back.pe, core(n, d_model))


def test_float64_input_on_float32_module():
    m = SinusoidalPositionalEncoding(8, max_len=16)
    x = torch.zeros(2, 10, 8, dtype=torch.float64)
    out = m(x)
    assert out.dtype == torch.float64
    table64 = posenc.sinusoidal(10, 8, dtype=np.float64)
    assert np.all(np.abs(out[0].numpy() - table64) <= np.spacing(np.abs(table64)))
    assert torch.equal(m(torch.zeros(2, 10, 8)), core(10, 8).expand(2, 10, 8))


# -- meta device -------------------------------------------------------------------------------


def test_meta_device_init_forward_and_to_empty():
    with torch.device("meta"):
        m = SinusoidalPositionalEncoding(8, max_len=16)
    assert m.pe.device.type == "meta"
    assert m.pe.shape == (16, 8)
    out = m(torch.empty(2, 5, 8, device="meta"))
    assert out.device.type == "meta"
    assert out.shape == (2, 5, 8)
    out = m(torch.empty(3, 40, 8, device="meta", dtype=torch.bfloat16))  # longer than cache
    assert out.device.type == "meta"
    assert out.shape == (3, 40, 8)
    assert out.dtype == torch.bfloat16
    m = SinusoidalPositionalEncoding(8, max_len=16, device="meta")
    m.to_empty(device="cpu")
    assert m.pe.device.type == "cpu"
    assert torch.equal(m.pe, core(16, 8))
    x = torch.randn(2, 20, 8)
    assert torch.equal(m(x), x + core(20, 8))


# -- gradients, dropout, modes -----------------------------------------------------------------


def test_gradient_flows_to_input():
    m = SinusoidalPositionalEncoding(8, max_len=4)
    x = torch.randn(2, 6, 8, requires_grad=True)
    m(x).sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))
    assert not m.pe.requires_grad


def test_cache_built_under_inference_mode_is_usable_with_autograd():
    m = SinusoidalPositionalEncoding(8)
    with torch.inference_mode():
        m(torch.zeros(1, 6, 8))
    assert m.pe.shape == (6, 8)
    assert not m.pe.is_inference()
    x = torch.randn(1, 6, 8, requires_grad=True)
    m(x).sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))


def test_dropout_train_and_eval():
    m = SinusoidalPositionalEncoding(64, dropout=0.5)
    x = torch.full((8, 128, 64), 3.0)  # x + pe is in [2, 4]: never zero
    clean = x + core(128, 64)
    torch.manual_seed(5)
    out = m.train()(x)
    dropped = out == 0
    fraction = dropped.double().mean().item()
    assert 0.45 < fraction < 0.55
    assert torch.equal(out[~dropped], 2 * clean[~dropped])
    torch.manual_seed(6)
    assert not torch.equal(m(x), out)  # a different mask
    m.eval()
    assert torch.equal(m(x), clean)
    assert torch.equal(m(x), m(x))


def test_dropout_gradient_is_masked():
    m = SinusoidalPositionalEncoding(16, dropout=0.5)
    x = torch.randn(4, 32, 16, requires_grad=True)
    torch.manual_seed(7)
    out = m(x)
    out.sum().backward()
    kept = out != 0
    assert torch.equal(x.grad, kept.to(x.dtype) * 2)


# -- torch.compile -------------------------------------------------------------------------------


@pytest.mark.slow
def test_torch_compile_fullgraph_matches_eager():
    torch._dynamo.reset()
    m = SinusoidalPositionalEncoding(8, max_len=4).eval()
    compiled = torch.compile(m, fullgraph=True)
    torch.manual_seed(8)
    x = torch.randn(2, 10, 8)  # longer than the cache: computed on the fly
    out = compiled(x)
    assert m.pe.shape == (4, 8)  # no buffer mutation while compiled
    assert torch.equal(out, x + core(10, 8))
    short = torch.randn(2, 3, 8)  # within the cache
    assert torch.equal(compiled(short), short + core(3, 8))
    assert m.pe.shape == (4, 8)
    assert torch.equal(out, m(x))  # eager


# -- errors ------------------------------------------------------------------------------------

PE = SinusoidalPositionalEncoding


def _x(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


ERRORS = [
    pytest.param(
        lambda: PE(0), ValueError, "d_model must be an integer >= 1, got 0", id="d_model-0"
    ),
    pytest.param(
        lambda: PE(2.5), TypeError, "d_model must be an integer >= 1, got 2.5", id="d_model-2.5"
    ),
    pytest.param(
        lambda: PE(True), TypeError, "d_model must be an integer >= 1, got True", id="d_model-True"
    ),
    pytest.param(
        lambda: PE(8, base=0),
        ValueError,
        "base must be a positive finite number, got 0.0",
        id="base-0",
    ),
    pytest.param(
        lambda: PE(8, base=-1),
        ValueError,
        "base must be a positive finite number, got -1.0",
        id="base-neg",
    ),
    pytest.param(
        lambda: PE(8, base=math.nan),
        ValueError,
        "base must be a positive finite number, got nan",
        id="base-nan",
    ),
    pytest.param(
        lambda: PE(8, base=math.inf),
        ValueError,
        "base must be a positive finite number, got inf",
        id="base-inf",
    ),
    pytest.param(
        lambda: PE(8, base="x"),
        TypeError,
        "base must be a positive finite number, got 'x'",
        id="base-str",
    ),
    pytest.param(
        lambda: PE(8, convention="bert"),
        ValueError,
        "convention must be one of 'marian', 'musicgen', 'paper', 'tensor2tensor', got 'bert'",
        id="convention",
    ),
    pytest.param(
        lambda: PE(8, dropout=-0.1),
        ValueError,
        "dropout must be a number in [0, 1], got -0.1",
        id="dropout-neg",
    ),
    pytest.param(
        lambda: PE(8, dropout=1.5),
        ValueError,
        "dropout must be a number in [0, 1], got 1.5",
        id="dropout-big",
    ),
    pytest.param(
        lambda: PE(8, dropout=math.nan),
        ValueError,
        "dropout must be a number in [0, 1], got nan",
        id="dropout-nan",
    ),
    pytest.param(
        lambda: PE(8, batch_first="yes"),
        TypeError,
        "batch_first must be True or False, got 'yes'",
        id="batch_first",
    ),
    pytest.param(
        lambda: PE(8, max_len=-1),
        ValueError,
        "max_len must be an integer >= 0, got -1",
        id="max_len",
    ),
    pytest.param(
        lambda: PE(8, dtype=torch.int64),
        TypeError,
        "dtype must be one of torch.float16, torch.bfloat16, torch.float32, torch.float64, "
        "got torch.int64",
        id="factory-dtype",
    ),
    pytest.param(
        lambda: PE(8)(_x(2, 3, 8, dtype=torch.int64)),
        TypeError,
        "x must be a floating-point tensor of embeddings, got dtype torch.int64",
        id="x-int",
    ),
    pytest.param(
        lambda: PE(8)(np.zeros((2, 3, 8))),
        TypeError,
        "x must be a torch.Tensor, got ndarray",
        id="x-array",
    ),
    pytest.param(
        lambda: PE(8)(_x(8)),
        ValueError,
        "x must have shape (b, s, d) or (s, d) with d = d_model = 8, got 1-D shape (8,)",
        id="x-1d",
    ),
    pytest.param(
        lambda: PE(8)(_x(1, 2, 3, 8)),
        ValueError,
        "x must have shape (b, s, d) or (s, d) with d = d_model = 8, got 4-D shape (1, 2, 3, 8)",
        id="x-4d",
    ),
    pytest.param(
        lambda: PE(8, batch_first=False)(_x(1, 2, 3, 8)),
        ValueError,
        "x must have shape (s, b, d) or (s, d)",
        id="x-4d-seq-first",
    ),
    pytest.param(
        lambda: PE(8)(_x(2, 3, 7)),
        ValueError,
        "x must have d_model = 8 channels in its last dimension, got shape (2, 3, 7)",
        id="x-channels",
    ),
    pytest.param(
        lambda: PE(8)(_x(2, 3, 8), positions=torch.arange(4)),
        ValueError,
        "positions must have shape (s,) = (3,) or (b, s) = (2, 3) "
        "for x of shape (2, 3, 8), got (4,)",
        id="positions-len",
    ),
    pytest.param(
        lambda: PE(8)(_x(2, 3, 8), positions=torch.zeros(3, 2)),
        ValueError,
        "positions must have shape (s,) = (3,) or (b, s) = (2, 3) "
        "for x of shape (2, 3, 8), got (3, 2)",
        id="positions-transposed",
    ),
    pytest.param(
        lambda: PE(8, batch_first=False)(_x(3, 2, 8), positions=torch.zeros(2, 3)),
        ValueError,
        "positions must have shape (s,) = (3,) or (s, b) = (3, 2) "
        "for x of shape (3, 2, 8), got (2, 3)",
        id="positions-seq-first",
    ),
    pytest.param(
        lambda: PE(8)(_x(2, 3, 8), positions=torch.tensor([0.0, math.nan, 1.0])),
        ValueError,
        "positions must be finite, got NaN or infinity among its values",
        id="positions-nan",
    ),
    pytest.param(
        lambda: PE(8)(_x(2, 3, 8), positions=torch.tensor([0.0, math.inf, 1.0])),
        ValueError,
        "positions must be finite, got NaN or infinity among its values",
        id="positions-inf",
    ),
    pytest.param(
        lambda: PE(8)(_x(2, 3, 8), positions=torch.ones(3, dtype=torch.bool)),
        TypeError,
        "positions must hold integers or real numbers, got dtype torch.bool",
        id="positions-bool",
    ),
    pytest.param(
        lambda: PE(8)(_x(2, 3, 8), offset=-1),
        ValueError,
        "offset must be an integer >= 0, got -1",
        id="offset-neg",
    ),
    pytest.param(
        lambda: PE(8)(_x(2, 3, 8), offset=1.5),
        TypeError,
        "offset must be an integer >= 0, got 1.5",
        id="offset-float",
    ),
    pytest.param(
        lambda: PE(8)(_x(2, 3, 8), offset=True),
        TypeError,
        "offset must be an integer >= 0, got True",
        id="offset-bool",
    ),
    pytest.param(
        lambda: PE(8).encoding(3, dtype=torch.int64),
        TypeError,
        "dtype must be one of torch.float16, torch.bfloat16, torch.float32, torch.float64, "
        "got torch.int64",
        id="encoding-dtype",
    ),
    pytest.param(
        lambda: PE(8).encoding(-1),
        ValueError,
        "length_or_positions must be an integer >= 0, got -1",
        id="encoding-length",
    ),
    pytest.param(
        lambda: PE(8).encoding(3, offset=-2),
        ValueError,
        "offset must be an integer >= 0, got -2",
        id="encoding-offset",
    ),
    pytest.param(
        lambda: PE(8).encoding(torch.tensor([math.nan])),
        ValueError,
        "length_or_positions must be finite",
        id="encoding-nan",
    ),
]


@pytest.mark.parametrize(("call", "exc", "message"), ERRORS)
def test_errors(call, exc, message):
    with pytest.raises(exc, match=re.escape(message)):
        call()


def test_rejected_call_leaves_cache_untouched():
    m = SinusoidalPositionalEncoding(8, max_len=4)
    with pytest.raises(ValueError, match="offset must be an integer >= 0"):
        m(_x(1, 10, 8), offset=-1)
    assert m.pe.shape == (4, 8)


# -- regressions: offset is added in int64/float64; share_memory keeps the buffer ---------------


@pytest.mark.parametrize(
    ("positions", "offset", "expected_positions"),
    [
        (torch.tensor([250, 251], dtype=torch.uint8), 10, [260, 261]),
        (torch.tensor([32767, 0], dtype=torch.int16), 1, [32768, 1]),
        (torch.tensor([0.0, 1.0], dtype=torch.float16), 70000, [70000, 70001]),
        (torch.tensor([2048.0, 4.0], dtype=torch.float16), 1, [2049, 5]),
    ],
    ids=["uint8-wraps", "int16-wraps", "float16-inf", "float16-rounds"],
)
def test_forward_offset_is_added_exactly_to_narrow_positions(positions, offset, expected_positions):
    m = SinusoidalPositionalEncoding(4)
    out = m(torch.zeros(2, 4), positions=positions, offset=offset)
    assert torch.equal(out, core(expected_positions, 4))


def test_encoding_offset_is_added_exactly_to_narrow_positions():
    m = SinusoidalPositionalEncoding(4)
    out = m.encoding(torch.tensor([250], dtype=torch.uint8), offset=10)
    assert torch.equal(out, core([260], 4))


def test_share_memory_keeps_pe_shared():
    m = SinusoidalPositionalEncoding(8, max_len=4)
    m.share_memory()
    assert m.pe.is_shared()
