"""Tests of the fused eager paths of the additive encodings (the add kernel).

Covered: the dropout keep-mask (exact keep probability, reproducibility, tie handling), the
fused add + dropout (forward equal to the unfused expression given the mask, backward reusing
that mask, gradcheck), explicit positions read from the cache (slice, gather, per-token
gather fused with the addition), the in-place / ``out=`` inference path, and the fused
``TransformerEmbedding`` evaluation. References are the NumPy core (``posenc.sinusoidal``) and
the plain PyTorch expressions the fast paths replace.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
from posenc.torch import SinusoidalPositionalEncoding, TransformerEmbedding  # noqa: E402
from posenc.torch._kernels import _add as _fused  # noqa: E402
from posenc.torch._kernels import _workers  # noqa: E402
from posenc.torch._kernels._add import Rows, add_dropout, fused_sum, keep_mask  # noqa: E402

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def core(positions, d_model, dtype=torch.float32) -> torch.Tensor:
    """The NumPy core's float64 table as a tensor, rounded to float32 or kept float64."""
    table = torch.from_numpy(posenc.sinusoidal(positions, d_model, dtype=np.float64))
    return table.to(dtype) if dtype in (torch.float32, torch.float64) else table


def binomial_ok(count: int, n: int, q: float, z: float = 6.0) -> bool:
    """``count`` successes in ``n`` trials is within ``z`` standard deviations of ``n q``.

    z = 6 makes a false failure about a one-in-10**9 event.
    """
    return abs(count - n * q) <= z * math.sqrt(n * q * (1 - q)) + 1e-9


@pytest.fixture(params=["threads", "caller"])
def small_blocks(request, monkeypatch):
    """Fused paths for any size, in blocks of 64 bytes: small test tensors go through many
    blocks of both kinds (several rows per block, and rows split into several blocks), handed
    to two threads or all on the calling thread."""
    monkeypatch.setattr(_fused, "BLOCK_BYTES", 64)
    monkeypatch.setattr(_fused, "FUSE_MIN_BYTES", 0)
    if request.param == "threads":
        monkeypatch.setattr(_workers, "SPREAD_MIN_BYTES", 0)
        monkeypatch.setattr(_workers, "threads", lambda: 2)


@pytest.fixture(params=["fused", "plain"])
def either_path(request, monkeypatch):
    """Run a test with the fused eager paths (tiny blocks) and with the small-input plain ones."""
    if request.param == "fused":
        monkeypatch.setattr(_fused, "BLOCK_BYTES", 64)
        monkeypatch.setattr(_fused, "FUSE_MIN_BYTES", 0)
    else:
        monkeypatch.setattr(_fused, "FUSE_MIN_BYTES", 1 << 62)
    return request.param


# -- keep_mask ----------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.1, 1 / 3, 0.5, 0.25, 0.9, 0.999, 1e-3, 2**-10 + 2**-30])
def test_keep_rate_is_one_minus_p(p):
    # 2**22 draws: 6 standard deviations of the keep rate are below 1e-3 for p = 0.1, while a
    # mask decided by the leading random byte alone would keep 1 - 25/256 = 0.9023 (or
    # 0.8984 with ties dropped), so this test fails if ties are not resolved correctly.
    torch.manual_seed(11)
    n = 1 << 22
    mask = keep_mask(n, p)
    assert mask.shape == (n,)
    assert mask.dtype == torch.uint8
    assert int(mask.max()) <= 1
    assert binomial_ok(int(mask.sum()), n, 1 - p)


def test_keep_rate_detects_byte_rounding():
    """The bound used above is tight enough to tell p from p rounded to a multiple of 1/256."""
    n = 1 << 22
    assert not binomial_ok(round(n * (1 - 25 / 256)), n, 0.9)
    assert not binomial_ok(round(n * (1 - 26 / 256)), n, 0.9)


def test_keep_mask_edges():
    assert torch.equal(keep_mask(100, 0.0), torch.ones(100, dtype=torch.uint8))
    assert keep_mask(0, 0.3).shape == (0,)
    assert keep_mask(13, 0.3).shape == (13,)  # not a multiple of 8
    for bad in (1.0, -0.1, math.nan):
        with pytest.raises(ValueError, match=re.escape("p must be a number in [0, 1)")):
            keep_mask(10, bad)


