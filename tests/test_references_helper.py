"""The reference-library rule: skip when missing, fail under CI."""

from __future__ import annotations

import pytest

from .references import require


def test_a_present_library_is_returned() -> None:
    assert require("numpy").__name__ == "numpy"


def test_a_missing_library_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        require("posenc_no_such_reference")


def test_a_missing_library_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must have"):
        require("posenc_no_such_reference")
