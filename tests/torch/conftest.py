"""The torch tests' terminal summaries (the fixtures they share are in tests/conftest.py)."""

from __future__ import annotations

import sys

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    _rope_coverage_summary(terminalreporter)
    _swap_sweep_summary(terminalreporter)


def _rope_coverage_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the RoPE coverage found by tests/torch/test_rope_coverage.py, when it ran."""
    harness = sys.modules.get("tests.torch.rope_coverage")
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
    """Print what tests/torch/test_swap_sweep.py found, when it ran."""
    sweep = sys.modules.get("tests.torch.test_swap_sweep")
    outcomes = getattr(sweep, "OUTCOMES", None)
    if not outcomes:
        return
    counts: dict[str, list[str]] = {}
    for model_type, outcome in sorted(outcomes.items()):
        counts.setdefault(outcome, []).append(model_type)
    terminalreporter.section("swap sweep")
    terminalreporter.write_line(
        f"swap sweep: {len(outcomes)} of {len(sweep.MODEL_TYPES)} causal LM model types checked"
    )
    for outcome, names in sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        terminalreporter.write_line(f"  {len(names):3d}  {outcome}: {', '.join(names)}")
