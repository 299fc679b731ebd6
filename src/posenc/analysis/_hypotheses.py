"""The table families :func:`identify` tries: one per registered convention, and the bug."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._conventions import CONVENTIONS, ConventionName, get_convention
from .._features import feature_slices, sin_cos_pairs
from .._sinusoidal import sinusoidal
from ._recipes import ODD_EXPONENT_BUG, _exponents, odd_exponent_table
from ._results import _F64


def _conventions() -> tuple[ConventionName, ...]:
    """Every registered convention, in registry order."""
    return tuple(get_convention(name).name for name in CONVENTIONS)


@dataclass(frozen=True, eq=False)
class _Hypothesis:
    """A table family: which channels hold sin/cos of which exponent e (ω = base^-e)."""

    convention: ConventionName
    bug: str | None
    d_model: int
    pair_sin: npt.NDArray[np.intp]
    pair_cos: npt.NDArray[np.intp]
    pair_exp: _F64
    lone: npt.NDArray[np.intp]
    lone_is_cos: npt.NDArray[np.bool_]
    lone_exp: _F64
    zero: npt.NDArray[np.intp]

    @property
    def base_matters(self) -> bool:
        return bool(np.any(self.pair_exp > 0) or np.any(self.lone_exp > 0))

    @property
    def informative(self) -> bool:
        return bool(self.pair_sin.size or self.lone.size)

    def build(self, positions: npt.NDArray[Any], base: float | None) -> _F64:
        b = 10000.0 if base is None else base
        if self.bug is not None:
            return odd_exponent_table(positions, self.d_model, base=b, dtype=np.float64)
        return sinusoidal(
            positions, self.d_model, base=b, convention=self.convention, dtype=np.float64
        )


def _hypotheses(d_model: int) -> tuple[list[_Hypothesis], _Hypothesis]:
    """One hypothesis per registered convention, and the odd-exponent cosine bug."""
    channels = np.arange(d_model)
    out = []
    for name in _conventions():
        nums, den = _exponents(d_model, name)
        exps = nums.astype(np.float64) / den
        layout = feature_slices(d_model, name)
        pairs = sin_cos_pairs(layout, d_model)
        out.append(
            _Hypothesis(
                convention=name,
                bug=None,
                d_model=d_model,
                pair_sin=pairs.sin,
                pair_cos=pairs.cos,
                pair_exp=exps[: layout.n_cos],
                lone=pairs.unpaired,
                lone_is_cos=np.zeros(pairs.unpaired.shape[0], dtype=bool),
                lone_exp=exps[layout.n_cos : layout.n_sin],
                zero=pairs.zero,
            )
        )
    empty = np.zeros(0, dtype=np.intp)
    bug = _Hypothesis(
        convention="paper",
        bug=ODD_EXPONENT_BUG,
        d_model=d_model,
        pair_sin=empty,
        pair_cos=empty,
        pair_exp=np.zeros(0),
        lone=channels,
        lone_is_cos=channels % 2 == 1,
        lone_exp=channels / d_model,
        zero=empty,
    )
    return out, bug
