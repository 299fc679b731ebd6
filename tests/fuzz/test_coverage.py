"""Every public callable is fuzzed: a new public function without a fuzz test fails here.

The fuzz tests label each call they make (``Args.call("posenc.sinusoidal", ...)``,
``Args.build("hf.MarianPositions", ...)``, ``Call(...)``, and in a test over both front-ends
(``@each_frontend``) ``frontend.label("sinusoidal")``: ``posenc.sinusoidal`` and
``posenc.torch.sinusoidal``); this test reads those labels from the fuzz sources and asks for
one per public callable of ``posenc``, ``posenc.torch``, ``posenc.torch.hf`` and
``posenc.analysis``, except the names below, which are not called with arguments to fuzz.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from .frontends import NumpyFrontend, TorchFrontend

HERE = Path(__file__).parent

#: the label prefixes that name each public module's callables
PREFIXES = {
    "posenc": ("posenc.",),
    "posenc.torch": ("posenc.torch.",),
    "posenc.torch.hf": ("hf.", "posenc.torch.hf."),
    "posenc.analysis": ("posenc.analysis.",),
}

_CONSTANT = "a constant, not a callable"
_TYPE = "a type alias (Literal), not a callable"
_RESULT = "a result type that the library returns; its fields are checked where it is returned"
_MODULE = "a submodule; its own __all__ is checked"

#: public names that are not callables taking arguments to fuzz, and why
NOT_FUZZED = {
    "posenc": {
        "CONVENTIONS": _CONSTANT,
        "GRID_CONVENTIONS": _CONSTANT,
        "ROPE_TYPES": _CONSTANT,
        "__version__": _CONSTANT,
        "AxisOrder": _TYPE,
        "AxisSchedule": _TYPE,
        "ConventionName": _TYPE,
        "GridConventionName": _TYPE,
        "PairLayout": _TYPE,
        "BIAS_CONVENTIONS": _CONSTANT,
        "AlibiConvention": _TYPE,
        "AlibiForm": _TYPE,
        "BucketConvention": _TYPE,
        "KerpleKind": _TYPE,
        "RelativeSign": _TYPE,
        "TemperatureKind": _TYPE,
        "AttentionTemperature": _RESULT,
        "MultiAxisFrequencies": _RESULT,
        "MultimodalPositions": _RESULT,
        "RopeLayer": _RESULT,
        "RopePlan": _RESULT,
        "analysis": _MODULE,
    },
    "posenc.torch": {"hf": _MODULE},
    "posenc.torch.hf": {"SwapReport": _RESULT},
    "posenc.analysis": {
        "DEFAULT_BASES": _CONSTANT,
        "MAX_OFFSET": _CONSTANT,
        "MAX_OFFSET_LIMIT": _CONSTANT,
        "ODD_EXPONENT_BUG": _CONSTANT,
        "BiasProfile": _RESULT,
        "BucketMap": _RESULT,
        "Candidate": _RESULT,
        "DistinctRows": _RESULT,
        "Identification": _RESULT,
        "PrecisionReport": _RESULT,
        "Similarity": _RESULT,
        "SlopeTable": _RESULT,
        "Wavelengths": _RESULT,
        "MethodError": "an exception type, raised by identify",
    },
}


#: the prefixes of ``frontend.label(name)`` in a test over both front-ends
FRONTEND_PREFIXES = (NumpyFrontend.prefix, TorchFrontend.prefix)


def call_labels(sources: list[Path]) -> set[str]:
    """The labels of the calls the fuzz tests make: the first argument of ``Call(...)``,
    ``<args>.call(...)`` and ``<args>.build(...)`` when it is a string, and
    ``<frontend>.label(name)`` in a test decorated ``@each_frontend`` (the label in each
    front-end)."""
    labels = set()
    for path in sources:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            named = (isinstance(func, ast.Name) and func.id == "Call") or (
                isinstance(func, ast.Attribute) and func.attr in ("call", "build")
            )
            first = node.args[0]
            if named and isinstance(first, ast.Constant) and isinstance(first.value, str):
                labels.add(first.value)
        for test in ast.walk(tree):
            if isinstance(test, ast.FunctionDef) and _over_each_frontend(test):
                for name in _frontend_labels(test):
                    labels.update(f"{prefix}.{name}" for prefix in FRONTEND_PREFIXES)
    return labels


def _over_each_frontend(test: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "each_frontend" for d in test.decorator_list)


def _frontend_labels(test: ast.FunctionDef) -> list[str]:
    """The names in ``<x>.label("name")`` calls in ``test``."""
    return [
        node.args[0].value
        for node in ast.walk(test)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "label"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]


def unfuzzed(module_name: str, labels: set[str]) -> list[str]:
    """Public names of ``module_name`` that no fuzz call label names."""
    module = importlib.import_module(module_name)
    skip = NOT_FUZZED.get(module_name, {})
    prefixes = PREFIXES[module_name]
    return [
        name
        for name in module.__all__
        if name not in skip and not any(prefix + name in labels for prefix in prefixes)
    ]


@pytest.mark.parametrize("module_name", sorted(PREFIXES))
def test_every_public_callable_is_fuzzed(module_name: str) -> None:
    if module_name.startswith("posenc.torch"):
        pytest.importorskip("torch")
    labels = call_labels(sorted(HERE.glob("test_*.py")))
    missing = unfuzzed(module_name, labels)
    assert not missing, (
        f"{module_name}: no fuzz test calls {missing} (label a call "
        f"{PREFIXES[module_name][0]}<name> in tests/fuzz, or list the name in NOT_FUZZED "
        "with the reason)"
    )


@pytest.mark.parametrize("module_name", sorted(NOT_FUZZED))
def test_exclusions_are_public_names(module_name: str) -> None:
    if module_name.startswith("posenc.torch"):
        pytest.importorskip("torch")
    stale = set(NOT_FUZZED[module_name]) - set(importlib.import_module(module_name).__all__)
    assert not stale, f"NOT_FUZZED lists names {module_name} no longer has: {sorted(stale)}"


def test_a_public_function_without_a_fuzz_label_is_found(tmp_path: Path) -> None:
    source = tmp_path / "test_x.py"
    source.write_text(
        'run(a.call("posenc.sinusoidal", f, check))\nCall("hf.fake", f, {})\n'
        'a.build("posenc.torch.RotaryEmbedding", f)\n'
    )
    labels = call_labels([source])
    assert labels == {"posenc.sinusoidal", "hf.fake", "posenc.torch.RotaryEmbedding"}
    assert "frequencies" in unfuzzed("posenc", labels)
    assert "sinusoidal" not in unfuzzed("posenc", labels)


def test_a_label_over_both_front_ends_counts_in_each(tmp_path: Path) -> None:
    source = tmp_path / "test_x.py"
    source.write_text(
        "@each_frontend\n"
        "def test_a(frontend):\n"
        '    run(a.call(frontend.label("rotary_cos_sin"), f, check))\n'
        "def test_b(frontend):\n"  # not over both front-ends: no label
        '    run(a.call(frontend.label("apply_rotary"), f, check))\n'
    )
    labels = call_labels([source])
    assert labels == {"posenc.rotary_cos_sin", "posenc.torch.rotary_cos_sin"}
    assert "apply_rotary" in unfuzzed("posenc", labels)
