"""How accurate a table is: max errors against a wider-precision reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import check_allocation, check_base, check_int, check_position_magnitude
from .._conventions import get_convention
from .._frequencies import frequencies
from .._sinusoidal import sinusoidal
from ._recipes import _LONGDOUBLE_WIDER, _recipe, _reference_table
from ._results import _F64, MethodError, PrecisionReport
from ._rounding import _dtype_name, _round_bfloat16, _round_to


def _max_error(name: str, table: Any, exact: _F64, positions: npt.NDArray[Any]) -> MethodError:
    values = np.asarray(table, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(values - exact)
    err = np.where(np.isfinite(err), err, np.inf)
    row, col = np.unravel_index(int(np.argmax(err)), err.shape)
    return MethodError(name, float(err[row, col]), int(positions[row]), int(col))


def precision_report(
    max_position: int,
    d_model: int,
    dtype: Any = "float32",
    *,
    base: float = 10000.0,
    convention: Any = "paper",
    samples: int = 64,
    seed: int = 0,
) -> PrecisionReport:
    """Measure the max error of three ways to build a table, at positions below ``max_position``.

    Positions: the last ``samples // 2`` positions below ``max_position`` and ``samples // 2``
    random ones (``np.random.default_rng(seed)``), all channels. Methods:

    - ``"posenc"``: :func:`posenc.sinusoidal` in ``dtype`` (float64 angles, one rounding;
      bfloat16 is the float64 table rounded once with :func:`_round_bfloat16`);
    - ``"float32 recipe"``: :func:`float32_recipe`, then rounded to ``dtype``;
    - ``"recipe in <dtype>"``: the same recipe with every operation in ``dtype`` (bfloat16
      emulated by rounding after each operation). For float32 it *is* the float32 recipe, so
      it is not repeated (``merged`` records that). A result that overflows (float16
      positions above 65504 become inf) has error ``inf``.

    The reference evaluates the angle p·base^(-num/den) and its sin/cos in ``np.longdouble``
    when that is wider than float64 (x86: 64-bit mantissa), with the schedule's exact rational
    exponent. Its error is then about (p·ω + 1)·2^-63 before the final rounding to float64,
    ~2e-12 at p = 10^7 (``reference_error`` reports the bound used), far below float32's
    3e-8. Where long double is float64, the reference is float64 and its error grows like
    p·2^-52, ~3e-9 at 10^7: still 10x below float32 rounding there.

    Args:
        max_position: positions are drawn from ``0 .. max_position - 1``; 1 <= it <= 2**53.
        d_model: number of channels, an integer >= 1.
        dtype: ``"float32"`` (default), ``"float16"``, ``"bfloat16"`` or ``"float64"``.
        base, convention: as in :func:`posenc.sinusoidal`.
        samples: number of positions, an even count is used (>= 2).
        seed: seed of the random positions.

    Returns:
        :class:`PrecisionReport`.

    >>> r = precision_report(10**6, 64)
    >>> [row.name for row in r.methods]
    ['posenc', 'float32 recipe']
    >>> r.method("posenc").max_error < 6e-8 < 1e-3 < r.method("float32 recipe").max_error
    True
    """
    max_position = check_int("max_position", max_position, minimum=1)
    check_position_magnitude("max_position", 0, max_position)
    d_model = check_int("d_model", d_model, minimum=1)
    dtype_name = _dtype_name("dtype", dtype)
    base = check_base("base", base)
    name = get_convention(convention).name
    samples = check_int("samples", samples, minimum=2)
    seed = check_int("seed", seed, minimum=0)
    # the long-double reference (angles and table) and the float64 tables compared with it
    check_allocation("samples and d_model", (samples, d_model), 16, 4)
    half = samples // 2
    rng = np.random.default_rng(seed)
    positions = np.unique(
        np.concatenate(
            [
                np.arange(max(0, max_position - half), max_position, dtype=np.int64),
                rng.integers(0, max_position, half, dtype=np.int64),
            ]
        )
    )
    omega = frequencies(d_model, base=base, convention=name)
    if omega.size == 0:
        raise ValueError(
            f"d_model must be >= 2 under convention {name!r} for a precision report, got "
            f"{d_model} (its table is a single zero column: there is nothing to measure)"
        )
    exact = _reference_table(positions, d_model, base, name)
    largest_angle = float(positions.max()) * float(omega.max())
    eps = float(np.finfo(np.longdouble if _LONGDOUBLE_WIDER else np.float64).eps)
    reference_error = 4.0 * (largest_angle + 1.0) * eps + 2.0**-53

    if dtype_name == "bfloat16":
        ours: Any = _round_bfloat16(
            sinusoidal(positions, d_model, base=base, convention=name, dtype=np.float64)
        )
    else:
        ours = sinusoidal(positions, d_model, base=base, convention=name, dtype=dtype_name)
    recipe32 = _recipe(positions, d_model, base, name, "float32")
    methods = [
        _max_error("posenc", ours, exact, positions),
        _max_error("float32 recipe", _round_to(recipe32, dtype_name), exact, positions),
    ]
    merged: tuple[tuple[str, str], ...] = ()
    if dtype_name == "float32":  # the recipe in float32 is the float32 recipe: listed once
        merged = (("recipe in float32", "float32 recipe"),)
    else:
        in_dtype = _recipe(positions, d_model, base, name, dtype_name)
        methods.append(_max_error(f"recipe in {dtype_name}", in_dtype, exact, positions))
    return PrecisionReport(
        max_position=max_position,
        d_model=d_model,
        dtype=dtype_name,
        base=base,
        convention=name,
        seed=seed,
        positions=tuple(int(p) for p in positions),
        methods=tuple(methods),
        reference="longdouble" if _LONGDOUBLE_WIDER else "float64",
        reference_error=reference_error,
        merged=merged,
    )
