"""A RoPE as numbers to compare: frequencies, attention factor and pair layout (a "form"),
the probe positions, and the error model of float32 angles.

A :class:`Form` holds what decides a rotary table: the frequency matrix ``(n_axes, n_pairs)``
(one row for 1-D RoPE), the attention factor of each pair and the pair layout. Its
:meth:`Form.tables` are computed in float64 at any positions, so the plan of a config, a
GGUF file's metadata and every hypothesis about a bug are all forms, compared the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from .._features import PairLayout, pair_slices
from .._rope.plan import RopeLayer

_F64 = npt.NDArray[np.float64]

#: float32's unit roundoff, 2**-24.
UNIT = 2.0**-24
#: The position the audit calls "1M": the last of 2**20 positions.
ONE_MILLION = 2**20 - 1


@dataclass(frozen=True)
class Form:
    """The numbers that decide a rotary table.

    Attributes:
        frequencies: float64 ``(n_axes, n_pairs)``: pair ``k`` turns by ``Σ_a p[a]·F[a, k]``.
        attention: float64 ``(n_pairs,)``: the factor cos and sin are multiplied by.
        pairs: ``"half"`` or ``"interleaved"``.
    """

    frequencies: _F64
    attention: _F64
    pairs: PairLayout

    @property
    def n_pairs(self) -> int:
        return int(self.frequencies.shape[1])

    @property
    def width(self) -> int:
        """Channels of the table: two per pair."""
        return 2 * self.n_pairs

    def angles(self, positions: _F64) -> _F64:
        """float64 ``(P, n_pairs)`` angles of ``positions`` ``(P, n_axes)``."""
        theta: _F64 = positions @ self.frequencies
        return theta

    def spread(self, values: _F64) -> _F64:
        """Per-pair values ``(P, n_pairs)`` laid out in channels ``(P, width)``."""
        out = np.empty((values.shape[0], self.width), dtype=np.float64)
        first, second = pair_slices(self.pairs, self.n_pairs)
        out[:, first] = values
        out[:, second] = values
        return out

    def tables(self, positions: _F64) -> tuple[_F64, _F64]:
        """float64 ``(cos, sin)``, each ``(P, width)``, at ``positions`` ``(P, n_axes)``."""
        theta = self.angles(positions)
        return self.spread(np.cos(theta) * self.attention), self.spread(
            np.sin(theta) * self.attention
        )

    def with_frequencies(self, omega: Any, attention: Any = None) -> Form:
        """The same form with 1-D frequencies ``omega`` (every axis row replaced)."""
        matrix = np.broadcast_to(np.asarray(omega, dtype=np.float64), self.frequencies.shape)
        return replace(self, frequencies=np.array(matrix), attention=self._att(attention))

    def _att(self, attention: Any) -> _F64:
        if attention is None:
            return self.attention
        att: _F64 = np.broadcast_to(np.asarray(attention, dtype=np.float64), (self.n_pairs,))
        return np.array(att, dtype=np.float64)


def one_axis_form(omega: Any, attention: Any, pairs: PairLayout) -> Form:
    """A 1-D form from frequencies ``(n,)`` and one attention factor (or one per pair)."""
    omega = np.asarray(omega, dtype=np.float64).reshape(1, -1)
    att = np.broadcast_to(np.asarray(attention, dtype=np.float64), (omega.shape[1],)).copy()
    return Form(omega, att, pairs)


def layer_form(layer: RopeLayer, seq_len: int | None) -> Form:
    """The form of a rotating plan layer for a sequence of ``seq_len`` positions."""
    if layer.multi_axis:
        matrix, attention = layer.axis_frequencies(seq_len)
        if layer.pairs_per_axis:
            raise ValueError(
                f"layer type {layer.layer_type!r} lays each axis's pairs in a block of its own "
                "(pairs_per_axis): the audit does not compare such layers yet"
            )
        return Form(np.array(matrix, dtype=np.float64), np.array(attention), layer.pairs)
    omega, factor = layer.frequencies_at(seq_len)
    return one_axis_form(omega, factor, layer.pairs)


def probe_positions(context: int | None, original: int | None) -> npt.NDArray[np.int64]:
    """The positions an audit probes: ``0 .. 16``, every ``2**j - 1`` and ``2**j`` up to
    :data:`ONE_MILLION`, the model's full context (its last position and the next), the
    original length of a scaling and a few fixed others; sorted, unique, a few dozen."""
    points = set(range(17))
    for j in range(5, 21):
        points |= {2**j - 1, 2**j}
    for length in (context, original):
        if length is not None and 1 <= length <= 2**24:
            points |= {length - 1, length}
    points |= {1000, 4095, 15962, 100_000, 253_131, 999_999}
    return np.array(sorted(p for p in points if p <= ONE_MILLION), dtype=np.int64)


def exact_tolerance(expected: _F64, theta: _F64, dtype: str) -> _F64:
    """What rounding the exact values to the subject's ``dtype`` may cost, per element: one unit
    in the last place of ``dtype`` at the expected value, plus float64's own angle error."""
    magnitude = np.abs(expected)
    if dtype == "bfloat16":
        _, exp = np.frexp(np.maximum(magnitude, 2.0**-126))
        ulp = np.ldexp(1.0, exp - 8)
    else:
        kind = np.dtype(dtype) if dtype in ("float16", "float32", "float64") else np.float32
        ulp = np.spacing(magnitude.astype(kind)).astype(np.float64)
    return ulp + 2.0**-50 * (1.0 + np.abs(theta))  # type: ignore[no-any-return]


def float32_bound(form: Form, positions: _F64) -> _F64:
    """The error model of float32 angles, per element ``(P, width)``.

    A stack that computes ω in float32 (``base ** (-2k/d)`` with a float32 power, or
    llama.cpp's running product ``θ_scale**k``) and multiplies it by a float32 position makes
    an angle error of at most ``(4 + 1.5k)·u·|θ|`` (u = 2**-24; the ``1.5k`` covers the running
    product); cos and sin in float32 add ``2u``. Times the attention factor.
    """
    theta = np.abs(form.angles(positions))
    k = np.arange(form.n_pairs, dtype=np.float64)
    per_pair = form.attention * (UNIT * (4.0 + 1.5 * k) * theta + 2.0 * UNIT)
    return form.spread(per_pair)


def float32_bound_at(form: Form, position: int, n_axes: int) -> float:
    """The largest element of :func:`float32_bound` at ``position`` (all axes equal)."""
    return float(float32_bound(form, np.full((1, n_axes), float(position))).max())


def lengths(layer: RopeLayer, context: int | None) -> tuple[int | None, bool]:
    """``(original length, length-dependent)`` of a layer's scaling."""
    spec = layer.scaling
    if spec is None or not spec.depends_on_length:
        return None, False
    original = spec.original_length
    return (int(original) if original else context), True


def describe_number(value: float) -> str:
    """``500000`` for whole numbers, else 4 significant digits."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return f"{int(value)}"
    return f"{value:.4g}"
