"""Query and key positions of an attention bias, and their relative positions.

Every bias in this package is a function of a query position ``i`` and a key position ``j``.
Positions are integers within +-2**53 (where float64 holds them exactly), given either as a
length ``L`` (positions ``0 .. L-1``) or as a 1-D array of any integers: an offset (KV-cache
decoding), positions restarting per packed document, a sequence-parallel shard, left padding.

Sign convention of this package: **the relative position is key − query**, ``j − i`` (as T5
writes it: memory position minus query position); keys in the past have negative relative
positions. Functions that follow a framework with the other sign (DeBERTa, the speech tables:
query − key) say so in their docstrings.

>>> relative_positions(3, 3)
array([[ 0,  1,  2],
       [-1,  0,  1],
       [-2, -1,  0]])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import (
    _show,
    as_float,
    as_length,
    check_allocation,
    check_int,
    check_position_magnitude,
    check_positions,
    detached,
    is_integer,
)

__all__ = [
    "BLOCK_VALUES",
    "as_position_pair",
    "as_positions",
    "bfloat16_round",
    "cast_bias",
    "cast_in_blocks",
    "check_count",
    "check_fits",
    "check_number",
    "check_offset",
    "check_pairs",
    "check_parameter",
    "position_count",
    "query_blocks",
    "real_values",
    "relative_positions",
]


def as_positions(name: str, value: Any) -> npt.NDArray[np.int64]:
    """``value`` as a 1-D int64 array of positions within +-2**53.

    ``value`` is an int ``L`` (positions ``0 .. L-1``) or a 1-D array-like of integers.

    >>> as_positions("key_positions", 3)
    array([0, 1, 2])
    >>> as_positions("key_positions", [2**53 + 1])
    Traceback (most recent call last):
    ...
    ValueError: key_positions must lie within +-2**53 (float64 holds them exactly), got ...
    """
    length = as_length(name, value)
    if length is not None:
        check_allocation(name, (length,), 8)
        return np.arange(length, dtype=np.int64)
    given = detached(value)
    if isinstance(given, np.ndarray) and given.dtype.kind == "O" and given.size == 0:
        given = np.zeros(given.shape, dtype=np.int64)  # no positions, of no dtype
    array = check_positions(name, given)
    if array.dtype.kind == "f":
        if array.size and not np.all(array == np.floor(array)):
            raise TypeError(f"{name} must be integer positions, got fractional values")
        if array.size and float(np.max(np.abs(array))) > 2.0**53:
            check_position_magnitude(name, float(array.min()), float(array.max()))
        array = array.astype(np.int64)
    if array.ndim != 1:
        raise ValueError(
            f"{name} must be an int L or a 1-D array of positions, got shape {array.shape}"
        )
    if array.size:
        check_position_magnitude(name, int(array.min()), int(array.max()))
    return array.astype(np.int64, copy=False)


def relative_positions(query_positions: Any, key_positions: Any) -> npt.NDArray[np.int64]:
    """Relative positions ``key − query`` of every query/key pair: int64 ``(q, k)``.

    Args:
        query_positions: an int ``q`` (positions ``0 .. q-1``) or a 1-D array of integers
            within +-2**53.
        key_positions: the same for the keys.

    Returns:
        ``out[a, b] = key_positions[b] − query_positions[a]`` (exact: within +-2**54).

    >>> relative_positions([4], 5)        # one decoding step at position 4
    array([[-4, -3, -2, -1,  0]])
    """
    query, key = as_position_pair(query_positions, key_positions, copies=2)
    return key[None, :] - query[:, None]


def position_count(name: str, value: Any) -> int:
    """How many positions ``value`` holds, found without building them: ``L`` for a length
    (checked), else the number of entries of the array-like (0 when it cannot be read as an
    array: :func:`as_positions` then refuses it by name).

    >>> position_count("key_positions", 10**9), position_count("key_positions", [4, 7])
    (1000000000, 2)
    """
    length = as_length(name, value)
    if length is not None:
        return length
    value = detached(value)
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(is_integer(n) for n in shape):
        return math.prod(int(n) for n in shape)
    try:
        return int(np.asarray(value).size)
    except Exception:  # ragged lists and the like: refused by as_positions, by name
        return 0


def as_position_pair(
    query_positions: Any,
    key_positions: Any,
    *,
    heads: int | None = None,
    head_names: str = "heads",
    copies: int = 3,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Query and key positions (:func:`as_positions`), once the result they ask for is known
    to fit: ``copies`` float64 arrays of ``(heads, q, k)`` (``(q, k)`` without ``heads``),
    refused by :func:`check_pairs` before anything proportional to ``q`` or ``k`` (not even
    the positions ``0 .. L-1`` of a length) is allocated. ``head_names`` names what decides
    ``heads`` in that refusal (``"r1"``, ``"table"``).

    >>> query, key = as_position_pair(2, [5, 9, 11])
    >>> query, key
    (array([0, 1]), array([ 5,  9, 11]))
    """
    q = position_count("query_positions", query_positions)
    k = position_count("key_positions", key_positions)
    if heads is None:
        check_pairs("query_positions and key_positions", (q, k), copies)
    else:
        check_pairs(f"{head_names}, query_positions and key_positions", (heads, q, k), copies)
    return as_positions("query_positions", query_positions), as_positions(
        "key_positions", key_positions
    )


