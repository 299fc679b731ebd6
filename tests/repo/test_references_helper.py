"""The reference-library rule: skip when missing, fail under CI."""

from __future__ import annotations

import pytest

from tests.references import require


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


def test_importorskip_of_a_missing_library_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    # every pytest.importorskip in tests/ and docs/ follows the rule (the root conftest.py)
    monkeypatch.setenv("CI", "true")
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception)) as raised:
        pytest.importorskip("posenc_no_such_reference", reason="a reference is not installed")
    assert raised.type is pytest.fail.Exception, f"skipped under CI: {raised.value}"
    assert "under CI" in str(raised.value)


def test_importorskip_of_a_missing_library_skips_outside_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        pytest.importorskip("posenc_no_such_reference", reason="a reference is not installed")


def test_an_optional_reference_outside_the_test_stack_still_skips_under_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")
    outside = pytest.importorskip.__globals__["OUTSIDE_THE_STACK"]  # the root conftest's
    monkeypatch.setitem(outside, "posenc_no_such_outside", "not in the test stack")
    with pytest.raises(pytest.skip.Exception):
        pytest.importorskip("posenc_no_such_outside", reason="it is not installed")
