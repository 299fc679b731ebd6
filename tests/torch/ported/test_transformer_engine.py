"""Cases of TransformerEngine's ``tests/pytorch/test_fused_rope.py`` (the cases, not the code),
with posenc's float64 oracle instead of TE's unfused float32 one: the ``sbhd`` and ``bshd``
layouts, transposed (non-contiguous) inputs, ``rotary_percent`` 0.5, interleaved pairs,
gradients; packed ``thd`` sequences with TE's ``cu_seqlens``, per-sequence
``start_positions`` and context-parallel zig-zag shards; and the fused q/k/v case. This
position geometry (packing, shards, offsets) is where the 2025–26 RoPE bugs sat."""

from __future__ import annotations

import itertools

import pytest

import posenc

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402
from tests.torch.ported.reference import flash_attn_tolerance, rotate_reference  # noqa: E402

#: test_fused_rope_thd's packed sequence boundaries
CU_SEQLENS = [0, 400, 542, 711, 727, 752, 1270, 1426, 1450, 1954, 2044, 2048]
HEADS, HEAD_DIM = 2, 16


def _close(out: torch.Tensor, want: torch.Tensor) -> None:
    out = out.detach()
    assert float((out.double() - want).abs().max()) <= flash_attn_tolerance(out)


@pytest.mark.parametrize(
    ("layout", "transpose", "fraction", "pairs"),
    list(itertools.product(["sbhd", "bshd"], [False, True], [1.0, 0.5], ["half", "interleaved"])),
)
def test_fused_rope(layout: str, transpose: bool, fraction: float, pairs: str) -> None:
    """``test_fused_rope``: ``(s, b, h, d)`` or ``(b, s, h, d)``, optionally a transposed view
    (not contiguous), rotating ``rotary_percent`` of the head; the gradient of the rotation is
    the inverse rotation of the incoming gradient."""
    torch.manual_seed(0)
    s, b, rotary_dim = 96, 2, int(HEAD_DIM * fraction)
    shape = (s, b, HEADS, HEAD_DIM) if layout == "sbhd" else (b, s, HEADS, HEAD_DIM)
    seq_dim = 0 if layout == "sbhd" else 1
    x = torch.randn(shape)
    if transpose:  # the same values through a view with heads and batch swapped in memory
        x = torch.randn(shape[0], shape[2], shape[1], shape[3]).transpose(1, 2)
        assert not x.is_contiguous()
    x.requires_grad_(True)
    rope = pt.RotaryEmbedding(HEAD_DIM, pairs=pairs, rotary_dim=rotary_dim, seq_dim=seq_dim)
    out, _ = rope(x, x.detach())
    positions = (
        torch.arange(s).view(-1, 1, 1) if layout == "sbhd" else torch.arange(s).view(1, -1, 1)
    )
    _close(out, rotate_reference(x, positions, rotary_dim=rotary_dim, pairs=pairs))
    grad = torch.randn(shape)
    out.backward(grad)
    cos, sin = pt.rotary_cos_sin(torch.arange(s), rotary_dim, pairs=pairs, dtype=torch.float64)
    if layout == "sbhd":
        cos, sin = cos[:, None, None], sin[:, None, None]
    else:
        cos, sin = cos[:, None], sin[:, None]
    back = pt.apply_rotary(grad.double(), cos, sin, pairs=pairs, inverse=True)
    assert x.grad is not None
    _close(x.grad, back)


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
@pytest.mark.parametrize("starts", [False, True], ids=["from 0", "start_positions"])
def test_fused_rope_thd(pairs: str, starts: bool) -> None:
    """``test_fused_rope_thd``: eleven sequences packed into ``(t, h, d)`` by TE's
    ``cu_seqlens``, each from 0 or from its own ``start_positions`` entry."""
    torch.manual_seed(1)
    cu = torch.tensor(CU_SEQLENS)
    x = torch.randn(CU_SEQLENS[-1], HEADS, HEAD_DIM)
    within = torch.from_numpy(posenc.positions_from_cu_seqlens(cu.numpy()))
    start = torch.randint(0, 4096, (len(CU_SEQLENS) - 1,)) if starts else torch.zeros(11).long()
    positions = within + torch.repeat_interleave(start, cu.diff())
    cos, sin = pt.rotary_cos_sin(positions, HEAD_DIM, pairs=pairs)
    out = pt.apply_rotary(x, cos[:, None], sin[:, None], pairs=pairs)
    _close(out, rotate_reference(x, positions[:, None], rotary_dim=HEAD_DIM, pairs=pairs))
    first = cu[:-1]
    assert torch.equal(positions[first], start)  # every sequence starts at its own start


def _zigzag(lengths: list[int], cp_size: int, rank: int) -> torch.Tensor:
    """The token indices of ``rank``: each sequence (padded to a multiple of ``2·cp_size``)
    in ``2·cp_size`` chunks, of which the rank holds chunks ``rank`` and ``2·cp_size − 1 −
    rank`` (the load-balanced split of causal attention)."""
    picked, offset = [], 0
    for length in lengths:
        chunk = length // (2 * cp_size)
        for c in (rank, 2 * cp_size - 1 - rank):
            picked.append(torch.arange(offset + c * chunk, offset + (c + 1) * chunk))
        offset += length
    return torch.cat(picked)


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
def test_fused_rope_thd_context_parallel_zigzag(pairs: str) -> None:
    """``test_fused_rope_thd`` with ``cp_size`` 2: each rank rotates its zig-zag shard at the
    positions of its tokens in the whole sequence, and the shards put back together equal the
    unsharded rotation bit for bit."""
    torch.manual_seed(2)
    cp_size = 2
    raw = torch.tensor(CU_SEQLENS).diff()
    lengths = [int(-(-n // (2 * cp_size)) * 2 * cp_size) for n in raw]  # padded
    total = sum(lengths)
    cu = torch.tensor([0, *itertools.accumulate(lengths)])
    x = torch.randn(total, HEADS, HEAD_DIM)
    positions = torch.from_numpy(posenc.positions_from_cu_seqlens(cu.numpy()))
    cos, sin = pt.rotary_cos_sin(positions, HEAD_DIM, pairs=pairs)
    whole = pt.apply_rotary(x, cos[:, None], sin[:, None], pairs=pairs)
    joined = torch.empty_like(whole)
    for rank in range(cp_size):
        mine = _zigzag(lengths, cp_size, rank)
        c, s = pt.rotary_cos_sin(positions[mine], HEAD_DIM, pairs=pairs)
        joined[mine] = pt.apply_rotary(x[mine], c[:, None], s[:, None], pairs=pairs)
    assert torch.equal(joined, whole)
    _close(whole, rotate_reference(x, positions[:, None], rotary_dim=HEAD_DIM, pairs=pairs))


def test_fused_qkv_rope() -> None:
    """``test_fused_qkv_rope``: one ``(s, b, h, 3·d)`` projection split into q, k, v; q and k
    rotated (views of the fused tensor, not contiguous), v untouched."""
    torch.manual_seed(3)
    s, b = 64, 2
    qkv = torch.randn(s, b, HEADS, 3 * HEAD_DIM)
    q, k, v = qkv.split(HEAD_DIM, dim=-1)
    rope = pt.RotaryEmbedding(HEAD_DIM, seq_dim=0)
    q_rot, k_rot = rope(q, k)
    positions = torch.arange(s).view(-1, 1, 1)
    for x, out in ((q, q_rot), (k, k_rot)):
        _close(out, rotate_reference(x, positions, rotary_dim=HEAD_DIM, pairs="half"))
    assert torch.equal(qkv[..., 2 * HEAD_DIM :], v)
