"""What a panel is: a title, the sentence saying what to look at, controls, and a function that
computes its figure, caption and key numbers from the checked control values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._charts import rounded
from ._controls import Control


@dataclass(frozen=True)
class Panel:
    """One panel of the explorer.

    Attributes:
        name: the identifier in URLs (``/api/panel/heatmap``).
        title: the heading.
        look: one sentence saying what to look at.
        controls: its inputs.
        compute: checked control values -> ``{"caption", "numbers", "chart", "tables"}``;
            ``numbers`` is a list of ``{"key", "label", "value", "shown"}``: the exact
            value as text, and the same rounded for the page.
        upload: the file kind the panel accepts (``"config"``, ``"table"``) or None.
    """

    name: str
    title: str
    look: str
    controls: tuple[Control, ...]
    compute: Callable[[dict[str, Any]], dict[str, Any]]
    upload: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "look": self.look,
            "controls": [c.as_dict() for c in self.controls],
            "upload": self.upload,
        }


def result(
    caption: str,
    numbers: list[tuple[str, str, str]],
    chart: dict[str, Any] | list[dict[str, Any]],
    tables: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A panel's answer: ``numbers`` as (key, label, value text) triples; each number keeps
    its exact text as ``value`` and is shown rounded to 6 significant digits (``shown``)."""
    return {
        "caption": caption,
        "numbers": [
            {"key": k, "label": label, "value": v, "shown": rounded(v)} for k, label, v in numbers
        ],
        "chart": chart,
        "tables": tables or [],
    }
