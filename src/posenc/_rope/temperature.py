"""Position-dependent attention temperature: the scale some models put on their queries (or on
q and k) by position, beside or instead of RoPE.

============================  =================================================================
kind                          scale at position ``p`` (float64)
============================  =================================================================
``"llama4"``                  ``1 + attn_scale · ln(1 + floor((p + 1) / floor_scale))``: Llama 4's
                              layers without RoPE (``attn_temperature_tuning``), on the queries
``"llama4_beta"``             ``1 + beta · ln(1 + floor(p / original_max_position_embeddings))``:
                              Ministral 3 and Mistral 4 (``llama_4_scaling_beta`` in the rope
                              parameters), on the queries of every layer
``"log"``                     ``1 + alpha · ln(max((p + 1) / n_floor, 1))``: Inkling's
                              non-sliding layers (``log_scaling_n_floor``, ``log_scaling_alpha``),
                              on the queries and the relative logits
``"constant"``                ``scale`` at every position: Ergo's full-attention layers
                              (``sqrt(global_attention_scale)`` on q and on k)
============================  =================================================================

:func:`attention_temperature` computes a kind at given positions; :func:`read_temperature`
finds the temperature a config gives a layer, which :func:`posenc.rope_plan` records in
``RopeLayer.temperature``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._checks import _show
from .._positions.sequence import table_positions
from . import config_values as values
from .config import ConfigReading

__all__ = [
    "TEMPERATURE_KINDS",
    "AttentionTemperature",
    "TemperatureKind",
    "attention_temperature",
    "read_temperature",
]

TemperatureKind = Literal["llama4", "llama4_beta", "log", "constant"]

#: kind -> (its parameters, what it scales).
TEMPERATURE_KINDS: Mapping[str, tuple[tuple[str, ...], str]] = {
    "llama4": (("attn_scale", "floor_scale"), "queries"),
    "llama4_beta": (("beta", "original_max_position_embeddings"), "queries"),
    "log": (("alpha", "n_floor"), "queries and relative logits"),
    "constant": (("scale",), "queries and keys"),
}


def _parameter(kind: str, name: str, value: Any) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} of kind {kind!r} must be a number, got {_show(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf  # refused below, by name
    positive = name in ("floor_scale", "original_max_position_embeddings", "n_floor", "scale")
    if not math.isfinite(number) or (positive and number <= 0):
        allowed = "a finite number > 0" if positive else "a finite number"
        raise ValueError(f"{name} of kind {kind!r} must be {allowed}, got {_show(value)}")
    return number


def _check(kind: Any, params: Mapping[str, Any]) -> dict[str, float]:
    if not isinstance(kind, str) or kind not in TEMPERATURE_KINDS:
        raise ValueError(f"kind must be one of {tuple(TEMPERATURE_KINDS)}, got {kind!r}")
    names = TEMPERATURE_KINDS[kind][0]
    if set(params) != set(names):
        given = ", ".join(params) or "none"
        raise TypeError(f"kind {kind!r} takes the parameters {', '.join(names)}, got {given}")
    return {name: _parameter(kind, name, params[name]) for name in names}


def _positions(positions: Any) -> npt.NDArray[np.float64]:
    """Token positions, checked as every table's are (:func:`table_positions`), then held to
    whole numbers >= 0: the scales count tokens."""
    array = table_positions(positions, "positions", 1, 8, 2)
    if array.dtype.kind == "f" and array.size:
        raise TypeError(f"positions must be integers (or a length), got dtype {array.dtype}")
    if array.size and int(array.min()) < 0:
        raise ValueError("positions must lie in [0, 2**53]")
    return array.astype(np.float64)


def attention_temperature(positions: Any, kind: TemperatureKind, **params: float) -> Any:
    """The attention temperature of ``kind`` at ``positions``: float64, the shape of
    ``positions`` (a length ``L`` for ``0 .. L-1``). See the module docstring for the kinds.

    >>> attention_temperature([0, 8191, 8192, 10**6], "llama4", attn_scale=0.1, floor_scale=8192)
    array([1.        , 1.06931472, 1.06931472, 1.48121844])
    >>> attention_temperature(3, "llama4_beta", beta=0.1, original_max_position_embeddings=2)
    array([1.        , 1.        , 1.06931472])
    """
    checked = _check(kind, params)
    p = _positions(positions)
    if kind == "llama4":
        steps = np.floor((p + 1.0) / checked["floor_scale"])
        result = 1.0 + checked["attn_scale"] * np.log1p(steps)
    elif kind == "llama4_beta":
        steps = np.floor(p / checked["original_max_position_embeddings"])
        result = 1.0 + checked["beta"] * np.log1p(steps)
    elif kind == "log":
        result = 1.0 + checked["alpha"] * np.log(np.maximum((p + 1.0) / checked["n_floor"], 1.0))
    else:
        result = np.full(p.shape, checked["scale"])
    return result


@dataclass(frozen=True)
class AttentionTemperature:
    """The temperature a config gives a layer (:func:`read_temperature`).

    Attributes:
        kind: one of :data:`TEMPERATURE_KINDS`.
        params: its parameters, ``(name, value)`` pairs.
        scales: what it multiplies (``"queries"``, ``"queries and keys"``, ...).
        source: the config keys it was read from.
    """

    kind: str
    params: tuple[tuple[str, float], ...]
    scales: str
    source: str

    def at(self, positions: Any) -> Any:
        """The scale at ``positions`` (float64), :func:`attention_temperature`."""
        return attention_temperature(positions, self.kind, **dict(self.params))  # type: ignore[arg-type]

    def describe(self) -> str:
        settings = ", ".join(f"{k}={v:g}" for k, v in self.params)
        return f"{self.kind} ({settings}) on the {self.scales}, from {self.source}"


def _make(kind: str, source: str, **params: Any) -> AttentionTemperature:
    checked = _check(kind, params)
    return AttentionTemperature(kind, tuple(checked.items()), TEMPERATURE_KINDS[kind][1], source)


def read_temperature(
    reading: ConfigReading, label: str, index: int | None, rotates: bool
) -> AttentionTemperature | None:
    """The temperature the config of ``reading`` gives a layer of type ``label`` (``index``:
    its place, None for a kind of layer), which ``rotates`` or not; None for none."""
    top, where = reading.top, reading.where
    model = str(reading.model_type or "")
    if model in ("llama4_text", "llama4") and not rotates and index is not None:
        tuning = top.get("attn_temperature_tuning")
        if tuning is not None and values.boolean("config", "attn_temperature_tuning", tuning):
            return _make(
                "llama4", "config.attn_temperature_tuning, floor_scale, attn_scale",
                attn_scale=top.get("attn_scale", 0.1), floor_scale=top.get("floor_scale", 8192),
            )  # fmt: skip
    params = reading.params.get(label if reading.nested else "full_attention") or {}
    beta = params.get("llama_4_scaling_beta")
    if beta is not None and rotates:
        original = params.get(
            "original_max_position_embeddings", top.get("original_max_position_embeddings")
        )
        return _make(
            "llama4_beta", f"{where}: llama_4_scaling_beta, original_max_position_embeddings",
            beta=beta, original_max_position_embeddings=original,
        )  # fmt: skip
    if top.get("log_scaling_n_floor") is not None and label != "sliding_attention":
        return _make(
            "log", "config.log_scaling_n_floor, log_scaling_alpha",
            alpha=top.get("log_scaling_alpha", 0.1), n_floor=top["log_scaling_n_floor"],
        )  # fmt: skip
    scale = top.get("global_attention_scale")
    if model == "ergo" and scale is not None and label == "full_attention":
        return _make(
            "constant", "config.global_attention_scale (its square root, on q and on k)",
            scale=math.sqrt(_parameter("constant", "global_attention_scale", scale)),
        )  # fmt: skip
    return None
