"""What the sweeps found, printed at the end of the run, and carried there from pytest-xdist's
workers: a plugin (the root ``conftest.py`` names it in ``pytest_plugins``).

The RoPE coverage test and the swap sweeps write what they find into dictionaries of their
own modules (``SHARED`` names them); the terminal summaries below read those dictionaries.
Under pytest-xdist the tests run in worker processes and the summary in the controller, which
runs no test and collects nothing (so it loads no conftest below ``tests/``: these hooks are a
plugin's). Each worker sends, with every test's teardown report, the entries that changed since
its last report (pickled, in the report's ``user_properties``), and the controller merges them
into the same dictionaries of its own copy of the module. In a single process nothing is sent:
the dictionaries are the ones the tests wrote.
"""

from __future__ import annotations

import base64
import importlib
import os
import pickle
import sys
from typing import Any

import pytest

#: module -> its dictionaries the summaries read
SHARED: dict[str, tuple[str, ...]] = {
    "tests.torch.hf.rope_coverage": ("OUTCOMES",),
    "tests.torch.hf.test_swap_sweep": ("OUTCOMES", "OUTCOMES_16", "NEAR_TIES"),
    "tests.torch.hf.test_swap_bias_sweep": ("OUTCOMES",),
}
#: module -> its integer counts the summaries read (sent when they change)
COUNTS: dict[str, tuple[str, ...]] = {"tests.torch.hf.rope_coverage": ("TOTAL",)}

PROPERTY = "posenc-summary"
#: this process is a pytest-xdist worker (xdist names it in the variable)
IN_WORKER = "PYTEST_XDIST_WORKER" in os.environ

_sent: dict[tuple[str, str], Any] = {}


def changes() -> str | None:
    """The entries written since the last call in this process, pickled as text (None: none)."""
    found: dict[tuple[str, str], Any] = {}
    for name in SHARED.keys() | COUNTS.keys():
        module = sys.modules.get(name)
        if module is None:
            continue
        for attribute in SHARED.get(name, ()):
            table = getattr(module, attribute)
            sent = _sent.setdefault((name, attribute), {})
            new = {k: v for k, v in table.items() if k not in sent or sent[k] != v}
            if new:
                found[name, attribute] = new
                sent.update(pickle.loads(pickle.dumps(new)))  # a copy: lists may grow later
        for attribute in COUNTS.get(name, ()):
            value = getattr(module, attribute)
            if _sent.get((name, attribute), 0) != value:  # the counts start at 0
                found[name, attribute] = _sent[name, attribute] = value
    return base64.b64encode(pickle.dumps(found)).decode("ascii") if found else None


def merge(text: str) -> None:
    """Write what :func:`changes` sent into this process's copies of the modules."""
    for (name, attribute), value in pickle.loads(base64.b64decode(text)).items():
        module = importlib.import_module(name)
        if attribute in SHARED.get(name, ()):
            getattr(module, attribute).update(value)
        else:
            setattr(module, attribute, value)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under pytest-xdist, a worker's teardown report carries what the sweeps found since its
    last report (above)."""
    outcome = yield
    if call.when == "teardown" and IN_WORKER:
        text = changes()
        if text is not None:
            outcome.get_result().user_properties.append((PROPERTY, text))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The controller of pytest-xdist merges what the workers' reports carry."""
    for name, value in report.user_properties:
        if name == PROPERTY and not IN_WORKER:
            merge(value)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    _rope_coverage_summary(terminalreporter)
    _swap_sweep_summary(terminalreporter)
    _bias_sweep_summary(terminalreporter)


