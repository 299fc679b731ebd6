"""Fuzz the content-dependent relative terms' index maps of the NumPy core (see
``contract.py``): DeBERTa's relative positions and clamped rows, and the relative shift, each
checked against its formula on the arguments (the buckets by integer comparisons)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import posenc

from .contract import DOUBTFUL, Args, expect_array, run
from .profile import fuzz
from .test_bias import BUCKET_CONVENTIONS, deberta_reference
from .values import (
    NUMPY_RELATIVE,
    bias_meaning,
    bias_positions,
    count,
    distance_setting,
    name,
    plain,
)


def draw_bucketing(a: Args) -> tuple[int | None, int | None]:
    """``bucket_size`` and ``max_position`` (each may be left out); a valid value that the
    other setting makes refusable (one without the other, an empty log region) is doubtful."""
    size = a.draw("bucket_size", count(2, 64, none=True), optional=True)
    top = a.draw("max_position", distance_setting(2, 256, none=True), optional=True)
    given_size, given_top = size is not None, top is not None
    both_valid = all(a.kinds.get(k) == "valid" for k in ("bucket_size", "max_position"))
    empty_log = both_valid and int(top) - 1 <= int(size) // 2  # type: ignore[arg-type]
    if given_size != given_top or empty_log:
        for key in ("bucket_size", "max_position"):
            if a.kinds.get(key) == "valid":
                a.kinds[key] = DOUBTFUL
    a.draw("convention", name(BUCKET_CONVENTIONS), optional=True)
    return size, top


def deberta_map(query: Any, key: Any, size: Any, top: Any) -> np.ndarray:
    """The exact query − key map (bucketed when both settings are given)."""
    rel = bias_meaning(query)[:, None] - bias_meaning(key)[None, :]
    if size is None:
        return rel
    flat = [deberta_reference(int(r), int(size), int(top)) for r in rel.flat]
    return np.array(flat, dtype=np.int64).reshape(rel.shape)


def check_map(a: Args, out: Any, want: np.ndarray) -> None:
    """``out`` equals ``want``; transformers' float32 log may move a bucket edge by one."""
    got = expect_array(out, want.shape, np.int64)
    if a.kwargs.get("convention") == "transformers" and a.kwargs.get("bucket_size") is not None:
        assert np.all(np.abs(got - want) <= 1), (got, want)
    else:
        np.testing.assert_array_equal(got, want)


@fuzz()
@given(st.data())
def test_deberta_relative_positions(data: st.DataObject) -> None:
    a = Args(data)
    query = a.draw("query_positions", bias_positions(wrapped=True))
    key = a.draw("key_positions", bias_positions(wrapped=True))
    size, top = draw_bucketing(a)

    def check(out: np.ndarray) -> None:
        check_map(a, out, deberta_map(query, key, size, top))

    run(a.call("posenc.deberta_relative_positions", posenc.deberta_relative_positions, check))


@fuzz()
@given(st.data())
def test_disentangled_index(data: st.DataObject) -> None:
    a = Args(data)
    rel = a.draw("relative_positions", NUMPY_RELATIVE)
    span = a.draw("att_span", count(1, 64))

    def check(out: np.ndarray) -> None:
        values = np.asarray(plain(rel)).astype(np.int64)
        want = np.clip(values + int(span), 0, 2 * int(span) - 1)
        np.testing.assert_array_equal(expect_array(out, values.shape, np.int64), want)

    run(a.call("posenc.disentangled_index", posenc.disentangled_index, check))


@fuzz()
@given(st.data())
def test_relative_shift_index(data: st.DataObject) -> None:
    a = Args(data)
    q = a.draw("query_length", count(1, 12))
    k = a.draw("key_length", count(1, 12, none=True), optional=True)
    rows = a.draw("rows", count(1, 30, none=True), optional=True)
    few = a.clean and rows is not None and int(rows) < int(q) + int(q if k is None else k) - 1
    if few:
        a.kinds["rows"] = DOUBTFUL  # too few rows for the shift: refused by name

    def check(out: np.ndarray) -> None:
        keys = int(q if k is None else k)
        i, j = np.ogrid[: int(q), :keys]
        want = np.broadcast_to(int(q) - 1 - i + j, (int(q), keys))
        np.testing.assert_array_equal(expect_array(out, want.shape, np.int64), want)

    run(a.call("posenc.relative_shift_index", posenc.relative_shift_index, check))
