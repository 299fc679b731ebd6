"""Markers choose what each make target runs: the ``sweep`` tests run only when asked for
(``-m sweep`` or ``POSENC_SWEEP=1``), and the folder markers (``tests/folders.py``) reach every
test below the folder that sets them, whatever its file is called."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import ASKED_BY, _asked_for
from tests.folders import folders_marked, marks_below

TESTS = Path(__file__).resolve().parents[1]
#: folder -> the markers its conftest.py sets (what make test-compat / test-kernels / check select)
FOLDER_MARKS = {
    "references": {"kernel_sets"},
    "references/hf": {"kernel_sets", "compat"},
    "torch/hf": {"kernel_sets", "compat"},
    "torch/kernels": {"kernel_sets"},
    "explore/browser": {"browser"},
}


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


def _marks(item: pytest.Item) -> set[str]:
    return {mark.name for mark in item.iter_markers()}


def test_every_test_in_a_marked_folder_carries_its_markers(request: pytest.FixtureRequest) -> None:
    """Each item of this run below a folder of ``FOLDER_MARKS`` carries that folder's markers,
    and no item elsewhere carries ``compat`` or ``kernel_sets`` (bar doc pages that use
    transformers: ``compat``)."""
    wrong = []
    for item in request.session.items:
        path = Path(item.path).resolve()
        if TESTS not in path.parents:
            continue
        folder = path.relative_to(TESTS).parent.as_posix()
        expected: set[str] = set()
        for marked, names in FOLDER_MARKS.items():
            if folder == marked or folder.startswith(marked + "/"):
                expected |= names
        found = _marks(item) & {"kernel_sets", "compat", "browser"}
        if found != expected:
            wrong.append(f"{item.nodeid}: {sorted(found)}, expected {sorted(expected)}")
    assert wrong == []


@pytest.mark.parametrize("folder", sorted(FOLDER_MARKS))
def test_each_marked_folder_sets_its_markers_in_its_conftest(folder: str) -> None:
    conftest = TESTS / folder / "conftest.py"
    text = conftest.read_text("utf-8")
    assert "marks_below(__file__" in text, conftest
    own = FOLDER_MARKS[folder] - set().union(
        *(n for f, n in FOLDER_MARKS.items() if folder.startswith(f + "/"))
    )
    for name in own:
        assert f'"{name}"' in text, (conftest, name)


def test_marks_below_marks_only_below_its_folder(tmp_path: Path) -> None:
    inside, outside = tmp_path / "a" / "b" / "test_x.py", tmp_path / "c" / "test_y.py"
    items = [SimpleNamespace(path=p, marks=[]) for p in (inside, outside)]
    for item in items:
        item.add_marker = item.marks.append  # type: ignore[attr-defined]
    hook = marks_below(str(tmp_path / "a" / "conftest.py"), "compat")
    hook(items)  # type: ignore[arg-type]
    assert [item.marks for item in items] == [["compat"], []]


def test_slow_tests_are_handed_out_first_in_their_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-xdist hands tests out in collection order: the slow ones go first."""
    from tests.conftest import pytest_collection_modifyitems

    class Item(SimpleNamespace):
        def get_closest_marker(self, name: str) -> object:
            return name if name in self.marks else None

    monkeypatch.delenv(ASKED_BY["sweep"], raising=False)
    items = [Item(name=n, marks=m) for n, m in [("a", ()), ("b", ("slow",)), ("c", ()),
                                                 ("d", ("slow",)), ("e", ("sweep",))]]  # fmt: skip
    deselected: list[object] = []
    config = SimpleNamespace(
        option=SimpleNamespace(markexpr=""),
        hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)),
    )
    pytest_collection_modifyitems(config, items)  # type: ignore[arg-type]
    assert [item.name for item in items] == ["b", "d", "a", "c"]
    assert [item.name for item in deselected] == ["e"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("marker", ["kernel_sets", "compat", "browser"])
def test_folders_marked_are_the_outermost_folders_that_set_the_marker(marker: str) -> None:
    """What ``make test-kernels`` collects (``python -m tests.folders kernel_sets``): the
    folders of ``FOLDER_MARKS`` with the marker, a subfolder inside its parent's."""
    marked = sorted(f for f, names in FOLDER_MARKS.items() if marker in names)
    outermost = [f for f in marked if not any(f.startswith(o + "/") for o in marked)]
    assert folders_marked(marker) == [f"tests/{f}" for f in outermost]


def test_folders_marked_reads_only_marks_below_calls(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    (tmp_path / "a" / "conftest.py").write_text('x = marks_below(__file__, "kernel_sets")\n')
    (tmp_path / "a" / "b" / "conftest.py").write_text('y = marks_below(__file__, "kernel_sets")\n')
    (tmp_path / "c" / "conftest.py").write_text('# "kernel_sets" in a comment only\n')
    assert folders_marked("kernel_sets", tmp_path) == [f"{tmp_path.name}/a"]
