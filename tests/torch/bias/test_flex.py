"""FlexAttention forms of the biases: forward equals dense attention with the bias (SDPA
with ``bias_attn_mask``) within 2e-6 in float32, eager, with causal and packed-document
block masks; one tiny compiled check. FlexAttention on CPU runs forward only: gradients
are checked through the dense path and through a ``score_mod`` on materialised scores."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
flex = pytest.importorskip("torch.nn.attention.flex_attention")
F = torch.nn.functional
import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

HEADS, Q, K, D = 4, 24, 24, 8


def _qkv(q: int = Q, k: int = K) -> tuple:
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, HEADS, n, D, generator=generator) for n in (q, k, k))


def _flex(query, key, value, score_mod, block_mask=None):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # eager FlexAttention materialises scores
        return flex.flex_attention(query, key, value, score_mod=score_mod, block_mask=block_mask)


CASES = {
    "alibi": (lambda: pt.alibi_score_mod(HEADS), lambda: pt.alibi_bias(HEADS, Q, K)),
    "alibi_relative": (
        lambda: pt.alibi_score_mod(HEADS, form="relative"),
        lambda: pt.alibi_bias(HEADS, Q, K, form="relative"),
    ),
    "t5": (
        lambda: pt.t5_score_mod(TABLE, Q, K, max_distance=16),
        lambda: torch.from_numpy(
            __import__("posenc").t5_bias(TABLE.numpy(), Q, K, max_distance=16)
        ),
    ),
    "kerple": (
        lambda: pt.kerple_score_mod([0.5, 1.0, 2.0, 3.0], [1.0, 0.5, 0.25, 2.0]),
        lambda: pt.kerple_bias(Q, K, r1=[0.5, 1.0, 2.0, 3.0], r2=[1.0, 0.5, 0.25, 2.0]),
    ),
    "sandwich": (
        lambda: pt.sandwich_score_mod(HEADS, Q, K, dim=16),
        lambda: pt.sandwich_bias(HEADS, Q, K, dim=16),
    ),
}
TABLE = torch.randn(32, HEADS, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mask", ["none", "causal", "documents"])
def test_flex_attention_equals_dense_attention_with_the_bias(name: str, mask: str) -> None:
    make_mod, make_bias = CASES[name]
    query, key, value = _qkv()
    documents = torch.tensor([0] * 10 + [1] * 9 + [2] * 5)
    block = None
    if mask != "none":
        block = pt.bias_block_mask(
            Q, K, causal=mask == "causal", documents=documents if mask == "documents" else None
        )
    out = _flex(query, key, value, make_mod(), block)
    attn_mask = pt.bias_attn_mask(
        make_bias(),
        causal=mask == "causal",
        query_documents=documents if mask == "documents" else None,
    )
    want = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)
    assert (out - want).abs().max() <= 2e-6


def test_offsets_give_a_decoding_step_of_the_full_attention() -> None:
    query, key, value = _qkv(3, 40)
    out = _flex(query, key, value, pt.alibi_score_mod(HEADS, query_offset=37))
    bias = pt.alibi_bias(HEADS, np.arange(37, 40), 40)
    want = F.scaled_dot_product_attention(query, key, value, attn_mask=bias)
    assert (out - want).abs().max() <= 2e-6


def test_gradients_through_the_score_mod_on_materialised_scores() -> None:
    r1 = torch.tensor([0.5, 1.0, 2.0, 3.0], requires_grad=True)
    mod = pt.kerple_score_mod(r1, [1.0, 0.5, 0.25, 2.0])
    h, qi, ki = (
        torch.arange(HEADS)[:, None, None],
        torch.arange(Q)[None, :, None],
        torch.arange(K)[None, None, :],
    )
    mod(torch.zeros(HEADS, Q, K), 0, h, qi, ki).sum().backward()
    assert r1.grad is not None
    assert torch.all(r1.grad < 0)


#: the families of score_mod: a formula per head (ALiBi), a table over relative positions (T5;
#: Sandwich shares its relative_score_mod), a formula with learnable tensors (KERPLE)
COMPILED = {
    "alibi": (lambda n: pt.alibi_score_mod(HEADS), lambda n: pt.alibi_bias(HEADS, n, n)),
    "t5": (
        lambda n: pt.t5_score_mod(TABLE, n, n, max_distance=16),
        lambda n: torch.from_numpy(
            __import__("posenc").t5_bias(TABLE.numpy(), n, n, max_distance=16)
        ),
    ),
    "kerple": (
        lambda n: pt.kerple_score_mod([0.5, 1.0, 2.0, 3.0], [1.0, 0.5, 0.25, 2.0]),
        lambda n: pt.kerple_bias(n, n, r1=[0.5, 1.0, 2.0, 3.0], r2=[1.0, 0.5, 0.25, 2.0]),
    ),
}


@pytest.mark.slow
def test_compiled_flex_attention_equals_dense_attention() -> None:
    """Each family's score_mod compiled with a packed-and-padded block mask (one graph holds
    the three attentions: one compilation; fullgraph=True, so a graph break in a score_mod
    fails here)."""
    query, key, value = _qkv(16, 16)
    documents = torch.tensor([[0] * 9 + [1] * 7, [0] * 16])  # a packed and a padded row
    padding = torch.ones(2, 16, dtype=torch.bool)
    padding[1, :4] = False
    conditions = {"window": 6, "padding_mask": padding}
    block = pt.bias_block_mask(16, 16, documents=documents, **conditions)
    mods = {name: make_mod(16) for name, (make_mod, _) in COMPILED.items()}

    def every_family(q, k, v):  # type: ignore[no-untyped-def]
        return {
            name: flex.flex_attention(q, k, v, score_mod=mod, block_mask=block)
            for name, mod in mods.items()
        }

    torch._dynamo.reset()
    got = torch.compile(every_family, fullgraph=True)(query, key, value)
    errors = {}
    for name, (_, make_bias) in COMPILED.items():
        mask = pt.bias_attn_mask(make_bias(16), causal=True, key_documents=documents, **conditions)
        want = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
        errors[name] = float((got[name] - want).abs().max())
    assert all(error <= 2e-6 for error in errors.values()), errors


@pytest.mark.slow
def test_one_dynamic_compile_serves_changing_lengths() -> None:
    # the three families in one score_mod, with offsets, and a block mask with a window and
    # padding: one compile (ints captured by a score_mod or mask_mod turned into symbols
    # under dynamic=True, which broke the CPU kernel's C++)
    alibi = pt.alibi_score_mod(HEADS, query_offset=3)
    t5 = pt.t5_score_mod(TABLE, max_distance=16, key_offset=5)
    kerple = pt.kerple_score_mod([0.5, 1.0, 2.0, 3.0], 0.5, query_offset=2)

    def all_three(score, b, h, q_idx, kv_idx):  # type: ignore[no-untyped-def]
        for mod in (alibi, t5, kerple):
            score = mod(score, b, h, q_idx, kv_idx)
        return score

    torch._dynamo.reset()
    compiled = torch.compile(flex.flex_attention, fullgraph=True, dynamic=True)
    for n in (16, 24):
        query, key, value = _qkv(n, n)
        padding = torch.ones(2, n, dtype=torch.bool)
        padding[0, :3] = False
        block = pt.bias_block_mask(n, n, window=9)
        out = compiled(query, key, value, score_mod=all_three, block_mask=block)
        bias = (
            pt.alibi_bias(HEADS, np.arange(n) + 3, n)
            + torch.from_numpy(posenc.t5_bias(TABLE.numpy(), n, np.arange(n) + 5, max_distance=16))
            + pt.kerple_bias(np.arange(n) + 2, n, r1=[0.5, 1.0, 2.0, 3.0], r2=0.5)
        )
        mask = pt.bias_attn_mask(bias, causal=True, window=9)
        want = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
        assert (out - want).abs().max() <= 4e-6, n


def test_bad_masks_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="query_documents"):
        pt.bias_attn_mask(torch.zeros(2, 3, 3), query_documents=[0, 1])
    with pytest.raises(TypeError, match="bias"):
        pt.bias_attn_mask(torch.zeros(3))
    with pytest.raises(ValueError, match="documents"):
        pt.bias_block_mask(4, 5, documents=torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="form"):
        pt.alibi_score_mod(4, form="abs")
    with pytest.raises(ValueError, match="r2"):
        pt.kerple_score_mod(1.0, float("nan"))


def _evaluate(score_mod, heads: int, q: int, k: int) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """A ``score_mod`` on zero scores, called directly with CPU index tensors."""
    h = torch.arange(heads)[:, None, None]
    qi, ki = torch.arange(q)[None, :, None], torch.arange(k)[None, None, :]
    out: torch.Tensor = score_mod(torch.zeros(heads, q, k), 0, h, qi, ki)
    return out


def test_kerple_score_mod_checks_its_parameters_as_the_core() -> None:
    for r1, r2, kind, name in [
        (1.0, 3.0, "power", "r2"),
        (1.0, 1.0, "exp", "kind"),
        (torch.tensor([1.0, -1.0]), 1.0, "log", "r1"),
        ([1.0, 2.0], [1.0, 1.0, 1.0], "log", "r1 and r2"),
        (torch.tensor([True]), 1.0, "log", "r1"),
    ]:
        with pytest.raises((ValueError, TypeError), match=name):
            pt.kerple_score_mod(r1, r2, kind=kind)
        with pytest.raises((ValueError, TypeError), match=name):
            posenc.kerple_bias(2, 2, r1=r1, r2=r2, kind=kind)


def test_t5_score_mod_serves_every_length() -> None:
    mod = pt.t5_score_mod(TABLE, 3, 3, max_distance=16)  # the lengths are no limit
    want = posenc.t5_bias(TABLE.numpy(), 40, 40, max_distance=16)
    torch.testing.assert_close(_evaluate(mod, HEADS, 40, 40), torch.from_numpy(want))


def test_score_mods_refuse_heads_and_pairs_beyond_what_they_were_built_for() -> None:
    with pytest.raises(ValueError, match=r"6 with ALiBi.*h = 6"):
        _evaluate(pt.alibi_score_mod(6), 8, 3, 3)
    with pytest.raises(ValueError, match=r"query_len=3, key_len=3.*relative position 3"):
        _evaluate(pt.sandwich_score_mod(HEADS, 3, 3, dim=8), HEADS, 6, 6)
    with pytest.raises(ValueError, match=r"relative positions -1 .. 1"):
        _evaluate(pt.relative_score_mod(torch.zeros(2, 3), min_relative=-1), 2, 3, 3)
    with pytest.raises(ValueError, match=r"2 heads.*h = 2"):
        _evaluate(pt.kerple_score_mod([1.0, 2.0], 1.0), 3, 2, 2)
    with pytest.raises(ValueError, match=r"4 heads.*h = 4"):
        _evaluate(pt.t5_score_mod(TABLE), 5, 2, 2)
    with pytest.raises(ValueError, match="query_len and key_len"):
        pt.t5_score_mod(TABLE, max_distance=2**21)
    # inside FlexAttention the indices cannot be read: NaN, never another entry's value
    query, key, value = _qkv(6, 6)
    out = _flex(query, key, value, pt.sandwich_score_mod(HEADS, 3, 3, dim=8))
    assert torch.isnan(out).any()
    assert torch.equal(torch.isnan(out).all(-1), torch.isnan(out).any(-1))


def test_alibi_on_the_first_heads_of_a_larger_attention() -> None:
    mod = pt.alibi_score_mod(3, total_heads=HEADS)
    want = pt.alibi_bias(3, Q, K, total_heads=HEADS)
    assert want.shape == (HEADS, Q, K)
    assert torch.equal(want[3:], torch.zeros(1, Q, K))
    assert torch.equal(want[:3], pt.alibi_bias(3, Q, K))
    torch.testing.assert_close(_evaluate(mod, HEADS, Q, K), want, rtol=0, atol=2e-6)
    for bad, match in [(2, "total_heads must be an integer >= 3"), (2.5, "total_heads")]:
        with pytest.raises((ValueError, TypeError), match=match):
            pt.alibi_score_mod(3, total_heads=bad)
        with pytest.raises((ValueError, TypeError), match=match):
            pt.alibi_bias(3, 4, 4, total_heads=bad)
    with pytest.raises(ValueError, match="total_heads and shard"):
        pt.alibi_score_mod(4, total_heads=8, shard=(0, 2))


def test_tables_of_score_mods_are_checked_as_the_core_checks_them() -> None:
    nan = torch.full((32, 2), float("nan"))
    with pytest.raises(ValueError, match="table must be finite"):
        pt.t5_score_mod(nan)
    with pytest.raises(ValueError, match="values must be finite"):
        pt.relative_score_mod(nan, min_relative=0)
