"""1-D sinusoidal tables: positions → float64 angles → features in a convention's layout.

The one builder every front-end shares. Angles θ = p·ω_k are formed in float64 and sin/cos
are taken in float64; the only rounding that reaches the result is the final cast to the
output dtype (to nearest, once). Hence:

- float32 output is within 1e-7 of the exact value for every position below 10^7 (the cast
  itself contributes at most 3e-8; the float64 angle error grows like |p|·2e-16);
- float16 output is the exact value rounded once, so within one float16 ulp.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from ._checks import (
    check_base,
    check_float_dtype,
    check_int,
    check_position_magnitude,
    check_positions,
    is_length,
)
from .conventions import get_convention
from .frequencies import frequencies

__all__ = ["FeatureSlices", "feature_slices", "fill_features", "fill_table", "sinusoidal"]

# Rows per chunk when filling a table: keeps the float64 temporaries near 2 MiB each.
_CHUNK_ELEMENTS = 1 << 18


class FeatureSlices(NamedTuple):
    """Where the sin, cos and zero columns of a convention go, for one ``d_model``.

    ``out[..., sin] = sin(θ[..., :n_sin])``, ``out[..., cos] = cos(θ[..., :n_cos])`` and
    ``out[..., zero] = 0`` fill all ``d_model`` channels exactly once.
    """

    sin: slice
    cos: slice
    zero: slice
    n_sin: int
    n_cos: int


def feature_slices(d_model: int, convention: Any = "paper") -> FeatureSlices:
    """The channel layout of ``convention`` for ``d_model`` channels.

    >>> feature_slices(5, "paper")
    FeatureSlices(sin=slice(0, 6, 2), cos=slice(1, 4, 2), zero=slice(5, 5, None), n_sin=3, n_cos=2)
    >>> feature_slices(5, "tensor2tensor").zero
    slice(4, 5, None)
    """
    d_model = check_int("d_model", d_model, minimum=1)
    conv = get_convention(convention)
    if conv.odd == "extra_sin":
        n_sin, n_cos = (d_model + 1) // 2, d_model // 2
    else:  # "zero_pad"
        n_sin = n_cos = d_model // 2
    used = n_sin + n_cos
    if conv.layout == "interleaved":
        sin, cos = slice(0, 2 * n_sin, 2), slice(1, 2 * n_cos, 2)
    else:  # "sin_cos"
        sin, cos = slice(0, n_sin), slice(n_sin, used)
    return FeatureSlices(sin, cos, slice(used, d_model), n_sin, n_cos)


_Array = TypeVar("_Array")


def fill_features(
    out: _Array,
    angles: Any,
    layout: FeatureSlices,
    sin: Callable[[Any], Any],
    cos: Callable[[Any], Any],
) -> _Array:
    """Write sin/cos of ``angles`` (…, n) into ``out`` (…, d_model) following ``layout``.

    Array-library neutral: works for NumPy arrays and torch tensors alike (``sin``/``cos``
    are that library's functions). Assignment into ``out`` performs the single cast.
    """
    out[..., layout.sin] = sin(angles[..., : layout.n_sin])  # type: ignore[index]
    out[..., layout.cos] = cos(angles[..., : layout.n_cos])  # type: ignore[index]
    out[..., layout.zero] = 0  # type: ignore[index]
    return out


def positions_array(positions: Any) -> npt.NDArray[Any]:
    """An int L means 0..L-1; anything else is an array of positions (checked)."""
    if is_length(positions):
        length = check_int("positions", positions, minimum=0)
        return np.arange(length, dtype=np.int64)
    array = check_positions("positions", positions)
    if array.size:  # .item(): exact Python ints for integer positions
        check_position_magnitude("positions", array.min().item(), array.max().item())
    return array


def sinusoidal(
    positions: Any,
    d_model: int,
    *,
    base: float = 10000.0,
    convention: Any = "paper",
    dtype: Any = np.float32,
) -> npt.NDArray[Any]:
    """The sinusoidal positional encoding of ``positions``, computed in float64.

    Args:
        positions: an int ``L`` (positions ``0 .. L-1``), or an array-like of integer or real
            positions of any shape ``S`` (negative and fractional positions are allowed).
        d_model: number of channels, an integer >= 1 (odd is fine; see the convention).
        base: wavelength base, a finite number > 0 (10000 in the paper).
        convention: ``"paper"`` (default), ``"tensor2tensor"`` or ``"marian"``; see
            :data:`posenc.CONVENTIONS` and :mod:`posenc.conventions` for the layouts.
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
    pos = positions_array(positions)
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

    No argument checks (callers check). Works through the rows in chunks so the float64
    temporaries stay near 2 MiB each, whatever the size of ``out``.
    """
    rows = max(1, _CHUNK_ELEMENTS // max(omega.shape[0], 1))
    for start in range(0, positions.shape[0], rows):
        chunk = positions[start : start + rows].astype(np.float64)
        angles = np.multiply.outer(chunk, omega)
        fill_features(out[start : start + rows], angles, layout, np.sin, np.cos)
