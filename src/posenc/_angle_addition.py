"""The fast engine of the angle-addition table (private; the formula is in ``_angles``).

:func:`posenc._angles.angle_addition` defines the values of integer positions in a rounded
dtype: ``p = hi + lo``, ``lo = p mod ANGLE_BLOCK``, then one product of the unit phasors of
``lo·ω`` and ``hi·ω`` per element. This engine computes the same float64 arithmetic with far
fewer sin/cos calls: the phasors ``sin(lo·ω) + i cos(lo·ω)`` and ``cos(hi·ω) − i sin(hi·ω)``
are computed for the *distinct* ``lo`` and ``hi`` only, and their complex product (4
multiplies, 2 adds: the formula's operations, hence its bits) is rounded once into the
output. Consecutive positions (a table ``p0 .. p0+N-1``) need no gathers at all: blocks of
``ANGLE_BLOCK`` rows share one ``hi`` and the ``lo`` phasors are the same for every block.

Array-library neutral: NumPy (:data:`NUMPY_OPS`) and torch (``posenc.torch._kernels._table``)
supply the primitives (:class:`AngleOps`), so both front-ends give the same values.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ._angles import ANGLE_BLOCK, split_positions
from ._features import FeatureSlices, write_pairs

__all__ = ["NUMPY_OPS", "AngleOps", "fill_by_angle_addition", "fill_rows"]


class AngleOps(Protocol):
    """The array-library primitives :func:`fill_by_angle_addition` needs (NumPy or torch).

    Arrays are the library's own (``np.ndarray`` / ``torch.Tensor``); integer positions are
    int64, angles float64, phasors complex128. The engine runs eagerly only: code traced by
    ``torch.compile`` takes the plain formula, whose shapes never depend on values.
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

    def unique(self, values: Any) -> tuple[Any, Any]:
        """``(sorted distinct values, inverse indices)`` of 1-D ``values``."""

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

    def unique(self, values: Any) -> tuple[Any, Any]:
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

    >>> from posenc._features import feature_slices
    >>> from posenc._sinusoidal import fill_table
    >>> omega = np.array([1.0, 0.01])
    >>> out = np.empty((100, 4), dtype=np.float32)
    >>> fill_by_angle_addition(out, np.arange(100), omega, feature_slices(4), NUMPY_OPS)
    >>> import posenc
    >>> with posenc.set_fast_paths(False):  # the formula, written plainly
    ...     plain = np.empty((100, 4), dtype=np.float32)
    ...     fill_table(plain, np.arange(100), omega, feature_slices(4))
    >>> bool(np.array_equal(out, plain))
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


def fill_rows(out: Any, start: int, omega: Any, layout: FeatureSlices, ops: AngleOps) -> None:
    """Fill ``out`` (N, d) with the table of positions ``start .. start + N - 1``.

    Like :func:`fill_by_angle_addition` for consecutive positions, without reading any
    position: one broadcast product per chunk of blocks. No argument checks.
    """
    out[:, layout.zero] = 0
    if out.shape[0] and omega.shape[0]:
        _fill_consecutive(out, start, omega, layout, ops)


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
    hi, lo = split_positions(positions)
    (lo_values, lo_index), hi_split = ops.unique(lo), ops.unique(hi)
    lo_phasors = ops.phasors(ops.float64(lo_values)[:, None] * omega, conjugate=False)
    hi_table = None
    if hi_split[0].shape[0] <= rows // 8:
        hi_table = ops.phasors(ops.float64(hi_split[0])[:, None] * omega, conjugate=True)
    per_chunk = max(1, ops.chunk // n)
    buffer = ops.empty_phasors((min(per_chunk, rows), n))
    for r0 in range(0, rows, per_chunk):
        r1 = min(r0 + per_chunk, rows)
        if hi_table is None:
            his = ops.phasors(ops.float64(hi[r0:r1])[:, None] * omega, conjugate=True)
        else:
            his = hi_table[hi_split[1][r0:r1]]
        product = ops.multiply(lo_phasors[lo_index[r0:r1]], his, out=buffer[: r1 - r0])
        write_pairs(out[r0:r1], ops.as_pairs(product), layout, ops.store)
