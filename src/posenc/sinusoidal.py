"""1-D sinusoidal tables: positions → float64 angles → features in a convention's layout.

The one builder every front-end shares. Angles θ = p·ω_k are formed in float64 and sin/cos
are taken in float64; the only rounding that reaches the result is the final cast to the
output dtype (to nearest, once). Hence:

- float32 output is within 1e-7 of the exact value for every position below 10^7 (the cast
  itself contributes at most 3e-8; the float64 angle error grows like |p|·2e-16);
- float16 output is the exact value rounded once, so within one float16 ulp.

Tables of integer positions in a rounded dtype (float32, float16) are built by angle addition
(:func:`fill_by_angle_addition`): each position is split as ``p = hi + lo`` with
``lo = p mod ANGLE_BLOCK``, sin/cos are taken in float64 of the few distinct ``hi·ω`` and
``lo·ω`` only, and every element is one complex product of two unit phasors in float64
(4 multiplies, 2 adds), rounded once. Nothing is accumulated by recurrence: the float64 value
differs from the direct ``sin(p·ω)`` only because the angle is rounded in two parts
(``hi·ω``, ``lo·ω``) instead of one, about |p|·3e-16 plus a few ulps, the same size as the
direct build's own angle error. So the rounded table is the direct one rounded once except
for values that close to a rounding boundary (rare below 10^5), and the accuracy above holds
unchanged. Positions ``0 .. ANGLE_BLOCK-1`` (``hi = 0``) give exactly the direct values, and a
position has the same value in every table (the split depends on the position only).
float64 output and real-valued positions keep the direct float64 build.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar

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

__all__ = [
    "ANGLE_BLOCK",
    "NUMPY_OPS",
    "AngleOps",
    "FeatureSlices",
    "feature_slices",
    "fill_by_angle_addition",
    "fill_features",
    "fill_table",
    "sinusoidal",
    "write_pairs",
]

# Rows per chunk when filling a table: keeps the float64 temporaries near 2 MiB each.
_CHUNK_ELEMENTS = 1 << 18

#: Integer positions are split as p = hi + lo with lo = p mod ANGLE_BLOCK (angle addition).
#: A property of the values, not a tuning knob: every front-end and every table length uses
#: the same split, so a position gets the same value wherever it is computed.
ANGLE_BLOCK = 64


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

    No argument checks (callers check). Integer positions into a float16/float32 ``out`` use
    :func:`fill_by_angle_addition` (a few sin/cos calls, then one complex product per
    element); float64 ``out`` and real-valued positions use the direct float64 sin/cos. Both
    work through the rows in chunks so the float64 temporaries stay near 1-2 MiB each,
    whatever the size of ``out``.

    >>> out = np.empty((3, 4), dtype=np.float32)
    >>> fill_table(out, np.arange(3), np.array([1.0, 0.01]), feature_slices(4))
    >>> bool(np.array_equal(out, sinusoidal(3, 4)))
    True
    """
    if positions.dtype.kind in "iu" and out.dtype != np.float64:
        fill_by_angle_addition(
            out, positions.astype(np.int64, copy=False), omega, layout, NUMPY_OPS
        )
        return
    rows = max(1, _CHUNK_ELEMENTS // max(omega.shape[0], 1))
    for start in range(0, positions.shape[0], rows):
        chunk = positions[start : start + rows].astype(np.float64)
        angles = np.multiply.outer(chunk, omega)
        fill_features(out[start : start + rows], angles, layout, np.sin, np.cos)


# -- angle addition ---------------------------------------------------------------------------


class AngleOps(Protocol):
    """The array-library primitives :func:`fill_by_angle_addition` needs (NumPy or torch).

    Arrays are the library's own (``np.ndarray`` / ``torch.Tensor``); integer positions are
    int64, angles float64. Phasors are complex128 arrays, or any representation whose leading
    dimensions index and broadcast like the angles' (torch uses float64 ``(..., 2)`` pairs
    inside ``torch.compile``, which does not generate code for complex numbers).
    """

    #: Complex products per chunk of rows (16 bytes each): the temporaries' size.
    chunk: int

    def arange(self, n: int) -> Any:
        """float64 ``0 .. n-1``."""

    def float64(self, values: Any) -> Any:
        """``values`` as float64 (exact for the integers used here, all within 2**53)."""

    def phasors(self, angles: Any, *, conjugate: bool) -> Any:
        """The unit phasors ``sin a + i cos a`` (``conjugate=False``) or ``cos a - i sin a``."""

    def empty_phasors(self, shape: tuple[int, ...]) -> Any:
        """Uninitialised room for phasors of leading shape ``shape``."""

    def multiply(self, a: Any, b: Any, out: Any) -> Any:
        """``out[...] = a * b`` (complex product, with broadcasting); returns ``out``."""

    def as_pairs(self, z: Any) -> Any:
        """The float64 view ``(..., n, 2)`` (real, imaginary) of contiguous phasors ``z``."""

    def unique(self, values: Any) -> tuple[Any, Any] | None:
        """``(sorted distinct values, inverse indices)``, or None where that is not allowed
        (inside ``torch.compile``, whose shapes must not depend on values)."""

    def consecutive_start(self, positions: Any) -> int | None:
        """``positions[0]`` when the 1-D int64 ``positions`` are ``p0, p0 + 1, ...``, else None."""

    def store(self, dst: Any, src: Any) -> None:
        """``dst[...] = src`` with a single rounding of the float64 ``src`` to ``dst``'s dtype."""


class _NumPyOps:
    """:class:`AngleOps` for NumPy."""

    chunk = 1 << 17  # 2 MiB of complex128: one thread, a chunk that stays in cache

    def arange(self, n: int) -> npt.NDArray[np.float64]:
        return np.arange(n, dtype=np.float64)

    def float64(self, values: Any) -> npt.NDArray[np.float64]:
        return np.asarray(values, dtype=np.float64)

    def phasors(self, angles: Any, *, conjugate: bool) -> npt.NDArray[np.complex128]:
        z = np.empty(angles.shape, dtype=np.complex128)
        if conjugate:
            np.cos(angles, out=z.real)
            np.negative(np.sin(angles), out=z.imag)
        else:
            np.sin(angles, out=z.real)
            np.cos(angles, out=z.imag)
        return z

    def empty_phasors(self, shape: tuple[int, ...]) -> npt.NDArray[np.complex128]:
        return np.empty(shape, dtype=np.complex128)

    def multiply(self, a: Any, b: Any, out: Any) -> Any:
        return np.multiply(a, b, out=out)

    def as_pairs(self, z: Any) -> Any:
        return z.view(np.float64).reshape(*z.shape, 2)

    def unique(self, values: Any) -> tuple[Any, Any] | None:
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, inverse.reshape(-1)

    def consecutive_start(self, positions: Any) -> int | None:
        if positions.ndim != 1 or positions.shape[0] == 0:
            return None
        first = int(positions[0])
        if int(positions[-1]) - first != positions.shape[0] - 1:
            return None
        if not bool(np.all(np.diff(positions) == 1)):
            return None
        return first

    def store(self, dst: Any, src: Any) -> None:
        dst[...] = src  # NumPy casts float64 to float32/float16 with one rounding


#: The NumPy primitives of :func:`fill_by_angle_addition`.
NUMPY_OPS = _NumPyOps()


def write_pairs(
    out: Any, pairs: Any, layout: FeatureSlices, store: Callable[[Any, Any], None]
) -> None:
    """Write ``pairs`` (m, n, 2) = (sin, cos) of n angles into the sin/cos columns of ``out``.

    Array-library neutral. ``store(dst, src)`` performs the cast; the zero columns of
    ``layout`` are left alone. Layouts whose columns are the pairs in order (the paper's
    interleaving) take one contiguous copy.

    >>> pairs = np.array([[[0.1, 0.9], [0.2, 0.8]]])  # one row: (sin, cos) of two angles
    >>> out = np.zeros((1, 4))
    >>> write_pairs(out, pairs, feature_slices(4, "marian"), NUMPY_OPS.store)
    >>> out
    array([[0.1, 0.2, 0.9, 0.8]])
    """
    m, n = pairs.shape[0], pairs.shape[1]
    used = layout.n_sin + layout.n_cos
    interleaved = (
        layout.n_sin == n
        and layout.n_cos in (n, n - 1)
        and layout.sin == slice(0, 2 * n, 2)
        and layout.cos == slice(1, 2 * layout.n_cos, 2)
    )
    if interleaved:
        store(out[:, :used], pairs.reshape(m, 2 * n)[:, :used])
    else:
        store(out[:, layout.sin], pairs[:, : layout.n_sin, 0])
        store(out[:, layout.cos], pairs[:, : layout.n_cos, 1])


def fill_by_angle_addition(
    out: Any, positions: Any, omega: Any, layout: FeatureSlices, ops: AngleOps
) -> None:
    """Fill ``out`` (N, d) with the table of the int64 ``positions`` (N,) by angle addition.

    Array-library neutral (``ops`` supplies the primitives: :data:`NUMPY_OPS` or torch's);
    ``omega`` is the float64 frequencies (n,) in the same library, ``out`` any float dtype.
    No argument checks.

    Each position is split as ``p = hi + lo`` with ``lo = p mod ANGLE_BLOCK``. The unit
    phasors ``sin(lo·ω) + i cos(lo·ω)`` and ``cos(hi·ω) - i sin(hi·ω)`` are computed in float64
    for the distinct ``lo`` and ``hi`` only; their product is ``sin(p·ω) + i cos(p·ω)``
    (angle addition), whose real/imaginary pairs are rounded once into ``out``. Consecutive
    positions (a table ``p0 .. p0+N-1``) need no gathers: blocks of ``ANGLE_BLOCK`` rows share
    one ``hi`` and the ``lo`` table is the same for every block.

    >>> omega = np.array([1.0, 0.01])
    >>> out = np.empty((100, 4), dtype=np.float32)
    >>> fill_by_angle_addition(out, np.arange(100), omega, feature_slices(4), NUMPY_OPS)
    >>> direct = np.empty((100, 4), dtype=np.float32)
    >>> angles = np.multiply.outer(np.arange(100.0), omega)
    >>> bool(np.array_equal(out, fill_features(direct, angles, feature_slices(4), np.sin, np.cos)))
    True
    """
    out[:, layout.zero] = 0
    rows, n = positions.shape[0], omega.shape[0]
    if rows == 0 or n == 0:
        return
    start = ops.consecutive_start(positions) if rows >= 2 * ANGLE_BLOCK else None
    if start is not None:
        _fill_consecutive(out, start, omega, layout, ops)
    else:
        _fill_gathered(out, positions, omega, layout, ops)


def _fill_consecutive(
    out: Any, start: int, omega: Any, layout: FeatureSlices, ops: AngleOps
) -> None:
    """Rows ``start .. start + len(out) - 1``: one broadcast product per chunk of blocks."""
    rows, n, block = out.shape[0], omega.shape[0], ANGLE_BLOCK
    first = start - start % block  # hi of the first row
    blocks = -(-(start + rows - first) // block)
    lo = ops.phasors(ops.arange(block)[:, None] * omega, conjugate=False)  # (block, n)
    his = ops.arange(blocks) * block + first  # exact: integers within 2**53
    hi = ops.phasors(his[:, None] * omega, conjugate=True)[:, None, :]  # (blocks, 1, n)
    per_chunk = max(1, ops.chunk // (block * n))
    buffer = ops.empty_phasors((min(per_chunk, blocks), block, n))
    for b0 in range(0, blocks, per_chunk):
        b1 = min(b0 + per_chunk, blocks)
        product = ops.multiply(lo, hi[b0:b1], out=buffer[: b1 - b0])
        pairs = ops.as_pairs(product).reshape((b1 - b0) * block, n, 2)
        row0 = first + b0 * block - start  # row of out that pairs[0] belongs to
        skip, stop = max(0, -row0), min(pairs.shape[0], rows - row0)
        write_pairs(out[row0 + skip : row0 + stop], pairs[skip:stop], layout, ops.store)


def _fill_gathered(
    out: Any, positions: Any, omega: Any, layout: FeatureSlices, ops: AngleOps
) -> None:
    """Any int64 positions: phasors of the distinct lo (and hi), gathered and multiplied.

    Distinct ``hi`` are tabulated only when they repeat a lot (batched or packed sequences, at
    most one per 8 rows), so the table stays small; otherwise each chunk of rows takes the
    phasors of its own ``hi`` and memory stays bounded by the chunk.
    """
    rows, n = positions.shape[0], omega.shape[0]
    lo = positions % ANGLE_BLOCK
    hi = positions - lo
    lo_split, hi_split = ops.unique(lo), ops.unique(hi)
    if lo_split is None:  # no value-dependent shapes: index the whole lo table
        lo_values, lo_index = ops.arange(ANGLE_BLOCK), lo
    else:
        lo_values, lo_index = ops.float64(lo_split[0]), lo_split[1]
    lo_phasors = ops.phasors(lo_values[:, None] * omega, conjugate=False)
    hi_table = None
    if hi_split is not None and hi_split[0].shape[0] <= rows // 8:
        hi_table = ops.phasors(ops.float64(hi_split[0])[:, None] * omega, conjugate=True)
    per_chunk = max(1, ops.chunk // n)
    buffer = ops.empty_phasors((min(per_chunk, rows), n))
    for r0 in range(0, rows, per_chunk):
        r1 = min(r0 + per_chunk, rows)
        if hi_table is None or hi_split is None:
            his = ops.phasors(ops.float64(hi[r0:r1])[:, None] * omega, conjugate=True)
        else:
            his = hi_table[hi_split[1][r0:r1]]
        product = ops.multiply(lo_phasors[lo_index[r0:r1]], his, out=buffer[: r1 - r0])
        write_pairs(out[r0:r1], ops.as_pairs(product), layout, ops.store)