def test_keep_mask_is_reproducible_with_manual_seed_and_generators():
    torch.manual_seed(3)
    a = keep_mask(10_001, 0.1)
    torch.manual_seed(3)
    b = keep_mask(10_001, 0.1)
    torch.manual_seed(4)
    c = keep_mask(10_001, 0.1)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(keep_mask(999, 0.3, generator=g1), keep_mask(999, 0.3, generator=g2))


def test_keep_mask_decisions_follow_the_random_bytes():
    """Away from ties, an element is dropped exactly when its random byte is below 256 p."""
    p = 0.1  # 256 p = 25.6
    torch.manual_seed(8)
    raw = torch.empty(4096, dtype=torch.uint8)
    raw.view(torch.int64).random_(-(2**63), None)
    torch.manual_seed(8)
    mask = keep_mask(4096, p)
    decided = raw != 25
    assert torch.equal(mask[decided], (raw[decided] > 25).to(torch.uint8))
    assert int((~decided).sum()) > 0  # some ties were refined


@pytest.mark.parametrize("lead", [0, 25, 128, 255])
def test_ties_are_found_exactly(lead):
    torch.manual_seed(lead)
    values = torch.empty(1 << 16, dtype=torch.uint8)
    values.view(torch.int64).random_(-(2**63), None)
    values[:8] = lead  # a word full of ties
    values[-1] = lead  # the last byte
    found = _fused._ties(values, lead)
    assert torch.equal(found.sort().values, torch.nonzero(values == lead).squeeze(1))


def test_refine_keep_rate_and_deeper_rounds():
    torch.manual_seed(9)
    n = 1 << 20

    def draw(k: int) -> torch.Tensor:
        return torch.empty(k, dtype=torch.int64).random_(0, 2**32)

    # After a tie on the leading byte of p = 0.1 the rest of p is 0.6: kept with prob. 0.4.
    keep = _fused._refine(n, 0.6, draw)
    assert binomial_ok(int(keep.sum()), n, 0.4)

    # Scripted draws reach the second and third rounds: rest = (5 + (7 + 1/2) / 2**32) / 2**32.
    rest = (5 + (7 + 0.5) / 2**32) / 2**32
    rounds = iter(
        [
            torch.tensor([4, 6, 5, 5, 5]),  # drop, keep, three ties
            torch.tensor([6, 8, 7]),  # drop, keep, tie
            torch.tensor([2**31]),  # equal to the last digits: not below p, kept
        ]
    )
    keep = _fused._refine(5, rest, lambda k: next(rounds))
    assert keep.tolist() == [0, 1, 0, 1, 1]
    rounds = iter([torch.tensor([5]), torch.tensor([7]), torch.tensor([2**31 - 1])])
    assert _fused._refine(1, rest, lambda k: next(rounds)).tolist() == [0]


# -- fused_sum --------------------------------------------------------------------------------


@pytest.mark.parametrize("blocks", ["default", "small"])
@pytest.mark.parametrize("shape", [(3, 10, 6), (10, 6), (40, 2, 6)])
def test_fused_sum_equals_unfused_expression(shape, blocks, monkeypatch):
    if blocks == "small":
        monkeypatch.setattr(_fused, "BLOCK_BYTES", 64)
    torch.manual_seed(1)
    weight, table = torch.randn(50, 6), torch.randn(64, 6)
    tokens = torch.randint(0, 50, shape[:-1])
    index = torch.randint(0, 64, shape[:-1])
    x, row = torch.randn(shape), torch.randn(6)
    mask = keep_mask(x.numel(), 0.3)
    out = fused_sum(
        torch.empty(shape),
        [Rows(weight, tokens), x, Rows(table, index), row],
        first_scale=2.5,
        mask=mask,
        scale=1 / 0.7,
    )
    expected = (weight[tokens] * 2.5 + x + table[index] + row) * mask.view(shape) * (1 / 0.7)
    assert torch.equal(out, expected)
    assert torch.equal(fused_sum(torch.empty(shape), [x], mask=mask), x * mask.view(shape))
    assert torch.equal(fused_sum(torch.empty(shape), [x], first_scale=3.0), x * 3.0)
    assert torch.equal(fused_sum(torch.empty(shape), [Rows(table, index)]), table[index])


