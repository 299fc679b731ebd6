"""Content-dependent relative terms as tensors: DeBERTa's c2p/p2c scores and the
Conformer / Transformer-XL ``(q + v)·R`` term with the relative shift.

Which table row each query/key pair reads is the NumPy core's (``posenc.disentangled_index``,
``posenc.relative_shift_index``, documented there with their signs, query − key in both);
here the rows are gathered from products of given projections, in the frameworks' own
operations and order, so the terms equal transformers' bit for bit in float32 (tested:
``DisentangledSelfAttention.disentangled_attention_bias`` of DeBERTa-v2 and SEW-D,
``_apply_relative_position_encoding`` of Wav2Vec2-Conformer). Nothing is read on the host:
no device synchronisation, and the functions trace with ``torch.compile``.

>>> import torch
>>> relative_shift(torch.arange(5.0).expand(3, 5))
tensor([[2., 3., 4.],
        [1., 2., 3.],
        [0., 1., 2.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..._bias import buckets as core_buckets
from ..._bias import relative_terms as core
from ..._bias.positions import check_pairs
from ..._checks import check_int, check_real
from .._checks import as_device
from .dense import deberta_buckets, position_tensor, transformers_deberta_buckets

__all__ = [
    "deberta_relative_positions",
    "disentangled_scores",
    "logits_at_distances",
    "relative_key_index",
    "relative_key_scores",
    "relative_logits",
    "relative_position_scores",
    "relative_shift",
]


def deberta_relative_positions(
    query_positions: Any,
    key_positions: Any,
    *,
    bucket_size: int | None = None,
    max_position: int | None = None,
    convention: core_buckets.BucketConvention = "exact",
    device: Any = None,
) -> torch.Tensor:
    """:func:`posenc.deberta_relative_positions` as an int64 ``(q, k)`` tensor (query − key).

    ``convention="transformers"`` runs ``make_log_bucket_position``'s float32 steps with
    ``torch.log``: equal to ``build_relative_position(...)[0]`` bit for bit, with no host work
    (it traces with ``torch.compile``); ``"exact"`` reads the positions. Positions given as
    1-D integer tensors stay on their device (unless ``device`` says otherwise).

    >>> deberta_relative_positions(2, 3)
    tensor([[ 0, -1, -2],
            [ 1,  0, -1]])
    """
    bucketed = core.check_bucketing(bucket_size, max_position)  # every setting, before work
    if convention not in ("exact", "transformers"):
        raise ValueError(f"convention must be 'exact' or 'transformers', got {convention!r}")
    query, key = _position_pair(query_positions, key_positions, device)
    rel = query[:, None] - key[None, :]
    if not bucketed:
        return rel
    if convention == "transformers":  # no host work: traces with torch.compile
        return transformers_deberta_buckets(rel, int(bucket_size), int(max_position))  # type: ignore[arg-type]
    return deberta_buckets(
        rel,
        bucket_size=bucket_size,  # type: ignore[arg-type]
        max_position=max_position,  # type: ignore[arg-type]
        convention=convention,
    )


def _position_pair(
    query_positions: Any, key_positions: Any, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """Query and key positions as 1-D int64 tensors on one device: ``device``, else that of
    a tensor given (tensors stay where they are), checked so that the ``(q, k)`` map fits."""
    where = as_device(device)
    if where is not None:  # positions move to the device asked for
        query_positions, key_positions = (
            p.to(where) if isinstance(p, torch.Tensor) else p
            for p in (query_positions, key_positions)
        )
    tensors = [p for p in (query_positions, key_positions) if isinstance(p, torch.Tensor)]
    where = where if where is not None else (tensors[0].device if tensors else None)
    query = position_tensor("query_positions", query_positions, where)
    key = position_tensor("key_positions", key_positions, where)
    if not torch.compiler.is_compiling():  # before the (q, k) map
        shape = (int(query.shape[0]), int(key.shape[0]))
        check_pairs("query_positions and key_positions", shape, copies=2)
    return query, key


def relative_key_index(
    query_positions: Any,
    key_positions: Any,
    *,
    left: int,
    right: int,
    sign: core.RelativeSign = "key - query",
    folded: bool = False,
    offset: int | None = None,
    device: Any = None,
) -> torch.Tensor:
    """:func:`posenc.relative_key_index` as an int64 ``(q, k)`` tensor (the table row each
    pair reads), built on the device with no host work: it traces with ``torch.compile``.

    >>> relative_key_index(2, 3, left=1, right=1)
    tensor([[1, 2, 2],
            [0, 1, 2]])
    """
    low, high, base, _ = core.check_relative_key(left, right, sign, folded, offset)
    query, key = _position_pair(query_positions, key_positions, device)
    rel = key[None, :] - query[:, None]
    if sign == "query - key":
        rel = -rel
    clipped = rel.clamp(-low, high)
    return clipped.abs() if folded else clipped + base


def relative_key_scores(
    query: torch.Tensor,
    table: torch.Tensor,
    index: torch.Tensor,
    *,
    key: torch.Tensor | None = None,
) -> torch.Tensor:
    """The relative-key score terms (Shaw et al.): ``(..., q, k)``, unscaled.

    ``out[..., i, j] = query[..., i, :] · table[index[i, j]]``, the ``relative_key`` term
    (Wav2Vec2-BERT's and SeamlessM4T-v2's ``position_bias`` before their ``1/√head_dim``,
    BERT's ``relative_position_scores``); with ``key``, plus ``key[..., j, :] ·
    table[index[i, j]]`` (BERT's ``relative_key_query``). Computed as the products of every
    query with every row, then gathered, in the input's dtype.

    Args:
        query: ``(..., q, head_dim)`` floating point.
        table: ``(rows, head_dim)``, the learned table (``distance_embedding.weight``), the
            query's dtype.
        index: ``(q, k)`` integer rows (:func:`relative_key_index`), on the query's device.
        key: ``(..., k, head_dim)``, leading dimensions broadcasting to the query's, or None.

    Returns:
        ``(..., q, k)`` in the query's dtype. A row outside the table is refused for CPU
        tensors (``ValueError``); elsewhere its scores are NaN (no device synchronisation).

    >>> index = relative_key_index(2, 2, left=1, right=1)
    >>> relative_key_scores(torch.ones(1, 2, 2), torch.arange(6.0).view(3, 2), index)
    tensor([[[5., 9.],
             [1., 5.]]])
    """
    q_layer = _float_tensor("query", query, 2)
    rows_table = _float_tensor("table", table, 2)
    _same_dtype("table", rows_table, q_layer, "query")
    if rows_table.ndim != 2 or rows_table.shape[-1] != q_layer.shape[-1]:
        raise ValueError(
            f"table must be (rows, head_dim) with the query's head_dim {q_layer.shape[-1]}, "
            f"got shape {tuple(rows_table.shape)}"
        )
    if not isinstance(index, torch.Tensor):
        raise TypeError(f"index must be an integer torch.Tensor (q, k), got {type(index).__name__}")
    if index.dtype.is_floating_point or index.dtype.is_complex or index.dtype == torch.bool:
        raise TypeError(f"index must hold integers, got dtype {index.dtype}")
    q, rows = q_layer.shape[-2], rows_table.shape[0]
    if index.ndim != 2 or index.shape[0] != q:
        raise ValueError(
            f"index must be (q, k) with the query's q = {q}, got shape {tuple(index.shape)}"
        )
    k = index.shape[1]
    lead = tuple(q_layer.shape[:-2])
    key_layer = None
    if key is not None:
        key_layer = _float_tensor("key", key, 2)
        _same_dtype("key", key_layer, q_layer, "query")
        _leading("key", key_layer, lead, "query")
        if key_layer.shape[-2:] != (k, q_layer.shape[-1]):
            raise ValueError(
                f"key must be (..., k, head_dim) = (..., {k}, {q_layer.shape[-1]}) with the "
                f"index's k, got shape {tuple(key_layer.shape)}"
            )
    if index.device.type == "cpu" and index.numel() and not torch.compiler.is_compiling():
        low, high = int(index.min()), int(index.max())  # no sync on the CPU
        if low < 0 or high >= rows:
            raise ValueError(
                f"index reads rows {low} .. {high}, but table has {rows} rows (0 .. {rows - 1})"
            )
    rows_index = index.to(torch.int64)
    valid = (rows_index >= 0) & (rows_index < rows)
    safe = rows_index.clamp(0, max(rows - 1, 0))
    products = q_layer @ rows_table.T  # (..., q, rows)
    scores = products.gather(-1, safe.expand(*products.shape[:-2], q, k))
    if key_layer is not None:
        key_products = key_layer @ rows_table.T  # (..., k, rows)
        from_keys = key_products.gather(-1, safe.T.expand(*key_products.shape[:-2], k, q))
        scores = scores + from_keys.transpose(-1, -2)
    nan = torch.full((), float("nan"), dtype=scores.dtype, device=scores.device)
    result: torch.Tensor = torch.where(valid, scores, nan)
    return result


def relative_logits(curves: torch.Tensor, query_positions: Any, key_positions: Any) -> torch.Tensor:
    """Content-conditioned relative logits (Inkling): ``(..., q, k)``.

    Each query brings its own profile of bias against backward distance, ``curves[..., i,
    d]`` for ``d = 0 .. extent − 1`` (transformers' ``InklingRelativeLogits``: ``(states @
    proj).transpose(1, 2)``; x-transformers' ``RelativeProjPositionalBias``: its ``curves``).
    The pair ``(i, j)`` reads distance ``d = query_positions[i] − key_positions[j]`` when
    ``0 <= d < extent``, and gets 0 otherwise (a key after its query, or too far back:
    causality and padding stay in the attention mask).

    Args:
        curves: ``(..., q, extent)`` floating point, ``extent >= 1``.
        query_positions: an int ``q`` (positions ``0 .. q-1``) or 1-D integer positions,
            ``q`` of them (a decoding step: the cache's offset on).
        key_positions: the same for the keys.

    Returns:
        ``(..., q, k)`` in the dtype of ``curves``; no host work (it traces with
        ``torch.compile``).

    >>> curves = torch.arange(6.0).view(1, 1, 2, 3)          # two queries, distances 0 .. 2
    >>> relative_logits(curves, torch.tensor([4, 5]), torch.arange(6))
    tensor([[[[0., 0., 2., 1., 0., 0.],
              [0., 0., 0., 5., 4., 3.]]]])
    """
    values = _float_tensor("curves", curves, 2)
    q, extent = int(values.shape[-2]), int(values.shape[-1])
    if extent < 1:
        raise ValueError(
            "curves must hold at least one distance (..., q, extent >= 1), got "
            f"{tuple(values.shape)}"
        )
    query, key = _position_pair(query_positions, key_positions, values.device)
    if query.shape[0] != q:
        raise ValueError(
            f"query_positions must give one position per row of curves (q = {q}), got "
            f"{query.shape[0]}"
        )
    return logits_at_distances(values, query[:, None] - key[None, :])


def logits_at_distances(curves: torch.Tensor, distance: torch.Tensor) -> torch.Tensor:
    """:func:`relative_logits` at a given ``(q, k)`` integer map of query − key distances (the
    form Inkling2-loop's layers are handed); no checks (the callers' own)."""
    extent = int(curves.shape[-1])
    inside = (distance >= 0) & (distance < extent)
    index = distance.clamp(0, extent - 1).expand(*curves.shape[:-2], *distance.shape[-2:])
    result: torch.Tensor = curves.gather(-1, index).masked_fill(~inside, 0.0)
    return result


def _float_tensor(name: str, value: Any, ndim: int) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not value.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point tensor, got {value.dtype}")
    if value.ndim < ndim:
        raise ValueError(
            f"{name} must have at least {ndim} dimensions, got shape {tuple(value.shape)}"
        )
    return value


def _same_dtype(name: str, value: torch.Tensor, like: torch.Tensor, like_name: str) -> None:
    if value.dtype != like.dtype:
        raise TypeError(f"{name} must have {like_name}'s dtype {like.dtype}, got {value.dtype}")


def _leading(name: str, value: torch.Tensor, lead: tuple[int, ...], what: str) -> None:
    """``value``'s leading dimensions must broadcast to ``lead`` (the query's)."""
    try:
        ok = tuple(torch.broadcast_shapes(tuple(value.shape[:-2]), lead)) == lead  # type: ignore[no-untyped-call]
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name}'s leading dimensions {tuple(value.shape[:-2])} must broadcast to "
            f"{what}'s {lead}"
        )


def _position_layer(name: str, value: Any, query: torch.Tensor) -> torch.Tensor | None:
    if value is None:
        return None
    layer = _float_tensor(name, value, 2)
    _same_dtype(name, layer, query, "query_layer")
    _leading(name, layer, tuple(query.shape[:-2]), "query_layer")
    rows, width = layer.shape[-2:]
    if width != query.shape[-1] or rows < 2 or rows % 2:
        raise ValueError(
            f"{name} must be (..., 2·att_span, {query.shape[-1]}): an even number >= 2 of rows "
            f"of query_layer's head_dim, got shape {tuple(layer.shape)}"
        )
    return layer


def _relative_map(value: Any, q: int, k: int, device: torch.device) -> torch.Tensor:
    """The (q, k) query − key map: given (checked on the CPU), or ``0 .. q-1`` against
    ``0 .. k-1``, built on ``device``."""
    if value is None:
        rows = torch.arange(q, device=device)
        return rows[:, None] - torch.arange(k, device=device)[None, :]
    if not isinstance(value, torch.Tensor):
        value = torch.from_numpy(np.ascontiguousarray(core_buckets._relative(value)))
    if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
        raise TypeError(f"relative_positions must be integers, got dtype {value.dtype}")
    if tuple(value.shape) != (q, k):
        raise ValueError(
            f"relative_positions must be (q, k) = ({q}, {k}), the query and key lengths, got "
            f"shape {tuple(value.shape)}"
        )
    if value.device.type == "cpu" and not torch.compiler.is_compiling():
        core_buckets._relative(value.detach().numpy())  # no sync on the CPU
    result: torch.Tensor = value.to(device=device, dtype=torch.int64)
    return result


def disentangled_scores(
    query_layer: torch.Tensor,
    key_layer: torch.Tensor,
    *,
    pos_key_layer: torch.Tensor | None = None,
    pos_query_layer: torch.Tensor | None = None,
    relative_positions: Any = None,
    scale_factor: int | None = None,
) -> torch.Tensor:
    """DeBERTa's disentangled relative terms: c2p + p2c, scaled, ``(..., q, k)``.

    ``c2p[i, j] = q_i · pos_key_layer[row(i, j)]`` and ``p2c[i, j] = k_j ·
    pos_query_layer[row(i, j)]``, each divided by ``sqrt(head_dim · scale_factor)``, with
    ``row = clamp(relative_positions + att_span, 0, 2·att_span − 1)``
    (:func:`posenc.disentangled_index`; relative positions are **query − key**). This is
    ``DisentangledSelfAttention.disentangled_attention_bias`` of transformers' DeBERTa-v2 and
    SEW-D, bit for bit in float32, given the projections that method makes of
    ``rel_embeddings[:2·att_span]`` (``pos_key_proj``/``pos_query_proj``, or
    ``key_proj``/``query_proj`` with ``share_att_key``). The content term ``q·kᵀ`` is the
    caller's (transformers divides it by the same scale).

    Args:
        query_layer: ``(..., q, head_dim)`` floating point (transformers: ``(batch·heads, q,
            head_dim)``).
        key_layer: ``(..., k, head_dim)``, the same leading dimensions and dtype.
        pos_key_layer: ``(..., 2·att_span, head_dim)``, leading dimensions broadcasting to the
            query's: gives the c2p term.
        pos_query_layer: the same for the p2c term. At least one of the two is required.
        relative_positions: int ``(q, k)`` query − key, e.g.
            :func:`deberta_relative_positions` with the model's buckets; default: queries
            ``0 .. q-1`` against keys ``0 .. k-1``, unbucketed.
        scale_factor: an int >= 1; default ``1 +`` the number of terms given (DeBERTa's
            ``1 + len(pos_att_type)``).

    Returns:
        ``(..., q, k)`` in ``query_layer``'s dtype, on its device.

    The scale is DeBERTa's: ``sqrt(float32(head_dim) · scale_factor)`` in float32, cast to
    the layers' dtype (float64 layers too). p2c works for any lengths, pair ``(i, j)`` reading
    the row of its own relative position; transformers' p2c needs ``q == k`` (with fewer
    queries its p2c alone is ``(k, k)``, and c2p + p2c fails on the shapes).

    >>> q = torch.ones(1, 2, 4)
    >>> disentangled_scores(q, q, pos_key_layer=torch.arange(4.0)[:, None].expand(4, 4))
    tensor([[[2.8284, 1.4142],
             [4.2426, 2.8284]]])
    """
    query = _float_tensor("query_layer", query_layer, 2)
    key = _float_tensor("key_layer", key_layer, 2)
    _same_dtype("key_layer", key, query, "query_layer")
    if key.shape[:-2] != query.shape[:-2] or key.shape[-1] != query.shape[-1]:
        raise ValueError(
            f"key_layer must be (..., k, head_dim) with query_layer's leading dimensions and "
            f"head_dim {tuple(query.shape[:-2])}, {query.shape[-1]}: got {tuple(key.shape)}"
        )
    pos_key = _position_layer("pos_key_layer", pos_key_layer, query)
    pos_query = _position_layer("pos_query_layer", pos_query_layer, query)
    if pos_key is None and pos_query is None:
        raise ValueError(
            "give pos_key_layer (the c2p term), pos_query_layer (the p2c term) or both"
        )
    if pos_key is not None and pos_query is not None and pos_key.shape[-2] != pos_query.shape[-2]:
        raise ValueError(
            f"pos_key_layer and pos_query_layer must have the same 2·att_span rows, got "
            f"{pos_key.shape[-2]} and {pos_query.shape[-2]}"
        )
    terms = (pos_key is not None) + (pos_query is not None)
    factor = (
        1 + terms if scale_factor is None else check_int("scale_factor", scale_factor, minimum=1)
    )
    q, k = query.shape[-2], key.shape[-2]
    rel = _relative_map(relative_positions, q, k, query.device)
    span = (pos_key if pos_key is not None else pos_query).shape[-2] // 2  # type: ignore[union-attr]
    index = torch.clamp(rel + span, 0, span * 2 - 1)
    score: torch.Tensor | None = None
    if pos_key is not None:  # transformers' c2p, the same operations
        scale = torch.sqrt(torch.tensor(pos_key.size(-1), dtype=torch.float) * factor)
        c2p = torch.matmul(query, pos_key.transpose(-1, -2))
        c2p = torch.gather(c2p, dim=-1, index=index.expand(*c2p.shape[:-2], q, k))
        score = c2p / scale.to(dtype=c2p.dtype)
    if pos_query is not None:  # p2c: gathered per key, then transposed
        scale = torch.sqrt(torch.tensor(pos_query.size(-1), dtype=torch.float) * factor)
        p2c = torch.matmul(key, pos_query.transpose(-1, -2))
        p2c = torch.gather(p2c, dim=-1, index=index.T.expand(*p2c.shape[:-2], k, q))
        term = p2c.transpose(-1, -2) / scale.to(dtype=p2c.dtype)
        score = term if score is None else score + term
    assert score is not None
    return score


def relative_shift(scores: torch.Tensor, key_length: int | None = None) -> torch.Tensor:
    """The relative shift of Transformer-XL, XLNet and the Conformers: ``(..., q, rows)`` →
    ``(..., q, key_length)``.

    ``out[..., i, j] = scores[..., i, q − 1 − i + j]`` (:func:`posenc.relative_shift_index`),
    by the pad-and-reshape trick (one zero column padded on the left, no gather), as
    Wav2Vec2-Conformer's ``_apply_relative_position_encoding`` does it.

    Args:
        scores: ``(..., q, rows)`` floating point: every query against every table row, row
            ``r`` holding the relative position **query − key** ``q − 1 − r``.
        key_length: keys ``k``, an int >= 1; default ``q``. ``rows`` must be at least
            ``q + k − 1``, else the trick reads the padding or another query's scores.

    Returns:
        ``(..., q, key_length)``, the dtype and device of ``scores``.
    """
    values = _float_tensor("scores", scores, 2)
    q, rows = values.shape[-2:]
    if q < 1:
        raise ValueError(
            f"scores must have at least one query row, got shape {tuple(values.shape)}"
        )
    k = q if key_length is None else check_int("key_length", key_length, minimum=1)
    if rows < q + k - 1:
        raise ValueError(
            f"key_length={k} needs scores with at least q + key_length - 1 = {q + k - 1} "
            f"columns (table rows), got {rows}: the shift would read another query's scores"
        )
    shape = values.shape
    padded = torch.nn.functional.pad(values, (1, 0)).view(*shape[:-2], rows + 1, q)
    shifted: torch.Tensor = padded[..., 1:, :].view(shape)[..., :k]
    return shifted


def relative_position_scores(
    query: torch.Tensor,
    position_keys: torch.Tensor,
    *,
    pos_bias_v: torch.Tensor | None = None,
    key_length: int | None = None,
    scaling: float | None = None,
) -> torch.Tensor:
    """The position term ``(q + v)·R`` of Transformer-XL / Conformer attention, shifted and
    scaled: ``(..., heads, q, k)``.

    ``out[..., h, i, j] = scaling · (query[..., h, i] + pos_bias_v[h]) ·
    position_keys[..., h, q − 1 − i + j]`` (:func:`relative_shift`): Wav2Vec2-Conformer's
    ``matrix_bd`` (``_apply_relative_position_encoding``) bit for bit in float32, with
    ``position_keys = linear_pos(table)`` split into heads, heads first. The content term
    ``(q + u)·kᵀ · scaling`` (``pos_bias_u``) is the caller's; the two are added before the
    softmax.

    Args:
        query: ``(..., heads, q, head_dim)`` floating point.
        position_keys: ``(..., heads, rows, head_dim)``, leading dimensions broadcasting to the
            query's, the same dtype; row ``r`` encodes the relative position **query − key**
            ``q − 1 − r`` (``posenc.relative_sinusoid_table(L, d)`` projected, for
            ``q = k = L``), ``rows >= q + k − 1``.
        pos_bias_v: ``(heads, head_dim)``, added to the query (``None``: nothing added).
        key_length: keys ``k``; default ``q``.
        scaling: multiplies the result; default ``head_dim ** -0.5``.

    Returns:
        ``(..., heads, q, k)`` in the query's dtype.

    >>> query = torch.ones(1, 1, 2, 2)
    >>> keys = torch.arange(3.0)[None, None, :, None].expand(1, 1, 3, 2)
    >>> relative_position_scores(query, keys, scaling=1.0)
    tensor([[[[2., 4.],
              [0., 2.]]]])
    """
    q_layer = _float_tensor("query", query, 3)
    keys = _float_tensor("position_keys", position_keys, 3)
    _same_dtype("position_keys", keys, q_layer, "query")
    _leading("position_keys", keys, tuple(q_layer.shape[:-2]), "query")
    heads, head_dim = q_layer.shape[-3], q_layer.shape[-1]
    if keys.shape[-1] != head_dim or keys.shape[-3] != heads:
        raise ValueError(
            f"position_keys must be (..., heads, rows, head_dim) with the query's {heads} "
            f"heads and head_dim {head_dim}, got shape {tuple(keys.shape)}"
        )
    if pos_bias_v is not None:
        bias = _float_tensor("pos_bias_v", pos_bias_v, 2)
        _same_dtype("pos_bias_v", bias, q_layer, "query")
        if tuple(bias.shape) != (heads, head_dim):
            raise ValueError(
                f"pos_bias_v must be (heads, head_dim) = ({heads}, {head_dim}), got shape "
                f"{tuple(bias.shape)}"
            )
        q_layer = q_layer + bias[:, None, :]
    q, rows = q_layer.shape[-2], keys.shape[-2]
    k = q if key_length is None else check_int("key_length", key_length, minimum=1)
    if rows < q + k - 1:
        raise ValueError(
            f"position_keys must have at least q + key_length - 1 = {q + k - 1} rows (relative "
            f"positions {q - 1} down to {1 - k}) for key_length={k}, got {rows}"
        )
    factor = head_dim**-0.5 if scaling is None else check_real("scaling", scaling)
    scores = torch.matmul(q_layer, keys.transpose(-1, -2))
    return relative_shift(scores, k) * factor