def _rope_coverage_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the RoPE coverage found by tests/torch/hf/test_rope_coverage.py, when it ran."""
    harness = sys.modules.get("tests.torch.hf.rope_coverage")
    outcomes = getattr(harness, "OUTCOMES", None)
    if not outcomes:
        return
    total = harness.TOTAL or len(outcomes)
    reproduced = sum(o.reproduced for o in outcomes.values())
    missing = {d: o.reason for d, o in sorted(outcomes.items()) if not o.reproduced}
    checked = "" if len(outcomes) == total else f" ({len(outcomes)} checked in this run)"
    terminalreporter.section("RoPE coverage")
    terminalreporter.write_line(
        f"RoPE coverage: {reproduced}/{total} transformers model directories with a rotary "
        f"class reproduced by posenc.rope_plan{checked} ({100 * reproduced / total:.1f}%); "
        f"not reproduced: {len(missing)}"
    )
    for directory, reason in missing.items():
        terminalreporter.write_line(f"  {directory}: {reason}")


def _swap_sweep_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print what tests/torch/hf/test_swap_sweep.py found, when it ran."""
    sweep = sys.modules.get("tests.torch.hf.test_swap_sweep")
    outcomes = getattr(sweep, "OUTCOMES", None)
    if not outcomes:
        return
    terminalreporter.section("swap sweep")
    terminalreporter.write_line(
        f"swap sweep: {len(outcomes)} of {len(sweep.MODEL_TYPES)} causal LM model types checked"
    )
    _write_by_outcome(terminalreporter, outcomes)
    version = sweep.transformers.__version__
    missing = sweep.not_covered(outcomes)
    terminalreporter.write_line(
        f"not covered by posenc in transformers {version} ({len(missing)}): {', '.join(missing)}"
    )
    new = sweep.new_model_types()
    terminalreporter.write_line(
        f"new since transformers {sweep.pinned.VERSION} ({len(new)}): {', '.join(new) or '-'}"
    )
    _swap_sweep_16_bits(terminalreporter, sweep)


def _swap_sweep_16_bits(terminalreporter: pytest.TerminalReporter, sweep: object) -> None:
    """The sweep's bfloat16 and float16 runs, and the near-ties they listed."""
    outcomes = getattr(sweep, "OUTCOMES_16", None)
    if not outcomes:
        return
    terminalreporter.write_line(
        f"swap sweep in 16 bits: {len(outcomes)} runs (bfloat16 and float16)"
    )
    _write_by_outcome(terminalreporter, outcomes)
    ties = {k: v for k, v in sorted(getattr(sweep, "NEAR_TIES", {}).items()) if v}
    terminalreporter.write_line(f"near-ties (greedy tokens not compared further): {len(ties)}")
    for key, where in ties.items():
        terminalreporter.write_line(f"  {key}: {'; '.join(where)}")


def _bias_sweep_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print what tests/torch/hf/test_swap_bias_sweep.py found, when it ran: model type → swapped
    or left (the function), and how far the outputs moved."""
    sweep = sys.modules.get("tests.torch.hf.test_swap_bias_sweep")
    outcomes = getattr(sweep, "OUTCOMES", None)
    if not outcomes:
        return
    terminalreporter.section("bias swap sweep")
    covered = sweep.covered()
    terminalreporter.write_line(
        f"bias swap sweep: {len(outcomes)} model types checked, from {len(covered)} model "
        f"directories: {', '.join(covered)}"
    )
    width = max(len(name) for name in outcomes)
    for model_type, outcome in sorted(outcomes.items()):
        terminalreporter.write_line(f"  {model_type.ljust(width)}  {outcome}")
    missing = sweep.not_covered()
    version = sweep.transformers.__version__
    terminalreporter.write_line(
        f"with a bias but not covered by posenc in transformers {version} ({len(missing)}): "
        f"{', '.join(missing) or '-'}"
    )
    for directory in missing:
        reason = sweep.NOT_COVERED.get(directory, f"new since transformers {sweep.pinned.VERSION}")
        terminalreporter.write_line(f"  {directory}: {reason}")


# -- reference helpers -------------------------------------------------------------------------


def _write_by_outcome(terminalreporter: pytest.TerminalReporter, outcomes: dict[str, str]) -> None:
    """One line per outcome, the most frequent first: its count and the keys that had it."""
    by_outcome: dict[str, list[str]] = {}
    for key, outcome in sorted(outcomes.items()):
        by_outcome.setdefault(outcome, []).append(key)
    for outcome, keys in sorted(by_outcome.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        terminalreporter.write_line(f"  {len(keys):3d}  {outcome}: {', '.join(keys)}")
