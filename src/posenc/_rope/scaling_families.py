"""The rope types that single model families define, one :class:`RopeType` record each.

- ``proportional`` (Gemma 4's full-attention layers; ``transformers``'
  ``_compute_proportional_rope_parameters``): the table keeps the whole head; the first
  ``int(partial_rotary_factor * head_dim // 2)`` pairs turn at ω_k = base^(-2k/head_dim) (the
  exponent uses the *whole* head) and the other pairs do not turn (ω = 0: cos 1, sin 0); all
  divided by ``factor`` (default 1).
- ``ntk_alpha`` (HunYuan; ``compute_ntk_alpha_rope_parameters`` of the HunYuan modeling files):
  NTK-aware scaling by a fixed ``alpha``: the base becomes ``base · alpha^(dim/(dim − 2))``
  whatever the sequence length. HunYuan configs write it as ``{"rope_type": "dynamic",
  "alpha": ...}`` (and carry YaRN-style keys that it does not read); :func:`posenc.rope_scaling`
  maps that spelling here.

The records are registered on import, like those of ``scaling_types``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from .._frequencies import paper_schedule
from .records import RopeInput, RopeType, key_name, positive, register
from .scaling_types import YARN_KEYS

__all__: list[str] = []

_F64 = npt.NDArray[np.float64]


def _proportional(r: RopeInput) -> tuple[_F64, float]:
    # r.dim is the whole head (keeps_head_dim): the exponent and the table use it.
    proportion = r.params.get("partial_rotary_factor", 1.0)
    rotated = int(proportion * r.dim // 2)
    omega = paper_schedule(r.dim, r.base)
    omega[rotated:] = 0.0
    return omega / r.params.get("factor", 1.0), 1.0


register(
    RopeType(
        name="proportional",
        keys={"factor": positive},
        required=(),
        transform=_proportional,
        keeps_head_dim=True,
        description=(
            "Gemma 4: the first partial_rotary_factor of the pairs turn at "
            "base^(-2k/head_dim), the others not at all"
        ),
    )
)


_HUNYUAN_EXTRAS = ("factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate")


def _ntk_alpha(r: RopeInput) -> tuple[_F64, float]:
    if r.dim == 2:
        raise ValueError("dim must be >= 4 for rope_type 'ntk_alpha' (its exponent is dim/(dim-2))")
    alpha, exponent = r.params["alpha"], r.dim / (r.dim - 2)
    if math.log(r.base) + math.log(alpha) * exponent > 709:  # the new base overflows float64
        raise ValueError(
            f"rope_type 'ntk_alpha' with {key_name('alpha')} = {alpha!r} and base = {r.base!r}: "
            f"its scaled base, base * alpha^{exponent:g}, overflows float64"
        )
    new_base = r.base * alpha**exponent
    return paper_schedule(r.dim, new_base), 1.0


register(
    RopeType(
        name="ntk_alpha",
        keys={
            "alpha": positive,
            # HunYuan configs carry YaRN's keys next to alpha; its NTK-alpha ignores them.
            **{k: YARN_KEYS[k] for k in _HUNYUAN_EXTRAS},
        },
        required=("alpha",),
        transform=_ntk_alpha,
        spelled_as=("dynamic", "alpha"),
        description="HunYuan NTK-alpha: base * alpha^(dim/(dim-2)) at every length",
    )
)
