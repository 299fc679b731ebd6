"""Frequency schedules ω_k of the sinusoidal encodings, in float64.

Two schedules cover the 1-D conventions (``h = d_model // 2``):

- ``paper``: ω_k = base^(-2k/d_model) for k = 0 .. ceil(d_model/2) - 1. The wavelengths
  2π/ω_k run in a geometric progression from 2π towards base·2π.
- ``timescale``: ω_k = base^(-k/max(h-1, 1)) for k = 0 .. h - 1 (tensor2tensor's
  ``log_timescale_increment``); the last frequency is exactly 1/base.

The exponent is formed as one correctly rounded division and raised with ``np.power`` in
float64, so each ω_k is within about 1e-15 (relative) of the exact value; an angle p·ω_k is
then exact to about p·2e-16, far below float32 resolution for every p < 10^7.

Both exponents lie in [0, 1], so ω_k <= 1/base. A base below :data:`MIN_BASE` = 2**-970 is
refused (:func:`check_schedule_base`): above it every ω_k is at most :data:`MAX_FREQUENCY`
= 2**970, and every angle p·ω_k of a position |p| <= 2**53 stays finite (no NaN columns).

Rotary embeddings (RoPE) use the ``paper`` schedule of their rotated dimension, transformed by
the context-extension scalings of Hugging Face ``rope_parameters`` (see ``_rope/scaling.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from ._checks import check_allocation, check_base, check_int
from ._conventions import get_convention

__all__ = [
    "MAX_FREQUENCY",
    "MIN_BASE",
    "check_frequencies",
    "check_omega_size",
    "check_schedule_base",
    "frequencies",
    "paper_schedule",
    "timescale_schedule",
]

#: The largest frequency whose angles p·ω stay finite in float64 for every |p| <= 2**53.
MAX_FREQUENCY = 2.0**970

#: The smallest base of a schedule: its frequencies, at most 1/base, stay <= MAX_FREQUENCY.
MIN_BASE = 2.0**-970


def check_frequencies(omega: npt.NDArray[np.float64], attention: float, source: str) -> None:
    """Frequencies in [0, :data:`MAX_FREQUENCY`] (0: an underflow) and an attention factor
    in (0, 2**15], else a ``ValueError`` saying which ``source`` gave them.

    >>> check_frequencies(np.array([1.0, 1e300]), 1.0, "factor = 1e-300")
    Traceback (most recent call last):
    ...
    ValueError: factor = 1e-300 gives frequencies up to 1e+300 (they must be at most 2**970, \
about 1e292, so that the angles of positions up to 2**53 stay finite)
    """
    largest = float(np.max(omega, initial=0.0))
    if not (math.isfinite(largest) and largest <= MAX_FREQUENCY and np.all(omega >= 0)):
        raise ValueError(
            f"{source} gives frequencies up to {largest:.3g} (they must be at most 2**970, "
            "about 1e292, so that the angles of positions up to 2**53 stay finite)"
        )
    if not 0.0 < attention <= 2.0**15:
        raise ValueError(
            f"{source} gives an attention factor of {attention!r} (it must be a number in "
            "(0, 2**15]: it multiplies cos and sin, which must stay finite in float16)"
        )


def check_schedule_base(name: str, value: Any) -> float:
    """``value`` as a float: a finite number >= :data:`MIN_BASE` = 2**-970.

    >>> check_schedule_base("base", 10000)
    10000.0
    >>> check_schedule_base("base", 1e-300)
    Traceback (most recent call last):
    ...
    ValueError: base must be a number >= 2**-970 (about 1e-292; the frequencies reach 1/base, \
and their angles at positions up to 2**53 must stay finite), got 1e-300
    """
    base = check_base(name, value)
    if base < MIN_BASE:
        raise ValueError(
            f"{name} must be a number >= 2**-970 (about 1e-292; the frequencies reach 1/base, "
            f"and their angles at positions up to 2**53 must stay finite), got {base!r}"
        )
    return base


def check_omega_size(name: str, d_model: int) -> None:
    """The frequencies of ``d_model`` channels (at most ceil(d_model/2) float64) must fit in
    memory: else a ``TooLargeError`` naming ``name``, before anything is allocated."""
    check_allocation(name, ((d_model + 1) // 2,), 8)


def paper_schedule(d_model: int, base: float) -> npt.NDArray[np.float64]:
    """ω_k = base^(-2k/d_model) for k = 0 .. ceil(d_model/2) - 1 (float64, no argument checks)."""
    k = np.arange((d_model + 1) // 2, dtype=np.float64)
    return np.power(base, -(2.0 * k) / d_model)


def timescale_schedule(d_model: int, base: float) -> npt.NDArray[np.float64]:
    """ω_k = base^(-k/max(h-1, 1)), h = d_model // 2 (float64, no argument checks)."""
    half = d_model // 2
    k = np.arange(half, dtype=np.float64)
    return np.power(base, -k / max(half - 1, 1))


_SCHEDULES = {"paper": paper_schedule, "timescale": timescale_schedule}


def frequencies(
    d_model: int, *, base: float = 10000.0, convention: Any = "paper"
) -> npt.NDArray[np.float64]:
    """The angular frequencies ω_k of a convention, as float64 of shape ``(n,)``.

    ``n`` is ``ceil(d_model/2)`` for the ``paper`` and ``marian`` conventions and
    ``d_model // 2`` for ``tensor2tensor``. Column ``k`` of the sin (and cos) part of the
    table is ``sin(p * ω_k)`` (``cos(p * ω_k)``).

    Args:
        d_model: number of channels, an integer >= 1.
        base: the wavelength base (10000 in the paper), a finite number >= 2**-970.
        convention: a name from :data:`posenc.CONVENTIONS`.

    Returns:
        ``np.ndarray`` of float64, shape ``(n,)``, starting at ω_0 = 1.

    >>> frequencies(8)
    array([1.   , 0.1  , 0.01 , 0.001])
    >>> frequencies(8, convention="tensor2tensor")
    array([1.00000000e+00, 4.64158883e-02, 2.15443469e-03, 1.00000000e-04])
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_schedule_base("base", base)
    check_omega_size("d_model", d_model)
    return _SCHEDULES[get_convention(convention).schedule](d_model, base)
