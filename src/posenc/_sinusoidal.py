"""1-D sinusoidal tables: positions → float64 angles → features in a convention's layout.

The one builder every front-end shares. Angles θ = p·ω_k are formed in float64 and sin/cos
are taken in float64; the only rounding that reaches the result is the final cast to the
output dtype (to nearest, once). Hence:

- float32 output is within 1e-7 of the exact value for every position below 10^7 (the cast
  itself contributes at most 3e-8; the float64 angle error grows like |p|·2e-16);
- float16 output is the exact value rounded once, so within one float16 ulp.

Two float64 formulas define the values:

- **direct**, for float64 output and real-valued positions: ``sin(p·ω)``, ``cos(p·ω)``;
- **angle addition**, for integer positions in a rounded dtype (float32, float16, bfloat16):
  each position is split as ``p = hi + lo`` with ``lo = p mod ANGLE_BLOCK``, and ::

      sin(p·ω) = sin(lo·ω)·cos(hi·ω) + cos(lo·ω)·sin(hi·ω)
      cos(p·ω) = cos(lo·ω)·cos(hi·ω) − sin(lo·ω)·sin(hi·ω)

  (``_angles.angle_addition``). Its float64 value differs from the direct one only because the
  angle is rounded in two parts (``hi·ω``, ``lo·ω``) instead of one, about |p|·3e-16 plus a
  few ulps, the size of the direct build's own angle error; so the rounded table is the
  direct one rounded once except for values that close to a rounding boundary (rare below
  10^5), and the accuracy above holds unchanged. Positions ``0 .. ANGLE_BLOCK-1`` (``hi = 0``)
  give exactly the direct values, and a position has the same value in every table: the split
  depends on the position only.

The angle-addition formula needs sin/cos of the few distinct ``hi·ω`` and ``lo·ω`` only; the
fast engine in ``_angle_addition`` exploits that (one complex product per element, the same
arithmetic, the same bits). :func:`fill_table` chooses it unless ``posenc.set_fast_paths(False)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ._angle_addition import NUMPY_OPS, fill_by_angle_addition
from ._angles import angle_addition, angles, row_blocks, split_positions
from ._checks import check_base, check_float_dtype, check_int
from ._conventions import ConventionName
from ._features import FeatureSlices, feature_slices, fill_features
from ._frequencies import frequencies
from ._positions.sequence import table_positions
from ._switches import fast_paths_enabled

__all__ = ["fill_table", "sinusoidal"]


def sinusoidal(
    positions: Any,
    d_model: int,
    *,
    base: float = 10000.0,
    convention: ConventionName = "paper",
    dtype: Any = np.float32,
) -> npt.NDArray[Any]:
    """The sinusoidal positional encoding of ``positions``, computed in float64.

    Args:
        positions: an int ``L`` (positions ``0 .. L-1``), or an array-like of integer or real
            positions of any shape ``S`` (negative and fractional positions are allowed).
        d_model: number of channels, an integer >= 1 (odd is fine; see the convention).
        base: wavelength base, a finite number > 0 (10000 in the paper).
        convention: ``"paper"`` (default), ``"tensor2tensor"`` or ``"marian"``; see
            :data:`posenc.CONVENTIONS` for the layouts.
        dtype: output dtype: float32 (default), float16 or float64.

    Returns:
        ``np.ndarray`` of shape ``(L, d_model)`` or ``(*S, d_model)`` and the given dtype.
        Under ``paper``: ``out[p, 2k] = sin(p·ω_k)``, ``out[p, 2k+1] = cos(p·ω_k)``,
        ω_k = base^(-2k/d_model).

    Accuracy: float32 results are within 1e-7 of the exact value for |p| < 10^7 and float16
    results are the exact value rounded once (within one ulp). Above that the float64 angle
    error, about |p|·2e-16, dominates.

    >>> sinusoidal(3, 4)
    array([[ 0.        ,  1.        ,  0.        ,  1.        ],
           [ 0.84147096,  0.5403023 ,  0.00999983,  0.99995   ],
           [ 0.9092974 , -0.41614684,  0.01999867,  0.9998    ]], dtype=float32)
    >>> sinusoidal([[0, 5], [7, 9]], 6).shape
    (2, 2, 6)
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    out_dtype = check_float_dtype("dtype", dtype)
    pos = table_positions(positions, "positions and d_model", d_model, out_dtype.itemsize)
    omega = frequencies(d_model, base=base, convention=convention)
    layout = feature_slices(d_model, convention)

    flat = pos.reshape(-1)
    out = np.empty((flat.shape[0], d_model), dtype=out_dtype)
    fill_table(out, flat, omega, layout)
    return out.reshape(*pos.shape, d_model)


def fill_table(
    out: npt.NDArray[Any],
    positions: npt.NDArray[Any],
    omega: npt.NDArray[np.float64],
    layout: FeatureSlices,
) -> None:
    """Fill ``out`` (n, d_model), any float dtype or a memory map, with the rows of ``positions``.

    No argument checks (callers check). Integer positions into a float16/float32 ``out`` take
    the angle-addition formula (by the fast engine unless fast paths are off); float64 ``out``
    and real-valued positions take the direct formula. Rows are processed in chunks, so the
    float64 temporaries stay near 1-2 MiB each, whatever the size of ``out``.

    >>> out = np.empty((3, 4), dtype=np.float32)
    >>> fill_table(out, np.arange(3), np.array([1.0, 0.01]), feature_slices(4))
    >>> bool(np.array_equal(out, sinusoidal(3, 4)))
    True
    """
    by_addition = positions.dtype.kind in "iu" and out.dtype != np.float64
    if by_addition and fast_paths_enabled():
        fill_by_angle_addition(
            out, positions.astype(np.int64, copy=False), omega, layout, NUMPY_OPS
        )
        return
    for rows in row_blocks(positions.shape[0], omega.shape[0]):
        chunk = positions[rows]
        if by_addition:
            hi, lo = split_positions(chunk.astype(np.int64, copy=False))
            sin, cos = angle_addition(
                hi.astype(np.float64), lo.astype(np.float64), omega, np.sin, np.cos
            )
            target = out[rows]
            target[:, layout.sin] = sin[:, : layout.n_sin]
            target[:, layout.cos] = cos[:, : layout.n_cos]
            target[:, layout.zero] = 0
        else:
            fill_features(out[rows], angles(chunk, omega), layout, np.sin, np.cos)
