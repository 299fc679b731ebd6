"""The rope types of Hugging Face ``transformers``, one record each, in float64.

Every transform follows the function that ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS``
holds for its ``rope_type`` (``default``, ``linear``, ``dynamic``, ``yarn``, ``llama3``,
``longrope``), evaluated in float64 instead of float32. The parameters are described on
:class:`posenc.RopeScaling`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from .._frequencies import paper_schedule
from .records import (
    Check,
    RopeInput,
    RopeType,
    attention,
    factors,
    finite,
    flag,
    key_name,
    length,
    positive,
    register,
    rotations,
)

__all__ = ["YARN_KEYS"]

_F64 = npt.NDArray[np.float64]


register(
    RopeType(
        name="default",
        keys={},
        required=(),
        transform=lambda r: (r.omega, 1.0),
        description="plain RoPE: w_k = base^(-2k/dim)",
    )
)

register(
    RopeType(
        name="linear",
        keys={"factor": positive},
        required=("factor",),
        transform=lambda r: (r.omega / r.params["factor"], 1.0),
        description="position interpolation: w_k / factor",
    )
)


def _dynamic_length(params: Mapping[str, Any]) -> int | None:
    original: int | None = params.get("original_max_position_embeddings")
    return original or params.get("max_position_embeddings")


def _dynamic_relations(params: Mapping[str, Any]) -> None:
    original, maximum = (
        params.get("original_max_position_embeddings"),
        params.get("max_position_embeddings"),
    )
    if original is None and maximum is None:
        raise ValueError(
            f"{key_name('original_max_position_embeddings')} (or "
            f"{key_name('max_position_embeddings')}) is required for rope_type 'dynamic'"
        )
    if original is not None and maximum is not None and original != maximum:
        raise ValueError(
            "rope_type 'dynamic' takes one length: "
            f"{key_name('original_max_position_embeddings')} = {original} and "
            f"{key_name('max_position_embeddings')} = {maximum} differ"
        )


def _dynamic(r: RopeInput) -> tuple[_F64, float]:
    if r.dim == 2:
        raise ValueError("dim must be >= 4 for rope_type 'dynamic' (its exponent is dim/(dim-2))")
    factor = r.params["factor"]
    original = (
        r.params.get("original_max_position_embeddings") or r.params["max_position_embeddings"]
    )
    longest = original if r.seq_len is None else max(r.seq_len, original)
    # >= 1 in exact arithmetic, and 1 at the original length: the float expression rounds to
    # 1.0 there for every factor below 2**53 (transformers computes it so), and is kept 1.0
    # for larger factors, where factor - 1.0 rounds to factor and the term would be 0
    term = 1.0 if longest == original else factor * longest / original - (factor - 1.0)
    if not 0.5 <= term < math.inf or math.log(r.base) + math.log(term) * r.dim / (r.dim - 2) > 709:
        raise ValueError(
            f"rope_type 'dynamic' with {key_name('factor')} = {factor!r}, base = {r.base!r} and "
            f"seq_len = {r.seq_len}: its scaled base overflows float64"
        )
    new_base = r.base * term ** (r.dim / (r.dim - 2))
    return paper_schedule(r.dim, new_base), 1.0


register(
    RopeType(
        name="dynamic",
        keys={"factor": positive, "original_max_position_embeddings": length},
        required=("factor",),
        transform=_dynamic,
        relations=_dynamic_relations,
        length_dependent=True,
        original_length=_dynamic_length,
        description="dynamic NTK: a larger base for sequences past the original length",
    )
)


def _get_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature term: 0.1·mscale·ln(scale) + 1, or 1 for scale <= 1."""
    return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn_relations(params: Mapping[str, Any]) -> None:
    if "factor" not in params and "max_position_embeddings" not in params:
        raise ValueError(
            f"{key_name('factor')} (or {key_name('max_position_embeddings')}, to derive it) is "
            "required for rope_type 'yarn'"
        )


def _yarn_attention(p: Mapping[str, Any], factor: float) -> float:
    """The given attention factor, else from ``mscale``/``mscale_all_dim`` or ``factor``."""
    if not (p.get("mscale") and p.get("mscale_all_dim")):  # both non-zero, as in transformers
        return p.get("attention_factor") or _get_mscale(factor)
    bottom = _get_mscale(factor, p["mscale_all_dim"])
    attention = _get_mscale(factor, p["mscale"]) / bottom if bottom else math.inf
    if "attention_factor" not in p and not 0.0 < attention < math.inf:
        raise ValueError(
            f"{key_name('mscale')} = {p['mscale']!r} and {key_name('mscale_all_dim')} = "
            f"{p['mscale_all_dim']!r} give an attention factor of {attention:.4g}: it must be "
            "a positive finite number"
        )
    return p.get("attention_factor") or attention


