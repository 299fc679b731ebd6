"""posenc.analysis results: one serialiser for all of them, and no sentences in them.

Every result type's ``as_dict()`` is the shared serialiser's output, survives a JSON round trip
and gives back every number exactly; the English lives in :func:`posenc.describe`
(tests/core/test_describe.py), so no result carries a message or a note.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import posenc
from posenc import analysis
from posenc.analysis import (
    distinct_rows,
    identify,
    odd_exponent_table,
    precision_report,
    similarity,
    wavelengths,
)


def _results() -> list[object]:
    """One result of every type (several identifications: every kind of field value)."""
    report = precision_report(10**5, 8, "float16")  # an infinite error
    single = identify(posenc.sinusoidal([1000], 16))
    return [
        wavelengths(8),
        wavelengths(1, convention="tensor2tensor"),  # NaN shortest/longest, no ratio
        similarity([0.0, 0.5, 2.0], 8),
        similarity(3, 1, metric="cosine"),  # NaN in the matrix
        distinct_rows(2000, "float16", d_model=2),
        distinct_rows(10, "float32", d_model=8),  # no duplicate
        precision_report(1000, 8),
        report,
        report.methods[0],
        single,
        single.candidates[0],
        identify(np.zeros((8, 6))),
        identify(np.full((2, 3), np.nan)),  # NaN tolerance, no closest candidate
        identify(odd_exponent_table(20, 8)),
        identify(posenc.sinusoidal(np.arange(3, 200), 32).T),
    ]


def _assert_round_trips(value: object, data: object, where: str) -> None:
    """``data`` (after a JSON round trip) holds exactly the numbers and names of ``value``."""
    if hasattr(value, "__dataclass_fields__") or hasattr(value, "_asdict"):
        fields = (
            value._asdict() if hasattr(value, "_asdict") else {
                name: getattr(value, name) for name in value.__dataclass_fields__
            }
        )  # fmt: skip
        assert isinstance(data, dict), where
        assert list(data) == list(fields), where
        for name, item in fields.items():
            _assert_round_trips(item, data[name], f"{where}.{name}")
    elif isinstance(value, np.ndarray):
        back = np.array(data, dtype=value.dtype).reshape(value.shape)
        np.testing.assert_array_equal(back, value, err_msg=where)
    elif isinstance(value, (tuple, list)):
        assert isinstance(data, list), where
        assert len(data) == len(value), where
        for i, (item, got) in enumerate(zip(value, data, strict=True)):
            _assert_round_trips(item, got, f"{where}[{i}]")
    elif isinstance(value, (float, np.floating)) and math.isnan(value):
        assert isinstance(data, float), where
        assert math.isnan(data), where
    else:
        assert type(data) is type(value.item() if isinstance(value, np.generic) else value), where
        assert data == value, where


@pytest.mark.parametrize("index", range(15))
def test_as_dict_is_json_and_round_trips_every_number(index: int) -> None:
    from posenc.analysis._results import plain

    result = _results()[index]
    data = result.as_dict()  # type: ignore[attr-defined]
    text = json.dumps(data)
    # the one serialiser: as_dict() is plain(result), for every result type
    assert text == json.dumps(plain(result))
    _assert_round_trips(result, json.loads(text), type(result).__name__)


def test_results_hold_no_sentences() -> None:
    # the English is composed by posenc.describe, outside posenc.analysis
    types = [
        analysis.Wavelengths,
        analysis.Similarity,
        analysis.DistinctRows,
        analysis.MethodError,
        analysis.PrecisionReport,
        analysis.Candidate,
        analysis.Identification,
    ]
    for cls in types:
        fields = getattr(cls, "_fields", None) or tuple(cls.__dataclass_fields__)
        assert not {"message", "note", "text", "description"} & set(fields), cls
    assert {type(r) for r in _results()} == set(types)

    def strings(value: object) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [s for v in value.values() for s in strings(v)]
        if isinstance(value, list):
            return [s for v in value for s in strings(v)]
        return []

    for result in _results():
        for text in strings(result.as_dict()):  # type: ignore[attr-defined]
            assert len(text) <= 24, text  # names and identifiers, not sentences
