"""Cases of flash-attn's ``tests/test_rotary.py`` (the cases, not the code): sequence offsets
as 0, an int and a per-batch tensor; variable-length sequences with ``cu_seqlens``; rotating
half of the head; interleaved pairs; and its tolerance, twice the error of ``x + 0.3 − 0.3`` in
the output dtype, against float64. Its in-place variant has no posenc counterpart (posenc's
rotation returns new tensors)."""

from __future__ import annotations

import pytest

import posenc

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402
from tests.torch.ported.reference import flash_attn_tolerance, rotate_reference  # noqa: E402

BATCH, SEQ, HEADS, HEAD_DIM = 3, 37, 2, 16


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
@pytest.mark.parametrize("fraction", [1.0, 0.5])
@pytest.mark.parametrize("offsets", ["zero", "int", "per batch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rotary_emb_func(pairs: str, fraction: float, offsets: str, dtype: torch.dtype) -> None:
    """``test_rotary_emb_func``: (batch, seqlen, heads, head_dim) with ``seqlen_offsets`` 0,
    an int, or one per batch element (decoding with a cache of a different length per row)."""
    torch.manual_seed(0)
    rotary_dim = int(HEAD_DIM * fraction)
    q, k = torch.randn(2, BATCH, SEQ, HEADS, HEAD_DIM).to(dtype)
    start = {"zero": torch.zeros(BATCH), "int": torch.full((BATCH,), 217),
             "per batch": torch.tensor([0, 5, 1033])}[offsets].long()  # fmt: skip
    positions = start[:, None] + torch.arange(SEQ)  # (batch, seqlen)
    rope = pt.RotaryEmbedding(HEAD_DIM, pairs=pairs, rotary_dim=rotary_dim, seq_dim=1)
    q_rot, k_rot = rope(q, k, positions=positions)
    for x, out in ((q, q_rot), (k, k_rot)):
        want = rotate_reference(x, positions[:, :, None], rotary_dim=rotary_dim, pairs=pairs)
        assert out.dtype == dtype
        assert float((out.double() - want).abs().max()) <= flash_attn_tolerance(out)
        assert torch.equal(out[..., rotary_dim:], x[..., rotary_dim:])  # the rest passes


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_rotary_emb_varlen_func(pairs: str, fraction: float) -> None:
    """``test_rotary_emb_varlen_func``: sequences packed into (total, heads, head_dim), each
    restarting at its own offset, found from ``cu_seqlens``."""
    torch.manual_seed(1)
    rotary_dim = int(HEAD_DIM * fraction)
    cu_seqlens = torch.tensor([0, 7, 8, 30, 61])
    offsets = torch.tensor([0, 3, 900, 12])  # one per sequence
    x = torch.randn(int(cu_seqlens[-1]), HEADS, HEAD_DIM)
    within = torch.from_numpy(posenc.positions_from_cu_seqlens(cu_seqlens.numpy()))
    sequence = torch.repeat_interleave(torch.arange(4), cu_seqlens.diff())
    positions = within + offsets[sequence]
    cos, sin = pt.rotary_cos_sin(positions, rotary_dim, pairs=pairs)  # (total, rotary_dim)
    out = pt.apply_rotary(x, cos[:, None], sin[:, None], pairs=pairs)
    want = rotate_reference(x, positions[:, None], rotary_dim=rotary_dim, pairs=pairs)
    assert float((out.double() - want).abs().max()) <= flash_attn_tolerance(out)


def test_rotary_emb_qkv() -> None:
    """``test_rotary_emb_qkv``: q and k rotated in one call from a packed (batch, seqlen, 3,
    heads, head_dim) tensor, v left alone."""
    torch.manual_seed(2)
    qkv = torch.randn(BATCH, SEQ, 3, HEADS, HEAD_DIM)
    q, k, v = qkv.unbind(2)  # views, not contiguous
    rope = pt.RotaryEmbedding(HEAD_DIM, seq_dim=1)
    q_rot, k_rot = rope(q, k, offset=40)
    positions = (40 + torch.arange(SEQ))[None, :, None]
    for x, out in ((q, q_rot), (k, k_rot)):
        want = rotate_reference(x, positions, rotary_dim=HEAD_DIM, pairs="half")
        assert float((out.double() - want).abs().max()) <= flash_attn_tolerance(out)
    assert torch.equal(qkv[:, :, 2], v)  # nothing written back into the packed tensor
