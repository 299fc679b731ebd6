"""Fuzz the attention biases of the NumPy core (see ``contract.py``).

Valid calls are checked against independent float64 references: the slopes by the paper's
rule, every dense bias by its formula on the positions, the buckets by integer comparisons.
"""

from __future__ import annotations

import math
from typing import Any

import mpmath
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import posenc
from tests.tolerance import assert_close_ulp

from .checks import check_rounded_once
from .contract import DOUBTFUL, VALID, Args, choose, expect_array, run
from .profile import fuzz
from .values import (
    FLOAT_BOUNDED,
    FLOAT_OUT,
    HOSTILE_BIAS_POSITIONS,
    HUGE,
    INF,
    NAN,
    NUMPY_RELATIVE,
    WRONG_TYPES,
    Detachable,
    bias_meaning,
    bias_positions,
    count,
    detachable,
    distance_setting,
    flag,
    name,
    plain,
    positive,
    reals,
)

ALIBI_CONVENTIONS = ("exact", "bloom", "mpt", "falcon")
BUCKET_CONVENTIONS = ("exact", "transformers")
F64 = 2.0**-52


def paper_slopes(heads: int, max_bias: float) -> np.ndarray:
    """The paper's rule, recursively, in float64 (``2**x`` is correctly rounded)."""
    if heads & (heads - 1) == 0:
        return np.array([2.0 ** (-max_bias * (k + 1) / heads) for k in range(heads)])
    lower = 1 << (heads.bit_length() - 1)
    return np.concatenate(
        [paper_slopes(lower, max_bias), paper_slopes(2 * lower, max_bias)[0::2][: heads - lower]]
    )


def shards(heads: Any) -> st.SearchStrategy[Any]:
    """A valid ``(rank, ranks)`` of ``heads`` or a hostile one."""
    hostile = st.sampled_from(
        [(0, 0), (1, 1), (-1, 2), "01", (0,), (0, 1, 2), (0.5, 1), (0, 10**30), (True, 1), "x"]
    )
    plain = isinstance(heads, int | np.integer) and not isinstance(heads, bool | np.bool_)
    if not (plain and 1 <= heads <= 1000):
        return choose(st.just((0, 1)), hostile)
    ranks = [r for r in range(1, int(heads) + 1) if int(heads) % r == 0]
    valid = st.sampled_from(ranks).flatmap(lambda r: st.tuples(st.integers(0, r - 1), st.just(r)))
    return choose(valid, hostile | st.just((0, int(heads) + 1)))


def total_heads(heads: Any, kind: str) -> st.SearchStrategy[Any]:
    """``total_heads``: from ``heads`` up (or None), or a hostile value."""
    base = int(heads) if kind == VALID else 1
    hostile = [0, -1, float(base + 1), True, "4", [base], 2**70, 10**30, *([base - 1] * (base > 1))]
    return choose(st.integers(base, base + 6) | st.just(None), st.sampled_from(hostile))


def _alibi_args(a: Args, data: st.DataObject) -> tuple[Any, Any, Any, str, int]:
    heads = a.draw("heads", count(1, 70))
    max_bias = a.draw("max_bias", positive(0.5, 16.0, extra=(8.0, 8)), optional=True)
    convention = a.draw("convention", name(ALIBI_CONVENTIONS), optional=True)
    if convention in ("bloom", "falcon") and max_bias is not None and max_bias != 8:
        a.kinds["max_bias"] = a.kinds["max_bias"] if a.kinds["max_bias"] != "valid" else DOUBTFUL
    total = a.draw("total_heads", total_heads(heads, a.kinds["heads"]), optional=True)
    whole = total if total is not None and a.kinds["total_heads"] == VALID else heads
    shard = None
    if data.draw(st.booleans(), label="sharded"):
        shard = a.draw("shard", shards(whole))
    mode = convention if isinstance(convention, str) else "exact"
    both = total is not None and a.kinds["total_heads"] == VALID and a.kinds["heads"] == VALID
    return heads, max_bias, shard, mode, int(total) - int(heads) if both else 0


