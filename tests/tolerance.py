"""Tolerances that state their error model: bounds in units in the last place (ulps).

Every end-to-end comparison in the tests (model outputs, layers, logits, a framework's
reference function) goes through :func:`assert_close_ulp`, so that a tolerance is never a
constant at the edge of what one CPU produced but a count of roundings, written next to the
comparison with the reason for the count.

The error model
---------------
``eps(dtype)`` is one ulp at 1.0 (2^-23 for float32). A value of magnitude ``m`` rounded once
is off by at most ``eps/2 · m``; we count in whole ``eps · m`` units ("ulps of the
magnitudes compared"), ``m`` being ``max|expected|`` unless the call site names another
``scale`` (below). The bound is

    |actual - expected| <= ulps · eps(dtype) · scale          (for every element)

Using the largest magnitude rather than each element's own ulp is deliberate: sums and
matmuls make the error of a small output as large as the rounding of the large terms that
cancelled into it, so an elementwise ``ulp(|expected|)`` would need a floor near zero anyway;
the largest magnitude is that floor. A zero ``expected`` (scale 0) asks for exact equality.
Values computed by a few roundings of their own magnitude (frequencies, ALiBi slopes, xPos
scales: products and powers, no sums) take ``scale=abs(expected)``, a bound per element.

How many ulps a call site needs:

- posenc rounds once: a table computed in float64 and cast is within 1/2 ulp of the exact
  value, so posenc against an exact reference is 1 ulp.
- a framework's float32 recipe may round two or three times (angle, sin/cos, a scaling
  factor), so posenc against it is a few ulps of the outputs -- and when it computes the angle
  ``p · ω`` in float32, the angle's rounding is an ulp of the *angle*: pass ``scale`` = the
  largest angle (about the largest position) instead of the output magnitude.
- a layer or a model multiplies those tables into matmuls: a dot product of ``k`` terms
  accumulates ``k`` roundings (worst case ``k`` ulps, typically ``sqrt(k)``), and the input
  difference of one ulp in cos/sin is carried through every later layer. Kernels differ in
  summation order (ATen's ``default``, ``avx2`` and ``avx512`` kernels block the sums
  differently), so the bound must cover other orders than the one this CPU used: a layer
  with reductions of width ``k`` gets ``sqrt(k)`` to ``k`` ulps of its output magnitude
  (the tests allow 2-4x the worst measured under the three kernels, inside that range).

Choose ``ulps`` per call site with a comment saying which roundings it counts; more than about
8 needs the width of the reduction that explains it.

Both NumPy arrays and torch tensors (any floating dtype, on any device) are accepted; values
are compared in float64 on the host, which is exact for every input dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "RECIPE_ULPS",
    "assert_close_float32_recipe",
    "assert_close_ulp",
    "bound",
    "eps",
    "ulps_apart",
]


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _dtype_name(x: Any) -> str:
    """'float32', 'bfloat16', ... for an array, a tensor or a dtype of either library."""
    if isinstance(x, type) and issubclass(x, np.generic):  # np.float32, ...
        return np.dtype(x).name
    dtype = getattr(x, "dtype", x)
    if isinstance(dtype, np.dtype):
        return dtype.name
    return str(dtype).removeprefix("torch.")


_EPS = {
    "float64": 2.0**-52,
    "float32": 2.0**-23,
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
}


def eps(dtype: Any) -> float:
    """One ulp at 1.0 for a NumPy or torch floating dtype (or an array/tensor of one)."""
    name = _dtype_name(dtype)
    if name not in _EPS:
        raise TypeError(f"dtype must be a floating dtype ({', '.join(_EPS)}), got {name}")
    return _EPS[name]


def _as_float64(x: Any) -> np.ndarray:
    if _is_tensor(x):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def _coarser(actual: Any, expected: Any) -> str:
    """The less precise floating dtype of the two (a float64 truth checks a float32 result)."""
    names = [_dtype_name(x) for x in (actual, expected) if _dtype_name(x) in _EPS]
    if not names:
        raise TypeError(
            "dtype must be given when neither actual nor expected is floating, got "
            f"{_dtype_name(actual)} and {_dtype_name(expected)}"
        )
    return max(names, key=lambda name: _EPS[name])


def bound(expected: Any, dtype: Any, ulps: float, *, scale: Any = None) -> Any:
    """``ulps · eps(dtype) · scale``; ``scale`` defaults to ``max|expected|`` (finite values).

    ``expected``: array or tensor of any shape. ``scale``: a number, or an array that
    broadcasts against ``expected`` for a bound per element (``scale=abs(expected)`` is a
    relative bound, for values computed by a few roundings of their own magnitude, such as
    frequencies). Returns a float, or a float64 array for an array ``scale``.
    """
    if scale is None:
        values = np.abs(_as_float64(expected))
        values = values[np.isfinite(values)]
        scale = float(values.max()) if values.size else 0.0
    if np.ndim(scale):
        return float(ulps) * eps(dtype) * np.abs(_as_float64(scale))
    return float(ulps) * eps(dtype) * float(scale)


def _units(actual: Any, expected: Any, dtype: Any, scale: Any) -> np.ndarray:
    """``|actual - expected| / (eps · scale)`` per element: 0 where equal or not finite."""
    a, e = _as_float64(actual), _as_float64(expected)
    unit = np.broadcast_to(bound(e, dtype, 1.0, scale=scale), e.shape)
    diff = np.abs(a - e)
    apart = np.isfinite(e) & np.isfinite(a) & (diff > 0)
    out = np.zeros(e.shape)
    with np.errstate(divide="ignore"):
        out[apart] = np.where(unit[apart] > 0, diff[apart] / unit[apart], np.inf)
    return out


def ulps_apart(actual: Any, expected: Any, dtype: Any = None, *, scale: Any = None) -> float:
    """``max |actual - expected| / (eps(dtype) · scale)``: 0 when equal."""
    dtype = _coarser(actual, expected) if dtype is None else dtype
    units = _units(actual, expected, dtype, scale)
    return float(units.max()) if units.size else 0.0


def assert_close_ulp(
    actual: Any,
    expected: Any,
    *,
    ulps: float,
    dtype: Any = None,
    scale: Any = None,
    what: str = "values",
) -> None:
    """Assert ``|actual - expected| <= ulps · eps(dtype) · scale`` everywhere.

    ``actual``, ``expected``: NumPy arrays or torch tensors of the same shape. ``dtype``: the
    precision the ulps count in; defaults to the coarser of the two dtypes. ``scale``: the
    magnitude the roundings happened at; defaults to ``max|expected|`` (see :func:`bound`).
    NaN and infinities must sit at the same places (and infinities agree in sign). ``what``
    names the values in the failure message.
    """
    if ulps < 0:
        raise ValueError(f"ulps must be >= 0, got {ulps}")
    dtype = _coarser(actual, expected) if dtype is None else dtype
    a, e = _as_float64(actual), _as_float64(expected)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != expected shape {e.shape}"
    assert np.array_equal(np.isnan(a), np.isnan(e)), f"{what}: NaN at different places"
    infinite = np.isinf(a) | np.isinf(e)
    assert np.array_equal(a[infinite], e[infinite]), f"{what}: infinities differ"
    tolerance = np.broadcast_to(bound(e, dtype, ulps, scale=scale), e.shape)
    over = np.isfinite(e) & (np.abs(a - e) > tolerance)
    if over.any():
        units = _units(a, e, dtype, scale)
        where = np.unravel_index(int(np.argmax(np.where(over, units, -1.0))), e.shape)
        at = tuple(int(i) for i in where)
        raise AssertionError(
            f"{what}: {float(a[where])!r} != {float(e[where])!r} at {at}, {units[where]:.3g} "
            f"ulps of {_dtype_name(dtype)} at the scale compared; allowed {ulps} ulps; "
            f"{int(over.sum())} of {e.size} over"
        )


#: A framework recipe that computes its frequencies and its angles ``p·ω`` in float32 rounds
#: the angle: an error of about one float32 ulp of the *angle* (measured at most 0.75 ulp of
#: the position, 9e-8·p, for d <= 1024), then sin/cos and the output round once more each at
#: magnitude <= 1. So: 2 ulps at the scale ``largest angle + 1``.
RECIPE_ULPS = 2


def assert_close_float32_recipe(
    actual: Any,
    expected: Any,
    *,
    max_angle: float,
    magnitude: float = 1.0,
    terms: int = 1,
    what: str = "table",
) -> None:
    """:func:`assert_close_ulp` for a reference that computes its angles in float32.

    ``max_angle``: the largest ``|p·ω|`` of the table (the largest position when ω <= 1).
    ``magnitude``: what the table entries multiply (an attention factor, ``max|x|`` of a
    rotated vector); ``terms``: how many such products are summed (2 for a rotation,
    ``x·cos + rotate_half(x)·sin``). The bound is ``RECIPE_ULPS · terms`` float32 ulps at the
    scale ``(max_angle + 1) · magnitude``.
    """
    assert_close_ulp(
        actual,
        expected,
        ulps=RECIPE_ULPS * terms,
        dtype="float32",
        scale=(abs(max_angle) + 1.0) * magnitude,
        what=what,
    )