# -- add + dropout -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.0])
def test_add_dropout_forward_equals_masked_expression(dtype, p, small_blocks):
    torch.manual_seed(2)
    x = torch.randn(4, 33, 8).to(dtype)
    table = torch.randn(33, 8).to(dtype)
    torch.manual_seed(21)
    out = add_dropout(x, table, p)
    torch.manual_seed(21)
    mask = keep_mask(x.numel(), p).view(x.shape)
    expected = (x + table) * mask * (1.0 / (1.0 - p)) if p else x + table
    assert out.dtype == dtype
    assert torch.equal(out, expected)


def test_add_dropout_with_index_and_out(small_blocks):
    torch.manual_seed(3)
    x, table = torch.randn(3, 20, 4), torch.randn(50, 4)
    index = torch.randint(0, 50, (3, 20))
    torch.manual_seed(31)
    out = add_dropout(x, table, 0.2, index=index)
    torch.manual_seed(31)
    mask = keep_mask(x.numel(), 0.2).view(x.shape)
    assert torch.equal(out, (x + table[index]) * mask * (1 / 0.8))
    buffer = torch.empty_like(x)
    torch.manual_seed(31)
    assert add_dropout(x, table, 0.2, index=index, out=buffer) is buffer
    assert torch.equal(buffer, out)
    with pytest.raises(ValueError, match=re.escape("p must be a number in [0, 1), got 1.0")):
        add_dropout(x, table, 1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_add_dropout_backward_reuses_the_forward_mask(dtype, small_blocks):
    torch.manual_seed(4)
    x = torch.randn(2, 50, 8).to(dtype).requires_grad_()
    table = torch.randn(50, 8).to(dtype)
    grad = torch.randn(2, 50, 8).to(dtype)
    torch.manual_seed(41)
    out = add_dropout(x, table, 0.3)
    torch.manual_seed(41)
    mask = keep_mask(x.numel(), 0.3).view(x.shape)
    torch.manual_seed(99)  # drawing again must not matter: backward uses the saved mask
    out.backward(grad)
    assert torch.equal(x.grad, grad * mask * (1 / 0.7))


def _seeded(fn, seed=0):
    def call(*args):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return fn(*args)

    return call


@pytest.mark.parametrize("index", [False, True])
def test_add_dropout_gradcheck_and_gradgradcheck(index):
    torch.manual_seed(5)
    x = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    table = torch.randn(6, 3, dtype=torch.float64)
    rows = torch.randint(0, 6, (2, 6)) if index else None
    f = _seeded(lambda t: add_dropout(t, table, 0.4, index=rows))
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))
    g = _seeded(lambda t: add_dropout(t, table, 0.0, index=rows))
    assert torch.autograd.gradcheck(g, (x,))


# -- the module: training -----------------------------------------------------------------------


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_module_training_equals_masked_reference(batch_first, dtype, small_blocks):
    m = SinusoidalPositionalEncoding(8, dropout=0.1, batch_first=batch_first).to(dtype)
    shape = (3, 20, 8) if batch_first else (20, 3, 8)
    x = torch.randn(shape).to(dtype).requires_grad_()
    torch.manual_seed(6)
    out = m(x)
    torch.manual_seed(6)
    mask = keep_mask(x.numel(), 0.1).view(shape)
    table = core(20, 8, dtype) if dtype != torch.bfloat16 else m.encoding(20)
    table = table if batch_first else table.unsqueeze(1)
    assert torch.equal(out, (x.detach() + table) * mask * (1 / 0.9))
    out.sum().backward()
    assert torch.equal(x.grad, torch.ones(shape, dtype=dtype) * mask * (1 / 0.9))


def test_module_training_keep_rate_and_per_token_positions(small_blocks):
    m = SinusoidalPositionalEncoding(16, dropout=0.1, max_len=64)
    x = torch.full((4, 64, 16), 3.0)  # x + PE in [2, 4]: never zero
    positions = torch.randint(0, 64, (4, 64))
    torch.manual_seed(7)
    out = m(x, positions=positions)
    torch.manual_seed(7)
    mask = keep_mask(x.numel(), 0.1).view(x.shape)
    assert torch.equal(out, (x + core(positions.numpy(), 16)) * mask * (1 / 0.9))
    big = SinusoidalPositionalEncoding(64, dropout=0.1)
    kept = int((big(torch.full((16, 1024, 64), 3.0)) != 0).sum())
    assert binomial_ok(kept, 16 * 1024 * 64, 0.9)


