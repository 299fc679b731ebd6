"""Rounding to a float dtype: dtype names, exact bfloat16 rounding, rows as bit patterns."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import check_float_dtype
from ._results import _F64


def _dtype_name(name: str, value: Any) -> str:
    """'float16' | 'float32' | 'float64' | 'bfloat16' from a string or NumPy dtype."""
    if isinstance(value, str) and value.lower() in ("bfloat16", "bf16"):
        return "bfloat16"
    if getattr(value, "__name__", None) == "bfloat16" or str(value) in (
        "bfloat16",
        "torch.bfloat16",
    ):
        return "bfloat16"
    try:
        return str(check_float_dtype(name, value).name)
    except TypeError:
        raise TypeError(
            f"{name} must be one of 'float16', 'float32', 'float64', 'bfloat16' "
            f"(or the NumPy dtype), got {value!r}"
        ) from None


def _round_bfloat16(values: Any) -> _F64:
    """Round to the nearest bfloat16 value, ties to even, in one step; float64 out.

    bfloat16 has float32's 8-bit exponent and 7 stored mantissa bits. Each finite value is
    scaled by the power of two that makes its bfloat16 spacing 1 (2^(e-7) for normal values
    in [2^e, 2^(e+1)), 2^-133 below 2^-126, where bfloat16 is subnormal), rounded with
    ``np.rint`` (round half to even) and scaled back; scaling by a power of two is exact in
    float64, so the float64 input is rounded once. Results of magnitude 2^128 or more overflow
    to ±inf, as in IEEE arithmetic. The output is float64 holding exact bfloat16 values.

    >>> _round_bfloat16([1.0 + 2**-8, 1.0 + 3 * 2**-8, 1 / 3]).tolist()
    [1.0, 1.015625, 0.333984375]
    """
    x = np.array(values, dtype=np.float64, copy=True)
    finite = np.isfinite(x)
    xf = x[finite]
    _, exp = np.frexp(xf)  # xf = m * 2**exp, 0.5 <= |m| < 1
    step = np.maximum(exp - 8, -133)  # bfloat16 spacing is 2**step
    rounded = np.ldexp(np.rint(np.ldexp(xf, -step)), step)
    rounded = np.where(np.abs(rounded) >= 2.0**128, np.copysign(np.inf, rounded), rounded)
    x[finite] = rounded
    return x


def _round_to(values: Any, dtype_name: str) -> npt.NDArray[Any]:
    """Round float values once to ``dtype_name``; bfloat16 comes back as float64."""
    if dtype_name == "bfloat16":
        return _round_bfloat16(values)
    return np.asarray(values).astype(dtype_name)


#: Bytes per element of each dtype name (bfloat16's rows are kept as 16-bit patterns).
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def _row_bits(values: Any, dtype_name: str) -> npt.NDArray[Any]:
    """Rounded rows as unsigned integers (one per element), -0.0 folded into +0.0."""
    rounded = _round_to(values, dtype_name) + 0.0  # + 0.0 turns -0.0 into 0.0
    if dtype_name == "bfloat16":  # exact in float32; its upper 16 bits are the bfloat16
        return (rounded.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bits = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}[dtype_name]
    return np.asarray(rounded).view(bits)
