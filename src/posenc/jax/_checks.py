"""Argument checks of the JAX front-end (private): what the NumPy core cannot see.

Everything the core checks (head_dim, base, scaling, pairs, positions given as values) is
checked by the core's own functions; this module adds the JAX-specific parts: dtypes
(bfloat16 included), arrays, and whether a value is known (concrete) or traced.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import numpy.typing as npt

from .._checks import _show, check_positions
from ._exact import x64_enabled

__all__ = [
    "as_host_positions",
    "check_array",
    "check_dtype",
    "is_traced",
    "traced_positions",
]

_ALLOWED = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32))
_F64 = np.dtype(np.float64)


def is_traced(value: Any) -> bool:
    """True when ``value`` is a JAX tracer (inside ``jit``, ``vmap``, ``grad``, ...): its
    values are not known while the graph is built."""
    return isinstance(value, jax.core.Tracer)


def check_dtype(name: str, value: Any) -> np.dtype[Any]:
    """``value`` (None: float32) as a NumPy dtype: float16, bfloat16, float32, or float64
    when ``jax_enable_x64`` is on."""
    if value is None:
        return np.dtype(np.float32)
    dtype: np.dtype[Any] | None
    try:
        dtype = np.dtype(value)
    except TypeError:
        dtype = None
    if dtype == _F64:
        if x64_enabled():
            return _F64
        raise TypeError(
            f"{name} float64 needs JAX's 64-bit mode (jax.config.update('jax_enable_x64', "
            "True)); without it pass float32, bfloat16 or float16"
        )
    if dtype is None or dtype not in _ALLOWED:
        raise TypeError(
            f"{name} must be one of float16, bfloat16, float32, float64, got {_show(value)}"
        )
    return dtype


def check_array(name: str, value: Any) -> jax.Array:
    """``value`` (a JAX or NumPy array) as a floating-point JAX array."""
    if not isinstance(value, jax.Array | np.ndarray) or isinstance(value, np.generic):
        raise TypeError(f"{name} must be a JAX array, got {type(value).__name__}")
    if not jnp.issubdtype(value.dtype, jnp.floating):
        raise TypeError(f"{name} must be a floating-point array, got dtype {value.dtype}")
    return jnp.asarray(value)


def as_host_positions(value: Any) -> Any:
    """Known positions as the NumPy core reads them: JAX arrays become NumPy arrays (16-bit
    floats as float32, exactly); anything else is passed on for the core to check."""
    if isinstance(value, jax.Array):
        array = np.asarray(value)
        if array.dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)):
            return array.astype(np.float32)
        return array
    return value


def traced_positions(name: str, value: jax.Array) -> jax.Array:
    """Traced positions: an integer or floating dtype (the values cannot be checked)."""
    if not (jnp.issubdtype(value.dtype, jnp.integer) or jnp.issubdtype(value.dtype, jnp.floating)):
        raise TypeError(
            f"{name} must contain integers or real numbers, got dtype {value.dtype}"
            + (
                " (booleans are not positions; see positions_from_mask)"
                if value.dtype == bool
                else ""
            )
        )
    return value


def host_positions(name: str, value: Any) -> npt.NDArray[Any]:
    """Known positions checked by the core (:func:`posenc._checks.check_positions`)."""
    return check_positions(name, as_host_positions(value))
