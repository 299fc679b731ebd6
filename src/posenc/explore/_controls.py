"""The controls of the explorer's panels and the checks of the values a page sends.

A control is described once here: the page builds its labelled input from the description
(``as_dict``) and the server checks what comes back (``parse``). Every value arrives as text
in a query string, so every check starts from a string and ends in a Python number or one of
a few named choices; anything else is a ``ValueError`` naming the control, the value given
and what is allowed (the page shows the message next to the figure).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The largest ``d_model`` (or head size) a panel computes with.
MAX_D_MODEL = 4096
#: The most rows (positions) a panel draws; longer ranges are sampled.
MAX_DRAWN_ROWS = 8192
#: The largest position (or length) a control accepts.
MAX_POSITION = 10**9
#: About how many values a slider steps through over a wide range.
SLIDER_STOPS = 120
#: The longest text a control accepts (a list of channels, a preset name).
MAX_TEXT = 200


@dataclass(frozen=True)
class Control:
    """One input of a panel.

    Attributes:
        name: the query-string key (``d_model``).
        label: the text of the ``<label>`` (``d_model (channels)``).
        kind: ``"int"``, ``"float"``, ``"choice"`` or ``"text"``.
        default: the value the page starts with.
        low, high: the inclusive range of an int or float.
        choices: the allowed values of a choice.
        step: the step of the page's input (the server accepts any value in range).
    """

    name: str
    label: str
    kind: str
    default: Any
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = field(default=())
    step: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The description the page builds its input from (JSON-ready)."""
        return {
            "name": self.name,
            "label": self.label,
            "kind": self.kind,
            "default": self.default,
            "low": self.low,
            "high": self.high,
            "choices": list(self.choices),
            "step": self.step,
            "stops": self.stops(),
        }

    def stops(self) -> list[float]:
        """The values a slider steps through (empty for text and choices): every allowed
        value of a short integer range, else about :data:`SLIDER_STOPS` values spread
        geometrically (mirrored about 0 for a range around it) and rounded to 3 significant
        digits, with the default and both ends. The page maps the slider's index to them.

        >>> Control("k", "k", "int", 3, low=0, high=5).stops()
        [0, 1, 2, 3, 4, 5]
        >>> Control("p", "p", "int", 12, low=0, high=10**7).stops()[:6]
        [0, 1, 2, 3, 4, 5]
        """
        if self.kind not in ("int", "float") or self.low is None or self.high is None:
            return []
        low, high = self.low, self.high
        step = self.step if self.kind == "int" and self.step else 1
        if self.kind == "int" and (high - low) / step <= SLIDER_STOPS:
            return [int(v) for v in range(int(low), int(high) + 1, int(step))]
        values = {low, high, self.default}
        if low < 0 < high:
            sides = [(1.0, -low, -1.0), (1.0, high, 1.0)]
            values.add(0)
        elif low <= 0:
            sides = [(1.0 if self.kind == "int" else high * 1e-6, high, 1.0)]
        else:
            sides = [(low, high, 1.0)]
        count = SLIDER_STOPS // len(sides)
        for start, stop, sign in sides:
            values.update(sign * v for v in np.geomspace(start, stop, count))
        kept: set[float]
        if self.kind == "int":
            kept = {float(round(float(f"{v:.3g}") / step) * step) for v in values}
        else:
            kept = {float(f"{v:.3g}") for v in values}
        kept.update((self.low, self.high, self.default))
        inside = sorted(v for v in kept if low <= v <= high)
        return [int(v) if self.kind == "int" else float(v) for v in inside]

    def parse(self, text: str | None) -> Any:
        """The value of ``text`` (None: the default), checked.

        >>> Control("d_model", "d", "int", 64, low=1, high=4096).parse("128")
        128
        >>> Control("d_model", "d", "int", 64, low=1, high=4096).parse("0")
        Traceback (most recent call last):
        ...
        ValueError: d_model must be an integer in 1 .. 4096, got '0'
        """
        if text is None:
            return self.default
        if len(text) > MAX_TEXT:
            raise ValueError(f"{self.name} must be at most {MAX_TEXT} characters long")
        if self.kind == "int":
            return self._number(text, int)
        if self.kind == "float":
            return self._number(text, float)
        if self.kind == "choice":
            if text not in self.choices:
                allowed = ", ".join(self.choices)
                raise ValueError(f"{self.name} must be one of {allowed}, got {text!r}")
            return text
        return text

    def _number(self, text: str, kind: type) -> Any:
        what = "an integer" if kind is int else "a number"
        allowed = f"{what} in {_show(self.low)} .. {_show(self.high)}"
        try:
            if not text.isascii() or "_" in text:  # int() and float() take "1_0" and "٣"
                raise ValueError
            value = kind(text.strip())
        except ValueError:
            raise ValueError(f"{self.name} must be {allowed}, got {text!r}") from None
        if not math.isfinite(value) or not (
            (self.low is None or value >= self.low) and (self.high is None or value <= self.high)
        ):
            raise ValueError(f"{self.name} must be {allowed}, got {text!r}")
        return value


def _show(bound: float | None) -> str:
    if bound is None:
        return "any"
    return f"{bound:g}" if isinstance(bound, float) and not bound.is_integer() else f"{bound:.0f}"


def parse_all(controls: Sequence[Control], query: Mapping[str, str]) -> dict[str, Any]:
    """Every control's value from ``query`` (defaults where missing); unknown keys refused."""
    known = {c.name for c in controls}
    unknown = sorted(set(query) - known)
    if unknown:
        raise ValueError(
            f"unknown parameter {unknown[0]!r}; this panel takes {', '.join(sorted(known))}"
        )
    return {c.name: c.parse(query.get(c.name)) for c in controls}


def parse_channels(text: str, d_model: int) -> list[int] | None:
    """``"0, 1, 6"`` -> ``[0, 1, 6]``; ``""`` or ``"auto"`` -> None (the default channels).

    >>> parse_channels("3, 2", 8), parse_channels("auto", 8)
    ([3, 2], None)
    """
    text = text.strip()
    if text in ("", "auto"):
        return None
    values: list[int] = []
    for item in text.split(","):
        try:
            value = int(item)
        except ValueError:
            raise ValueError(
                f"channels must be comma-separated integers or 'auto', got {text!r}"
            ) from None
        if not 0 <= value < d_model:
            raise ValueError(f"channels must lie in 0 .. {d_model - 1}, got {value}")
        values.append(value)
    if len(values) > 12:
        raise ValueError(f"channels must name at most 12 channels, got {len(values)}")
    return list(dict.fromkeys(values))


# Controls shared by several panels.
def d_model(default: int = 64, name: str = "d_model", label: str = "d_model (channels)") -> Control:
    return Control(name, label, "int", default, low=1, high=MAX_D_MODEL, step=1)


def even_dim(default: int = 64, name: str = "head_dim") -> Control:
    return Control(name, f"{name} (even)", "int", default, low=2, high=MAX_D_MODEL, step=2)


def base(default: float = 10000.0) -> Control:
    return Control("base", "base (wavelength base)", "float", default, low=1.0001, high=1e12)


def length(default: int = 128, high: int = MAX_POSITION) -> Control:
    return Control("length", "length (positions 0 .. length-1)", "int", default, 1, high, step=1)


def convention(choices: Sequence[str], default: str = "paper") -> Control:
    return Control("convention", "convention", "choice", default, choices=tuple(choices))
