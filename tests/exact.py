"""Exact reference values with mpmath (independent of posenc's float64 arithmetic)."""

from __future__ import annotations

import mpmath
import numpy as np


def exact_paper_table(positions: np.ndarray, d_model: int, base: float = 10000.0) -> np.ndarray:
    """PE[p, 2k] = sin(p·base^(-2k/d)), PE[p, 2k+1] = cos(...), evaluated with 40 digits.

    Returns float64 values (the exact value rounded once to float64, far below float32 ulp).
    """
    with mpmath.workdps(40):
        omegas = [
            mpmath.power(mpmath.mpf(base), -mpmath.mpf(2 * k) / d_model)
            for k in range((d_model + 1) // 2)
        ]
        out = np.empty((len(positions), d_model))
        for row, p in enumerate(positions):
            mp_p = mpmath.mpf(int(p))
            for col in range(d_model):
                angle = mp_p * omegas[col // 2]
                out[row, col] = float(mpmath.sin(angle) if col % 2 == 0 else mpmath.cos(angle))
    return out
