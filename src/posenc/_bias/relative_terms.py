"""Content-dependent relative terms: the index maps behind DeBERTa's disentangled attention
and the relative shift of the Conformer / Transformer-XL ``(q + v)·R`` term.

These are not additive biases: the score of query ``i`` and key ``j`` gains a dot product of
the query (or key) *content* with a table row chosen by their relative position. So there is
no ``score_mod`` of positions alone; what positions decide is **which row** each pair reads,
and that is what this module computes (the products are in ``posenc.torch``).

**DeBERTa-v2/v3, SEW-D** (sign: **query − key**, as the models). ``δ(i, j) = query_i −
key_j``, optionally log-bucketed (:func:`posenc.deberta_buckets`); the relative table has
``2·span`` rows and the pair reads row ``clamp(δ(i, j) + span, 0, 2·span − 1)``, in both terms:

- c2p (content to position): ``q_i · K_r[row(i, j)]``;
- p2c (position to content): ``k_j · Q_r[row(i, j)]``. transformers writes its index as
  ``clamp(−δ(j, i) + span)`` on the transposed map; ``δ`` is odd (buckets included), so it is
  the same row.

**Relative keys** (Shaw et al. 2018: BERT's ``relative_key`` / ``relative_key_query``,
Wav2Vec2-BERT, SeamlessM4T-v2, SpeechT5, Granite Speech, Phi-4-multimodal's audio encoder): a
learned table of clipped distances. The pair reads row ``clip(δ, −left, right) + offset``
(``offset`` = ``left`` by default), or ``|clip(δ, −left, right)|`` folded; ``δ`` is
**key − query** or **query − key**, as each model writes it (:func:`relative_key_index`).
The score gains ``q_i · E[row(i, j)]`` (``relative_key``), and ``k_j · E[row(i, j)]`` besides
(``relative_key_query``): ``posenc.torch.relative_key_scores``.

**Conformer, Transformer-XL, XLNet** (``(q + v)·R`` with the relative shift): the query
(plus ``v``) is multiplied with *every* row of the projected table, and the "relative shift"
(pad one column, reshape, drop a row) moves row ``q − 1 − i + j`` of query ``i``'s products to
column ``j``. Row ``r`` of the table therefore holds the relative position **query − key**
``= q − 1 − r``: :func:`posenc.relative_sinusoid_table` of ``L`` rows for ``q = k = L``.

>>> disentangled_index(deberta_relative_positions(3, 3), 1)
array([[1, 0, 0],
       [1, 1, 0],
       [1, 1, 1]])
>>> relative_shift_index(2, 3)
array([[1, 2, 3],
       [0, 1, 2]])
>>> relative_key_index(3, 3, left=1, right=1)
array([[1, 2, 2],
       [0, 1, 2],
       [0, 0, 1]])
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._checks import MAX_EXACT_POSITION, _show, check_int, detached
from .buckets import BucketConvention, _relative, deberta_buckets
from .positions import as_position_pair, check_count, check_pairs, relative_positions

__all__ = [
    "RELATIVE_SIGNS",
    "RelativeSign",
    "check_bucketing",
    "check_relative_key",
    "deberta_relative_positions",
    "disentangled_index",
    "relative_key_index",
    "relative_logits",
    "relative_shift_index",
]

#: Which difference a relative-key index is taken of (each model writes one of them).
RelativeSign = Literal["key - query", "query - key"]
RELATIVE_SIGNS: tuple[RelativeSign, ...] = ("key - query", "query - key")


def check_bucketing(bucket_size: Any, max_position: Any) -> bool:
    """Whether DeBERTa's log buckets apply: both settings given (and valid, as
    :func:`posenc.deberta_buckets` checks them), or neither; refuse one without the other,
    and the ``bucket_size <= 0`` that transformers reads as "no buckets" (say ``None``).
    Python only, no NumPy: ``torch.compile`` traces it."""
    if bucket_size is None and max_position is None:
        return False
    if bucket_size is None:
        raise ValueError(
            f"max_position is used only with bucket_size (the log buckets), got "
            f"max_position={_show(max_position)} without bucket_size: pass both, or neither"
        )
    whole = isinstance(bucket_size, int | np.integer) and not isinstance(bucket_size, bool)
    if whole and int(bucket_size) <= 0:
        raise ValueError(
            f"bucket_size must be an integer >= 2, or None for no buckets (transformers' "
            f"-1), got {int(bucket_size)}"
        )
    if max_position is None:
        raise ValueError(
            f"max_position is required with bucket_size={_show(bucket_size)} "
            "(max_relative_positions of the config)"
        )
    mid = check_int("bucket_size", bucket_size, minimum=2) // 2
    if check_int("max_position", max_position, minimum=1) - 1 <= mid:
        raise ValueError(
            f"max_position must be greater than bucket_size // 2 + 1 = {mid + 1}, got "
            f"{int(max_position)}: the log bins would be empty or negative"
        )
    return True


def deberta_relative_positions(
    query_positions: Any,
    key_positions: Any,
    *,
    bucket_size: int | None = None,
    max_position: int | None = None,
    convention: BucketConvention = "exact",
) -> npt.NDArray[np.int64]:
    """DeBERTa's relative positions **query − key** of every pair, log-bucketed on request.

    transformers' ``build_relative_position(query_layer, key_layer, bucket_size,
    max_position)[0]`` for positions ``0 .. q-1`` and ``0 .. k-1``; any other positions
    (an offset, a shard) work the same way.

    Args:
        query_positions: an int ``q`` (positions ``0 .. q-1``) or 1-D integer positions.
        key_positions: the same for the keys.
        bucket_size: ``position_buckets`` of the config, an int >= 2; ``None`` (default) for
            plain distances (the config's ``-1``).
        max_position: ``max_relative_positions`` of the config; required with
            ``bucket_size``, refused without it.
        convention: of the buckets, as :func:`posenc.deberta_buckets`.

    Returns:
        int64 ``(q, k)``: ``out[i, j] = query_positions[i] − key_positions[j]``, or its bucket.

    >>> deberta_relative_positions(2, 3)
    array([[ 0, -1, -2],
           [ 1,  0, -1]])
    >>> deberta_relative_positions([100], [0], bucket_size=8, max_position=64)
    array([[8]])
    """
    bucketed = check_bucketing(bucket_size, max_position)
    if convention not in ("exact", "transformers"):
        raise ValueError(f"convention must be 'exact' or 'transformers', got {convention!r}")
    rel = -relative_positions(query_positions, key_positions)
    if not bucketed:
        return rel
    return deberta_buckets(
        rel,
        bucket_size=bucket_size,  # type: ignore[arg-type]
        max_position=max_position,  # type: ignore[arg-type]
        convention=convention,
    )


def disentangled_index(relative_positions: Any, att_span: int) -> npt.NDArray[np.int64]:
    """The row of DeBERTa's relative table that each pair reads, in c2p and in p2c.

    ``clamp(relative_positions + att_span, 0, 2·att_span − 1)``, as transformers'
    ``disentangled_attention_bias`` indexes ``c2p_pos`` (and, for ``p2c``, the same rows:
    see the module docstring).

    Args:
        relative_positions: integers **query − key** of any shape
            (:func:`deberta_relative_positions`).
        att_span: half the rows of the table, an int >= 1: the model's ``pos_ebd_size``
            (``position_buckets`` if > 0, else ``max_relative_positions``).

    Returns:
        int64 rows in ``[0, 2·att_span)``, the shape of ``relative_positions``.

    >>> disentangled_index([-5, -1, 0, 1, 5], 2)
    array([0, 1, 2, 3, 3])
    """
    rel = _relative(relative_positions)
    span = check_count("att_span", att_span)  # the table's 2·att_span rows must fit too
    rows: npt.NDArray[np.int64] = np.asarray(np.clip(rel + span, 0, 2 * span - 1), np.int64)
    return rows


def relative_shift_index(
    query_length: int, key_length: int | None = None, *, rows: int | None = None
) -> npt.NDArray[np.int64]:
    """The table row that the relative shift gives each query/key pair: int64 ``(q, k)``.

    The shift of Transformer-XL, XLNet and the Conformers (``_apply_relative_position_encoding``
    of Wav2Vec2-Conformer): scores ``(q, rows)`` of every query against every row are padded
    with one zero column on the left, read as ``(rows + 1, q)``, their first row dropped, read
    back as ``(q, rows)`` and cut to ``k`` columns. This function runs those steps on the row
    numbers themselves.

    Args:
        query_length: queries ``q``, an int >= 1.
        key_length: keys ``k``, an int >= 1; default ``q`` (self-attention).
        rows: rows of the table, at least ``q + k − 1`` (default), else the shift reads the
            padding or a neighbouring query's products.

    Returns:
        ``out[i, j] = q − 1 − i + j``: row ``r`` must hold relative position **query − key**
        ``q − 1 − r`` (Wav2Vec2-Conformer's ``2L − 1`` rows for ``q = k = L``).

    >>> relative_shift_index(3)
    array([[2, 3, 4],
           [1, 2, 3],
           [0, 1, 2]])
    """
    q = check_count("query_length", query_length)
    k = q if key_length is None else check_count("key_length", key_length)
    needed = q + k - 1
    size = needed if rows is None else check_count("rows", rows)
    if size < needed:
        raise ValueError(
            f"rows must be at least query_length + key_length - 1 = {needed}, got {size}: the "
            "shift would read the padding or another query's row"
        )
    check_pairs("query_length and rows", (q, size + 1), copies=2)
    labels = np.broadcast_to(np.arange(size, dtype=np.int64), (q, size))
    padded = np.pad(labels, ((0, 0), (1, 0)), constant_values=-1)
    shifted = padded.reshape(size + 1, q)[1:].reshape(q, size)[:, :k]
    return np.ascontiguousarray(shifted)


def check_relative_key(
    left: Any, right: Any, sign: Any, folded: Any, offset: Any
) -> tuple[int, int, int, int]:
    """The settings of :func:`relative_key_index`, checked: ``(left, right, offset, rows)``,
    ``rows`` the rows of the table the index reads (``offset`` is 0 when folded). Checks of
    Python values only: ``torch.compile`` traces it."""
    low = check_int("left", left, minimum=0)
    high = check_int("right", right, minimum=0)
    for name, value in (("left", low), ("right", high)):
        if value > MAX_EXACT_POSITION:
            raise ValueError(f"{name} must be at most 2**53 (a distance), got {_show(value)}")
    if sign not in RELATIVE_SIGNS:
        raise ValueError(f"sign must be one of {RELATIVE_SIGNS}, got {sign!r}")
    if not isinstance(folded, bool | np.bool_):
        raise TypeError(f"folded must be True or False, got {type(folded).__name__}")
    if bool(folded):
        if offset is not None:
            raise ValueError(
                "offset applies to the unfolded index (clip + offset); a folded index is "
                f"|clip| itself, got offset={_show(offset)}"
            )
        return low, high, 0, max(low, high) + 1
    base = low if offset is None else check_int("offset", offset, minimum=low)
    if base > MAX_EXACT_POSITION:
        raise ValueError(f"offset must be at most 2**53, got {_show(base)}")
    return low, high, base, base + high + 1


def relative_key_index(
    query_positions: Any,
    key_positions: Any,
    *,
    left: int,
    right: int,
    sign: RelativeSign = "key - query",
    folded: bool = False,
    offset: int | None = None,
) -> npt.NDArray[np.int64]:
    """The row of a clipped relative-distance table (relative keys) that each pair reads.

    ``δ`` is ``key − query`` (or ``query − key``), clipped to ``[−left, right]``; the row is
    ``clip(δ) + offset``, or ``|clip(δ)|`` with ``folded``. The calls of the models (``L``
    positions, their config's names):

    - Wav2Vec2-BERT and SeamlessM4T-v2, ``position_embeddings_type="relative_key"``:
      ``left=left_max_position_embeddings, right=right_max_position_embeddings``;
    - SpeechT5's encoder (``encoder_max_relative_position`` ``m``):
      ``left=m, right=m − 1, sign="query - key"``;
    - Phi-4-multimodal's audio encoder (``bias_max_distance`` ``m``): ``left=m, right=m − 1``,
      and ``folded=True`` with ``bias_symmetric`` (whose ``m``-row table is one row short
      when a key lies ``m`` or more positions before its query: row ``m`` is read);
    - Granite Speech (``context_size`` ``c`` within each block, ``max_pos_emb`` ``M``):
      ``left=c, right=c, sign="query - key", offset=M``;
    - BERT-family ``relative_key`` / ``relative_key_query`` (transformers 4.x,
      ``max_position_embeddings`` ``M``): ``left=M − 1, right=M − 1, sign="query - key"``.

    Args:
        query_positions: an int ``q`` (positions ``0 .. q-1``) or 1-D integer positions.
        key_positions: the same for the keys.
        left: the farthest distance kept below zero, an int >= 0.
        right: the farthest kept above zero, an int >= 0.
        sign: ``"key - query"`` (default) or ``"query - key"``.
        folded: the row is ``|clip(δ)|`` (one row per distance, either side).
        offset: added to ``clip(δ)``, an int >= ``left``; default ``left`` (row 0 is ``−left``).

    Returns:
        int64 ``(q, k)`` rows, in ``[0, offset + right]`` (folded: ``[0, max(left, right)]``).

    >>> relative_key_index(2, 4, left=1, right=2, sign="query - key")
    array([[1, 0, 0, 0],
           [2, 1, 0, 0]])
    >>> relative_key_index([5], [0, 3, 5, 9], left=2, right=2, folded=True)
    array([[2, 2, 0, 2]])
    """
    low, high, base, _ = check_relative_key(left, right, sign, folded, offset)
    rows = relative_positions(query_positions, key_positions)  # the one (q, k) array
    if sign == "query - key":
        np.negative(rows, out=rows)
    np.clip(rows, -low, high, out=rows)
    if folded:
        np.abs(rows, out=rows)
    else:
        rows += base
    return rows


def relative_logits(
    curves: Any, query_positions: Any, key_positions: Any
) -> npt.NDArray[np.float64]:
    """Content-conditioned relative logits (Inkling), the float64 reference: ``(..., q, k)``.

    Each query brings its own profile of bias against backward distance, ``curves[..., i,
    d]`` for ``d = 0 .. extent − 1`` (transformers' ``InklingRelativeLogits``: ``(states @
    proj).transpose(1, 2)``; x-transformers' ``RelativeProjPositionalBias``: its ``curves``).
    The pair ``(i, j)`` reads distance ``d = query_positions[i] − key_positions[j]`` when
    ``0 <= d < extent``, and gets 0 otherwise (a key after its query, or too far back:
    causality and padding stay in the attention mask). ``posenc.torch.relative_logits`` is
    the same on tensors, on the device.

    Args:
        curves: ``(..., q, extent)`` real numbers (any float dtype, a tensor too), finite,
            ``extent >= 1``.
        query_positions: an int ``q`` (positions ``0 .. q-1``) or 1-D integer positions,
            ``q`` of them (a decoding step: the cache's offset on).
        key_positions: the same for the keys.

    Returns:
        float64 ``(..., q, k)``: each value is one of ``curves`` or 0, so it is exact.

    >>> curves = np.arange(6.0).reshape(2, 3)          # two queries, distances 0 .. 2
    >>> relative_logits(curves, [4, 5], 6)
    array([[0., 0., 2., 1., 0., 0.],
           [0., 0., 0., 5., 4., 3.]])
    """
    try:
        values = np.asarray(detached(curves))
    except (TypeError, ValueError) as exc:  # ragged lists and the like
        raise TypeError(f"curves must be an array of real numbers, got {_show(curves)}") from exc
    if values.dtype.kind not in "iuf" or values.dtype == np.bool_:
        raise TypeError(f"curves must hold real numbers, got dtype {values.dtype}")
    if values.ndim < 2 or values.shape[-1] < 1:
        raise ValueError(
            f"curves must be (..., q, extent) with extent >= 1, got shape {values.shape}"
        )
    values = values.astype(np.float64, copy=False)
    if not np.isfinite(values).all():
        bad = float(values[~np.isfinite(values)].flat[0])
        raise ValueError(f"curves must be finite, got {bad!r} among its values")
    lead, (q, extent) = values.shape[:-2], values.shape[-2:]
    heads = int(np.prod(lead, dtype=np.int64)) if lead else 1
    query, key = as_position_pair(
        query_positions, key_positions, heads=heads, head_names="curves", copies=2
    )
    if query.shape[0] != q:
        raise ValueError(
            f"query_positions must give one position per row of curves (q = {q}), got "
            f"{query.shape[0]}"
        )
    distance = query[:, None] - key[None, :]
    inside = (distance >= 0) & (distance < extent)
    index = np.broadcast_to(np.clip(distance, 0, extent - 1), (*lead, q, key.shape[0]))
    out = np.take_along_axis(values, index, axis=-1)
    out[..., ~inside] = 0.0
    return out
