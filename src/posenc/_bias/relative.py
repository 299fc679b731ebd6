"""Relative sinusoid tables of Conformer-style speech encoders (Transformer-XL's relative
positions, as Wav2Vec2-Conformer, FastSpeech2-Conformer and Parakeet compute them).

Row ``r`` of the table of a sequence of length ``L`` encodes the relative position
``L − 1 − r`` (**query − key**, the sign these models use): rows run from ``+(L − 1)`` (a key
far to the left) to ``−(L − 1)``, ``2L − 1`` rows. Each row is the paper's sinusoid of that
position, interleaved ``[sin0, cos0, sin1, cos1, ...]`` with ω_k = base^(−2k/d).

The models compute the same exact table in float32 by different steps: the Conformer family
as ``exp(2k·(−ln(base)/d))``, Parakeet as ``1 / base^(2k/d)``; their float32 tables are up to
1.5e-5 apart at ``L = 300``. This one is computed in float64 and rounded once.

>>> relative_sinusoid_table(2, 2)
array([[ 0.84147096,  0.5403023 ],
       [ 0.        ,  1.        ],
       [-0.84147096,  0.5403023 ]], dtype=float32)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import check_allocation, check_int, check_length
from .._sinusoidal import sinusoidal

__all__ = ["relative_sinusoid_table"]


def relative_sinusoid_table(
    length: int, d_model: int, *, base: float = 10000.0, dtype: Any = np.float32
) -> npt.NDArray[Any]:
    """The ``(2·length − 1, d_model)`` relative sinusoid table of a sequence of ``length``.

    Args:
        length: the sequence length ``L``, an int >= 1.
        d_model: channels, an int >= 1.
        base: the wavelength base (10000 in every model above).
        dtype: float32 (default), float16 or float64.

    Returns:
        ``out[r] = sinusoid(L − 1 − r)`` in the paper layout: Wav2Vec2-Conformer's
        ``Wav2Vec2ConformerRelPositionalEmbedding(x)[0]`` for ``x`` of length ``L``, exactly.

    Accuracy: float32 values within 1e-7 of the exact table for ``L < 10^7``.

    >>> relative_sinusoid_table(3, 4).shape
    (5, 4)
    """
    size = check_length("length", length)
    check_int("length", size, minimum=1)
    check_allocation("length and d_model", (2 * size - 1, max(check_int("d_model", d_model), 1)), 8)
    positions = np.arange(size - 1, -size, -1, dtype=np.int64)
    return sinusoidal(positions, d_model, base=base, convention="paper", dtype=dtype)
