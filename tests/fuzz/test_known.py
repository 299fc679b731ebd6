"""Every known contract violation still happens: strict xfails, one per ``known.KNOWN`` entry.

A fix turns its test into XPASS(strict), a failure that says: remove the entry from
``tests/fuzz/known.py``.
"""

from __future__ import annotations

import importlib.util

import pytest

from .contract import Violation, run
from .known import KNOWN, find

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _param(entry):
    marks = (
        []
        if entry.fixed
        else [pytest.mark.xfail(strict=True, raises=Violation, reason=entry.reason)]
    )
    if entry.needs_torch and not HAS_TORCH:
        marks.append(pytest.mark.skip(reason="needs torch"))
    return pytest.param(entry, id=entry.id, marks=marks)


def _violation(call) -> Violation | None:
    try:
        run(call)
    except Violation as violation:
        return violation
    return None


@pytest.mark.parametrize("entry", [_param(e) for e in KNOWN])
def test_known_failure_still_happens(entry) -> None:
    violation = _violation(entry.reproducer())
    if violation is None:
        return  # the contract holds: XPASS(strict), remove the entry
    assert find(violation) is entry, f"{entry.id}: the reproducer matches {find(violation)}"
    raise violation
