"""The per-layer RoPE checks that transformers' own suite skips for the models with per-layer
rope settings, run against posenc's plan (``tests/torch/hf/test_rope_per_layer.py``).

Each check is a function returning None (holds) or the problem in words, so that a test can
show it fails on a wrong plan:

- :func:`frequency_problem`: a layer type's ``inv_freq`` (float32, from the model's rotary
  class) equals the plan's float64 frequencies within two float32 ulps (``1 / base**(2k/d)``
  in float32 rounds twice), zeros exactly;
- :func:`attention_problem`: the attention factor, to float32 rounding;
- :func:`default_problem`: a ``default`` layer's frequencies are the unscaled schedule at its
  base, bit for bit;
- :func:`scaling_problem`: a scaled layer against the unscaled schedule at its base: linear
  divides every pair by its factor; YaRN and llama3 leave the high-frequency pairs untouched,
  divide the low-frequency ones by the factor and ramp monotonically between; proportional
  turns its first pairs at ``base^(-2k/head_dim) / factor`` and the rest not at all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Container
from pathlib import Path
from typing import Any

import numpy as np

import posenc

#: The per-layer models whose RoPE property tests transformers skips (model directories).
#: OpenPanguV2 is in neither 5.23 nor 5.25: the scan picks it up when a release adds it.
NAMED = ("gemma4", "gemma4_unified", "deepseek_v4", "mimo_v2_flash", "axk2")

#: A rotary class with one table per layer type takes the layer type in its forward.
_LAYER_TYPED = re.compile(r"def forward\(self, x, position_ids, layer_type")

#: Two float32 ulps, relative: transformers' ``1 / base**(arange/dim)`` rounds twice.
FLOAT32_FREQUENCY = 2 * float(np.finfo(np.float32).eps)


def per_layer_directories(root: Path, rotary: Container[str]) -> dict[str, str]:
    """Model directory -> which per-layer schema it has, by a text scan of ``root``: a rotary
    class keyed by layer type (nested ``rope_parameters``, or label-keyed as DeepSeek-V4's),
    or a per-layer list (``layer_rope_theta``). ``rotary``: the directories with a rotary
    class (the others are not read)."""
    found: dict[str, str] = {}
    for path in sorted(root.glob("*/modeling_*.py")):
        if path.parent.name not in rotary:
            continue
        if _LAYER_TYPED.search(path.read_text(encoding="utf-8")):
            found[path.parent.name] = "by layer type"
    for path in sorted(root.glob("*/configuration_*.py")):
        if "layer_rope_theta" in path.read_text(encoding="utf-8"):
            found[path.parent.name] = "per-layer list"
    return found


def frequency_problem(layer: Any, inv_freq: np.ndarray) -> str | None:
    ours = np.asarray(layer.frequencies)
    theirs = np.asarray(inv_freq, dtype=np.float64)
    if ours.shape != theirs.shape:
        return f"{theirs.shape[0]} frequencies, the plan has {ours.shape[0]}"
    zero = ours == 0.0
    if not np.array_equal(zero, theirs == 0.0):
        return "the pairs that do not turn differ"
    error = np.abs(theirs - ours)[~zero] / ours[~zero]
    if error.size and not error.max() <= FLOAT32_FREQUENCY:
        k = int(np.argmax(error))
        return f"frequencies differ by {error.max():.3g} (relative) first at pair {k}"
    return None


def attention_problem(layer: Any, scaling: float) -> str | None:
    if not math.isclose(layer.attention_factor, float(scaling), rel_tol=1e-7):
        return f"attention factor {scaling!r}, the plan says {layer.attention_factor!r}"
    return None


def _unscaled(layer: Any) -> np.ndarray:
    omega, _ = posenc.rope_frequencies(layer.rotary_dim, base=layer.base)
    return omega


def default_problem(layer: Any) -> str | None:
    if layer.rope_type != "default":
        return None
    if not np.array_equal(layer.frequencies, _unscaled(layer)) or layer.attention_factor != 1.0:
        return "a default layer differs from the unscaled schedule at its base"
    return None


def _ramp_problem(
    ratio: np.ndarray, factor: float, high: np.ndarray, low: np.ndarray
) -> str | None:
    """``ratio`` = unscaled / scaled per pair: 1 on ``high`` pairs, ``factor`` on ``low`` ones,
    in [1, factor] and non-decreasing."""
    if not np.allclose(ratio[high], 1.0, rtol=1e-12, atol=0):
        return "a high-frequency pair is scaled"
    if not np.allclose(ratio[low], factor, rtol=1e-12, atol=0):
        return "a low-frequency pair is not divided by the factor"
    if not (np.all(np.diff(ratio) >= -1e-12) and ratio.min() >= 1 - 1e-12):
        return "the ramp is not monotone from 1 to the factor"
    if ratio.max() > factor * (1 + 1e-12):
        return "a pair is divided by more than the factor"
    return None


def scaling_problem(layer: Any) -> str | None:
    """The scaling properties of one layer; None for types without a closed form here."""
    kind = layer.rope_type
    if kind in ("default", None) or layer.scaling is None:
        return None
    p = layer.scaling.params
    omega = np.asarray(layer.frequencies)
    if kind == "proportional":
        d, factor = layer.head_dim, p.get("factor", 1.0)
        rotated = int(p.get("partial_rotary_factor", 1.0) * d // 2)
        want = layer.base ** (-np.arange(0, d, 2, dtype=np.float64) / d) / factor
        want[rotated:] = 0.0
        if not np.allclose(omega, want, rtol=1e-15, atol=0):
            return "proportional pairs are not base^(-2k/head_dim)/factor then 0"
        return None
    baseline = _unscaled(layer)
    ratio = baseline / omega
    factor = float(p["factor"])
    if kind == "linear":
        ok = np.allclose(ratio, factor, rtol=1e-12, atol=0)
        return None if ok else "linear scaling does not divide every pair by its factor"
    wavelength = 2 * math.pi / baseline
    length = float(p["original_max_position_embeddings"])
    if kind == "yarn":
        turns = length / wavelength
        return _ramp_problem(
            ratio, factor, turns > p.get("beta_fast", 32.0), turns < p.get("beta_slow", 1.0)
        )
    if kind == "llama3":
        high = wavelength < length / p["high_freq_factor"]
        return _ramp_problem(ratio, factor, high, wavelength > length / p["low_freq_factor"])
    return None


def nope_problem(layer: Any, model_rotates: bool) -> str | None:
    """A layer the model does not rotate is one the plan reports as such, and back."""
    if layer.uses_positions != model_rotates:
        said = "rotates" if layer.uses_positions else "does not rotate"
        did = "rotates" if model_rotates else "passes no positions"
        return f"the plan says the layer {said}; the model {did}"
    return None


def property_problems(layer: Any) -> list[str]:
    """The checks of one layer that need no reference: default and scaling properties."""
    found = [default_problem(layer), scaling_problem(layer)]
    return [f"{layer.layer_type}: {p}" for p in found if p is not None]


def uses_layer_types(cls: type) -> bool:
    """Whether a rotary class's forward takes the layer type (one table per type)."""
    import inspect

    return "layer_type" in inspect.signature(cls.forward).parameters