def _all_slopes(heads: Any, max_bias: Any, extra: int) -> np.ndarray:
    """The paper's slopes of ``heads`` heads, then ``extra`` zeros (``total_heads``)."""
    return np.concatenate([paper_slopes(int(heads), float(max_bias or 8.0)), np.zeros(extra)])


def _sharded(slopes: np.ndarray, shard: Any) -> np.ndarray:
    if shard is None:
        return slopes
    rank, ranks = shard
    return slopes.reshape(ranks, -1)[rank]


@fuzz()
@given(st.data())
def test_alibi_slopes(data: st.DataObject) -> None:
    a = Args(data)
    heads, max_bias, shard, mode, extra = _alibi_args(a, data)

    def check(out: np.ndarray) -> None:
        want = _sharded(_all_slopes(heads, max_bias, extra), shard)
        expect_array(out, want.shape, np.float64 if mode == "exact" else np.float32)
        # exact: within an ulp of the correctly rounded power; the framework conventions
        # round in float32 (BLOOM: up to 11 float32 ulps) or to bfloat16 (Falcon)
        rtol = {"exact": 2**-52, "falcon": 2**-8}.get(mode, 12 * 2**-23)
        np.testing.assert_allclose(out, want, rtol=rtol, atol=0)

    run(a.call("posenc.alibi_slopes", posenc.alibi_slopes, check))


@fuzz()
@given(st.data())
def test_alibi_bias(data: st.DataObject) -> None:
    a = Args(data)
    heads, max_bias, shard, mode, extra = _alibi_args(a, data)
    query = a.draw("query_positions", bias_positions(wrapped=True))
    key = a.draw("key_positions", bias_positions(wrapped=True))
    form = a.draw("form", name(("distance", "relative", "key")), optional=True)
    dtype = a.draw("dtype", FLOAT_OUT, optional=True)

    def check(out: np.ndarray) -> None:
        q, k = bias_meaning(query), bias_meaning(key)
        slopes = _sharded(_all_slopes(heads, max_bias, extra), shard)
        rel = (k[None, :] - q[:, None]).astype(np.float64)
        factor = {"key": np.broadcast_to(k[None, :], rel.shape), "relative": rel}.get(
            form or "distance", -np.abs(rel)
        )
        want = slopes[:, None, None] * factor[None]
        out_dtype = np.dtype(dtype or np.float32)
        if mode == "exact":  # the float64 product (its own rounding) rounded once
            check_rounded_once(expect_array(out, want.shape, out_dtype), want, 2 * F64 * abs(want))
            return
        got = expect_array(out, want.shape, out_dtype).astype(np.float64)
        # one rounding to the output (exact); the conventions' float32/bfloat16 steps on top
        step = {"exact": 0.0, "falcon": 2**-7}.get(mode, 24 * 2**-23)
        rtol = max(float(np.finfo(out_dtype).eps), step)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-300)

    run(a.call("posenc.alibi_bias", posenc.alibi_bias, check))


def _bucket_settings(a: Args, bidirectional: bool | None) -> tuple[int, int]:
    num_buckets = a.draw("num_buckets", count(2, 64), optional=True)
    max_distance = a.draw("max_distance", distance_setting(1, 400), optional=True)
    if a.kinds.get("num_buckets", "valid") != "valid":
        num_buckets = None  # refused anyway: any setting serves
    if a.kinds.get("max_distance", "valid") != "valid":
        max_distance = None
    side = int(num_buckets or 32)
    side = side // 2 if bidirectional in (None, True) else side
    valid_distance = max_distance is not None and a.kinds["max_distance"] == "valid"
    if valid_distance and int(max_distance) <= side // 2:  # <= max_exact: refused by name
        a.kinds["max_distance"] = DOUBTFUL
    if num_buckets is not None and a.kinds["num_buckets"] == "valid" and side < 2:
        a.kinds["num_buckets"] = DOUBTFUL
    return int(num_buckets or 32), int(max_distance or 128)


