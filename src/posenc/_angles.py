"""Angles: positions × frequencies → float64 ``θ = p·ω``, the stage every table shares.

Angles are formed in float64, never in the output dtype: for a position ``p`` below 2**53 the
product ``p·ω`` is the exact angle rounded once (about ``|p|·1e-16`` of error in radians), so
the sin/cos taken next and the final cast to the output dtype are the only roundings that
reach a table.

Two ways to form them, one per use:

- :func:`angles`: the outer product ``positions × ω`` (any real positions), by blocks of
  :func:`row_blocks` rows so that the float64 temporaries of a large table stay near 2 MiB;
- :func:`angle_addition`, for integer positions in a rounded dtype: each position is split as
  ``p = hi + lo`` with ``lo = p mod ANGLE_BLOCK`` (:func:`split_positions`), and ::

      sin(p·ω) = sin(lo·ω)·cos(hi·ω) + cos(lo·ω)·sin(hi·ω)
      cos(p·ω) = cos(lo·ω)·cos(hi·ω) − sin(lo·ω)·sin(hi·ω)

  The split depends on the position only, so a position has the same value in every table
  and every front-end; the sin/cos of the few distinct ``hi·ω`` and ``lo·ω`` are all that is
  needed, which the fast engine (``_angle_addition``) exploits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["ANGLE_BLOCK", "angle_addition", "angles", "row_blocks", "split_positions"]

#: Integer positions are split as p = hi + lo with lo = p mod ANGLE_BLOCK (angle addition).
#: A property of the values, not a tuning knob: every front-end and every table length uses
#: the same split, so a position gets the same value wherever it is computed.
ANGLE_BLOCK = 64

# Angles per block of rows: keeps the float64 temporaries near 2 MiB each.
_BLOCK_ELEMENTS = 1 << 18


def row_blocks(rows: int, width: int) -> Iterator[slice]:
    """Slices of ``rows`` rows, each holding about 2**18 angles of ``width`` columns.

    >>> [(s.start, s.stop) for s in row_blocks(5, 100_000)]
    [(0, 2), (2, 4), (4, 5)]
    """
    step = max(1, _BLOCK_ELEMENTS // max(width, 1))
    for start in range(0, rows, step):
        yield slice(start, min(start + step, rows))


def angles(positions: npt.NDArray[Any], omega: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``θ[i, k] = positions[i]·ω_k`` in float64: ``(N,)`` × ``(n,)`` → ``(N, n)``.

    >>> angles(np.array([0, 2, 3]), np.array([1.0, 0.5]))
    array([[0. , 0. ],
           [2. , 1. ],
           [3. , 1.5]])
    """
    return np.multiply.outer(positions.astype(np.float64, copy=False), omega)


def split_positions(positions: Any) -> tuple[Any, Any]:
    """``(hi, lo)`` with ``positions = hi + lo`` and ``lo = positions mod ANGLE_BLOCK`` (in
    [0, ANGLE_BLOCK), also for negative positions). Integer arrays or tensors in, same out."""
    lo = positions % ANGLE_BLOCK
    return positions - lo, lo


def angle_addition(
    hi: Any, lo: Any, omega: Any, sin: Callable[[Any], Any], cos: Callable[[Any], Any]
) -> tuple[Any, Any]:
    """``(sin, cos)`` of ``(hi + lo)·ω`` by angle addition: float64 ``(*S, n)``.

    ``hi`` and ``lo`` are float64 of shape ``S`` (the two parts of integer positions, see
    :func:`split_positions`), ``omega`` float64 ``(n,)``; ``sin``/``cos`` are the array
    library's functions (NumPy or torch). Four products and two sums per element, in float64.

    >>> hi, lo = split_positions(np.array([5, 200]))
    >>> s, c = angle_addition(hi.astype(float), lo.astype(float), np.array([1.0]), np.sin, np.cos)
    >>> bool(np.allclose(s[:, 0], np.sin([5.0, 200.0]), rtol=0, atol=1e-14))
    True
    """
    a, b = hi[..., None] * omega, lo[..., None] * omega
    sin_a, cos_a, sin_b, cos_b = sin(a), cos(a), sin(b), cos(b)
    return sin_b * cos_a + cos_b * sin_a, cos_b * cos_a - sin_b * sin_a
