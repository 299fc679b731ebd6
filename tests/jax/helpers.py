"""What the posenc.jax tests share: the import rule and the ulp bound.

``import_jax()`` returns ``(jax, jnp)`` or skips the module: under Python 3.10 with the reason
(jax 0.10.2 and flax 0.12.8 need Python >= 3.11), otherwise through ``pytest.importorskip``,
which under ``CI`` fails the run instead (the root conftest).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

PY310_REASON = "posenc.jax needs jax 0.10.2 and flax 0.12.8, which need Python >= 3.11"


def import_jax() -> tuple[Any, Any]:
    if sys.version_info < (3, 11):
        pytest.skip(PY310_REASON, allow_module_level=True)
    jax = pytest.importorskip("jax", reason="jax is not installed (pip install '.[jax]')")
    pytest.importorskip("flax", reason="flax is not installed (pip install '.[jax]')")
    import jax.numpy as jnp

    return jax, jnp


def ulp_errors(actual: Any, exact: np.ndarray) -> np.ndarray:
    """``|actual - exact|`` in units of the bound: one float32 ulp of the exact value, at
    least 2**-25 (near zeros). At most 1 everywhere: within the bound."""
    exact = np.asarray(exact, dtype=np.float64)
    error = np.abs(np.asarray(actual, dtype=np.float64) - exact)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return error / np.maximum(ulp, 2.0**-25)


def same_bits(a: Any, b: Any) -> bool:
    """Bitwise equality of two arrays (same dtype and shape); NaN equals NaN."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
