"""Sequence parallelism: each rank encodes its shard of a long sequence from global positions.

Two CPU processes (``torch.distributed``, gloo backend) each hold part of a sequence of
length ``S``. A rank must encode its tokens at their *global* positions: ``offset=`` for a
contiguous shard, ``positions=`` for any other split (here the "zigzag" split that balances
causal attention: rank ``r`` of ``W`` holds chunks ``r`` and ``2W - 1 - r``), and, for RoPE
scalings whose frequencies depend on the sequence length (``dynamic``, ``longrope``), the
*global* length ``seq_len=S``. After an ``all_gather`` the result must equal, bit for bit,
the single-process result for the whole sequence: for the absolute sinusoidal encoding
(``SinusoidalPositionalEncoding``) and for RoPE (``RotaryEmbedding``). Negative controls show
that local positions, or a local length, do not.
"""

from __future__ import annotations

import datetime
import os
import tempfile
import time

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed", reason="torch.distributed is not available")
mp = pytest.importorskip("torch.multiprocessing")

import posenc.torch as pt  # noqa: E402
from posenc.torch import RotaryEmbedding  # noqa: E402

WORLD = 2
LENGTH = 8192  # long enough that positions in the second half have large angles
D_MODEL = 64
BATCH = 2
TIMEOUT_S = 120
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16
#: Dynamic NTK with an original context of S/2: each half alone is "short", the whole is not.
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": LENGTH // 2}
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 1024,
}


pytestmark = pytest.mark.usefixtures("one_thread")


def gloo_reason() -> str | None:
    if not dist.is_available():
        return "torch.distributed is not available in this PyTorch build"
    if not dist.is_gloo_available():
        return "the gloo backend is not available in this PyTorch build"
    return None


def inputs() -> torch.Tensor:
    """The whole sequence every rank can rebuild: (b, S, d) float32."""
    return torch.randn(BATCH, LENGTH, D_MODEL, generator=torch.Generator().manual_seed(0))


def queries_keys() -> tuple[torch.Tensor, torch.Tensor]:
    """Queries (b, h, S, d) and keys (b, h_kv, S, d) of the whole sequence, float32."""
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(BATCH, HEADS, LENGTH, HEAD_DIM, generator=gen)
    k = torch.randn(BATCH, KV_HEADS, LENGTH, HEAD_DIM, generator=gen)
    return q, k


def contiguous_shard(rank: int) -> range:
    size = LENGTH // WORLD
    return range(rank * size, (rank + 1) * size)


def zigzag_shard(rank: int) -> torch.Tensor:
    """Global positions of rank ``rank`` under the zigzag split (chunks r and 2W-1-r)."""
    chunk = LENGTH // (2 * WORLD)
    first = torch.arange(rank * chunk, (rank + 1) * chunk)
    second = torch.arange((2 * WORLD - 1 - rank) * chunk, (2 * WORLD - rank) * chunk)
    return torch.cat([first, second])


def encode_shards(rank: int) -> dict[str, torch.Tensor]:
    """What rank ``rank`` computes for its own tokens (no communication).

    Sequence dimension: 1 for the absolute encoding (b, s, d), -2 for RoPE (b, h, s, d).
    """
    pe = pt.SinusoidalPositionalEncoding(D_MODEL, convention="tensor2tensor")
    x = inputs()
    rows = contiguous_shard(rank)
    zigzag = zigzag_shard(rank)
    out = {
        # contiguous shard: positions rows.start .. rows.stop - 1 via offset=
        "offset": pe(x[:, rows.start : rows.stop], offset=rows.start),
        # any split: explicit global positions
        "positions": pe(x[:, zigzag], positions=zigzag),
        # the mistake this pattern avoids: every shard numbered from 0
        "local": pe(x[:, rows.start : rows.stop]),
    }
    q, k = queries_keys()
    q_rows, k_rows = q[..., rows.start : rows.stop, :], k[..., rows.start : rows.stop, :]
    plain = RotaryEmbedding(HEAD_DIM, scaling=LLAMA3)
    out["rope_offset_q"], out["rope_offset_k"] = plain(q_rows, k_rows, offset=rows.start)
    out["rope_positions_q"], out["rope_positions_k"] = plain(
        q[..., zigzag, :], k[..., zigzag, :], positions=zigzag
    )
    dynamic = RotaryEmbedding(HEAD_DIM, scaling=DYNAMIC)
    # Length-dependent frequencies: every rank passes the global length.
    out["dynamic_q"], out["dynamic_k"] = dynamic(q_rows, k_rows, offset=rows.start, seq_len=LENGTH)
    # The mistake: rank 0 sees a "short" sequence (its own S/2 tokens) and picks the
    # unscaled frequencies.
    out["dynamic_local_q"], _ = dynamic(q_rows, k_rows, offset=rows.start)
    return out


