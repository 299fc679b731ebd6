"""Fuzz ``posenc.analysis``: properties, precision, identification (see ``contract.py``)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import posenc
from posenc import analysis
from tests.tolerance import assert_close_ulp

from .checks import check_rows, exact
from .contract import DOUBTFUL, VALID, Args, choose, expect_array, run
from .profile import fuzz
from .reference import (
    EPS,
    Channel,
    exact_omega,
    exact_rows,
    round_bfloat16,
    sinusoid_channels,
)
from .values import (
    BASES,
    CONVENTIONS,
    HUGE,
    NAN,
    WRONG_TYPES,
    count,
    meaning,
    name,
    positions,
    positive,
)

TABLE_DTYPES = st.sampled_from(["float16", "float32", "float64", "bfloat16", np.float32])
BAD_TABLES = [
    None,
    "abc",
    [["a"]],
    np.zeros(4),
    np.zeros((2, 2, 2)),
    np.zeros((0, 4)),
    np.zeros((3, 0)),
    np.zeros((3, 4), dtype=complex),
    np.zeros((2, 2), dtype=bool),
    np.full((3, 4), NAN),
    np.array([[1.0, np.inf]]),
    {"a": 1},
]


#: Not tables at all (identify reports NaN and inf tables as an outcome, "non_finite").
NOT_TABLES = [
    t
    for t in BAD_TABLES
    if not (
        isinstance(t, np.ndarray) and t.dtype.kind == "f" and t.size and not np.all(np.isfinite(t))
    )
]


def sinusoid_tables(min_rows: int = 1):
    """(table, start, d, base, convention): rows of consecutive positions."""
    return st.builds(
        lambda start, rows, d, base, conv, dtype: (
            posenc.sinusoidal(
                np.arange(start, start + rows), d, base=base, convention=conv, dtype=dtype
            ),
            start,
            d,
            base,
            conv,
        ),
        st.integers(0, 2000),
        st.integers(min_rows, 24),
        st.integers(1, 16),
        st.sampled_from([10000.0, 100.0, 500000.0, 2.5]),
        st.sampled_from(CONVENTIONS),
        st.sampled_from([np.float32, np.float64]),
    )


@fuzz(scale=0.5)
@given(st.data())
def test_wavelengths(data: st.DataObject) -> None:
    a = Args(data)
    d = a.draw("d_model", count(1, 64))
    base = a.draw("base", BASES, optional=True)
    conv = a.draw("convention", name(CONVENTIONS), optional=True)

    def check(w):
        omega = posenc.frequencies(int(d), base=float(base or 10000.0), convention=conv or "paper")
        assert np.array_equal(w.frequencies, omega)
        expect_array(w.wavelengths, omega.shape, np.float64)
        assert np.allclose(w.wavelengths * omega, 2 * np.pi, rtol=4 * EPS, atol=0)
        if omega.size:
            assert w.shortest == w.wavelengths.min()
            assert w.longest == w.wavelengths.max()
        assert w.ratio is None or (math.isfinite(w.ratio) and w.ratio > 0)

    run(a.call("posenc.analysis.wavelengths", analysis.wavelengths, check))


@fuzz()
@given(st.data())
def test_shift_matrix(data: st.DataObject) -> None:
    a = Args(data)
    k = a.draw(
        "k",
        choose(
            st.integers(-(10**6), 10**6) | st.floats(-1e3, 1e3),
            st.sampled_from(
                [*WRONG_TYPES, NAN, math.inf, 2**53 + 1, 2**63, 2**64, np.uint64(2**64 - 1)]
            ),
        ),
    )
    d = a.draw("d_model", count(1, 24))
    base = a.draw("base", BASES, optional=True)
    conv = a.draw("convention", name(CONVENTIONS), optional=True)
    unpaired = a.draw("unpaired", name(("raise", "drop")), optional=True)
    c = conv or "paper"
    odd = a.kinds["d_model"] == VALID and int(d) % 2 and c != "tensor2tensor"
    if odd and unpaired != "drop" and a.kinds.get("unpaired", VALID) == VALID:
        a.kinds["unpaired"] = DOUBTFUL  # documented: no exact map for the unpaired sine

    def check(m):
        d_, b = int(d), float(base or 10000.0)
        expect_array(m, (d_, d_), np.float64)
        channels = sinusoid_channels(d_, b, c)
        p = Fraction(37)
        before, _ = exact_rows([(p,)], channels)
        after, err = exact_rows([(p + exact(k),)], channels)
        paired = [i for i in range(d_) if channels[i].kind != "zero"]
        if d_ % 2 and c != "tensor2tensor":
            paired = paired[:-1] if c == "paper" else [i for i in paired if i != (d_ - 1) // 2]
        got = (m @ before[0])[paired]
        slack = 1e-12 + abs(float(k)) * (abs(math.log(b)) + 8) * EPS * 4 + float(np.max(err))
        assert np.allclose(got, after[0][paired], rtol=0, atol=slack), "M_k PE[p] != PE[p + k]"
        block = m[np.ix_(paired, paired)]
        # cos² + sin² of float64 angles: 2 ulps of 1
        assert_close_ulp(block @ block.T, np.eye(len(paired)), ulps=2, what="M_k M_kᵀ")

    run(
        a.call(
            "posenc.analysis.shift_matrix",
            analysis.shift_matrix,
            check,
            aliases={"unpaired": ("unpaired", "d_model")},
        )
    )


@fuzz()
@given(st.data())
def test_check_shift(data: st.DataObject) -> None:
    a = Args(data)
    drawn = data.draw(sinusoid_tables(2))
    table, _, _, b, conv = drawn
    a.draw("table", choose(st.just(table), st.sampled_from(BAD_TABLES)))
    rows = table.shape[0]
    a.draw(
        "k",
        choose(
            st.integers(-rows + 1, rows - 1),
            st.sampled_from([rows, -rows, 2**63, 1.0, "1", None, True, NAN]),
        ),
    )
    a.set("base", b)
    a.set("convention", conv)

    def check(residual):
        assert isinstance(residual, float)
        assert math.isfinite(residual)
        limit = 4e-7 if table.dtype == np.float32 else 1e-11
        assert 0 <= residual <= limit, f"residual {residual} of a correct table"

    run(a.call("posenc.analysis.check_shift", analysis.check_shift, check))


@fuzz()
@given(st.data())
def test_similarity(data: st.DataObject) -> None:
    a = Args(data)
    pos = a.draw(
        "positions",
        choose(
            st.integers(0, 24)
            | st.lists(st.integers(-(10**6), 10**6) | st.floats(-1e6, 1e6), max_size=6),
            st.sampled_from([5000, np.zeros((2, 2)), [NAN], [2**53 + 1], "abc", None, -1, *HUGE]),
        ),
    )
    d = a.draw("d_model", count(1, 24))
    base = a.draw("base", BASES, optional=True)
    conv = a.draw("convention", name(CONVENTIONS), optional=True)
    metric = a.draw("metric", name(("dot", "cosine")), optional=True)

    def check(s):
        _, flat = meaning(pos)
        n = len(flat)
        expect_array(s.positions, (n,), s.positions.dtype)
        assert s.matrix.shape == (n, n)
        assert s.matrix.dtype == np.float64
        channels = sinusoid_channels(int(d), float(base or 10000.0), conv or "paper")
        table, err = exact_rows([(exact(p),) for p in flat], channels)
        want = table @ table.T
        if metric == "cosine":
            norms = np.sqrt(np.sum(table * table, axis=1))
            zero = ~np.any(table, axis=1)
            assert np.all(np.isnan(s.matrix[zero])), "cosine of a zero row is not NaN"
            tiny = np.logical_or.outer(norms < 1e-150, norms < 1e-150)  # norms underflow
            want = np.where(tiny, s.matrix, want / np.where(tiny, 1.0, np.outer(norms, norms)))
        elif n:
            assert np.all(np.isfinite(s.matrix))
        slack = 1e-9 + int(d) * float(np.max(err, initial=0.0)) * 4
        assert np.allclose(s.matrix, want, rtol=0, atol=slack, equal_nan=True), "matrix"
        dist = np.abs(
            np.subtract.outer(np.asarray(flat, dtype=object), np.asarray(flat, dtype=object))
        )
        keys = sorted(set(dist.ravel().tolist()))
        assert [float(v) for v in s.distances] == [float(v) for v in keys], "distances"

    run(a.call("posenc.analysis.similarity", analysis.similarity, check))


def round_rows(table: np.ndarray, dtype: str) -> list[tuple]:
    """Rows rounded once to ``dtype`` (bfloat16 by scaling to its spacing), -0.0 as 0.0."""
    x = np.asarray(table, dtype=np.float64)
    r = round_bfloat16(x) if dtype == "bfloat16" else x.astype(dtype).astype(np.float64)
    return [tuple(v + 0.0 for v in row) for row in r.tolist()]


@fuzz()
@given(st.data())
def test_distinct_rows(data: st.DataObject) -> None:
    a = Args(data)
    given_table = hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 6), st.integers(1, 4)),
        elements=st.sampled_from([0.0, -0.0, 1.0, 1.0 + 2**-9, 1e-3, 7e4]),
    )
    source = a.draw(
        "table_or_length",
        choose(st.integers(1, 300) | given_table, st.sampled_from([*BAD_TABLES, 0, -3, *HUGE])),
    )
    is_length = isinstance(source, int | np.integer) and not isinstance(source, bool)
    dtype = a.draw(
        "dtype", choose(TABLE_DTYPES, st.sampled_from(["int8", None, 3, "bf", [1]])), optional=True
    )
    a.draw("d_model", count(1, 8))
    if not is_length and a.kinds["d_model"] == VALID and a.kinds["table_or_length"] == VALID:
        a.set("d_model", np.asarray(source).shape[1])
    base = a.draw("base", BASES, optional=True) if is_length else None
    if dtype is None and "dtype" in a.kwargs:
        a.kinds["dtype"] = DOUBTFUL

    def check(r):
        table = (
            posenc.sinusoidal(
                int(source), int(a.kwargs["d_model"]), base=float(base or 10000.0), dtype=np.float64
            )
            if is_length
            else np.asarray(source, dtype=np.float64)
        )
        if "dtype" not in a.kwargs:
            name_ = "float32"
        elif isinstance(dtype, str) and dtype.lower() in ("bfloat16", "bf16"):
            name_ = "bfloat16"
        else:
            name_ = np.dtype(dtype).name
        rows = round_rows(table, name_)
        firsts = {}
        duplicate = None
        for i, row in enumerate(rows):
            if row in firsts and duplicate is None:
                duplicate = (firsts[row], i)
            firsts.setdefault(row, i)
        assert (r.rows, r.distinct, r.first_duplicate) == (len(rows), len(firsts), duplicate)

    run(a.call("posenc.analysis.distinct_rows", analysis.distinct_rows, check))


@fuzz(scale=0.5)
@given(st.data())
def test_precision_report(data: st.DataObject) -> None:
    a = Args(data)
    top = a.draw("max_position", count(1, 10**7, huge="doubtful"))
    d = a.draw("d_model", count(1, 12))
    a.draw("dtype", choose(TABLE_DTYPES, st.sampled_from(["int8", 3, [1]])), optional=True)
    base = a.draw("base", positive(2.0, 1e5, extra=(10000.0,)), optional=True)
    conv = a.draw("convention", name(CONVENTIONS), optional=True)
    a.draw("samples", count(2, 64), optional=True)
    a.draw("seed", count(0, 2**64, huge="valid"), optional=True)
    if a.kinds["d_model"] == VALID and int(d) == 1 and conv == "tensor2tensor":
        a.kinds["d_model"] = DOUBTFUL  # documented: nothing to measure

    def check(rep):
        top_ = int(top)
        assert all(0 <= p < top_ for p in rep.positions)
        assert list(rep.positions) == sorted(set(rep.positions))
        names = [m.name for m in rep.methods]
        assert names[:2] == ["posenc", "float32 recipe"]
        ours = rep.method("posenc").max_error
        b = float(base or 10000.0)
        angle = top_ * (abs(math.log(b)) + 8) * EPS * 4
        limit = {"float32": 1e-7, "float64": 4 * EPS, "float16": 2.0**-10, "bfloat16": 2.0**-7}
        name_ = rep.dtype
        assert math.isfinite(rep.reference_error)
        assert ours <= max(limit[name_], 2.0**-24 + angle), f"posenc max error {ours}"

    run(a.call("posenc.analysis.precision_report", analysis.precision_report, check))


@fuzz(scale=0.5)
@given(st.data())
def test_identify(data: st.DataObject) -> None:
    a = Args(data)
    drawn = data.draw(sinusoid_tables(4))
    table = a.draw("table", choose(st.just(drawn[0]), st.sampled_from(NOT_TABLES)))
    a.draw(
        "bases",
        choose(
            st.sampled_from([None, [10000.0], (100.0, 2.5)]),
            st.sampled_from(["abc", [NAN], [-1.0], 5, [None], [True]]),
        ),
        optional=True,
    )
    a.draw(
        "tolerance",
        choose(
            st.sampled_from([None, 1e-3, 1e-6]),
            st.sampled_from([NAN, -1.0, 0.0, "x", True, math.inf]),
        ),
        optional=True,
    )
    a.draw(
        "max_offset",
        choose(
            st.integers(2001, 2**20),
            st.sampled_from([0, -1, 2.5, "9", None, True]),
            # far above the default: exact up to MAX_OFFSET_LIMIT = 2**24, refused beyond
            st.sampled_from([2**21, 2**24, 2**24 + 1, 2**40, 2**64]),
        ),
        optional=True,
    )
    tolerance = a.kwargs.get("tolerance")

    def check(r):
        start, rows = drawn[1], table.shape[0]
        assert r.matched, f"a {drawn[4]} table (base {drawn[3]}, start {start}) not matched"
        unit = 2.0**-24 if table.dtype == np.float32 else 2.0**-53
        limit = tolerance if tolerance is not None else unit + (start + rows) * 2.0**-50
        assert r.residual <= limit * (1 + 1e-9), f"residual {r.residual} > {limit}"
        if None in (r.convention, r.base, r.offset):
            return
        rebuilt = posenc.sinusoidal(
            np.arange(r.offset, r.offset + rows),
            table.shape[1],
            base=r.base,
            convention=r.convention,
            dtype=np.float64,
        )
        worst = float(np.max(np.abs(rebuilt - table)))
        assert worst <= r.residual + 1e-12, f"identified table differs by {worst}"

    run(a.call("posenc.analysis.identify", analysis.identify, check))


@fuzz(scale=0.5)
@given(st.data())
def test_odd_exponent_table(data: st.DataObject) -> None:
    a = Args(data)
    pos = a.draw("positions", positions())
    d = a.draw("d_model", count(1, 24))
    base = a.draw("base", BASES, optional=True)
    a.draw(
        "dtype",
        choose(
            st.sampled_from([np.float32, np.float16, np.float64]),
            st.sampled_from(["int8", "bfloat16", 3]),
        ),
        optional=True,
    )

    def check(out):
        shape, flat = meaning(pos)
        dtype = np.dtype(a.kwargs.get("dtype", np.float32))
        expect_array(out, (*shape, int(d)), dtype)
        b = float(base or 10000.0)
        channels = []
        for j in range(int(d)):
            omega, rel = exact_omega(b, Fraction(j, int(d)))
            channels.append(Channel("sin" if j % 2 == 0 else "cos", 0, omega, rel))
        check_rows(out.reshape(-1, int(d)).astype(np.float64), flat, channels, dtype.name)

    run(a.call("posenc.analysis.odd_exponent_table", analysis.odd_exponent_table, check))


@fuzz(scale=0.5)
@given(st.data())
def test_float32_recipe(data: st.DataObject) -> None:
    a = Args(data)
    pos = a.draw("positions", positions())
    d = a.draw("d_model", count(1, 24))
    a.draw("base", positive(0.5, 1e6, extra=(10000.0,)), optional=True)
    a.draw("convention", name(CONVENTIONS), optional=True)

    def check(out):
        shape, _ = meaning(pos)
        expect_array(out, (*shape, int(d)), np.float32)
        assert np.all(np.abs(out) <= 1.0)

    run(a.call("posenc.analysis.float32_recipe", analysis.float32_recipe, check))
