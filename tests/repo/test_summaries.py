"""The sweeps' findings reach the summary under pytest-xdist (tests/summaries.py): what a
worker sends is what changed, and the controller's copy ends up equal to the worker's."""

from __future__ import annotations

import re
import sys
import types

import pytest

from tests import summaries


@pytest.fixture
def worker_and_controller(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("fake_sweep")
    module.OUTCOMES = {}
    module.TOTAL = 0
    monkeypatch.setitem(sys.modules, "fake_sweep", module)
    monkeypatch.setattr(summaries, "SHARED", {"fake_sweep": ("OUTCOMES",)})
    monkeypatch.setattr(summaries, "COUNTS", {"fake_sweep": ("TOTAL",)})
    monkeypatch.setattr(summaries, "_sent", {})
    return module


def test_only_what_changed_is_sent(worker_and_controller) -> None:
    module = worker_and_controller
    assert summaries.changes() is None
    module.OUTCOMES["a"] = ["x"]
    module.TOTAL = 3
    first = summaries.changes()
    assert first is not None
    assert summaries.changes() is None  # nothing new
    module.OUTCOMES["a"].append("y")  # a list that grew is sent again
    module.OUTCOMES["b"] = ["z"]
    second = summaries.changes()
    assert second is not None

    controller = types.ModuleType("fake_sweep")
    controller.OUTCOMES = {}
    controller.TOTAL = 0
    sys.modules["fake_sweep"] = controller
    summaries.merge(first)
    assert controller.OUTCOMES == {"a": ["x"]}
    assert controller.TOTAL == 3
    summaries.merge(second)
    assert controller.OUTCOMES == {"a": ["x", "y"], "b": ["z"]}


def test_the_summary_hooks_live_where_the_xdist_controller_loads_them() -> None:
    """Under pytest-xdist the controller collects nothing: of the conftest files it loads only
    the root's and ``tests/conftest.py``. Summary hooks defined in a deeper conftest
    (``tests/torch/conftest.py``) never ran there, and ``make test`` printed no sweep summary."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    hooks = re.compile(r"^def (pytest_terminal_summary|pytest_runtest_logreport)\b", re.M)
    deeper = [p for p in (root / "tests").glob("*/**/conftest.py") if hooks.search(p.read_text())]
    assert deeper == []
    conftest = (root / "conftest.py").read_text()
    assert re.search(r"^pytest_plugins = .*tests\.summaries", conftest, re.M)
