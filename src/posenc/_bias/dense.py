"""The dense bias ``(heads, q, k)`` of a learned per-bucket table (T5 and its family).

T5, mT5, UMT5, LongT5, Switch, Pix2Struct and Pop2Piano learn one scalar per (bucket, head):
``relative_attention_bias.weight`` of shape ``(num_buckets, heads)``. The bias of query
``i`` and key ``j`` is ``table[bucket(j − i), h]`` (see :func:`posenc.t5_buckets`).

>>> import numpy as np
>>> t5_bias(np.arange(8.0).reshape(4, 2), 2, 2, num_buckets=4, max_distance=4)
array([[[0., 6.],
        [2., 0.]],
<BLANKLINE>
       [[1., 7.],
        [3., 1.]]], dtype=float32)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import check_float_dtype
from .buckets import BucketConvention, t5_buckets
from .positions import as_position_pair, cast_in_blocks, real_values

__all__ = ["t5_bias"]


def t5_bias(
    table: Any,
    query_positions: Any,
    key_positions: Any,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    convention: BucketConvention = "exact",
    dtype: Any = np.float32,
) -> npt.NDArray[Any]:
    """T5's relative bias ``(heads, q, k)`` from a ``(num_buckets, heads)`` table.

    Args:
        table: the learned table, shape ``(num_buckets, heads)`` with ``heads >= 1``, finite
            numbers: an array, or T5's ``relative_attention_bias.weight`` itself (a
            framework's parameter is read detached, on the host; bfloat16 exactly).
        query_positions, key_positions: an int ``L`` or 1-D integer positions each.
        bidirectional, num_buckets, max_distance, convention: as :func:`posenc.t5_buckets`.
        dtype: float32 (default), float16 or float64: the table's values cast once.

    Returns:
        ``out[h, a, b] = table[bucket(key_positions[b] − query_positions[a]), h]``.

    >>> t5_bias(np.ones((32, 12)), 5, 5).shape
    (12, 5, 5)
    """

    def buckets(relative: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return t5_buckets(
            relative, bidirectional=bidirectional, num_buckets=num_buckets,
            max_distance=max_distance, convention=convention,
        )  # fmt: skip

    buckets(np.zeros(0, dtype=np.int64))  # checks the settings, even for no pairs
    weights = real_values("table", table)
    if weights.ndim != 2 or weights.shape[0] != num_buckets or weights.shape[1] < 1:
        raise ValueError(
            f"table must have shape (num_buckets, heads) = ({num_buckets!r}, heads) with "
            f"heads >= 1, got shape {weights.shape}"
        )
    out_dtype = check_float_dtype("dtype", dtype)
    query, key = as_position_pair(
        query_positions, key_positions, heads=weights.shape[1], head_names="table"
    )
    shape = (weights.shape[1], query.size, key.size)
    out = np.empty(shape, dtype=out_dtype)

    def block(rows: slice) -> npt.NDArray[np.float64]:
        return np.moveaxis(weights[buckets(key[None, :] - query[rows, None])], -1, 0)

    def store(rows: slice, values: npt.NDArray[Any]) -> None:
        out[:, rows] = values + 0.0  # rounded once; + 0.0 turns negative zeros into zeros

    cast_in_blocks(shape, block, store, float(np.finfo(out_dtype).max), out_dtype.name)
    return out