def test_module_training_edge_cases():
    x = torch.randn(2, 5, 4)
    table = core(5, 4)
    assert torch.equal(SinusoidalPositionalEncoding(4, dropout=1.0)(x), torch.zeros(2, 5, 4))
    m = SinusoidalPositionalEncoding(4, dropout=0.5)
    m.dropout = torch.nn.Identity()  # a replaced dropout module is honoured
    assert torch.equal(m(x), x + table)
    m = SinusoidalPositionalEncoding(4, dropout=0.5)
    m.dropout.p = 0.0  # the probability is read at call time
    assert torch.equal(m(x), x + table)
    with torch.inference_mode():  # training mode without autograd
        out = SinusoidalPositionalEncoding(4, dropout=0.5)(x)
    assert set(torch.unique(out / (x + table)).tolist()) <= {0.0, 2.0}


# -- the module: explicit positions from the cache ---------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch_first", [True, False])
def test_explicit_positions_read_from_cache_equal_on_the_fly(dtype, batch_first, either_path):
    m = SinusoidalPositionalEncoding(6, max_len=32, batch_first=batch_first).to(dtype)
    fresh = SinusoidalPositionalEncoding(6, batch_first=batch_first).to(dtype)  # empty cache
    torch.manual_seed(8)
    b, s = 3, 10
    x = torch.randn((b, s, 6) if batch_first else (s, b, 6)).to(dtype)
    per_token = torch.randint(0, 32, x.shape[:-1])
    row = torch.arange(3, 13)
    same_rows = row.expand(b, s) if batch_first else row[:, None].expand(s, b)
    cases = [
        torch.arange(5, 15),  # contiguous: a slice of the cache
        torch.randperm(32)[:10],  # a gather of s rows
        per_token,  # per-token gather fused with the addition
        per_token.to(torch.int32),
        per_token.to(torch.int16),
        same_rows,  # broadcast along the batch: one row of positions
        same_rows.clone(),  # equal along the batch: one row of positions
    ]
    for positions in cases:
        with torch.no_grad():
            got = m(x, positions=positions)
        expected = fresh(x, positions=positions)
        assert torch.equal(got, expected), positions
        assert torch.equal(m(x, positions=positions, offset=2), fresh(x, positions=positions + 2))
    assert m.pe.shape == (32, 6)
    assert fresh.pe.shape == (0, 6)  # explicit positions never grow the cache


def test_explicit_positions_outside_cache_or_real_are_computed():
    m = SinusoidalPositionalEncoding(6, max_len=8)
    x = torch.zeros(2, 3, 6)
    for positions in ([5, 6, 9], [-1, 0, 1], [0.5, 1.0, 2.0], [[0, 1, 2], [7, 8, 100]]):
        table = core(np.asarray(positions, dtype=np.float64), 6)
        assert torch.equal(m(x, positions=torch.tensor(positions)), x + table)
    assert m.pe.shape == (8, 6)


def test_per_token_gather_path_keeps_gradients(either_path):
    m = SinusoidalPositionalEncoding(4, max_len=16)
    x = torch.randn(2, 7, 4, requires_grad=True)
    positions = torch.randint(0, 16, (2, 7))
    out = m(x, positions=positions)
    assert torch.equal(out, x.detach() + core(positions.numpy(), 4))
    out.backward(torch.full_like(out, 3.0))
    assert torch.equal(x.grad, torch.full_like(x, 3.0))


# -- in place / out= ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_add_inplace_and_out(dtype, small_blocks):
    m = SinusoidalPositionalEncoding(8, max_len=16).to(dtype)
    torch.manual_seed(10)
    x = torch.randn(2, 12, 8).to(dtype)
    expected = m(x)
    with torch.inference_mode():
        y = x.clone()
        assert m.add_(y) is y
        assert torch.equal(y, expected)
        buffer = torch.empty_like(x)
        assert m(x, out=buffer) is buffer
        assert torch.equal(buffer, expected)
        positions = torch.randint(0, 16, (2, 12))
        z = x.clone()
        m.add_(z, positions=positions)
        assert torch.equal(z, m(x, positions=positions))
    with torch.no_grad():  # no_grad works too, and so does a transposed (strided) x
        t = x.transpose(0, 1).contiguous().transpose(0, 1)
        m.add_(t)
        assert torch.equal(t, expected)


