"""The ``sweep`` and ``kernel_sets`` markers: their tests run only when asked for (``-m sweep``
or ``POSENC_SWEEP=1``; ``-m kernel_sets`` or ``POSENC_KERNEL_SETS=1``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from .conftest import ASKED_BY, _asked_for


def _config(markexpr: str) -> pytest.Config:
    return SimpleNamespace(option=SimpleNamespace(markexpr=markexpr))  # type: ignore[return-value]


@pytest.mark.parametrize("marker", sorted(ASKED_BY))
@pytest.mark.parametrize(
    ("markexpr", "env", "asked"),
    [
        ("", None, False),
        ("slow", None, False),
        ("{marker}", None, True),
        ("{marker} or slow", None, True),
        ("not {marker}", None, True),  # -m itself leaves them out
        ("", "1", True),
        ("", "0", False),
    ],
)
def test_marked_tests_run_only_when_asked_for(
    marker: str, markexpr: str, env: str | None, asked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv(ASKED_BY[marker], raising=False)
    else:
        monkeypatch.setenv(ASKED_BY[marker], env)
    assert _asked_for(_config(markexpr.format(marker=marker)), marker) is asked


@pytest.mark.parametrize("marker", sorted(ASKED_BY))
def test_this_run_holds_no_marked_test_unless_asked_for(
    marker: str, request: pytest.FixtureRequest
) -> None:
    if _asked_for(request.config, marker):
        pytest.skip(f"the {marker} tests were asked for")
    held = [i.nodeid for i in request.session.items if i.get_closest_marker(marker)]
    assert held == []
