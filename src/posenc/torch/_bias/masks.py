"""Which query/key pairs attention may use, and the SDPA ``attn_mask`` of a dense bias: the bias
where attention is allowed, ``-inf`` where a causal mask, a sliding window, packed documents or
padding forbid it.

One rule (:class:`PairRule`) decides every pair, for the dense masks here and for the
FlexAttention block mask (:func:`posenc.torch.bias_block_mask`), so the two agree pair for
pair. Queries are aligned to the end of the keys: query ``a`` of ``q`` sits at key position
``k − q + a`` (KV-cache decoding; ``q == k``: query ``a`` at position ``a``).

- ``causal``: keys at or before the query's position.
- ``window=w``: keys less than ``w`` positions away (``|i − j| < w``; with ``causal``,
  ``0 <= i − j < w``: the query and the ``w − 1`` keys before it, Mistral's
  ``sliding_window``).
- documents: a query attends to the keys of its own document (packed sequences). Ids per key
  (``key_documents``) give each query the document of the key position it sits at; ids per
  query (``query_documents``) alone stand for the keys too (``q == k``).
- ``padding_mask``: ``(batch, k)``, True (or 1) at real keys, False (0) at padding, as
  transformers' ``attention_mask``; the keys of padding are never attended to.

Ids and the padding mask are 1-D (the same for every row) or ``(batch, L)``, one row per
sequence: the result then has a batch dimension, and one call builds the mask of a padded or
packed batch.

>>> import torch
>>> bias_attn_mask(torch.zeros(1, 2, 2), causal=True)
tensor([[[0., -inf],
         [0., 0.]]])
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from ..._checks import check_allocation, check_bool, check_int
from .._checks import as_device, check_dtype, data_checked

__all__ = ["PairRule", "allowed_pairs", "bias_attn_mask"]


def _ids(name: str, value: Any, length: Any, device: torch.device, what: str) -> torch.Tensor:
    """``value`` as an integer tensor ``(length,)`` or ``(batch, length)`` on ``device``."""
    shape = f"({length},) or (batch, {length})"
    if isinstance(value, torch.Tensor):
        try:
            ids = value.to(device)
        except (RuntimeError, NotImplementedError) as exc:  # e.g. out of a meta tensor
            raise ValueError(
                f"{name} is on {value.device} and cannot move to {device}, where the mask "
                f"is built: {type(exc).__name__}"
            ) from exc
    else:
        try:
            ids = torch.as_tensor(value, device=device)
        except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
            raise TypeError(f"{name} must be {what} of shape {shape}, got {value!r:.80}") from exc
    booleans = ids.dtype == torch.bool and name != "padding_mask"  # ids are not booleans
    if ids.dtype.is_floating_point or ids.dtype.is_complex or booleans:
        raise TypeError(f"{name} must be {what} of shape {shape}, got dtype {ids.dtype}")
    if ids.ndim not in (1, 2) or ids.shape[-1] != length:
        raise ValueError(f"{name} must be {what} of shape {shape}, got {tuple(ids.shape)}")
    return ids


def _padding(value: Any, key_len: Any, device: torch.device) -> torch.Tensor:
    what = "True (or 1) at real keys, False (or 0) at padding"
    mask = _ids("padding_mask", value, key_len, device, f"booleans ({what})")
    if mask.dtype == torch.bool:
        return mask
    if data_checked(mask) and bool(((mask != 0) & (mask != 1)).any()):
        bad = int(mask[(mask != 0) & (mask != 1)].reshape(-1)[0])
        raise ValueError(f"padding_mask must hold only 0 and 1 ({what}), got {bad}")
    return mask != 0


def _pick(table: torch.Tensor, b: Any, index: Any) -> torch.Tensor:
    """``table[index]`` of a 1-D table, ``table[b, index]`` of a per-row one."""
    picked: torch.Tensor = table[index] if table.ndim == 1 else table[b, index]
    return picked


class PairRule:
    """The checked conditions of a mask, and the pairs they allow (see the module docstring).

    ``allowed(b, q_idx, kv_idx)`` takes index tensors that broadcast (or FlexAttention's
    scalars) and gives booleans: FlexAttention's ``mask_mod`` and the dense masks call it.
    ``batch`` is the rows of the per-row ids or padding (None: no batch dimension).
    """

    def __init__(
        self, query_len: Any, key_len: Any, *, causal: Any = False, window: Any = None,
        query_documents: Any = None, key_documents: Any = None, padding_mask: Any = None,
        device: torch.device,
    ) -> None:  # fmt: skip
        self.query_len, self.key_len = query_len, key_len
        self.shift: Any = key_len - query_len  # query a sits at key position shift + a
        self.causal = check_bool("causal", causal)
        self.window: Any = None
        if window is not None:  # beyond every distance: no limit (and no int64 overflow)
            self.window = min(check_int("window", window, minimum=1), 2**62)
        self.query_documents = self.key_documents = self.padding = None
        kinds = "integer document ids"
        if key_documents is not None:
            self.key_documents = _ids("key_documents", key_documents, key_len, device, kinds)
            if query_documents is None and not _fits(query_len, key_len):
                raise ValueError(
                    "key_documents alone give each query the document of the key position it "
                    f"sits at (key_len − query_len + a), which needs query_len <= key_len, got "
                    f"query_len={query_len}, key_len={key_len}: pass query_documents too"
                )
        if query_documents is not None:
            self.query_documents = _ids(
                "query_documents", query_documents, query_len, device, kinds
            )
            if key_documents is None:
                if not _same(query_len, key_len):
                    raise ValueError(
                        "query_documents alone stand for the keys' documents too, which needs "
                        f"query_len == key_len, got query_len={query_len}, key_len={key_len}: "
                        "pass key_documents too"
                    )
                self.key_documents = self.query_documents
        if padding_mask is not None:
            self.padding = _padding(padding_mask, key_len, device)
        rows = {
            name: int(t.shape[0])
            for name, t in (("query_documents", self.query_documents),
                            ("key_documents", self.key_documents), ("padding_mask", self.padding))
            if t is not None and t.ndim == 2
        }  # fmt: skip
        if len(set(rows.values())) > 1:
            raise ValueError(f"the batch sizes of the per-row arguments differ: {rows}")
        self.batch: int | None = next(iter(rows.values()), None)

    def captured(self, device: torch.device) -> PairRule:
        """This rule with its numbers as 0-d tensors, for a ``mask_mod`` (a Python int
        captured by a ``mask_mod`` becomes a symbol under ``torch.compile(dynamic=True)``,
        which the CPU FlexAttention kernel of torch 2.13 fails to compile)."""
        rule = copy.copy(self)
        rule.shift = torch.tensor(self.shift, dtype=torch.int64, device=device)
        if self.window is not None:
            rule.window = torch.tensor(self.window, dtype=torch.int64, device=device)
        for name in ("query_documents", "key_documents", "padding"):
            table = getattr(self, name)
            if table is not None and device.type == "cpu":  # their sizes would be symbols
                view = table.view_as(table)  # too: static, a compile per key length
                torch._dynamo.mark_static(view)
                setattr(rule, name, view)
        return rule

    def allowed(self, b: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        position = q_idx + self.shift  # the query's position among the keys
        ok: torch.Tensor = kv_idx >= 0
        if self.causal:
            ok = ok & (kv_idx <= position)
        if self.window is not None:
            gap = position - kv_idx
            ok = ok & ((gap < self.window) if self.causal else (gap.abs() < self.window))
        if self.key_documents is not None:
            if self.query_documents is not None:
                mine = _pick(self.query_documents, b, q_idx)
            else:
                mine = _pick(self.key_documents, b, position)
            ok = ok & (mine == _pick(self.key_documents, b, kv_idx))
        if self.padding is not None:
            ok = ok & _pick(self.padding, b, kv_idx)
        return ok

    def dense(self, device: torch.device) -> torch.Tensor:
        """The booleans of every pair: ``(q, k)``, or ``(batch, q, k)`` with per-row ids or
        padding."""
        query = torch.arange(self.query_len, device=device)[:, None]
        key = torch.arange(self.key_len, device=device)[None, :]
        if self.batch is None:
            shape: tuple[Any, ...] = (self.query_len, self.key_len)
            rows: Any = None
        else:
            shape = (self.batch, self.query_len, self.key_len)
            rows = torch.arange(self.batch, device=device)[:, None, None]
        full = torch.ones(shape, dtype=torch.bool, device=device)
        return full & self.allowed(rows, query, key)


def _fits(query_len: Any, key_len: Any) -> bool:
    return not isinstance(query_len, int) or not isinstance(key_len, int) or query_len <= key_len


def _same(query_len: Any, key_len: Any) -> bool:
    return not isinstance(query_len, int) or not isinstance(key_len, int) or query_len == key_len


def _holds_nan_or_plus_inf(bias: torch.Tensor) -> bool:
    """Whether ``bias`` holds NaN or +inf: its largest value is one of them (``amax``
    propagates NaN), one pass."""
    if bias.numel() == 0:
        return False
    largest = float(bias.detach().amax())
    return largest != largest or largest == float("inf")


def allowed_pairs(
    query_len: int,
    key_len: int,
    *,
    causal: bool = False,
    window: int | None = None,
    query_documents: Any = None,
    key_documents: Any = None,
    padding_mask: Any = None,
    device: Any = None,
) -> torch.Tensor:
    """Boolean ``(q, k)``: True where query ``a`` may attend to key ``b``; ``(batch, q, k)``
    with per-row documents or a padding mask.

    Args:
        query_len, key_len: ints >= 0; queries sit at the last ``query_len`` key positions.
        causal: keys at or before the query's position only.
        window: an int >= 1: keys less than ``window`` positions from the query.
        query_documents, key_documents: integer ids ``(L,)`` or ``(batch, L)`` (packed
            documents): key ids alone give each query the id of its position; query ids alone
            need ``query_len == key_len`` and stand for the keys'.
        padding_mask: ``(batch, key_len)`` (or ``(key_len,)``), True or 1 at real keys.
        device: where the result is built (default CPU).

    >>> allowed_pairs(3, 3, query_documents=torch.tensor([0, 0, 1])).int()
    tensor([[1, 1, 0],
            [1, 1, 0],
            [0, 0, 1]], dtype=torch.int32)
    >>> allowed_pairs(3, 3, causal=True, window=2).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [0, 1, 1]], dtype=torch.int32)
    """
    q = check_int("query_len", query_len, minimum=0)
    k = check_int("key_len", key_len, minimum=0)
    check_allocation("query_len and key_len", (q, k), 1, 2)
    where = as_device(device, torch.device("cpu"))
    rule = PairRule(
        q, k, causal=causal, window=window, query_documents=query_documents,
        key_documents=key_documents, padding_mask=padding_mask, device=where,
    )  # fmt: skip
    check_allocation("query_len, key_len and padding_mask", (rule.batch or 1, q, k), 1, 2)
    return rule.dense(where)


def bias_attn_mask(
    bias: torch.Tensor,
    *,
    causal: bool = False,
    window: int | None = None,
    query_documents: Any = None,
    key_documents: Any = None,
    padding_mask: Any = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The ``attn_mask`` of ``F.scaled_dot_product_attention`` from a dense bias.

    Args:
        bias: ``(heads, q, k)``, ``(q, k)`` or ``(batch, heads, q, k)``, e.g.
            :func:`posenc.torch.alibi_bias`: floating point (an additive bias; ``-inf``
            already in it stays) or bool (a mask of its own, True where attention is allowed,
            as SDPA reads a bool mask).
        causal, window, query_documents, key_documents, padding_mask: the pairs to forbid,
            as :func:`allowed_pairs`.
        dtype: the query's dtype (SDPA requires a float mask in it); default ``bias.dtype``.
            Given for a bool bias, the mask becomes additive: 0 where allowed, ``-inf`` not.

    Returns:
        A float bias in ``dtype`` with ``-inf`` at forbidden pairs, or a bool bias with False
        there. With per-row ids or a padding mask it is ``(batch, heads, q, k)`` (a 2-D bias:
        ``(batch, 1, q, k)``); otherwise ``bias``'s shape. It broadcasts against
        ``(batch, heads, q, k)``.

    Integer biases are refused (neither a bias nor SDPA's mask). With a padding mask, the
    queries of padding may have no key left: SDPA gives zeros for such rows.

    >>> bias_attn_mask(torch.zeros(2, 2), padding_mask=[[0, 1], [1, 1]]).shape
    torch.Size([2, 1, 2, 2])
    """
    if not isinstance(bias, torch.Tensor) or bias.ndim not in (2, 3, 4):
        got = (
            f"shape {tuple(bias.shape)}" if isinstance(bias, torch.Tensor) else type(bias).__name__
        )
        raise TypeError(
            f"bias must be a (heads, q, k), (q, k) or (batch, heads, q, k) tensor, got {got}"
        )
    is_mask = bias.dtype == torch.bool
    if not (bias.dtype.is_floating_point or is_mask):
        raise TypeError(
            f"bias must be a floating-point bias or a bool mask (True: attend), got {bias.dtype}"
        )
    out = bias.dtype if dtype is None else check_dtype("dtype", dtype)
    if not is_mask and data_checked(bias) and _holds_nan_or_plus_inf(bias):
        raise ValueError("bias must hold no NaN nor +inf (-inf masks a pair), got one")
    query_len, key_len = bias.shape[-2:]
    rule = PairRule(
        query_len, key_len, causal=causal, window=window, query_documents=query_documents,
        key_documents=key_documents, padding_mask=padding_mask, device=bias.device,
    )  # fmt: skip
    batched = rule.batch is not None or bias.ndim == 4
    if batched:
        rows = rule.batch if rule.batch is not None else bias.shape[0]
        if bias.ndim == 4 and bias.shape[0] not in (1, rows):
            raise ValueError(
                f"bias has {bias.shape[0]} rows, padding_mask and the per-row documents "
                f"{rows}: give them the same batch size"
            )
        heads = bias.shape[-3] if bias.ndim >= 3 else 1
        if not torch.compiler.is_compiling():  # before the (batch, q, k) pairs
            check_allocation("bias and padding_mask", (rows, heads, query_len, key_len), 8, 2)
    allowed = rule.dense(bias.device)
    if batched:
        bias = bias.reshape((1,) * (4 - bias.ndim) + tuple(bias.shape))
        allowed = allowed[:, None] if allowed.ndim == 3 else allowed
    never = torch.full((), float("-inf"), dtype=out, device=bias.device)
    if is_mask:
        both = bias & allowed
        return both if dtype is None else torch.where(both, never.new_zeros(()), never)
    masked: torch.Tensor = torch.where(allowed, bias.to(out), never)
    return masked