def test_add_inplace_with_dropout_in_training_mode(small_blocks):
    m = SinusoidalPositionalEncoding(8, dropout=0.2)
    x = torch.randn(2, 12, 8)
    with torch.no_grad():
        y = x.clone()
        torch.manual_seed(12)
        m.add_(y)
    torch.manual_seed(12)
    mask = keep_mask(x.numel(), 0.2).view(x.shape)
    assert torch.equal(y, (x + core(12, 8)) * mask * (1 / 0.8))


def test_out_errors():
    m = SinusoidalPositionalEncoding(4)
    x = torch.zeros(2, 3, 4)
    base = torch.zeros(2, 4, 4)
    cases = [
        (lambda: m(x, out=np.zeros((2, 3, 4))), TypeError, "out must be a torch.Tensor"),
        (lambda: m(x, out=torch.zeros(2, 3, 5)), ValueError, "out must have x's shape (2, 3, 4)"),
        (
            lambda: m(x, out=torch.zeros(2, 3, 4, dtype=torch.float64)),
            TypeError,
            "out must have x's dtype and device (torch.float32, cpu)",
        ),
        (
            lambda: m(x, out=torch.zeros(1, 3, 4).expand(2, 3, 4)),
            ValueError,
            "out is an expanded (broadcast) view, stride 0",
        ),
        (
            lambda: m(base[:, :3], out=base[:, 1:]),
            ValueError,
            "out must be x itself or memory that does not overlap x",
        ),
    ]
    for call, exc, message in cases:
        with pytest.raises(exc, match=re.escape(message)):
            call()
    needs_grad = torch.zeros(2, 3, 4, requires_grad=True)
    message = "out= writes without recording gradients, but x requires grad"
    with pytest.raises(ValueError, match=re.escape(message)):
        m.add_(needs_grad)
    with pytest.raises(ValueError, match=re.escape(message)):
        m(torch.zeros(2, 3, 4), out=needs_grad)
    with torch.no_grad():
        m.add_(needs_grad)  # fine without autograd
    assert torch.equal(needs_grad.detach()[0], core(3, 4))


# -- TransformerEmbedding -----------------------------------------------------------------------


def _reference(emb, tokens, segments=None, positions=None, offset=0):
    """The unfused expression of ``TransformerEmbedding.forward`` (eval, no dropout), with the
    table from ``encoding`` (computed from float64 for explicit positions)."""
    weight = emb.token.weight.detach()
    x = weight[tokens]
    if emb.scale:
        x = x * math.sqrt(emb.d_model)
    seq_first = tokens.dim() == 2 and not emb.position.batch_first
    length = tokens.shape[0 if (seq_first or tokens.dim() == 1) else 1]
    table = emb.position.encoding(length if positions is None else positions, offset=offset)
    if seq_first and table.dim() == 2:
        table = table.unsqueeze(1)
    x = x + table.to(x.dtype)
    if emb.segment is not None:
        seg = emb.segment.weight.detach()
        x = x + (seg[segments] if segments is not None else seg[0])
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("num_segments", [0, 2])
def test_transformer_embedding_fused_eval_is_bit_identical(
    dtype, batch_first, num_segments, either_path
):
    torch.manual_seed(13)
    emb = TransformerEmbedding(
        50, 8, num_segments=num_segments, batch_first=batch_first, dtype=dtype, max_len=32
    ).eval()
    shape = (3, 11) if batch_first else (11, 3)
    tokens = torch.randint(0, 50, shape)
    segments = torch.randint(0, 2, shape) if num_segments else None
    per_token = torch.randint(0, 32, shape)
    for kwargs in (
        {},
        {"segments": segments},
        {"positions": per_token},
        {"positions": torch.arange(11) * 2},
        {"offset": 40},  # a far jump beyond the cache: computed on the fly
    ):
        if "segments" in kwargs and not num_segments:
            continue
        with torch.no_grad():
            fused = emb(tokens, **kwargs)
        plain = _reference(emb, tokens, **kwargs)  # autograd on: the unfused modules
        assert fused.dtype == dtype
        assert torch.equal(fused, plain), kwargs