def _worker(rank: int, init_file: str, out_dir: str) -> None:
    torch.set_num_threads(1)  # two processes on a small machine
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=TIMEOUT_S),
    )
    try:
        gathered = {}
        for name, shard in encode_shards(rank).items():
            parts = [torch.empty_like(shard) for _ in range(WORLD)]
            dist.all_gather(parts, shard.contiguous())
            gathered[name] = parts
        if rank == 0:
            torch.save(gathered, os.path.join(out_dir, "gathered.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def gathered():
    reason = gloo_reason()
    if reason is not None:
        pytest.skip(reason)
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "rendezvous")
        context = mp.spawn(_worker, args=(init_file, tmp), nprocs=WORLD, join=False)
        deadline = time.monotonic() + TIMEOUT_S
        while not context.join(timeout=1.0):  # raises if a worker raised
            if time.monotonic() > deadline:
                for process in context.processes:
                    process.terminate()
                pytest.fail(f"the {WORLD} gloo processes did not finish within {TIMEOUT_S} s")
        return torch.load(os.path.join(tmp, "gathered.pt"))


def single_process() -> torch.Tensor:
    return pt.SinusoidalPositionalEncoding(D_MODEL, convention="tensor2tensor")(inputs())


def test_contiguous_shards_with_offset_equal_the_single_process_encoding(gathered):
    result = torch.cat(gathered["offset"], dim=1)
    assert result.shape == (BATCH, LENGTH, D_MODEL)
    assert torch.equal(result, single_process())


def test_zigzag_shards_with_positions_equal_the_single_process_encoding(gathered):
    expected = single_process()
    for rank, shard in enumerate(gathered["positions"]):
        assert torch.equal(shard, expected[:, zigzag_shard(rank)])
    order = torch.cat([zigzag_shard(rank) for rank in range(WORLD)])
    result = torch.empty_like(expected)
    result[:, order] = torch.cat(gathered["positions"], dim=1)
    assert torch.equal(result, expected)


def test_negative_control_local_positions_differ(gathered):
    result = torch.cat(gathered["local"], dim=1)
    expected = single_process()
    half = LENGTH // WORLD
    assert torch.equal(result[:, :half], expected[:, :half])  # rank 0 starts at 0 anyway
    assert float((result[:, half:] - expected[:, half:]).abs().max()) > 0.5


def test_shards_match_without_processes():
    # The same pattern in one process (what each rank does, concatenated): fast, no gloo.
    expected = single_process()
    offset = torch.cat([encode_shards(rank)["offset"] for rank in range(WORLD)], dim=1)
    assert torch.equal(offset, expected)


def single_process_rope(scaling) -> tuple[torch.Tensor, torch.Tensor]:
    q, k = queries_keys()
    return RotaryEmbedding(HEAD_DIM, scaling=scaling)(q, k)


def test_rope_contiguous_shards_with_offset_equal_the_single_process_rotation(gathered):
    expected_q, expected_k = single_process_rope(LLAMA3)
    assert torch.equal(torch.cat(gathered["rope_offset_q"], dim=-2), expected_q)
    assert torch.equal(torch.cat(gathered["rope_offset_k"], dim=-2), expected_k)


def test_rope_zigzag_shards_with_positions_equal_the_single_process_rotation(gathered):
    expected_q, expected_k = single_process_rope(LLAMA3)
    for rank in range(WORLD):
        rows = zigzag_shard(rank)
        assert torch.equal(gathered["rope_positions_q"][rank], expected_q[..., rows, :])
        assert torch.equal(gathered["rope_positions_k"][rank], expected_k[..., rows, :])


def test_rope_dynamic_scaling_needs_the_global_length(gathered):
    expected_q, expected_k = single_process_rope(DYNAMIC)
    assert torch.equal(torch.cat(gathered["dynamic_q"], dim=-2), expected_q)
    assert torch.equal(torch.cat(gathered["dynamic_k"], dim=-2), expected_k)
    local = torch.cat(gathered["dynamic_local_q"], dim=-2)
    half = LENGTH // WORLD
    assert float((local[..., :half, :] - expected_q[..., :half, :]).abs().max()) > 1e-2
    # rank 1's shard ends at S, so its local rule already gives the global length
    assert torch.equal(local[..., half:, :], expected_q[..., half:, :])
