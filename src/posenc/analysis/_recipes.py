"""Tables built by other recipes than posenc's, to compare posenc's with.

- :func:`float32_recipe` (and :func:`_recipe`, the same in any dtype): the PyTorch tutorial
  recipe, every operation in float32;
- :func:`odd_exponent_table`: a common tutorial implementation whose cosine columns use the
  odd exponent (a bug);
- :func:`_reference_table`: the table in ``np.longdouble``, the reference of
  :func:`precision_report`, from the exact rational exponents of a schedule
  (:func:`_exponents`).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import check_allocation, check_base, check_float_dtype, check_int
from .._conventions import get_convention
from .._features import feature_slices, fill_features
from .._frequencies import frequencies
from .._positions.sequence import table_positions
from ._results import _F64
from ._rounding import _round_bfloat16

#: The label :func:`identify` gives to a table with the bug of :func:`odd_exponent_table`.
ODD_EXPONENT_BUG = "odd-exponent cosine"


def _exponents(d_model: int, convention: Any) -> tuple[npt.NDArray[np.int64], int]:
    """Exact exponents of a convention's schedule: ω_k = base^(-num_k / den).

    Read off the schedule itself (no schedule is hard-coded here): with base 2 the exponents
    are -log2(ω_k), small rationals that ``Fraction.limit_denominator`` recovers exactly. For
    the paper schedule this gives num_k/den = 2k/d, for tensor2tensor's k/(d//2 - 1).
    """
    nums, den = _exponents_cached(d_model, get_convention(convention).name)
    return nums.copy(), den


@functools.lru_cache(maxsize=64)
def _exponents_cached(d_model: int, name: str) -> tuple[npt.NDArray[np.int64], int]:
    omega2 = frequencies(d_model, base=2.0, convention=name)
    exps = -np.log2(omega2)
    limit = 4 * d_model + 4
    # usually the smallest positive exponent is 1/den: try that denominator first
    positive = exps[exps > 0]
    den = (
        Fraction(float(positive.min())).limit_denominator(limit).denominator if positive.size else 1
    )
    if not np.allclose(exps * den, np.rint(exps * den), rtol=0, atol=1e-6):
        fracs = [Fraction(float(e)).limit_denominator(limit) for e in exps]
        den = math.lcm(*(f.denominator for f in fracs)) if fracs else 1
    nums = np.rint(exps * den).astype(np.int64)
    exact = np.power(2.0, -nums.astype(np.float64) / den)
    if not np.allclose(exact, omega2, rtol=1e-13, atol=0):  # pragma: no cover - future schedules
        raise ValueError(
            f"convention {name!r}: its frequencies are not of the form base^(-rational), "
            "which posenc.analysis needs"
        )
    return nums, den


def odd_exponent_table(
    positions: Any, d_model: int, *, base: float = 10000.0, dtype: Any = np.float32
) -> npt.NDArray[Any]:
    """A table with the odd-exponent cosine bug, computed in float64.

    The bug was found in tutorial code: the sine columns are the paper's,
    ``PE[p, 2i] = sin(p / base^(2i/d))``, but the cosine columns use the *odd* exponent,
    ``PE[p, 2i+1] = cos(p / base^((2i+1)/d))``, instead of the paper's ``base^(2i/d)``. It is
    a bug, not a convention: the cosine of a pair no longer shares the frequency of its sine,
    so no rotation maps ``PE[p]`` to ``PE[p+k]``. :func:`identify` recognises such a table
    (``bug`` is then :data:`ODD_EXPONENT_BUG`).

    Args:
        positions: an int ``L`` (positions ``0 .. L-1``) or an array-like of positions of any
            shape ``S``, as in :func:`posenc.sinusoidal`.
        d_model: number of channels, an integer >= 1.
        base: wavelength base, a finite number > 0.
        dtype: output dtype: float32 (default), float16 or float64 (rounded once).

    Returns:
        ``np.ndarray`` of shape ``(L, d_model)`` or ``(*S, d_model)`` and the given dtype.

    >>> odd_exponent_table(2, 4, dtype=np.float64)[1].round(4)
    array([0.8415, 0.995 , 0.01  , 1.    ])
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    out_dtype = check_float_dtype("dtype", dtype)
    pos = table_positions(positions, "positions and d_model", d_model, out_dtype.itemsize)
    flat = pos.reshape(-1)
    check_allocation("d_model", (d_model,), 8)  # one frequency per channel
    # channel j uses exponent j/d: even j is the paper's 2i/d, odd j the buggy (2i+1)/d
    omega = np.power(base, -np.arange(d_model, dtype=np.float64) / d_model)
    out = np.empty((flat.shape[0], d_model), dtype=out_dtype)
    rows = max(1, (1 << 18) // d_model)  # float64 temporaries of about 2 MiB
    for start in range(0, flat.shape[0], rows):
        chunk = flat[start : start + rows].astype(np.float64)
        out[start : start + rows, 0::2] = np.sin(np.multiply.outer(chunk, omega[0::2]))
        out[start : start + rows, 1::2] = np.cos(np.multiply.outer(chunk, omega[1::2]))
    return out.reshape(*pos.shape, d_model)


def _recipe(
    positions: npt.NDArray[Any], d_model: int, base: float, convention: str, dtype_name: str
) -> npt.NDArray[Any]:
    """The usual table recipe, every operation in ``dtype_name``.

    ``div = exp(steps * -(log(base)/den))``, ``angles = pos * div``, then sin/cos, where
    ``steps/den`` are the schedule's exponents (``arange(0, d, 2)/d`` for the paper schedule,
    as in the PyTorch tutorial; ``arange(h)/(h-1)`` for tensor2tensor, as in fairseq). For
    bfloat16, which NumPy lacks, each operation is done in float64 and rounded with
    :func:`_round_bfloat16`.
    """
    nums, den = _exponents(d_model, convention)
    if dtype_name == "bfloat16":
        work: Any = np.float64

        def cast(x: Any) -> npt.NDArray[Any]:
            return _round_bfloat16(x)

    else:
        work = np.dtype(dtype_name)

        def cast(x: Any) -> npt.NDArray[Any]:
            return np.asarray(x, dtype=work)

    with np.errstate(over="ignore", invalid="ignore"):
        scale = cast(-math.log(base) / den)
        div = cast(np.exp(cast(cast(nums) * scale)))
        angles = cast(cast(positions)[..., None] * div)
        out = np.zeros((*positions.shape, d_model), dtype=work)
        fill_features(
            out,
            angles,
            feature_slices(d_model, convention),
            lambda a: cast(np.sin(a)),
            lambda a: cast(np.cos(a)),
        )
    return out


def float32_recipe(
    positions: Any, d_model: int, *, base: float = 10000.0, convention: Any = "paper"
) -> npt.NDArray[np.float32]:
    """The PyTorch tutorial recipe (angles in float32): the table with everything in float32.

    ``div = exp(arange(0, d, 2) * -(log(base)/d))`` and ``angles = float32(pos) * div`` are
    float32, then ``sin``/``cos`` in float32 (fairseq's ``arange(h) * -(log(base)/(h-1))`` for
    the tensor2tensor convention). The angle loses the fractional digits of ``pos * ω`` as
    positions grow: errors reach ~1e-3 near position 10^4 and ~0.1 near 10^6.

    Args:
        positions: an int ``L`` or an array-like of positions of any shape ``S``.
        d_model: number of channels, an integer >= 1.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.

    Returns:
        float32 array ``(L, d_model)`` or ``(*S, d_model)``.

    >>> from posenc import sinusoidal
    >>> t = float32_recipe([100_000], 4)
    >>> bool(np.abs(t - sinusoidal([100_000], 4, dtype=np.float64)).max() > 1e-4)
    True
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    name = get_convention(convention).name
    # the table and its float32 angles (half the channels)
    pos = table_positions(positions, "positions and d_model", d_model, 4 + 2)
    return _recipe(pos, d_model, base, name, "float32").astype(np.float32, copy=False)


_LONGDOUBLE_WIDER = bool(np.finfo(np.longdouble).eps < np.finfo(np.float64).eps)


def _reference_table(
    positions: npt.NDArray[Any], d_model: int, base: float, convention: str
) -> _F64:
    """The table in ``np.longdouble`` (exponents exact rationals), returned as float64."""
    nums, den = _exponents(d_model, convention)
    ld = np.longdouble
    omega = np.power(ld(base), -(nums.astype(ld) / ld(den)))
    angles = np.multiply.outer(np.asarray(positions).astype(ld), omega)
    out = np.empty((*np.shape(positions), d_model), dtype=ld)
    fill_features(out, angles, feature_slices(d_model, convention), np.sin, np.cos)
    return out.astype(np.float64)
