"""FlexAttention forms of the biases: ``score_mod`` functions (float32 inside) and a
``block_mask`` for causal attention, sliding windows, packed documents and padding.

A ``score_mod`` is called as ``score_mod(score, b, h, q_idx, kv_idx)``; the positions are
``query_offset + q_idx`` and ``key_offset + kv_idx``. ALiBi and Kerple evaluate their formula
(per-head parameters looked up by ``h``); T5 looks its bucket up by distance (any length);
table-like biases over relative positions (Sandwich, :func:`relative_score_mod`) look up one
value per head and relative position, precomputed in float64 for the lengths given.
FlexAttention builds no ``(heads, q, k)`` bias when compiled; eager FlexAttention (CPU)
materialises the scores. FlexAttention has no ONNX export.

Sizes: a ``score_mod`` cannot read the indices FlexAttention gives it (they are traced, even
eagerly), so a head or a relative position beyond what it was built for gives a NaN score
(the attention output of that query is NaN), never another entry's value. Called directly
with CPU index tensors (or ints), as on materialised scores, it raises a ``ValueError``
naming what it was built for.

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
from ..._bias.distance import kerple_bias, sandwich_bias
from ..._bias.positions import check_count, check_offset, check_pairs, check_parameter
from ..._checks import check_bool, check_int, check_position_magnitude
from .._checks import as_device, data_checked
from .dense import t5_buckets as torch_t5_buckets
from .dense import total_heads_of
from .masks import PairRule

__all__ = [
    "ScoreMod",
    "alibi_score_mod",
    "bias_block_mask",
    "kerple_score_mod",
    "relative_logits_score_mod",
    "relative_score_mod",
    "sandwich_score_mod",
    "t5_score_mod",
]

ScoreMod = Callable[..., torch.Tensor]

#: T5's score_mod looks its buckets up by distance (any length) when ``max_distance`` is at
#: most this (the same limit as :class:`posenc.torch.T5RelativeBias`).
MAX_TABLE_DISTANCE = 1 << 20


def _readable(*indices: Any) -> bool:
    """Whether ``indices`` can be read: ints, or CPU tensors outside tracing and vmap."""
    if torch.compiler.is_compiling():
        return False
    for index in indices:
        if isinstance(index, torch.Tensor) and (
            not data_checked(index) or torch._C._functorch.is_functorch_wrapped_tensor(index)
        ):
            return False
    return True


class _Bound:
    """The indices ``0 .. size-1`` of a ``score_mod``'s table (heads, or columns), checked
    as the module docstring says. The limit is a captured 0-d tensor, never a Python int:
    under ``torch.compile(dynamic=True)`` a captured int becomes a symbol, which the CPU
    FlexAttention kernel of torch 2.13 fails to compile (C++ errors)."""

    def __init__(self, size: int, device: Any, describe: Callable[[int], str]) -> None:
        self.last = torch.tensor(size - 1, dtype=torch.int64, device=device)
        self.describe = describe

    def __call__(self, index: Any, readable: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """``index`` clamped into the range, and where it was inside; a readable index
        outside raises ``ValueError`` (``describe(first index outside)``)."""
        index = torch.as_tensor(index)
        inside = (index >= 0) & (index <= self.last)
        if readable and not bool(inside.all()):
            raise ValueError(self.describe(int(index[~inside].reshape(-1)[0])))
        return torch.minimum(index.clamp(min=0), self.last), inside


def _heads(size: int, device: Any, what: str) -> _Bound:
    """Head indices ``h`` of a ``score_mod`` with ``size`` heads."""

    def describe(bad: int) -> str:
        return f"this score_mod has {size} heads ({what}), got head index h = {bad}"

    return _Bound(size, device, describe)


def _static(table: torch.Tensor) -> torch.Tensor:
    """``table`` (a view of it: the caller's tensor is left alone) marked static for
    ``torch.compile`` on the CPU: with ``dynamic=True`` the sizes of captured tensors become
    symbols, which the CPU FlexAttention kernel of torch 2.13 fails to compile (C++
    errors)."""
    if table.device.type != "cpu":
        return table
    view = table.view_as(table)
    torch._dynamo.mark_static(view)
    return view


def _offset(value: int, device: Any) -> torch.Tensor:
    """An offset as a 0-d int64 tensor for a ``score_mod`` to capture (see :class:`_Bound`:
    no Python int in a ``score_mod``'s arithmetic)."""
    return torch.tensor(value, dtype=torch.int64, device=device)


def _finite(name: str, table: torch.Tensor) -> None:
    """A table's values must be finite, as the core's ``t5_bias`` checks them (CPU tensors;
    an accelerator's are not read)."""
    if data_checked(table) and not bool(torch.isfinite(table.detach()).all()):
        raise ValueError(f"{name} must be finite, got NaN or infinity among its values")


def _nan_outside(inside: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    nan = torch.full((), float("nan"), dtype=value.dtype, device=value.device)
    result: torch.Tensor = torch.where(inside, value, nan)
    return result


def alibi_score_mod(
    heads: int,
    *,
    total_heads: int | None = None,
    form: AlibiForm = "distance",
    max_bias: float = 8.0,
    shard: tuple[int, int] | None = None,
    query_offset: int = 0,
    key_offset: int = 0,
    device: Any = None,
) -> ScoreMod:
    """ALiBi as a ``score_mod``: ``score + m_h·f(i, j)`` in float32 (``form`` as
    :func:`posenc.alibi_bias`; the exact slopes rounded once to float32).

    ``total_heads``: ALiBi on the first ``heads`` of ``total_heads`` attention heads (their
    slopes are those of a ``heads``-head model), no bias on the others, as x-transformers'
    ``AlibiPositionalBias(heads, total_heads)``; default ``heads``. Not with ``shard``.
    A head index from ``total_heads`` (or ``heads``) on gives NaN (see the module docstring).

    >>> mod = alibi_score_mod(1, total_heads=2)
    >>> [float(mod(torch.tensor(0.0), 0, h, 3, 1)) for h in (0, 1)]
    [-0.0078125, 0.0]
    """
    if form not in ("distance", "relative", "key"):
        raise ValueError(f"form must be 'distance', 'relative' or 'key', got {form!r}")
    slopes = alibi_slopes(heads, max_bias=max_bias, shard=shard)
    total = total_heads_of(total_heads, slopes.size, shard)
    where = as_device(device)
    table = torch.zeros(total, dtype=torch.float32, device=where)
    table[: slopes.size] = torch.from_numpy(slopes).to(device=where, dtype=torch.float32)
    table = _static(table)
    k0 = _offset(check_offset("key_offset", key_offset), where)
    shift = k0 - check_offset("query_offset", query_offset)
    what = f"{slopes.size} with ALiBi" + (f" of {total}" if total != slopes.size else "")
    bound = _heads(total, where, what)

    def alibi(score: torch.Tensor, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        head, inside = bound(h, _readable(h))
        gap = kv_idx + k0 if form == "key" else (kv_idx - q_idx) + shift
        if form == "distance":
            gap = -gap.abs()
        bias = _nan_outside(inside, table[head] * gap.to(torch.float32))
        return score + bias

    return alibi


def relative_score_mod(
    values: torch.Tensor, *, min_relative: int, query_offset: int = 0, key_offset: int = 0
) -> ScoreMod:
    """``score + values[h, (j − i) − min_relative]``: a per-head table over relative positions
    ``min_relative .. min_relative + R − 1`` (``values`` of shape ``(heads, R)``), added in
    float32. A pair outside that range, or a head from ``heads`` on, gives NaN inside
    FlexAttention and a ``ValueError`` when the indices can be read (module docstring)."""
    if not isinstance(values, torch.Tensor) or values.ndim != 2:
        got = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
        raise TypeError(f"values must be a (heads, R) tensor, got {got}")
    if not values.dtype.is_floating_point:
        raise TypeError(f"values must be a floating-point tensor, got {values.dtype}")
    heads, size = values.shape
    if heads < 1 or size < 1:
        raise ValueError(
            f"values must have at least one head and one column, got {tuple(values.shape)}"
        )
    _finite("values", values)
    first = check_int("min_relative", min_relative)
    check_position_magnitude("min_relative", first, first)
    last = first + size - 1
    check_position_magnitude("min_relative + R - 1", last, last)
    return _relative_mod(
        values.to(torch.float32), first, check_offset("query_offset", query_offset),
        check_offset("key_offset", key_offset),
        f"relative positions {first} .. {last} (key − query, offsets included)",
    )  # fmt: skip


def relative_logits_score_mod(
    curves: torch.Tensor, *, query_offset: int = 0, key_offset: int = 0
) -> ScoreMod:
    """``score + curves[b, h, q_idx, d]`` for the backward distance ``d = (query_offset +
    q_idx) − (key_offset + kv_idx)`` when ``0 <= d < extent``, else ``score`` (Inkling's
    relative logits, :func:`posenc.torch.relative_logits`), in float32. ``curves``:
    ``(batch, heads, q, extent)``. A batch, head or query index beyond ``curves`` gives NaN
    inside FlexAttention and a ``ValueError`` when the indices can be read."""
    if not isinstance(curves, torch.Tensor) or curves.ndim != 4:
        got = tuple(curves.shape) if isinstance(curves, torch.Tensor) else type(curves).__name__
        raise TypeError(f"curves must be a (batch, heads, q, extent) tensor, got {got}")
    if not curves.dtype.is_floating_point:
        raise TypeError(f"curves must be a floating-point tensor, got {curves.dtype}")
    batch, heads, q, extent = (int(n) for n in curves.shape)
    if min(batch, heads, q, extent) < 1:
        raise ValueError(f"curves must have no empty dimension, got {tuple(curves.shape)}")
    _finite("curves", curves)
    q0, k0 = check_offset("query_offset", query_offset), check_offset("key_offset", key_offset)
    table = _static(curves.to(torch.float32))
    shift, last = _offset(q0 - k0, table.device), _offset(extent - 1, table.device)
    zero = torch.zeros((), dtype=torch.float32, device=table.device)

    def index_of(what: str, size: int) -> _Bound:
        def describe(bad: int) -> str:
            return f"this score_mod covers {size} {what} (curves {tuple(curves.shape)}), got {bad}"

        return _Bound(size, table.device, describe)

    batches, rows = index_of("batch rows", batch), index_of("queries", q)
    head_rows = _heads(heads, table.device, "curves' heads")

    def logits(score: torch.Tensor, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        readable = _readable(b, h, q_idx, kv_idx)
        bi, b_in = batches(b, readable)
        hi, h_in = head_rows(h, readable)
        qi, q_in = rows(q_idx, readable)
        distance = torch.as_tensor(q_idx - kv_idx) + shift
        near = (distance >= 0) & (distance <= last)
        value = table[bi, hi, qi, torch.minimum(distance.clamp(min=0), last)]
        return score + _nan_outside(b_in & h_in & q_in, torch.where(near, value, zero))

    return logits


def _relative_mod(table: torch.Tensor, first: int, q0: int, k0: int, built: str) -> ScoreMod:
    heads, size = (int(n) for n in table.shape)
    table = _static(table)
    shift = _offset(k0 - q0 - first, table.device)

    def describe(bad: int) -> str:
        return f"this score_mod covers {built}, got the relative position {bad + first}"

    rows = _heads(heads, table.device, f"the table's {heads} rows")
    columns = _Bound(size, table.device, describe)

    def relative(score: torch.Tensor, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        readable = _readable(h, q_idx, kv_idx)
        head, head_in = rows(h, readable)
        index, inside = columns((kv_idx - q_idx) + shift, readable)
        return score + _nan_outside(head_in & inside, table[head, index])

    return relative


def _relative_range(query_len: int, key_len: int, q0: int, k0: int) -> np.ndarray:
    q = check_count("query_len", query_len)
    k = check_count("key_len", key_len)
    first, second = check_offset("query_offset", q0), check_offset("key_offset", k0)
    check_pairs("query_len and key_len", (q + k - 1,), copies=4)
    return np.arange(second - (first + q - 1), second + k - first, dtype=np.int64)


def t5_score_mod(
    table: torch.Tensor,
    query_len: int | None = None,
    key_len: int | None = None,
    *,
    bidirectional: bool = True,
    max_distance: int = 128,
    convention: BucketConvention = "exact",
    query_offset: int = 0,
    key_offset: int = 0,
) -> ScoreMod:
    """T5's bias as a ``score_mod``: ``table`` is ``(num_buckets, heads)`` (T5's
    ``relative_attention_bias.weight``; its autograd graph is kept).

    The bucket of each relative position is looked up by distance, every distance from
    ``max_distance`` on sharing the last bucket, so one ``score_mod`` serves every length
    (``torch.compile`` with changing lengths included); ``query_len``/``key_len`` are then
    not needed (checked if given). With ``max_distance`` above 2**20 the values are
    tabulated for queries ``0 .. query_len-1`` and keys ``0 .. key_len-1`` (plus the
    offsets), which are then required; pairs beyond give NaN (see the module docstring), as
    do head indices from ``heads`` on.

    >>> table = torch.arange(8.0).reshape(4, 2)
    >>> float(t5_score_mod(table, max_distance=4)(torch.tensor(0.0), 0, 1, 9, 2))
    3.0
    """
    if not isinstance(table, torch.Tensor) or table.ndim != 2:
        got = tuple(table.shape) if isinstance(table, torch.Tensor) else type(table).__name__
        raise TypeError(f"table must be a (num_buckets, heads) tensor, got {got}")
    if not table.dtype.is_floating_point:
        raise TypeError(f"table must be a floating-point tensor, got {table.dtype}")
    _finite("table", table)
    settings: dict[str, Any] = {"bidirectional": bidirectional, "num_buckets": table.shape[0],
                                "max_distance": max_distance, "convention": convention}  # fmt: skip
    t5_buckets(np.zeros(1, dtype=np.int64), **settings)  # the core checks every setting
    sizes = [check_count(n, v) for n, v in (("query_len", query_len), ("key_len", key_len))
             if v is not None]  # fmt: skip
    q0 = check_offset("query_offset", query_offset)
    k0 = check_offset("key_offset", key_offset)
    far = int(max_distance)
    if far > MAX_TABLE_DISTANCE:
        if len(sizes) < 2:
            raise ValueError(
                f"t5_score_mod with max_distance={far} (more than 2**20) tabulates the bias "
                "for given lengths: pass query_len and key_len"
            )
        rel = _relative_range(sizes[0], sizes[1], q0, k0)
        buckets = t5_buckets(rel, **settings)
        values = table[torch.from_numpy(buckets).to(table.device)].T
        built = f"query_len={sizes[0]}, key_len={sizes[1]} (offsets {q0}, {k0})"
        return _relative_mod(values.to(torch.float32), int(rel[0]), q0, k0, built)
    relative = torch.arange(-far, far + 1, dtype=torch.int64)
    by_relative = torch_t5_buckets(relative, **settings).to(table.device)  # as the module's
    limit = _offset(far, table.device)
    shift = _offset(k0 - q0, table.device)
    heads = int(table.shape[1])
    columns = _heads(heads, table.device, f"the table's {heads} columns")
    values = _static(table.to(torch.float32))
    by_relative = _static(by_relative)

    def t5(score: torch.Tensor, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        head, inside = columns(h, _readable(h))
        rel = (kv_idx - q_idx) + shift  # from max_distance on, every distance shares a bucket
        bucket = by_relative[torch.minimum(torch.maximum(rel, -limit), limit) + limit]
        return score + _nan_outside(inside, values[bucket, head])

    return t5


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
    """Sandwich as a ``score_mod`` (float64 values per relative position, then float32), for
    queries ``0 .. query_len-1`` and keys ``0 .. key_len-1`` (plus the offsets): pairs beyond,
    or head indices from ``heads`` on, give NaN (see the module docstring)."""
    rel = _relative_range(query_len, key_len, query_offset, key_offset)
    values = sandwich_bias(heads, [0], rel, dim=dim, base=base, dtype=np.float64)[:, 0]
    built = f"query_len={query_len}, key_len={key_len} (offsets {query_offset}, {key_offset})"
    table = torch.from_numpy(values).to(device=as_device(device), dtype=torch.float32)
    return _relative_mod(table, int(rel[0]), int(query_offset), int(key_offset), built)


def _kerple_parameters(r1: Any, r2: Any, kind: Any) -> list[torch.Tensor]:
    """``r1``, ``r2`` as float32 tensors (a tensor keeps its graph), checked by the core as
    :func:`posenc.kerple_bias` checks them: numbers and CPU tensors' values; accelerator
    tensors' shapes only (reading them would synchronise)."""
    shown: list[Any] = []
    for name, value in (("r1", r1), ("r2", r2)):
        if not isinstance(value, torch.Tensor):
            shown.append(value)
            continue
        if value.dtype.is_complex or value.dtype == torch.bool or value.ndim > 1:
            raise TypeError(
                f"{name} must be a number or a 1-D tensor of real numbers (one per head), got "
                f"{value.dtype} {tuple(value.shape)}"
            )
        readable = data_checked(value) and not torch.compiler.is_compiling()
        shown.append(value.detach().cpu().numpy() if readable else np.ones(value.shape))
    # the core's checks: finite, > 0, r2 <= 2 for "power", the same length, kind
    kerple_bias([0], [0], r1=shown[0], r2=shown[1], kind=kind, dtype=np.float64)
    return [
        value.to(torch.float32)
        if isinstance(value, torch.Tensor)
        else torch.from_numpy(check_parameter(name, value, positive=True)).to(torch.float32)
        for name, value in (("r1", r1), ("r2", r2))
    ]


def kerple_score_mod(
    r1: Any, r2: Any, *, kind: str = "log", query_offset: int = 0, key_offset: int = 0
) -> ScoreMod:
    """Kerple as a ``score_mod``, evaluated in float32: ``r1``, ``r2`` a number (every head)
    or one per head (tensors keep their autograd graph). They are checked as
    :func:`posenc.kerple_bias` checks them (CPU tensors' values too; accelerator tensors'
    shapes only). A head index beyond the parameters gives NaN (see the module docstring).

    >>> float(kerple_score_mod(1.0, 2.0, kind="power")(torch.tensor(0.0), 0, 0, 3, 0))
    -9.0
    """
    scale, rate = (_static(value) for value in _kerple_parameters(r1, r2, kind))
    heads = max(scale.numel() if scale.ndim else 0, rate.numel() if rate.ndim else 0)
    shift = _offset(check_offset("key_offset", key_offset), scale.device)
    shift = shift - check_offset("query_offset", query_offset)
    bound = _heads(max(heads, 1), scale.device, "the length of r1 and r2")

    def kerple(score: torch.Tensor, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        one, two = scale, rate
        if heads:
            head, inside = bound(h, _readable(h))
            one = scale[head] if scale.ndim else scale
            two = rate[head] if rate.ndim else rate
        gap = ((kv_idx - q_idx) + shift).abs().to(torch.float32)
        shape = torch.log1p(two * gap) if kind == "log" else gap**two
        bias = -one * shape
        return score + (_nan_outside(inside, bias) if heads else bias)

    return kerple


def bias_block_mask(
    query_len: int,
    key_len: int,
    *,
    causal: bool = True,
    window: int | None = None,
    documents: Any = None,
    padding_mask: Any = None,
    device: Any = None,
) -> Any:
    """A FlexAttention ``BlockMask`` of the pairs :func:`posenc.torch.allowed_pairs` allows:
    causal (queries aligned to the end of the keys), a sliding ``window``, packed
    ``documents`` and ``padding_mask``; whole blocks outside the mask are skipped.

    Args:
        query_len, key_len: ints >= 1.
        causal, window, padding_mask: as :func:`posenc.torch.allowed_pairs`.
        documents: one id per key, ``(key_len,)`` or ``(batch, key_len)`` (a packed batch):
            each query takes the id of the key position it sits at (``key_len − query_len +
            a``; ``query_len == key_len``: its own).
        device: where the mask is built (default CPU).

    With per-row documents or a padding mask the block mask has a batch dimension.
    ``block_mask.mask_mod(b, h, q_idx, kv_idx)`` equals ``allowed_pairs(...)[b, q_idx, kv_idx]``.
    """
    q = check_count("query_len", query_len)
    k = check_count("key_len", key_len)
    causal = check_bool("causal", causal)
    where = as_device(device, torch.device("cpu"))
    rule = PairRule(
        q, k, causal=causal, window=window, key_documents=documents, padding_mask=padding_mask,
        device=where,
    ).captured(where)  # fmt: skip

    def mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> torch.Tensor:
        return rule.allowed(b, q_idx, kv_idx)

    return create_block_mask(mask, rule.batch, None, q, k, device=where)
