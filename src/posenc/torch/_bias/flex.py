"""FlexAttention forms of the biases: ``score_mod`` functions (float32 inside) and a
``block_mask`` for causal attention and packed documents.

A ``score_mod`` is called as ``score_mod(score, b, h, q_idx, kv_idx)``; the positions are
``query_offset + q_idx`` and ``key_offset + kv_idx``. ALiBi and Kerple evaluate their formula
(per-head parameters looked up by ``h``); table-like biases (T5, Sandwich) look up one value
per head and relative position, precomputed in float64 for the lengths given. FlexAttention
builds no ``(heads, q, k)`` bias when compiled; eager FlexAttention (CPU) materialises the
scores. FlexAttention has no ONNX export.

>>> import torch
>>> from torch.nn.attention.flex_attention import flex_attention
>>> q = k = v = torch.ones(1, 2, 4, 8)
>>> flex_attention(q, k, v, score_mod=alibi_score_mod(2)).shape
torch.Size([1, 2, 4, 8])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.nn.attention.flex_attention import create_block_mask

from ..._bias.alibi import AlibiForm, alibi_slopes
from ..._bias.buckets import BucketConvention, t5_buckets
from ..._bias.distance import sandwich_bias
from ..._bias.positions import check_count, check_offset, check_pairs, check_parameter
from ..._checks import check_bool, check_int, check_position_magnitude

__all__ = [
    "ScoreMod",
    "alibi_score_mod",
    "bias_block_mask",
    "kerple_score_mod",
    "relative_score_mod",
    "sandwich_score_mod",
    "t5_score_mod",
]

ScoreMod = Callable[..., torch.Tensor]


def alibi_score_mod(
    heads: int,
    *,
    form: AlibiForm = "distance",
    max_bias: float = 8.0,
    shard: tuple[int, int] | None = None,
    query_offset: int = 0,
    key_offset: int = 0,
    device: Any = None,
) -> ScoreMod:
    """ALiBi as a ``score_mod``: ``score + m_h·f(i, j)`` in float32 (``form`` as
    :func:`posenc.alibi_bias`; the exact slopes rounded once to float32)."""
    if form not in ("distance", "relative", "key"):
        raise ValueError(f"form must be 'distance', 'relative' or 'key', got {form!r}")
    slopes = torch.tensor(alibi_slopes(heads, max_bias=max_bias, shard=shard), device=device)
    slopes = slopes.to(torch.float32)
    q0 = check_offset("query_offset", query_offset)
    k0 = check_offset("key_offset", key_offset)

    def alibi(score: torch.Tensor, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        gap = (kv_idx + k0) - (q_idx + q0) if form != "key" else kv_idx + k0
        if form == "distance":
            gap = -gap.abs()
        result: torch.Tensor = score + slopes[h] * gap.to(torch.float32)
        return result

    return alibi


def relative_score_mod(
    values: torch.Tensor, *, min_relative: int, query_offset: int = 0, key_offset: int = 0
) -> ScoreMod:
    """``score + values[h, (j − i) − min_relative]``: a per-head table over relative positions
    ``min_relative .. min_relative + R − 1`` (``values`` of shape ``(heads, R)``), added in
    float32. Pairs outside that range must not occur (cover every ``j − i`` of the call)."""
    if not isinstance(values, torch.Tensor) or values.ndim != 2:
        got = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
        raise TypeError(f"values must be a (heads, R) tensor, got {got}")
    table = values.to(torch.float32)
    first = check_int("min_relative", min_relative)
    check_position_magnitude("min_relative", first, first)
    start = first + check_offset("query_offset", query_offset)
    k0 = check_offset("key_offset", key_offset)

    def relative(score: torch.Tensor, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        return score + table[h, kv_idx + k0 - q_idx - start]

    return relative


def _relative_range(query_len: int, key_len: int, q0: int, k0: int) -> np.ndarray:
    q = check_count("query_len", query_len)
    k = check_count("key_len", key_len)
    first, second = check_offset("query_offset", q0), check_offset("key_offset", k0)
    check_pairs("query_len and key_len", (q + k - 1,), copies=4)
    return np.arange(second - (first + q - 1), second + k - first, dtype=np.int64)


def t5_score_mod(
    table: torch.Tensor,
    query_len: int,
    key_len: int,
    *,
    bidirectional: bool = True,
    max_distance: int = 128,
    convention: BucketConvention = "exact",
    query_offset: int = 0,
    key_offset: int = 0,
) -> ScoreMod:
    """T5's bias as a ``score_mod``: ``table`` is ``(num_buckets, heads)`` (T5's
    ``relative_attention_bias.weight``), for queries ``0 .. query_len-1`` and keys
    ``0 .. key_len-1`` (plus the offsets)."""
    if not isinstance(table, torch.Tensor) or table.ndim != 2:
        got = tuple(table.shape) if isinstance(table, torch.Tensor) else type(table).__name__
        raise TypeError(f"table must be a (num_buckets, heads) tensor, got {got}")
    rel = _relative_range(query_len, key_len, query_offset, key_offset)
    buckets = t5_buckets(
        rel, bidirectional=bidirectional, num_buckets=table.shape[0],
        max_distance=max_distance, convention=convention,
    )  # fmt: skip
    values = table[torch.from_numpy(buckets).to(table.device)].T
    return relative_score_mod(
        values, min_relative=int(rel[0]), query_offset=query_offset, key_offset=key_offset
    )


def sandwich_score_mod(
    heads: int,
    query_len: int,
    key_len: int,
    *,
    dim: int = 128,
    base: float = 10000.0,
    query_offset: int = 0,
    key_offset: int = 0,
    device: Any = None,
) -> ScoreMod:
    """Sandwich as a ``score_mod`` (float64 values per relative position, then float32)."""
    rel = _relative_range(query_len, key_len, query_offset, key_offset)
    values = sandwich_bias(heads, [0], rel, dim=dim, base=base, dtype=np.float64)[:, 0]
    return relative_score_mod(
        torch.from_numpy(values).to(device=device, dtype=torch.float32),
        min_relative=int(rel[0]), query_offset=query_offset, key_offset=key_offset,
    )  # fmt: skip


def _per_head(name: str, value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.to(torch.float32)
    checked = np.atleast_1d(check_parameter(name, value, positive=True))
    return torch.tensor(checked, dtype=torch.float32)


def kerple_score_mod(
    r1: Any, r2: Any, *, kind: str = "log", query_offset: int = 0, key_offset: int = 0
) -> ScoreMod:
    """Kerple as a ``score_mod``, evaluated in float32: ``r1``, ``r2`` per head (tensors
    keep their autograd graph; numbers are checked as :func:`posenc.kerple_bias` checks)."""
    if kind not in ("log", "power"):
        raise ValueError(f"kind must be 'log' or 'power', got {kind!r}")
    scale, rate = (_per_head(name, value) for name, value in (("r1", r1), ("r2", r2)))
    q0 = check_offset("query_offset", query_offset)
    k0 = check_offset("key_offset", key_offset)

    def kerple(score: torch.Tensor, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        gap = ((kv_idx + k0) - (q_idx + q0)).abs().to(torch.float32)
        shape = torch.log1p(rate[h] * gap) if kind == "log" else gap ** rate[h]
        return score - scale[h] * shape

    return kerple


def bias_block_mask(
    query_len: int,
    key_len: int,
    *,
    causal: bool = True,
    documents: torch.Tensor | None = None,
    device: Any = None,
) -> Any:
    """A FlexAttention ``BlockMask``: causal (queries aligned to the end of the keys) and/or
    packed documents (``documents``: one id per position, ``query_len == key_len``); whole
    blocks outside the mask are skipped."""
    q = check_count("query_len", query_len)
    k = check_count("key_len", key_len)
    causal = check_bool("causal", causal)
    if documents is not None:
        if not isinstance(documents, torch.Tensor):
            raise TypeError(f"documents must be a tensor of ids, got {type(documents).__name__}")
        if q != k or tuple(documents.shape) != (q,):
            raise ValueError(
                f"documents must have shape ({q},) with query_len == key_len, got shape "
                f"{tuple(documents.shape)} for query_len={q}, key_len={k}"
            )
    shift = k - q

    def mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        allowed = kv_idx <= q_idx + shift if causal else kv_idx >= 0
        if documents is not None:
            allowed = allowed & (documents[q_idx] == documents[kv_idx])
        result: torch.Tensor = allowed
        return result

    where = "cpu" if device is None else device
    return create_block_mask(mask, None, None, q, k, device=where)