def test_transformer_embedding_fused_variants(either_path):
    torch.manual_seed(14)
    emb = TransformerEmbedding(20, 6, scale=False, padding_idx=0).eval()
    tokens = torch.randint(0, 20, (9,))  # unbatched
    with torch.inference_mode():
        assert torch.equal(emb(tokens), _reference(emb, tokens))
    emb.requires_grad_(False)  # frozen weights: fused with grad mode on
    assert torch.equal(emb(tokens), _reference(emb, tokens))


def test_transformer_embedding_sees_weight_updates(small_blocks):
    torch.manual_seed(15)
    emb = TransformerEmbedding(20, 6).eval()
    tokens = torch.randint(0, 20, (2, 5))
    with torch.no_grad():
        before = emb(tokens)
        emb.token.weight.mul_(2.0)
        after = emb(tokens)
    assert not torch.equal(before, after)
    assert torch.equal(after, _reference(emb, tokens))
    emb.token.weight = torch.nn.Parameter(torch.zeros(20, 6))
    with torch.no_grad():
        assert torch.equal(emb(tokens), core(5, 6).expand(2, 5, 6))


def test_transformer_embedding_dropout_and_max_norm_still_apply(small_blocks):
    torch.manual_seed(16)
    emb = TransformerEmbedding(30, 32, dropout=0.5).train()
    tokens = torch.randint(0, 30, (8, 64))
    clean = _reference(emb, tokens).detach()
    with torch.no_grad():
        out = emb(tokens)
    dropped = out == 0
    assert 0.4 < dropped.double().mean().item() < 0.6
    assert torch.equal(out[~dropped], 2 * clean[~dropped])
    emb.eval()
    emb.token.max_norm = 1.0  # renormalises rows in forward: the stock module must run
    with torch.no_grad():
        out = emb(tokens)
    assert float(emb.token.weight.detach()[tokens].norm(dim=-1).max()) <= 1.0 + 1e-5
    assert torch.equal(out, emb.token.weight[tokens] * math.sqrt(32) + core(64, 32))


# -- torch.compile keeps the plain path ---------------------------------------------------------


@pytest.mark.slow
def test_torch_compile_fullgraph_training_with_positions():
    torch._dynamo.reset()
    m = SinusoidalPositionalEncoding(8, dropout=0.5, max_len=16).train()
    compiled = torch.compile(m, fullgraph=True)
    x = torch.full((2, 6, 8), 3.0)
    positions = torch.randint(0, 16, (2, 6))
    out = compiled(x, positions=positions)
    clean = x + core(positions.numpy(), 8)
    kept = out != 0
    assert torch.equal(out[kept], 2 * clean[kept])


# -- CUDA ----------------------------------------------------------------------------------------


@CUDA
def test_cuda_paths_match_cpu_reference():
    torch.manual_seed(17)
    device = torch.device("cuda")
    n = 1 << 20
    mask = keep_mask(n, 0.1, device=device)
    assert mask.device.type == "cuda"
    assert binomial_ok(int(mask.sum()), n, 0.9)
    m = SinusoidalPositionalEncoding(8, dropout=0.1, max_len=32).to(device)
    x = torch.randn(3, 20, 8, device=device, requires_grad=True)
    torch.manual_seed(18)
    out = m(x)
    torch.manual_seed(18)
    mask = keep_mask(x.numel(), 0.1, device=device).view(x.shape)
    table = m.encoding(20)
    assert torch.equal(out, (x.detach() + table) * mask * (1 / 0.9))
    out.sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x) * mask * (1 / 0.9))
    m.eval()
    positions = torch.randint(0, 32, (3, 20), device=device)
    with torch.inference_mode():
        y = x.detach().clone()
        m.add_(y, positions=positions)
    assert torch.equal(y.cpu(), x.detach().cpu() + core(positions.cpu().numpy(), 8))
    emb = TransformerEmbedding(50, 8, max_len=32).to(device).eval()
    tokens = torch.randint(0, 50, (3, 20), device=device)
    with torch.no_grad():
        assert torch.equal(emb(tokens), _reference(emb, tokens))
