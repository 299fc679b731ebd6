"""An additive SDPA ``attn_mask`` from a dense bias: the bias where attention is allowed,
``-inf`` where a causal mask or packed documents forbid it.

>>> import torch
>>> bias_attn_mask(torch.zeros(1, 2, 2), causal=True)
tensor([[[0., -inf],
         [0., 0.]]])
"""

from __future__ import annotations

from typing import Any

import torch

from ..._checks import check_allocation, check_bool, check_int
from .._checks import as_device
from .._kernels._cast import check_dtype

__all__ = ["allowed_pairs", "bias_attn_mask"]


def _documents(name: str, value: Any, length: int, device: torch.device) -> torch.Tensor:
    try:
        ids = torch.as_tensor(value, device=device)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"{name} must be {length} integer document ids, got {value!r}") from exc
    if ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.shape != (length,):
        raise ValueError(
            f"{name} must be {length} integer document ids, got {ids.dtype} {tuple(ids.shape)}"
        )
    return ids


def allowed_pairs(
    query_len: int,
    key_len: int,
    *,
    causal: bool = False,
    query_documents: Any = None,
    key_documents: Any = None,
    device: Any = None,
) -> torch.Tensor:
    """Boolean ``(q, k)``: True where query ``a`` may attend to key ``b``.

    Causal: queries are aligned to the end of the keys (query ``a`` sits at key position
    ``key_len − query_len + a``, as in KV-cache decoding). Documents: ids per query and per
    key (packed sequences); ``key_documents`` defaults to ``query_documents``.

    >>> allowed_pairs(3, 3, query_documents=torch.tensor([0, 0, 1])).int()
    tensor([[1, 1, 0],
            [1, 1, 0],
            [0, 0, 1]], dtype=torch.int32)
    """
    q = check_int("query_len", query_len, minimum=0)
    k = check_int("key_len", key_len, minimum=0)
    causal = check_bool("causal", causal)
    check_allocation("query_len and key_len", (q, k), 1)
    where = as_device(device, torch.device("cpu"))
    return _allowed(q, k, causal, query_documents, key_documents, where)


def _allowed(
    query_len: Any, key_len: Any, causal: bool, query_documents: Any, key_documents: Any,
    where: torch.device,
) -> torch.Tensor:  # fmt: skip
    """:func:`allowed_pairs` of checked lengths (ints, or the symbolic sizes of a traced
    tensor): comparisons of index ranges, which ``torch.export`` keeps dynamic."""
    query = torch.arange(query_len, device=where)
    key = torch.arange(key_len, device=where)
    allowed = torch.ones_like(query[:, None] <= key[None, :])
    if causal:
        allowed = key[None, :] <= query[:, None] + (key_len - query_len)
    if query_documents is not None:
        query = _documents("query_documents", query_documents, query_len, where)
        keys = query_documents if key_documents is None else key_documents
        key = _documents("key_documents", keys, key_len, where)
        allowed = allowed & (query[:, None] == key[None, :])
    return allowed


def bias_attn_mask(
    bias: torch.Tensor,
    *,
    causal: bool = False,
    query_documents: Any = None,
    key_documents: Any = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The additive ``attn_mask`` of ``F.scaled_dot_product_attention`` from a dense bias.

    Args:
        bias: ``(heads, q, k)`` (or ``(q, k)``), e.g. :func:`posenc.torch.alibi_bias`.
        causal, query_documents, key_documents: the pairs to forbid, as
            :func:`allowed_pairs`.
        dtype: the query's dtype (SDPA requires the mask in it); default ``bias.dtype``.

    Returns:
        ``bias`` in ``dtype`` with ``-inf`` at forbidden pairs; broadcasts against
        ``(batch, heads, q, k)``.
    """
    if not isinstance(bias, torch.Tensor) or bias.ndim not in (2, 3):
        raise TypeError(f"bias must be a (heads, q, k) or (q, k) tensor, got {type(bias).__name__}")
    out = bias.dtype if dtype is None else check_dtype("dtype", dtype)
    check_bool("causal", causal)
    query_len, key_len = bias.shape[-2:]
    allowed = _allowed(query_len, key_len, causal, query_documents, key_documents, bias.device)
    return bias.to(out).masked_fill(~allowed, float("-inf"))
