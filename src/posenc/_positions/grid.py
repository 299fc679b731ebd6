"""Grid position ids: one ``(t, h, w)`` (or ``(h, w)``) coordinate per patch of an image or video.

Vision and video transformers cut their input into a grid of patches and give each patch its
coordinates on the grid; multi-axis RoPE (:func:`posenc.multi_axis_cos_sin`) then turns some
rotary pairs with each coordinate. Patches are usually numbered in row-major order (the last
axis varies fastest). Qwen2-VL's vision towers instead number them block by block: the
``m × m`` patches that the merger later fuses into one token are consecutive (``merge``).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import check_allocation, check_int, check_position_magnitude, check_sequence

__all__ = ["grid_positions"]


def _per_axis(name: str, value: Any, n_axes: int, minimum: int | None) -> tuple[int, ...]:
    """An int (every axis) or a sequence of ``n_axes`` ints."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return (check_int(name, value, minimum=minimum),) * n_axes
    value = check_sequence(name, value, f"an integer or a sequence of {n_axes} integers")
    if len(value) != n_axes:
        raise ValueError(
            f"{name} must give one value per axis of shape ({n_axes}), got {len(value)}: "
            f"{tuple(value)!r}"
        )
    return tuple(check_int(f"{name}[{i}]", v, minimum=minimum) for i, v in enumerate(value))


def _check_grid_shape(shape: Any) -> tuple[int, ...]:
    shape = check_sequence("shape", shape, "a sequence of grid sizes such as (h, w) or (t, h, w)")
    if not shape:
        raise ValueError("shape must have at least one axis, got ()")
    return tuple(check_int(f"shape[{i}]", n, minimum=0) for i, n in enumerate(shape))


def grid_positions(shape: Any, *, merge: Any = 1, start: Any = 0) -> npt.NDArray[np.int64]:
    """The coordinates of every cell of a grid, one row per cell.

    Args:
        shape: the grid, e.g. ``(h, w)`` or ``(t, h, w)``: integers >= 0, any number of axes.
        merge: block sizes: cells are numbered block by block (blocks in row-major order, the
            cells of a block in row-major order inside it), as Qwen2-VL's vision towers number
            patches for their ``spatial_merge_size``. An int ``m`` means ``m × m`` blocks over
            the last two axes (1 on the others); a sequence gives one size per axis. Each
            must divide its axis. Default 1: plain row-major order.
        start: added to every coordinate: an int, or one per axis (the text length before an
            image in Qwen2-VL's multimodal position ids).

    Returns:
        int64 array of shape ``(prod(shape), len(shape))``: row ``i`` holds the coordinates of
        the ``i``-th cell, in the order of ``shape``.

    >>> grid_positions((2, 3))
    array([[0, 0],
           [0, 1],
           [0, 2],
           [1, 0],
           [1, 1],
           [1, 2]])
    >>> grid_positions((1, 2, 4), merge=2)[:, 1:].T      # 2 x 2 blocks, one after the other
    array([[0, 0, 1, 1, 0, 0, 1, 1],
           [0, 1, 0, 1, 2, 3, 2, 3]])
    >>> grid_positions((2, 2), start=(10, 0))[:, 0]
    array([10, 10, 11, 11])
    """
    dims = _check_grid_shape(shape)
    n_axes = len(dims)
    if isinstance(merge, numbers.Integral) and not isinstance(merge, (bool, np.bool_)):
        size = check_int("merge", merge, minimum=1)
        blocks = (1,) * max(n_axes - 2, 0) + (size,) * min(n_axes, 2)
    else:
        blocks = _per_axis("merge", merge, n_axes, minimum=1)
    offsets = _per_axis("start", start, n_axes, minimum=None)
    for a, (n, first) in enumerate(zip(dims, offsets, strict=True)):
        check_position_magnitude(f"start[{a}] + shape[{a}] - 1", first, first + max(n - 1, 0))
    for a, (n, b) in enumerate(zip(dims, blocks, strict=True)):
        if n % b:
            raise ValueError(
                f"merge must divide every axis of shape: shape[{a}] = {n} is not a multiple "
                f"of {b} (shape {dims}, merge blocks {blocks})"
            )
    count = math.prod(dims)
    check_allocation("shape", (count, n_axes), 8)
    out = np.empty((count, n_axes), dtype=np.int64)
    # Cell i runs over (outer blocks..., cells inside a block...) in row-major order, and its
    # coordinate on axis a is outer_a * b_a + inner_a: each column is written in place as the
    # broadcast sum of two ranges, so the peak is the result.
    grid = [n // b for n, b in zip(dims, blocks, strict=True)] + list(blocks)
    for a, (b, first) in enumerate(zip(blocks, offsets, strict=True)):
        column = out[:, a].reshape(grid)  # a view: reshaping one strided axis never copies
        along_outer = [1] * (2 * n_axes)
        along_outer[a] = grid[a]
        along_inner = [1] * (2 * n_axes)
        along_inner[n_axes + a] = b
        outer = (np.arange(grid[a], dtype=np.int64) * b + first).reshape(along_outer)
        np.add(outer, np.arange(b, dtype=np.int64).reshape(along_inner), out=column)
    return out
