"""Fuzz the attention-bias views of ``posenc.analysis`` (see ``contract.py``): valid calls are
checked against the slopes of the paper's rule and the buckets of exact integer comparisons."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import analysis

from .contract import DOUBTFUL, VALID, Args, choose, expect_array, run
from .profile import fuzz
from .test_bias import deberta_reference, paper_slopes, t5_reference
from .values import (
    NAN,
    Detachable,
    count,
    detachable,
    distance_setting,
    flag,
    name,
    plain,
    positive,
)

DISTANCES = choose(
    st.integers(1, 40),
    st.sampled_from([0, -1, 2**20 + 1, 2**63, 2.5, NAN, "8", None, True]),
)


def _tables(buckets: int) -> st.SearchStrategy[Any]:
    return st.integers(1, 3).flatmap(
        lambda h: st.lists(
            st.floats(-100, 100, allow_nan=False), min_size=buckets * h, max_size=buckets * h
        ).map(lambda v: np.array(v).reshape(buckets, h))
    )


BAD_TABLES = st.sampled_from(
    [None, "abc", np.zeros(4), np.zeros((3, 2)), np.zeros((32, 0)), np.full((32, 2), NAN),
     np.zeros((32, 2), dtype=complex), np.zeros((32, 2), dtype=bool),
     Detachable(np.full((32, 1), NAN))]
)  # fmt: skip


@fuzz()
@given(st.data())
def test_bias_profile(data: st.DataObject) -> None:
    a = Args(data)
    method = a.draw("method", name(("alibi", "t5")))
    distance = a.draw("distance", DISTANCES)
    if method == "t5":
        both = a.draw("bidirectional", flag(), optional=True)
        a.set("num_buckets", 32)
        a.set("max_distance", 128)
        table = a.draw("table", choose(detachable(_tables(32)), BAD_TABLES))
        if data.draw(st.booleans(), label="give heads"):
            shape = getattr(plain(table), "shape", (0, 0))
            heads_ok = shape[1] if a.kinds["table"] == VALID else 1
            a.draw("heads", choose(st.just(heads_ok), st.sampled_from([0, 2.5, "2", 99])))
    else:
        a.draw("heads", count(1, 40), optional=True)
        a.draw("max_bias", positive(0.5, 16.0, extra=(8.0,)), optional=True)

    def check(p: Any) -> None:
        n = 2 * int(distance) + 1
        rel = np.arange(-int(distance), int(distance) + 1)
        assert np.array_equal(expect_array(p.relative, (n,), np.int64), rel)
        if method == "alibi":
            heads = int(a.kwargs.get("heads") or 8)
            slopes = paper_slopes(heads, float(a.kwargs.get("max_bias") or 8.0))
            want = -slopes[:, None] * np.abs(rel)[None, :]
            got = expect_array(p.values, (heads, n), np.float64)
            np.testing.assert_allclose(got, want, rtol=4 * 2**-52, atol=0)
            assert p.buckets is None
        else:
            weights = np.asarray(plain(a.kwargs["table"]), dtype=np.float64)
            flag_ = True if both is None else bool(both)
            buckets = [t5_reference(int(r), flag_, 32, 128) for r in rel]
            assert p.buckets.tolist() == buckets
            assert np.array_equal(p.values, weights[buckets].T)
            assert p.slopes is None

    run(a.call("posenc.analysis.bias_profile", analysis.bias_profile, check))


def _valid(a: Args, key: str) -> Any:
    """The drawn value of ``key`` when valid; None when absent or refused anyway."""
    return a.kwargs.get(key) if a.kinds.get(key, VALID) == VALID else None


@fuzz()
@given(st.data())
def test_bucket_map(data: st.DataObject) -> None:
    a = Args(data)
    method = a.draw("method", name(("t5", "deberta")))
    distance = a.draw("distance", DISTANCES)
    if method == "deberta":
        a.draw("num_buckets", count(2, 300, none=True), optional=True)
        a.draw("max_distance", distance_setting(2, 1024, none=True), optional=True)
        mid = int(_valid(a, "num_buckets") or 256) // 2
        if int(_valid(a, "max_distance") or 512) - 1 <= mid:
            for key in ("num_buckets", "max_distance"):
                if a.kinds.get(key) == VALID:
                    a.kinds[key] = DOUBTFUL
        bad = st.sampled_from([False, "yes", None])
        a.draw("bidirectional", choose(st.just(True), bad), optional=True)
    else:
        both = a.draw("bidirectional", flag(), optional=True)
        a.draw("num_buckets", count(4, 64, none=True), optional=True)
        a.draw("max_distance", distance_setting(1, 400, none=True), optional=True)
        side = int(_valid(a, "num_buckets") or 32)
        side = side // 2 if a.kinds.get("bidirectional") != VALID or both in (None, True) else side
        if int(_valid(a, "max_distance") or 128) <= side // 2:
            for key in ("num_buckets", "max_distance"):
                if a.kinds.get(key) == VALID:
                    a.kinds[key] = DOUBTFUL

    def check(m: Any) -> None:
        rel = np.arange(-int(distance), int(distance) + 1)
        assert np.array_equal(m.relative, rel)
        expect_array(m.buckets, rel.shape, np.int64)
        if method == "t5":
            flag_ = True if both is None else bool(both)
            count_ = int(a.kwargs.get("num_buckets") or 32)
            far = int(a.kwargs.get("max_distance") or 128)
            want = [t5_reference(int(r), flag_, count_, far) for r in rel]
            assert m.exact_limit == (count_ // 2 if flag_ else count_) // 2 - 1
        else:
            size = int(a.kwargs.get("num_buckets") or 256)
            far = int(a.kwargs.get("max_distance") or 512)
            want = [deberta_reference(-int(r), size, far) for r in rel]
            assert m.exact_limit == size // 2
        assert m.buckets.tolist() == want

    run(a.call("posenc.analysis.bucket_map", analysis.bucket_map, check))


@fuzz()
@given(st.data())
def test_slope_table(data: st.DataObject) -> None:
    a = Args(data)
    heads = a.draw("heads", count(1, 70))
    a.draw("max_bias", positive(0.5, 16.0, extra=(8.0, 8, 16.0)), optional=True)

    def check(t: Any) -> None:
        max_bias = float(a.kwargs.get("max_bias") or 8.0)
        exact = paper_slopes(int(heads), max_bias)
        np.testing.assert_allclose(expect_array(t.exact, exact.shape, np.float64), exact,
                                   rtol=2**-52, atol=0)  # fmt: skip
        rules = ("bloom", "mpt", "falcon") if max_bias == 8.0 else ("mpt",)
        assert sorted(t.rules) == sorted(rules)
        for rule in rules:
            want = posenc.alibi_slopes(int(heads), max_bias=max_bias, convention=rule)
            assert np.array_equal(t.rules[rule], want.astype(np.float64))
            spacing = np.spacing(t.exact.astype(np.float32)).astype(np.float64)
            assert np.array_equal(t.ulps[rule], (t.rules[rule] - t.exact) / spacing)
            limit = 2**17 if rule == "falcon" else 12  # BLOOM: up to 11 float32 ulps
            assert np.abs(t.ulps[rule]).max() <= limit

    run(a.call("posenc.analysis.slope_table", analysis.slope_table, check))