def _yarn(r: RopeInput) -> tuple[_F64, float]:
    p, dim = r.params, r.dim
    if r.base <= 1.0:
        raise ValueError(
            f"base must be > 1 for rope_type 'yarn' (it divides by ln(base)), got {r.base}"
        )
    original = p["original_max_position_embeddings"]
    factor = p.get("factor") or p["max_position_embeddings"] / original
    attention = _yarn_attention(p, factor)

    def correction_dim(rotations: float) -> float:
        # the (fractional) pair index whose wavelength fits `rotations` times into L0
        return dim * math.log(original / (rotations * 2.0 * math.pi)) / (2.0 * math.log(r.base))

    low, high = correction_dim(p.get("beta_fast", 32.0)), correction_dim(p.get("beta_slow", 1.0))
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as in transformers: avoids a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    # ramp 0: keep ω_k (high frequencies, extrapolate); ramp 1: ω_k / factor (interpolate)
    return r.omega / factor * ramp + r.omega * (1.0 - ramp), float(attention)


#: YaRN's parameters and their checks (HunYuan's NTK-alpha accepts some of them too).
YARN_KEYS: Mapping[str, Check] = MappingProxyType(
    {
        "factor": positive,
        "original_max_position_embeddings": length,
        "attention_factor": attention,
        "beta_fast": rotations,
        "beta_slow": rotations,
        "mscale": finite,
        "mscale_all_dim": finite,
        "truncate": flag,
    }
)

register(
    RopeType(
        name="yarn",
        keys=YARN_KEYS,
        required=("original_max_position_embeddings",),
        transform=_yarn,
        relations=_yarn_relations,
        description="YaRN: interpolate low frequencies, keep high ones, scale attention",
    )
)


def _llama3_relations(params: Mapping[str, Any]) -> None:
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    if high <= low:
        raise ValueError(
            f"{key_name('high_freq_factor')} must be greater than {key_name('low_freq_factor')}"
            f" = {low!r}, got {high!r}"
        )


def _llama3(r: RopeInput) -> tuple[_F64, float]:
    p, omega = r.params, r.omega
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    original = p["original_max_position_embeddings"]
    wavelength = 2.0 * math.pi / omega
    long_waves = wavelength > original / low  # low frequencies: divide by factor
    short_waves = wavelength < original / high  # high frequencies: unchanged
    smooth = (original / wavelength - low) / (high - low)
    blended = (1.0 - smooth) * omega / factor + smooth * omega
    return np.where(long_waves, omega / factor, np.where(short_waves, omega, blended)), 1.0


register(
    RopeType(
        name="llama3",
        keys={
            "factor": positive,
            "low_freq_factor": positive,
            "high_freq_factor": positive,
            "original_max_position_embeddings": length,
        },
        required=(
            "factor",
            "low_freq_factor",
            "high_freq_factor",
            "original_max_position_embeddings",
        ),
        transform=_llama3,
        relations=_llama3_relations,
        description="Llama 3: divide low frequencies by factor, blend the middle band",
    )
)


def _longrope_relations(params: Mapping[str, Any]) -> None:
    if not {"factor", "attention_factor", "max_position_embeddings"} & params.keys():
        raise ValueError(
            f"{key_name('factor')} (or {key_name('attention_factor')}, or "
            f"{key_name('max_position_embeddings')}) is required for rope_type 'longrope'"
        )
    if params["original_max_position_embeddings"] < 2 and "attention_factor" not in params:
        raise ValueError(
            f"{key_name('original_max_position_embeddings')} must be >= 2 for rope_type "
            "'longrope' (ln of it divides its attention factor), got 1; or give "
            f"{key_name('attention_factor')}"
        )


def _longrope(r: RopeInput) -> tuple[_F64, float]:
    p, dim = r.params, r.dim
    original = p["original_max_position_embeddings"]
    for name in ("short_factor", "long_factor"):
        if len(p[name]) != dim // 2:
            raise ValueError(
                f"{key_name(name)} must have dim/2 = {dim // 2} entries (one per rotated pair), "
                f"got {len(p[name])}"
            )
    use_long = r.seq_len is not None and r.seq_len > original
    ext = np.asarray(p["long_factor" if use_long else "short_factor"], dtype=np.float64)
    attention = p.get("attention_factor")
    if attention is None:
        factor = p.get("factor") or p["max_position_embeddings"] / original
        attention = 1.0 if factor <= 1.0 else math.sqrt(1.0 + math.log(factor) / math.log(original))
    return r.omega / ext, float(attention)


register(
    RopeType(
        name="longrope",
        keys={
            "short_factor": factors,
            "long_factor": factors,
            "original_max_position_embeddings": length,
            "factor": positive,
            "attention_factor": attention,
        },
        required=("short_factor", "long_factor", "original_max_position_embeddings"),
        transform=_longrope,
        relations=_longrope_relations,
        length_dependent=True,
        description="LongRoPE: per-frequency factors, short below the original length, long above",
    )
)