def check_pairs(names: str, shape: tuple[int, ...], copies: int = 3) -> None:
    """Refuse, before allocating, a result of ``shape`` (float64 or int64, ``copies`` arrays
    of it at once) that does not fit in memory: a :class:`~posenc.TooLargeError` naming
    ``names``, the arguments that decide the size."""
    check_allocation(names, shape, 8, copies)


def check_count(name: str, value: Any, minimum: int = 1) -> int:
    """A count (heads, buckets): an integer >= ``minimum``, not a bool nor a float.

    >>> check_count("heads", 0)
    Traceback (most recent call last):
    ...
    ValueError: heads must be an integer >= 1, got 0
    """
    count = check_int(name, value, minimum=minimum)
    check_allocation(name, (count,), 8)  # one float64 per head, bucket, ...: it must fit
    return count


def check_offset(name: str, value: Any) -> int:
    """An offset added to positions (``query_offset``, ``key_offset``): an integer within
    +-2**53, where float64 and every position check hold it exactly.

    >>> check_offset("query_offset", 2**60)
    Traceback (most recent call last):
    ...
    ValueError: query_offset must lie within +-2**53 (float64 holds them exactly), got ...
    """
    offset = check_int(name, value)
    check_position_magnitude(name, offset, offset)
    return offset


def real_values(name: str, value: Any) -> npt.NDArray[np.float64]:
    """``value`` (a number or an array-like of any shape; a framework's tensor is read through
    :func:`~posenc._checks.detached`) as finite float64 numbers.

    Booleans, strings, complex numbers and ragged lists are a ``TypeError``; NaN, infinities
    and numbers beyond float64 a ``ValueError``, each naming ``name``.

    >>> real_values("table", [[1, 2]])
    array([[1., 2.]])
    """
    try:
        given = np.asarray(detached(value))
    except Exception as exc:  # ragged lists, objects NumPy cannot read
        raise TypeError(
            f"{name} must be a real number or an array of them, got {_show(value)}"
        ) from exc
    if given.dtype.kind == "b":
        raise TypeError(f"{name} must be real numbers, got booleans")
    if given.dtype.kind == "O":  # Python numbers beyond NumPy's types: Fraction, 10**400
        items = [as_float(name, item, "real numbers") for item in given.reshape(-1)]
        given = np.array(items, dtype=np.float64).reshape(given.shape)
    if given.dtype.kind not in "iuf":  # strings, bytes, complex numbers
        raise TypeError(f"{name} must be real numbers, got {_show(value)}")
    array = given.astype(np.float64)
    if not np.all(np.isfinite(array)):
        bad = float(array[~np.isfinite(array)].flat[0])
        raise ValueError(f"{name} must be finite, got {bad!r} among its values")
    return array


def check_parameter(
    name: str, value: Any, heads: int | None = None, *, positive: bool = False
) -> npt.NDArray[np.float64]:
    """A learnable parameter as float64: a number, or one per head (shape ``(heads,)``, at
    least one head). A framework's tensor (a ``Parameter`` that requires grad) is read
    through :func:`~posenc._checks.detached`.

    NaN and infinities are refused by name; ``positive`` also refuses values <= 0.

    >>> check_parameter("r1", [1.0, float("nan")], 2)
    Traceback (most recent call last):
    ...
    ValueError: r1 must be finite, got nan among its values
    >>> check_parameter("r1", [])
    Traceback (most recent call last):
    ...
    ValueError: r1 must be a number or one value per head (at least one), got an empty array
    """
    array = real_values(name, value)
    if array.ndim > 1 or (heads is not None and array.ndim == 1 and array.shape[0] != heads):
        want = f"a number or shape ({heads},)" if heads is not None else "a number or 1-D"
        raise ValueError(f"{name} must be {want}, got shape {array.shape}")
    if array.ndim == 1 and array.size == 0:
        raise ValueError(
            f"{name} must be a number or one value per head (at least one), got an empty array"
        )
    if positive and np.any(array <= 0):
        raise ValueError(f"{name} must be > 0, got {float(np.min(array))!r}")
    return array


