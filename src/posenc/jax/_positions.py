"""Position ids as JAX arrays: padding masks, packed sequences, fairseq numbering, multimodal.

Known inputs go to the NumPy core (its checks, its values); ``positions_from_mask``,
``positions_from_segments`` and ``positions_from_tokens`` also trace (inside ``jit``), where
the values cannot be checked. Results are int32 (int64 under ``jax_enable_x64``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from .._checks import check_int
from .._positions.multimodal import multimodal_positions as _core_multimodal
from .._positions.sequence import positions_from_cu_seqlens as _core_cu_seqlens
from .._positions.sequence import positions_from_mask as _core_mask
from .._positions.sequence import positions_from_segments as _core_segments
from .._positions.sequence import positions_from_tokens as _core_tokens
from ._checks import is_traced
from ._exact import x64_enabled

__all__ = [
    "MultimodalIds",
    "multimodal_positions",
    "positions_from_cu_seqlens",
    "positions_from_mask",
    "positions_from_segments",
    "positions_from_tokens",
]

_INT32 = np.iinfo(np.int32)


def ids(name: str, array: npt.NDArray[np.int64]) -> jax.Array:
    """int64 ids as a JAX array: int32 without 64-bit mode (refused if they do not fit)."""
    if x64_enabled():
        return jnp.asarray(array)
    if array.size and (array.min() < _INT32.min or array.max() > _INT32.max):
        raise ValueError(
            f"{name} reach {int(array.max())}, beyond int32 (JAX's integers without 64-bit "
            "mode): enable jax_enable_x64 for positions of 2**31 and more"
        )
    return jnp.asarray(array.astype(np.int32))


def _host(value: Any) -> Any:
    return np.asarray(value) if isinstance(value, jax.Array) else value


def _int_dtype() -> Any:
    return jnp.int64 if x64_enabled() else jnp.int32


def _traced_ints(name: str, value: jax.Array, kinds: str) -> jax.Array:
    allowed = jnp.issubdtype(value.dtype, jnp.integer) or ("b" in kinds and value.dtype == bool)
    if not allowed:
        raise TypeError(f"{name} must be an integer array, got dtype {value.dtype}")
    if value.ndim == 0:
        raise ValueError(f"{name} must have at least one axis (the sequence), got a scalar")
    return value


def positions_from_mask(mask: Any, *, offset: Any = 0, pad_position: int = 0) -> jax.Array:
    """:func:`posenc.positions_from_mask` as a JAX array; ``mask`` and ``offset`` may be
    traced (then their values are not checked: 0/1 masks and offsets >= 0 are the caller's).

    >>> positions_from_mask(jnp.array([[0, 1, 1]]), offset=4)
    Array([[0, 4, 5]], dtype=int32)
    """
    if not (is_traced(mask) or is_traced(offset)):
        return ids(
            "positions", _core_mask(_host(mask), offset=_host(offset), pad_position=pad_position)
        )
    pad = check_int("pad_position", pad_position, minimum=0)
    real = _traced_ints("mask", jnp.asarray(mask), "b").astype(bool)
    counts = jnp.cumsum(real, axis=-1, dtype=_int_dtype())
    return jnp.where(real, counts - 1 + offset, pad).astype(_int_dtype())


def positions_from_segments(segment_ids: Any) -> jax.Array:
    """:func:`posenc.positions_from_segments` as a JAX array (packed sequences); traceable.

    >>> positions_from_segments(jnp.array([[0, 0, 0, 1, 1, 2]]))
    Array([[0, 1, 2, 0, 1, 0]], dtype=int32)
    """
    if not is_traced(segment_ids):
        return ids("positions", _core_segments(_host(segment_ids)))
    seg = _traced_ints("segment_ids", segment_ids, "")
    index = jnp.broadcast_to(jnp.arange(seg.shape[-1], dtype=_int_dtype()), seg.shape)
    starts = jnp.concatenate(
        (jnp.ones((*seg.shape[:-1], 1), dtype=bool), seg[..., 1:] != seg[..., :-1]), axis=-1
    )
    start_index = jax.lax.cummax(jnp.where(starts, index, 0), axis=seg.ndim - 1)
    return index - start_index


def positions_from_tokens(tokens: Any, padding_idx: int, *, offset: Any = 0) -> jax.Array:
    """:func:`posenc.positions_from_tokens` (fairseq / M2M100 numbering) as a JAX array;
    ``tokens`` and ``offset`` may be traced.

    >>> positions_from_tokens(jnp.array([[1, 1, 7, 8]]), padding_idx=1)
    Array([[1, 1, 2, 3]], dtype=int32)
    """
    if not (is_traced(tokens) or is_traced(offset)):
        return ids("positions", _core_tokens(_host(tokens), padding_idx, offset=_host(offset)))
    padding_idx = check_int("padding_idx", padding_idx, minimum=0)
    tok = _traced_ints("tokens", jnp.asarray(tokens), "")
    real = tok != padding_idx
    counts = jnp.cumsum(real, axis=-1, dtype=_int_dtype())
    result: jax.Array = ((counts + offset) * real + padding_idx).astype(_int_dtype())
    return result


def positions_from_cu_seqlens(cu_seqlens: Any) -> jax.Array:
    """:func:`posenc.positions_from_cu_seqlens` as a JAX array. The result's length is
    ``cu_seqlens[-1]``, a value: ``cu_seqlens`` must be known (not traced).

    >>> positions_from_cu_seqlens([0, 3, 5])
    Array([0, 1, 2, 0, 1], dtype=int32)
    """
    if is_traced(cu_seqlens):
        raise TypeError(
            "cu_seqlens must be known, not traced: the result's length is cu_seqlens[-1]; "
            "compute the positions outside jit, or use positions_from_segments"
        )
    return ids("positions", _core_cu_seqlens(_host(cu_seqlens)))


class MultimodalIds(NamedTuple):
    """:func:`multimodal_positions`' result: ``positions`` ``(..., s, 3)``, ``deltas``."""

    positions: jax.Array
    deltas: jax.Array


def multimodal_positions(token_types: Any, **kwargs: Any) -> MultimodalIds:
    """:func:`posenc.multimodal_positions` (Qwen-VL's ``(t, h, w)`` ids) as JAX arrays.

    Arguments as in the core; they must be known (not traced): the layout of the ids
    depends on the token types' values, so compute them where the batch is assembled.
    Hugging Face's ``(3, b, s)`` layout is ``jnp.moveaxis(positions, -1, 0)``.

    >>> pos, deltas = multimodal_positions([0, 0, 1, 1, 1, 1, 0], image_grids=[[1, 4, 4]],
    ...                                    spatial_merge=2)
    >>> pos[:, 1]
    Array([0, 1, 2, 2, 3, 3, 4], dtype=int32)
    """
    values = {"token_types": token_types, **kwargs}
    traced = [name for name, value in values.items() if is_traced(value)]
    if traced:
        raise TypeError(
            f"{traced[0]} must be known, not traced: multimodal ids depend on the token "
            "types' values; compute them outside jit"
        )
    result = _core_multimodal(
        _host(token_types), **{name: _host(value) for name, value in kwargs.items()}
    )
    return MultimodalIds(ids("positions", result.positions), ids("deltas", result.deltas))