def t5_reference(rel: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """T5's bucket of ``rel = key − query`` by exact integer comparisons."""
    side, offset = num_buckets, 0
    if bidirectional:
        side //= 2
        offset = side if rel > 0 else 0
        d = abs(rel)
    else:
        d = max(-rel, 0)
    exact = side // 2
    if d < exact:
        return offset + d
    n, t = side - exact, 0
    while t < n and d**n * exact ** (t + 1) >= exact**n * max_distance ** (t + 1):
        t += 1
    return offset + min(exact + t, side - 1)


@fuzz()
@given(st.data())
def test_t5_buckets(data: st.DataObject) -> None:
    a = Args(data)
    rel = a.draw("relative_positions", NUMPY_RELATIVE)
    bidirectional = a.draw("bidirectional", flag(), optional=True)
    num_buckets, max_distance = _bucket_settings(a, bidirectional)
    a.draw("convention", name(BUCKET_CONVENTIONS), optional=True)

    def check(out: np.ndarray) -> None:
        values = np.asarray(plain(rel)).astype(np.int64)
        expect_array(out, values.shape, np.int64)
        both = True if bidirectional is None else bool(bidirectional)
        want = [t5_reference(int(r), both, num_buckets, max_distance) for r in values.flat]
        # transformers' float32 log may land one bucket off at an edge; exact never does
        got = out.reshape(-1).tolist()
        if a.kwargs.get("convention") == "transformers":
            assert all(abs(g - w) <= 1 for g, w in zip(got, want, strict=True)), (got, want)
        else:
            assert got == want, (got, want)

    run(a.call("posenc.t5_buckets", posenc.t5_buckets, check))


def deberta_reference(rel: int, bucket_size: int, max_position: int) -> int:
    """DeBERTa's log bucket of ``rel`` by exact integer comparisons."""
    mid = bucket_size // 2
    if abs(rel) <= mid:
        return rel
    scale, t, top = mid - 1, 0, max_position - 1
    while abs(rel) ** scale * mid**t > top**t * mid**scale:
        t += 1
    return int(math.copysign(mid + t, rel))


@fuzz()
@given(st.data())
def test_deberta_buckets(data: st.DataObject) -> None:
    a = Args(data)
    rel = a.draw("relative_positions", NUMPY_RELATIVE)
    bucket_size = a.draw("bucket_size", count(2, 300), optional=True)
    max_position = a.draw("max_position", distance_setting(2, 1024), optional=True)
    if a.kinds.get("bucket_size", "valid") != "valid":
        bucket_size = None  # refused anyway: any setting serves
    if a.kinds.get("max_position", "valid") != "valid":
        max_position = None
    mid = int(bucket_size or 256) // 2
    if int(max_position or 512) - 1 <= mid:  # the log's ratio must exceed 1: refused
        for key in ("bucket_size", "max_position"):
            if a.kinds.get(key) == "valid":
                a.kinds[key] = DOUBTFUL
    a.draw("convention", name(BUCKET_CONVENTIONS), optional=True)

    def check(out: np.ndarray) -> None:
        values = np.asarray(plain(rel)).astype(np.int64)
        expect_array(out, values.shape, np.int64)
        want = [
            deberta_reference(int(r), int(bucket_size or 256), int(max_position or 512))
            for r in values.flat
        ]
        got = out.reshape(-1).tolist()
        if a.kwargs.get("convention") == "transformers":
            assert all(abs(g - w) <= 1 for g, w in zip(got, want, strict=True)), (got, want)
        else:
            assert got == want, (got, want)

    run(a.call("posenc.deberta_buckets", posenc.deberta_buckets, check))


TABLES = st.integers(1, 3).flatmap(
    lambda h: st.lists(st.floats(-100, 100, allow_nan=False), min_size=32 * h, max_size=32 * h).map(
        lambda v: np.array(v).reshape(32, h)
    )
)


@fuzz()
@given(st.data())
def test_t5_bias(data: st.DataObject) -> None:
    a = Args(data)
    table = a.draw(
        "table",
        choose(
            detachable(TABLES),
            st.sampled_from(
                [
                    None,
                    "x",
                    np.zeros((31, 2)),
                    np.zeros(32),
                    np.zeros((32, 0)),
                    np.zeros((32, 2, 1)),
                    np.full((32, 1), NAN),
                    np.full((32, 2), INF),
                    np.zeros((32, 1), dtype=bool),
                    np.zeros((32, 1), dtype=complex),
                    [[1.0], [2.0, 3.0]],
                    Detachable(np.full((32, 1), NAN)),
                ]
            ),
        ),
    )
    query = a.draw("query_positions", bias_positions(wrapped=True))
    key = a.draw("key_positions", bias_positions(wrapped=True))
    bidirectional = a.draw("bidirectional", flag(), optional=True)
    dtype = a.draw("dtype", FLOAT_BOUNDED, optional=True)  # tables within +-100

    def check(out: np.ndarray) -> None:
        q, k = bias_meaning(query), bias_meaning(key)
        rel = k[None, :] - q[:, None]
        both = True if bidirectional is None else bool(bidirectional)
        buckets = np.array(
            [t5_reference(int(r), both, 32, 128) for r in rel.flat], dtype=np.int64
        ).reshape(rel.shape)
        want = np.moveaxis(np.asarray(plain(table))[buckets], -1, 0)
        out_dtype = np.dtype(dtype or np.float32)
        np.testing.assert_array_equal(
            expect_array(out, want.shape, out_dtype), want.astype(out_dtype)
        )

    run(a.call("posenc.t5_bias", posenc.t5_bias, check))


@fuzz()
@given(st.data())
def test_relative_positions(data: st.DataObject) -> None:
    a = Args(data)
    query = a.draw("query_positions", bias_positions(wrapped=True))
    key = a.draw("key_positions", bias_positions(wrapped=True))

    def check(out: np.ndarray) -> None:
        q, k = bias_meaning(query), bias_meaning(key)
        want = k[None, :] - q[:, None]
        np.testing.assert_array_equal(expect_array(out, want.shape, np.int64), want)

    run(a.call("posenc.relative_positions", posenc.relative_positions, check))


@fuzz()
@given(st.data())
def test_relative_sinusoid_table(data: st.DataObject) -> None:
    a = Args(data)
    length = a.draw("length", count(1, 12))
    d = a.draw("d_model", count(1, 16))
    base = a.draw("base", positive(2.0, 1e5, extra=(10000.0,)), optional=True)
    dtype = a.draw("dtype", FLOAT_BOUNDED, optional=True)

    def check(out: np.ndarray) -> None:
        L, width = int(length), int(d)
        p = np.arange(L - 1, -L, -1, dtype=np.float64)[:, None]
        i = np.arange(width)
        omega = float(base or 10000.0) ** (-(i - i % 2) / width)
        want = np.where(i % 2 == 0, np.sin(p * omega), np.cos(p * omega))
        out_dtype = np.dtype(dtype or np.float32)
        # float64 angles of positions below 12: the truth to 1e-14
        check_rounded_once(expect_array(out, want.shape, out_dtype), want, 1e-14)

    run(a.call("posenc.relative_sinusoid_table", posenc.relative_sinusoid_table, check))


def _per_head(lo: float, hi: float) -> st.SearchStrategy[Any]:
    one = st.floats(lo, hi, allow_nan=False)
    return choose(
        one | detachable(st.lists(one, min_size=1, max_size=3).map(np.array)),
        st.sampled_from(
            [*WRONG_TYPES, NAN, INF, -1.0, 0.0, [1.0, NAN], np.zeros((2, 2)) + 1, [], np.array([]),
             Detachable([1.0, NAN]), [[1.0], [2.0, 3.0]]]
        ),
    )  # fmt: skip


@fuzz()
@given(st.data())
def test_kerple_bias(data: st.DataObject) -> None:
    a = Args(data)
    query = a.draw("query_positions", bias_positions(wrapped=True))
    key = a.draw("key_positions", bias_positions(wrapped=True))
    kind = a.draw("kind", name(("log", "power")), optional=True)
    r1 = a.draw("r1", _per_head(0.01, 4.0))
    r2 = a.draw("r2", _per_head(0.01, 2.0))
    both = a.kinds["r1"] == a.kinds["r2"] == VALID  # then both read as arrays
    if (
        both
        and np.ndim(plain(r1))
        and np.ndim(plain(r2))
        and np.shape(plain(r1)) != np.shape(plain(r2))
    ):
        a.kinds["r2"] = DOUBTFUL
    dtype = a.draw("dtype", FLOAT_OUT, optional=True)

    def check(out: np.ndarray) -> None:
        q, k = bias_meaning(query), bias_meaning(key)
        dist = np.abs(k[None, :] - q[:, None]).astype(np.float64)[None]
        s = np.atleast_1d(np.asarray(plain(r1), float))[:, None, None]
        r = np.atleast_1d(np.asarray(plain(r2), float))[:, None, None]
        want = -s * (np.log1p(r * dist) if (kind or "log") == "log" else dist**r)
        want = np.broadcast_to(want, (max(s.shape[0], r.shape[0]), *dist.shape[1:]))
        out_dtype = np.dtype(dtype or np.float32)
        # log1p or a power and a product, each rounded in float64; then rounded once
        check_rounded_once(expect_array(out, want.shape, out_dtype), want, 4 * F64 * abs(want))

    run(a.call("posenc.kerple_bias", posenc.kerple_bias, check))


@fuzz()
@given(st.data())
def test_fire_distance(data: st.DataObject) -> None:
    a = Args(data)
    query = a.draw(
        "query_positions",
        choose(
            st.integers(0, 9) | st.lists(st.integers(0, 10**6), max_size=5),
            HOSTILE_BIAS_POSITIONS | st.just([-3]),
        ),
    )
    key = a.draw("key_positions", bias_positions(wrapped=True))
    # any finite c > 0 gives finite distances (c·x may overflow or underflow float64)
    extremes = st.sampled_from([1e308, 1.7976931348623157e308, 1e300, 1e-300, 5e-324])
    c = a.draw("c", choose(reals(0.01, 10.0) | extremes,
                           st.sampled_from([*WRONG_TYPES, NAN, INF, 0.0, -1.0, [1.0], 10**400])),
               optional=True)  # fmt: skip
    # a tiny threshold may put the quotient beyond float64: refused by name, or finite
    threshold = a.draw("threshold", positive(0.5, 100.0, extreme=(1e-300, 5e-324, 1e300)),
                       optional=True)  # fmt: skip

    def check(out: np.ndarray) -> None:
        mp = mpmath.mp
        mp.dps = 40
        q, k = bias_meaning(query), bias_meaning(key)
        scale, floor = mp.mpf(float(c or 1.0)), mp.mpf(float(threshold or 1.0))
        want = np.array(
            [[float(mp.log1p(scale * max(i - j, 0)) / mp.log1p(scale * max(mp.mpf(int(i)), floor)))
              for j in k.tolist()] for i in q.tolist()]
        ).reshape(q.size, k.size)  # fmt: skip
        got = expect_array(out, want.shape, np.float64)
        # float64: two logarithms (or a product and a logarithm) and a quotient: a few ulps
        assert_close_ulp(got, want, ulps=8, scale=want)

    run(a.call("posenc.fire_distance", posenc.fire_distance, check))


@fuzz()
@given(st.data())
def test_sandwich_bias(data: st.DataObject) -> None:
    a = Args(data)
    heads = a.draw("heads", count(1, 8))
    query = a.draw("query_positions", bias_positions(wrapped=True))
    key = a.draw("key_positions", bias_positions(wrapped=True))
    dim = a.draw("dim", count(2, 64), optional=True)
    if dim is not None and a.kinds["dim"] == "valid" and dim % 2:
        a.kinds["dim"] = DOUBTFUL  # an odd dim is refused
    base = a.draw(
        "base", positive(2.0, 1e5, extra=(10000.0,), extreme=(1e308, 5e-324)), optional=True
    )
    dtype = a.draw("dtype", FLOAT_BOUNDED, optional=True)  # |bias| <= 32 here

    def check(out: np.ndarray) -> None:
        q, k = bias_meaning(query), bias_meaning(key)
        width = int(dim or 128)
        omega = float(base or 10000.0) ** (-2.0 * np.arange(width // 2) / width)  # finite here
        dist = np.abs(k[None, :] - q[:, None]).astype(np.float64)
        total = np.cos(dist[..., None] * omega).sum(-1)
        h = int(heads)
        want = (h / (8.0 * np.arange(1, h + 1)))[:, None, None] * total[None]
        out_dtype = np.dtype(dtype or np.float32)
        # a float64 sum of width / 2 cosines of angles up to 2e6: its error, then one rounding
        check_rounded_once(expect_array(out, want.shape, out_dtype), want, 1e-9 * width)

    run(a.call("posenc.sandwich_bias", posenc.sandwich_bias, check))


def _xpos_valid(value: Any) -> bool:
    """Hostile positions elsewhere that xPos takes: finite reals, arrays of any shape."""
    if isinstance(value, float) and math.isfinite(value):
        return True
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu" and value.ndim > 1:
        return True
    return isinstance(value, list) and value == [0.5]


def _xpos_positions(where: Any) -> np.ndarray:
    """Valid xPos positions, flat float64: an int is a length, anything else real positions."""
    if isinstance(where, int):
        return np.arange(where, dtype=np.float64)
    return np.asarray(plain(where), dtype=np.float64).reshape(-1)


@fuzz()
@given(st.data())
def test_xpos_scales(data: st.DataObject) -> None:
    a = Args(data)
    where = a.draw(
        "positions",
        choose(
            st.integers(0, 9)
            | st.lists(st.integers(-4096, 4096), max_size=5)
            | detachable(st.lists(st.integers(-4096, 4096), max_size=4).map(np.array))
            | st.sampled_from(
                [
                    np.array(7),
                    np.float16(-300.5),
                    np.zeros((2, 0)),
                    np.array([[1.5, -2.0]], dtype=np.float16),
                ]
            ),
            # real positions of any shape are xPos positions (2.5 is one position)
            HOSTILE_BIAS_POSITIONS.filter(lambda v: not _xpos_valid(v)) | st.sampled_from(HUGE[3:]),
        ),
    )
    head_dim = a.draw("head_dim", count(2, 32))
    if isinstance(head_dim, int | np.integer) and a.kinds["head_dim"] == "valid" and head_dim % 2:
        a.kinds["head_dim"] = DOUBTFUL
    scale_base = a.draw("scale_base", positive(16.0, 4096.0, extra=(512.0,)), optional=True)
    gamma = a.draw("gamma", positive(0.05, 2.0, extra=(0.4,)), optional=True)
    pairs = a.draw("pairs", name(("interleaved", "half")), optional=True)
    if a.kinds["positions"] == "valid" and a.kinds["head_dim"] == "valid":
        g_ = float(gamma or 0.4) if a.kinds.get("gamma", "valid") == "valid" else 0.4
        b_ = float(scale_base or 512.0) if a.kinds.get("scale_base", "valid") == "valid" else 512.0
        far = np.abs(_xpos_positions(where)).max(initial=0.0) / b_
        if far * abs(np.log(g_ / (1.0 + g_))) > 700:  # beyond float64: refused by name
            a.kinds["positions"] = DOUBTFUL

    def check(out: np.ndarray) -> None:
        p = _xpos_positions(where)
        shape = p.shape if isinstance(where, int) else np.shape(plain(where))
        dim, g = int(head_dim), float(gamma or 0.4)
        zeta = (np.arange(0, dim, 2) + g * dim) / ((1.0 + g) * dim)
        scales = zeta ** (p[:, None] / float(scale_base or 512.0))
        half = (pairs or "interleaved") == "half"
        want = np.concatenate([scales, scales], -1) if half else np.repeat(scales, 2, -1)
        got = expect_array(out, (*shape, dim), np.float64).reshape(want.shape)
        # ζ^(p/s) by two float64 formulas: the exponent's rounding is |p/s·ln ζ| ulps of it
        exponent = np.abs(p[:, None] / float(scale_base or 512.0) * np.log(zeta))
        ulps = 4 + float(exponent.max(initial=0.0))
        assert_close_ulp(got, want, ulps=ulps, scale=want)

    run(a.call("posenc.xpos_scales", posenc.xpos_scales, check))
