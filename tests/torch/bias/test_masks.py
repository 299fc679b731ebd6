"""SDPA masks from dense biases (``bias_attn_mask``, ``allowed_pairs``) and FlexAttention block
masks (``bias_block_mask``): every combination of causal / window / documents / padding, with
float and bool biases, against attention built by hand (softmax over the allowed keys only),
and the batched forms against a loop over the rows."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import posenc

torch = pytest.importorskip("torch")
flex = pytest.importorskip("torch.nn.attention.flex_attention")
F = torch.nn.functional
import posenc.torch as pt  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

B, H, D = 2, 2, 4
PADDING = [[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]]  # row 0 left-padded, row 1 right-padded
KEY_DOCS = [0, 0, 1, 1, 2]


def _allowed_by_hand(
    q: int, k: int, causal: bool, window: int | None, docs: str, padding: bool
) -> np.ndarray:
    """(batch, q, k) booleans, one pair at a time: query ``a`` sits at key position
    ``k − q + a``; key documents alone give each query the document of its position."""
    out = np.zeros((B, q, k), dtype=bool)
    for b, a, j in itertools.product(range(B), range(q), range(k)):
        i = k - q + a
        ok = True
        if causal:
            ok &= j <= i
        if window is not None:
            ok &= abs(i - j) < window
        if docs != "none":
            ok &= KEY_DOCS[i] == KEY_DOCS[j]
        if padding:
            ok &= bool(PADDING[b][j])
        out[b, a, j] = ok
    return out


def _attention_by_hand(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, bias: np.ndarray,
    allowed: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """Softmax over the allowed keys only (rows with none: zeros, as SDPA gives them)."""
    qn, kn, vn = (t.double().numpy() for t in (query, key, value))
    out = np.zeros(qn.shape)
    for b, h, a in itertools.product(range(B), range(H), range(qn.shape[2])):
        keys = np.flatnonzero(allowed[b, a])
        if keys.size == 0:
            continue
        scores = kn[b, h, keys] @ qn[b, h, a] / math.sqrt(D) + bias[h, a, keys]
        weights = np.exp(scores - scores.max())
        out[b, h, a] = weights @ vn[b, h, keys] / weights.sum()
    return out


@pytest.mark.parametrize("q", [5, 3])
@pytest.mark.parametrize("kind", ["float", "bool"])
def test_every_mask_combination_gives_attention_over_the_allowed_keys(q: int, kind: str) -> None:
    k = 5
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(B, H, q, D, generator=generator, dtype=torch.float64)
    key, value = (torch.randn(B, H, k, D, generator=generator, dtype=torch.float64) for _ in "kv")
    if kind == "float":
        bias = pt.alibi_bias(H, np.arange(k - q, k), k, dtype=torch.float64)
        given = bias.double().numpy()
    else:  # a bool mask of its own (True: attend) with no bias values
        bias = torch.from_numpy(np.tile(np.array([1, 1, 0, 1, 1], dtype=bool), (H, q, 1)))
        given = np.zeros(bias.shape)
    for causal, window, docs, padding in itertools.product(
        (False, True), (None, 2), ("none", "both", "keys"), (False, True)
    ):
        case = f"causal={causal} window={window} documents={docs} padding={padding}"
        kwargs: dict = {"causal": causal, "window": window}
        if docs == "both":
            kwargs["query_documents"] = KEY_DOCS[k - q :]
        if docs != "none":
            kwargs["key_documents"] = KEY_DOCS
        if padding:
            kwargs["padding_mask"] = torch.tensor(PADDING)
        mask = pt.bias_attn_mask(bias, **kwargs)
        assert mask.dtype == bias.dtype, case
        rule = _allowed_by_hand(q, k, causal, window, docs, padding)
        pairs = pt.allowed_pairs(q, k, **kwargs)
        np.testing.assert_array_equal(np.broadcast_to(pairs.numpy(), rule.shape), rule, case)
        allowed = rule & bias.numpy()[0][None] if kind == "bool" else rule
        got = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
        want = _attention_by_hand(query, key, value, given, allowed)
        np.testing.assert_allclose(got.numpy(), want, atol=1e-12, err_msg=case)


def test_a_bool_bias_under_causal_attends_to_no_future_key() -> None:
    mask = pt.bias_attn_mask(torch.ones(1, 3, 3, dtype=torch.bool), causal=True)
    assert torch.equal(mask[0], torch.ones(3, 3, dtype=torch.bool).tril())


def test_key_documents_alone_are_the_documents_of_the_queries_too() -> None:
    mask = pt.bias_attn_mask(torch.zeros(1, 3, 3), key_documents=[0, 0, 1])
    assert torch.equal(torch.isinf(mask[0]), torch.tensor([[0, 0, 1], [0, 0, 1], [1, 1, 0]]) > 0)


def test_a_bool_bias_can_become_an_additive_mask() -> None:
    bias = torch.tensor([[True, False], [True, True]])
    got = pt.bias_attn_mask(bias, causal=True, dtype=torch.float16)
    want = torch.tensor([[0.0, -math.inf], [0.0, 0.0]], dtype=torch.float16)
    assert torch.equal(got, want)


def test_non_float_biases_and_lonely_documents_are_refused_by_name() -> None:
    for dtype in (torch.int64, torch.int32, torch.complex64):
        with pytest.raises(TypeError, match=r"bias must be .*float.*bool.*got torch"):
            pt.bias_attn_mask(torch.zeros(1, 3, 3, dtype=dtype), causal=True)
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="bias must hold no NaN nor"):
            pt.bias_attn_mask(torch.tensor([[0.0, bad]]))
    with pytest.raises(ValueError, match="key_documents"):  # more queries than keys
        pt.bias_attn_mask(torch.zeros(4, 3), key_documents=[0, 0, 1])
    with pytest.raises(ValueError, match="query_documents alone"):
        pt.allowed_pairs(2, 3, query_documents=[0, 1])
    with pytest.raises(ValueError, match="window"):
        pt.allowed_pairs(2, 3, window=0)
    with pytest.raises(ValueError, match="padding_mask"):
        pt.allowed_pairs(2, 3, padding_mask=[[1, 2, 1]])
    with pytest.raises(ValueError, match="padding_mask"):
        pt.bias_attn_mask(torch.zeros(2, 3, 3), padding_mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="padding_mask"):  # its batch against the bias's
        pt.bias_attn_mask(torch.zeros(3, 2, 3, 3), padding_mask=torch.ones(2, 3, dtype=torch.bool))


def test_one_batched_call_equals_a_loop_over_the_rows_for_bloom_with_left_padding() -> None:
    """BLOOM numbers the keys of each row from its first real token; the ``"key"`` form moves
    by a constant per row, which the softmax ignores: one bias and one mask for the batch give
    the per-row attention of the real queries."""
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1]])
    batch, length = mask.shape
    generator = torch.Generator().manual_seed(1)
    query, key, value = (
        torch.randn(batch, 4, length, 8, generator=generator, dtype=torch.float64) for _ in "qkv"
    )
    bias = pt.alibi_bias(4, length, length, form="key", convention="bloom", dtype=torch.float64)
    attn_mask = pt.bias_attn_mask(bias, causal=True, padding_mask=mask)
    assert attn_mask.shape == (batch, 4, length, length)
    got = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)
    for row in range(batch):
        positions = posenc.positions_from_mask(mask[row].numpy())
        real = mask[row].bool()
        own = pt.alibi_bias(
            4, positions[real.numpy()], positions[real.numpy()], form="key",
            convention="bloom", dtype=torch.float64,
        )  # fmt: skip
        want = F.scaled_dot_product_attention(
            query[row][:, real], key[row][:, real], value[row][:, real],
            attn_mask=pt.bias_attn_mask(own, causal=True),
        )  # fmt: skip
        torch.testing.assert_close(got[row][:, real], want, rtol=0, atol=1e-12)


def test_batched_documents_and_padding_equal_a_loop_over_the_rows() -> None:
    documents = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 2, 2]])
    padding = torch.tensor(PADDING, dtype=torch.bool)
    together = pt.allowed_pairs(
        5, 5, causal=True, window=3, query_documents=documents, padding_mask=padding
    )
    for row in range(B):
        alone = pt.allowed_pairs(5, 5, causal=True, window=3, query_documents=documents[row])
        assert torch.equal(together[row], alone & padding[row][None, :])


def _flex(query, key, value, block_mask):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # eager FlexAttention materialises scores
        return flex.flex_attention(query, key, value, block_mask=block_mask)


def test_block_masks_equal_the_dense_masks() -> None:
    q, k = 130, 140  # more than one 128-block each way, queries at the end of the keys
    generator = torch.Generator().manual_seed(2)
    documents = torch.randint(0, 3, (B, k), generator=generator).sort(dim=1).values
    padding = torch.ones(B, k, dtype=torch.bool)
    padding[0, :7] = False
    query = torch.randn(B, H, q, D, generator=generator)
    key, value = (torch.randn(B, H, k, D, generator=generator) for _ in "kv")
    for causal, window, docs, pad in itertools.product(
        (False, True), (None, 33), (None, documents), (None, padding)
    ):
        case = f"causal={causal} window={window} docs={docs is not None} pad={pad is not None}"
        block = pt.bias_block_mask(
            q, k, causal=causal, window=window, documents=docs, padding_mask=pad
        )
        dense = pt.allowed_pairs(
            q, k, causal=causal, window=window, key_documents=docs, padding_mask=pad
        )
        b, qi, ki = torch.arange(B)[:, None, None], torch.arange(q)[:, None], torch.arange(k)
        got = block.mask_mod(b, 0, qi, ki)
        assert torch.equal(got.expand(B, q, k), dense.expand(B, q, k)), case
    # the attention itself, with every condition at once (eager FlexAttention takes ~0.3 s)
    out = _flex(query, key, value, block)
    want = F.scaled_dot_product_attention(query, key, value, attn_mask=dense[:, None])
    torch.testing.assert_close(out, want, rtol=0, atol=2e-6)


def test_hostile_masks_are_refused_by_name_before_allocating() -> None:
    meta_ids = torch.zeros(2, dtype=torch.long, device="meta")
    with pytest.raises(ValueError, match="query_documents is on meta"):
        pt.bias_attn_mask(torch.zeros(1, 2, 2), query_documents=meta_ids)
    with pytest.raises(MemoryError, match="padding_mask"):  # (batch, heads, q, k) first
        pt.bias_attn_mask(
            torch.zeros(1, 1000, 1000), padding_mask=torch.ones(10**5, 1000, dtype=torch.bool)
        )
    # a window beyond every distance is no limit (it overflowed int64)
    assert pt.allowed_pairs(3, 3, causal=True, window=10**30).equal(
        pt.allowed_pairs(3, 3, causal=True)
    )
