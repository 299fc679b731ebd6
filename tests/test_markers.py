"""The ``sweep`` marker: its tests run only when asked for (``-m sweep`` or ``POSENC_SWEEP=1``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from .conftest import _sweep_asked_for


def _config(markexpr: str) -> pytest.Config:
    return SimpleNamespace(option=SimpleNamespace(markexpr=markexpr))  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("markexpr", "env", "asked"),
    [
        ("", None, False),
        ("slow", None, False),
        ("sweep", None, True),
        ("sweep or slow", None, True),
        ("not sweep", None, True),  # -m itself leaves them out
        ("", "1", True),
        ("", "0", False),
    ],
)
def test_sweep_is_run_only_when_asked_for(
    markexpr: str, env: str | None, asked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv("POSENC_SWEEP", raising=False)
    else:
        monkeypatch.setenv("POSENC_SWEEP", env)
    assert _sweep_asked_for(_config(markexpr)) is asked


def test_this_run_holds_no_sweep_test_unless_asked_for(request: pytest.FixtureRequest) -> None:
    if _sweep_asked_for(request.config):
        pytest.skip("the sweep was asked for")
    swept = [i.nodeid for i in request.session.items if i.get_closest_marker("sweep")]
    assert swept == []
