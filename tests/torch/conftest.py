"""The torch tests' terminal summaries, and the reference helpers several torch test files
import (the fixtures they share are in tests/conftest.py).

Helpers: ``core`` (the NumPy core's sinusoidal table as a tensor), ``round_once`` (float64
rounded once to float16/bfloat16, written from the bit patterns, never ``cast_exact`` or
``Tensor.to``), ``same_bits`` and ``assert_same``. torch is imported only if installed: the
test files that call the helpers skip without it.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import posenc
from tests import summaries
from tests.tolerance import assert_close_ulp

try:
    import torch
except ImportError:  # the test files that use the helpers below skip without torch
    torch = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under pytest-xdist, a worker's teardown report carries what the sweeps found since its
    last report (tests/summaries.py)."""
    outcome = yield
    if call.when == "teardown" and summaries.IN_WORKER:
        text = summaries.changes()
        if text is not None:
            outcome.get_result().user_properties.append((summaries.PROPERTY, text))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The controller of pytest-xdist merges what the workers' reports carry."""
    for name, value in report.user_properties:
        if name == summaries.PROPERTY and not summaries.IN_WORKER:
            summaries.merge(value)


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
    counts: dict[str, list[str]] = {}
    for model_type, outcome in sorted(outcomes.items()):
        counts.setdefault(outcome, []).append(model_type)
    terminalreporter.section("swap sweep")
    terminalreporter.write_line(
        f"swap sweep: {len(outcomes)} of {len(sweep.MODEL_TYPES)} causal LM model types checked"
    )
    for outcome, names in sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        terminalreporter.write_line(f"  {len(names):3d}  {outcome}: {', '.join(names)}")
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
    counts: dict[str, list[str]] = {}
    for key, outcome in sorted(outcomes.items()):
        counts.setdefault(outcome, []).append(key)
    terminalreporter.write_line(
        f"swap sweep in 16 bits: {len(outcomes)} runs (bfloat16 and float16)"
    )
    for outcome, names in sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        terminalreporter.write_line(f"  {len(names):3d}  {outcome}: {', '.join(names)}")
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


def core(positions, d_model, *, dtype=np.float32, **kwargs) -> torch.Tensor:
    """The NumPy core's table as a tensor."""
    return torch.from_numpy(posenc.sinusoidal(positions, d_model, dtype=dtype, **kwargs))


def round_once(table: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Round float64 ``table`` to float16/bfloat16 once, to nearest with ties to even.

    ``Tensor.to`` rounds via float32 and may be one ulp off, but it is never further than one
    ulp from the correct result, so the correct result is among the three bit patterns around
    it. Pick the one closest to the float64 value (distances are exact in float64) and, on a
    tie, the one with an even bit pattern. Works on magnitudes, then restores the sign.
    """
    assert table.dtype == torch.float64
    magnitude = table.abs()
    bits = magnitude.to(dtype).view(torch.int16).to(torch.int32)
    candidates = torch.stack([(bits - 1).clamp(min=0), bits, bits + 1], dim=-1)
    values = candidates.to(torch.int16).view(dtype).to(torch.float64)
    distance = (values - magnitude.unsqueeze(-1)).abs()
    closest = distance == distance.min(dim=-1, keepdim=True).values
    score = 2 * closest.to(torch.int32) + (closest & (candidates % 2 == 0)).to(torch.int32)
    chosen = candidates.gather(-1, score.argmax(dim=-1, keepdim=True)).squeeze(-1)
    chosen = torch.where(torch.signbit(table), chosen | 0x8000, chosen)
    return chosen.to(torch.int16).view(dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality of two float16/bfloat16 tensors (same dtype and shape)."""
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    return torch.equal(a.view(torch.int16), b.view(torch.int16))


def assert_same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Bitwise equal, except float64, where NumPy's and torch's sin/cos may differ by an ulp."""
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if actual.dtype == torch.float64:
        assert_close_ulp(actual, expected, ulps=2)  # each sin/cos within an ulp of exact
    else:
        assert torch.equal(actual, expected)
