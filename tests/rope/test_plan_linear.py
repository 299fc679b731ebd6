"""``posenc plan`` is linear in the number of layers, and ``layer_types`` has the layer limit.

The work is counted, not timed: comparisons of layers (``_same_kind``) and of notes (a ``str``
whose ``==`` counts) stay proportional to the number of layers, whatever mix of kinds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import posenc
from posenc._io import plan_json as _plan
from posenc.cli import main

LAYERS = 4096


class CountedNote(str):
    """A note whose comparisons are counted (hashing is str's)."""

    calls = 0

    def __eq__(self, other: object) -> bool:
        CountedNote.calls += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def _counted(plan: Any) -> Any:
    """``plan`` with every note of every layer a :class:`CountedNote`."""
    from dataclasses import replace

    layers = tuple(replace(x, notes=tuple(map(CountedNote, x.notes))) for x in plan.layers)
    return replace(plan, layers=layers)


def _compare_counts(config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """How many layer comparisons and note comparisons ``plan_dict`` makes for ``config``."""
    plan = _counted(posenc.rope_plan(config))
    kinds = 0
    same_kind = _plan._same_kind

    def counting(a: Any, b: Any) -> bool:
        nonlocal kinds
        kinds += 1
        return same_kind(a, b)

    monkeypatch.setattr(_plan, "_same_kind", counting)
    CountedNote.calls = 0
    report = _plan.plan_dict(plan)
    assert sum(len(k["layers"]) for k in report["kinds"]) == len(config["layer_types"] or ())
    return kinds, CountedNote.calls


def test_no_rope_layers_are_grouped_in_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    config = {
        "model_type": "smollm3",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": LAYERS,
        "layer_types": ["full_attention"] * LAYERS,
        "no_rope_layers": [0] * LAYERS,  # every layer without RoPE: one note per layer
        "rope_theta": 10000.0,
    }
    kinds, notes = _compare_counts(config, monkeypatch)
    assert kinds <= 2 * LAYERS
    assert notes <= 2 * LAYERS


def test_distinct_layer_types_are_grouped_in_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    count = 1024  # one kind per layer: every layer its own row
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "layer_types": [f"type_{i}" for i in range(count)],
        "rope_theta": 10000.0,
    }
    kinds, notes = _compare_counts(config, monkeypatch)
    assert kinds <= 2 * count
    assert notes <= 2 * count


def test_layer_types_are_held_to_the_layer_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "layer_types": ["full_attention"] * (2**16 + 1),
        "rope_theta": 10000.0,
    }
    with pytest.raises(ValueError, match=r"config\.layer_types has 65537 entries, more than"):
        posenc.rope_plan(config)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "layer_types has 65537 entries, more than the 65536 layers a config may declare" in err


def test_the_most_layers_a_config_may_declare_are_planned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layers = 2**16
    config = {
        "model_type": "smollm3",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": layers,
        "no_rope_layers": [1, 0] * (layers // 2),
        "rope_theta": 10000.0,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["plan", "--json", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = [k["layers"] for k in report["kinds"]]
    assert rows == [list(range(0, layers, 2)), list(range(1, layers, 2))]