def check_number(name: str, value: Any, *, positive: bool = False) -> float:
    """A parameter that is one number (:func:`check_parameter` of a 0-d value), as a float.

    >>> check_number("c", [1.0, 2.0])
    Traceback (most recent call last):
    ...
    TypeError: c must be a number, got an array of shape (2,)
    """
    array = check_parameter(name, value, positive=positive)
    if array.ndim:
        raise TypeError(f"{name} must be a number, got an array of shape {array.shape}")
    return float(array)


def bfloat16_round(values: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    """``values`` rounded to bfloat16 (to nearest, ties to even), held in float32.

    Through float32 first, as ``tensor.float().bfloat16()`` rounds (twice).

    >>> bfloat16_round(np.array([1001.0, 1.0 + 2.0**-8]))
    array([1000.,    1.], dtype=float32)
    """
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


_WIDER = {"float16": "float32", "bfloat16": "float32"}


def check_fits(values: npt.NDArray[Any], largest: float, dtype_name: str) -> None:
    """Refuse a bias whose magnitude exceeds ``largest``, the output dtype's largest finite
    number: the cast would give infinities (a silent mask), never a bias.

    >>> check_fits(np.array([-1e5, 2.0]), 65504.0, "float16")
    Traceback (most recent call last):
    ...
    ValueError: dtype=float16 cannot hold this bias: its values reach 100000 in magnitude, ...
    """
    if values.size == 0:
        return
    peak = float(np.max(np.abs(values)))
    if not peak <= float(np.finfo(np.float64).max):  # inf or NaN: no dtype holds it
        raise ValueError(
            "the arguments give a bias beyond float64 (its values overflow to infinity); "
            "choose smaller parameters"
        )
    if peak > largest:
        raise ValueError(
            f"dtype={dtype_name} cannot hold this bias: its values reach {peak:.6g} in "
            f"magnitude, beyond {dtype_name}'s largest finite number {largest:.6g}; pass "
            f"dtype={_WIDER.get(dtype_name, 'float64')}"
        )


def cast_bias(values: npt.NDArray[Any], dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """``values`` (finite float64 or float32) cast to ``dtype``, refused by name when they do
    not fit (see :func:`check_fits`); ``+ 0.0`` turns negative zeros into zeros."""
    check_fits(values, float(np.finfo(dtype).max), dtype.name)
    result: npt.NDArray[Any] = (values + 0.0).astype(dtype)
    return result


#: About how many values one block of a dense bias holds (8 MiB in float64): a bias is built
#: a block of query rows at a time, so no float64 array of the whole ``(heads, q, k)`` exists.
BLOCK_VALUES = 1 << 20


def query_blocks(queries: int, per_query: int, size: int | None = None) -> list[slice]:
    """Consecutive slices of ``range(queries)`` of about ``size // per_query`` rows each (at
    least one row), where a query row holds ``per_query`` values; ``size`` defaults to
    :data:`BLOCK_VALUES`.

    >>> query_blocks(5, 4, size=8)
    [slice(0, 2, None), slice(2, 4, None), slice(4, 5, None)]
    """
    step = max(1, (BLOCK_VALUES if size is None else size) // max(1, per_query))
    return [slice(start, min(start + step, queries)) for start in range(0, queries, step)]


def cast_in_blocks(
    shape: tuple[int, int, int],
    block: Callable[[slice], npt.NDArray[Any]],
    store: Callable[[slice, npt.NDArray[Any]], None],
    largest: float,
    dtype_name: str,
    size: int | None = None,
) -> None:
    """Build a ``(heads, q, k)`` bias a block of query rows at a time: ``block(rows)`` gives
    the values of ``[:, rows, :]`` (float64, or a framework's float32), ``store(rows, values)``
    rounds them once into the result. Every value is computed as the whole array would
    compute it, so the result is bit for bit the same; only a block is ever held in float64.

    A value beyond ``largest`` (the output dtype's largest finite number) is refused as
    :func:`check_fits` refuses it, naming the largest magnitude of the whole bias.
    """
    heads, queries, keys = shape
    blocks = query_blocks(queries, heads * keys, size)
    for rows in blocks:
        values = block(rows)
        if values.size and float(np.max(np.abs(values))) > largest:
            peak = max(float(np.max(np.abs(block(r)), initial=0.0)) for r in blocks)
            check_fits(np.array([peak]), largest, dtype_name)
        store(rows, values)
