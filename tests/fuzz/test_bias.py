"""Fuzz the attention biases of the NumPy core and of ``posenc.torch``, with the latter's
masks, ``score_mod``s and learnable modules (see ``contract.py``).

Valid calls are checked against independent float64 references: the slopes by the paper's
rule, every dense bias by its formula on the positions, the buckets by integer comparisons;
what only ``posenc.torch`` has, against the NumPy core in float64.
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
from .contract import DOUBTFUL, HOSTILE, VALID, Args, Call, choose, expect_array, run
from .frontends import MODULE_MARKS, TORCH, Frontend, each_frontend, expect_tensor, torch_only
from .profile import fuzz
from .reference import ulp
from .values import (
    FLOAT_BOUNDED,
    HOSTILE_BIAS_POSITIONS,
    HUGE,
    INF,
    NAN,
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

if TORCH is not None:
    import torch

    import posenc.torch as pt

    from .torch_values import BIAS_DTYPES

pytestmark = MODULE_MARKS

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


@each_frontend
@fuzz()
@given(st.data())
def test_alibi_bias(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    heads, max_bias, shard, mode, extra = _alibi_args(a, data)
    if a.kwargs.get("total_heads") is not None and shard and not frontend.shards_total_heads:
        a.kinds["total_heads"] = HOSTILE  # documented: not with shard
    query = a.draw("query_positions", frontend.bias_positions())
    key = a.draw("key_positions", frontend.bias_positions())
    form = a.draw("form", name(("distance", "relative", "key")), optional=True)
    a.draw("dtype", frontend.bias_dtypes, optional=True)

    def check(out: Any) -> None:
        q, k = bias_meaning(query), bias_meaning(key)
        slopes = _sharded(_all_slopes(heads, max_bias, extra), shard)
        rel = (k[None, :] - q[:, None]).astype(np.float64)
        factor = {"key": np.broadcast_to(k[None, :], rel.shape), "relative": rel}.get(
            form or "distance", -np.abs(rel)
        )
        want = slopes[:, None, None] * factor[None]
        out_dtype = frontend.result_dtype(a, "float32")
        out_name = frontend.dtype_name(out_dtype)
        got = frontend.expect(out, want.shape, out_dtype)
        if mode == "exact":  # the float64 product (its own rounding) rounded once
            check_rounded_once(got, want, 2 * F64 * abs(want), out_name)
            return
        # one rounding to the output (exact); the conventions' float32/bfloat16 steps on top
        step = {"exact": 0.0, "falcon": 2**-7}.get(mode, 24 * 2**-23)
        rtol = max(float(ulp(out_name, 1.0)), step)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-300)

    run(a.call(frontend.label("alibi_bias"), frontend.api.alibi_bias, check))


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
        a.kinds["max_distance"] = HOSTILE
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


@each_frontend
@fuzz()
@given(st.data())
def test_t5_buckets(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    rel = a.draw("relative_positions", frontend.relative_positions())
    bidirectional = a.draw("bidirectional", flag(), optional=True)
    num_buckets, max_distance = _bucket_settings(a, bidirectional)
    a.draw("convention", name(BUCKET_CONVENTIONS), optional=True)

    def check(out: Any) -> None:
        values = np.asarray(plain(rel)).astype(np.int64)
        got = frontend.expect(out, values.shape, frontend.dtype("int64"))
        both = True if bidirectional is None else bool(bidirectional)
        want = [t5_reference(int(r), both, num_buckets, max_distance) for r in values.flat]
        check_buckets(a, got, want)

    run(a.call(frontend.label("t5_buckets"), frontend.api.t5_buckets, check))


def check_buckets(a: Args, got: np.ndarray, want: list[int]) -> None:
    """The buckets ``got`` are ``want``; transformers' float32 log may land one bucket off at
    an edge, exact never does."""
    flat = got.reshape(-1).tolist()
    slack = 1 if a.kwargs.get("convention") == "transformers" else 0
    assert all(abs(g - w) <= slack for g, w in zip(flat, want, strict=True)), (flat, want)


def deberta_reference(rel: int, bucket_size: int, max_position: int) -> int:
    """DeBERTa's log bucket of ``rel`` by exact integer comparisons."""
    mid = bucket_size // 2
    if abs(rel) <= mid:
        return rel
    scale, t, top = mid - 1, 0, max_position - 1
    while abs(rel) ** scale * mid**t > top**t * mid**scale:
        t += 1
    return int(math.copysign(mid + t, rel))


@each_frontend
@fuzz()
@given(st.data())
def test_deberta_buckets(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    rel = a.draw("relative_positions", frontend.relative_positions())
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

    def check(out: Any) -> None:
        values = np.asarray(plain(rel)).astype(np.int64)
        got = frontend.expect(out, values.shape, frontend.dtype("int64"))
        want = [
            deberta_reference(int(r), int(bucket_size or 256), int(max_position or 512))
            for r in values.flat
        ]
        check_buckets(a, got, want)

    run(a.call(frontend.label("deberta_buckets"), frontend.api.deberta_buckets, check))


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


@each_frontend
@fuzz()
@given(st.data())
def test_kerple_bias(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    query = a.draw("query_positions", frontend.bias_positions())
    key = a.draw("key_positions", frontend.bias_positions())
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
    a.draw("dtype", frontend.bias_dtypes, optional=True)

    def check(out: Any) -> None:
        q, k = bias_meaning(query), bias_meaning(key)
        dist = np.abs(k[None, :] - q[:, None]).astype(np.float64)[None]
        s = np.atleast_1d(np.asarray(plain(r1), float))[:, None, None]
        r = np.atleast_1d(np.asarray(plain(r2), float))[:, None, None]
        want = -s * (np.log1p(r * dist) if (kind or "log") == "log" else dist**r)
        want = np.broadcast_to(want, (max(s.shape[0], r.shape[0]), *dist.shape[1:]))
        out_dtype = frontend.result_dtype(a, "float32")
        got = frontend.expect(out, want.shape, out_dtype)
        # log1p or a power and a product, each rounded in float64; then rounded once
        check_rounded_once(got, want, 4 * F64 * abs(want), frontend.dtype_name(out_dtype))

    run(a.call(frontend.label("kerple_bias"), frontend.api.kerple_bias, check))


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


@each_frontend
@fuzz()
@given(st.data())
def test_sandwich_bias(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    heads = a.draw("heads", count(1, 8))
    query = a.draw("query_positions", frontend.bias_positions())
    key = a.draw("key_positions", frontend.bias_positions())
    dim = a.draw("dim", count(2, 64), optional=True)
    if dim is not None and a.kinds["dim"] == "valid" and dim % 2:
        a.kinds["dim"] = DOUBTFUL  # an odd dim is refused
    base = a.draw(
        "base", positive(2.0, 1e5, extra=(10000.0,), extreme=(1e308, 5e-324)), optional=True
    )
    a.draw("dtype", frontend.bounded_bias_dtypes, optional=True)  # |bias| <= 32 here

    def check(out: Any) -> None:
        q, k = bias_meaning(query), bias_meaning(key)
        width = int(dim or 128)
        omega = float(base or 10000.0) ** (-2.0 * np.arange(width // 2) / width)  # finite here
        dist = np.abs(k[None, :] - q[:, None]).astype(np.float64)
        total = np.cos(dist[..., None] * omega).sum(-1)
        h = int(heads)
        want = (h / (8.0 * np.arange(1, h + 1)))[:, None, None] * total[None]
        out_dtype = frontend.result_dtype(a, "float32")
        got = frontend.expect(out, want.shape, out_dtype)
        # a float64 sum of width / 2 cosines of angles up to 2e6: its error, then one rounding
        check_rounded_once(got, want, 1e-9 * width, frontend.dtype_name(out_dtype))

    run(a.call(frontend.label("sandwich_bias"), frontend.api.sandwich_bias, check))


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


# -- PyTorch only ------------------------------------------------------------------------------

OFFSETS = choose(
    st.integers(-50, 10**6),
    st.sampled_from([*WRONG_TYPES, 2.5, NAN, 2**53 + 1, -(2**60), 10**30]),
)


def evaluate(score_mod: Any, heads: int, q: int, k: int) -> np.ndarray:
    """A ``score_mod`` evaluated on zero scores over every (head, query, key): its bias."""
    score = torch.zeros(1, heads, q, k)
    b = torch.zeros(1, 1, 1, 1, dtype=torch.int64)
    h = torch.arange(heads)[None, :, None, None]
    qi = torch.arange(q)[None, None, :, None]
    ki = torch.arange(k)[None, None, None, :]
    out = score_mod(score, b, h, qi, ki)
    assert out.dtype == torch.float32, out.dtype
    return out[0].double().numpy()


@torch_only
@fuzz()
@given(st.data())
def test_score_mods(data: st.DataObject) -> None:
    a = Args(data)
    which = data.draw(st.sampled_from(["alibi", "kerple", "t5", "sandwich"]), label="which")
    q_len = int(data.draw(st.integers(1, 6), label="q"))
    k_len = int(data.draw(st.integers(1, 6), label="k"))
    heads = 3
    if which == "alibi":
        alibi_heads = data.draw(st.integers(1, heads), label="ALiBi heads")
        a.draw("heads", choose(st.just(alibi_heads), st.sampled_from([0, -1, 2.5, None, 2**60])))
        if alibi_heads < heads or data.draw(st.booleans(), label="total_heads"):
            a.draw(
                "total_heads",
                choose(st.just(heads), st.sampled_from([0, alibi_heads - 1, 2.5, "3", 2**62])),
            )
        a.draw("form", name(("distance", "relative", "key")), optional=True)
    elif which == "kerple":
        a.draw("r1", choose(st.just([0.5, 1.0, 2.0]), st.sampled_from([[NAN] * 3, -1.0, "x"])))
        a.draw("r2", choose(st.just([1.0, 0.5, 0.25]), st.sampled_from([[INF] * 3, 0.0, None])))
        a.draw("kind", name(("log", "power")), optional=True)
    elif which == "t5":
        table = torch.linspace(-1, 1, 32 * heads).reshape(32, heads)
        a.draw(
            "table",
            choose(
                st.just(table), st.sampled_from([None, "x", torch.zeros(32), np.zeros((32, 3))])
            ),
        )
        # the lengths are optional: one score_mod serves every length (evaluated beyond them)
        a.draw("query_len", choose(st.just(1), st.sampled_from([0, -1, 2.5])), optional=True)
        a.draw("key_len", choose(st.just(2), st.sampled_from([0, "3", 10**30])), optional=True)
        a.draw("bidirectional", flag(), optional=True)
    else:
        a.draw("heads", choose(st.just(heads), st.sampled_from([0, None, 2.5])))
        a.draw("query_len", choose(st.just(q_len), st.sampled_from([0, -1, None])))
        a.draw("key_len", choose(st.just(k_len), st.sampled_from([0, 2.5, 10**30])))
        a.draw("dim", choose(st.sampled_from([2, 8, 16]), st.sampled_from([0, 3, None])))
    q0 = a.draw("query_offset", OFFSETS, optional=True)
    k0 = a.draw("key_offset", OFFSETS, optional=True)

    def check(score_mod: Any) -> None:
        got = evaluate(score_mod, heads, q_len, k_len)
        query = np.arange(q_len) + int(q0 or 0)
        key = np.arange(k_len) + int(k0 or 0)
        kw = a.kwargs
        if which == "alibi":
            want = posenc.alibi_bias(kw["heads"], query, key, form=kw.get("form") or "distance")
            want = np.concatenate([want, np.zeros((heads - int(kw["heads"]), q_len, k_len))])
        elif which == "kerple":
            want = posenc.kerple_bias(
                query, key, r1=kw["r1"], r2=kw["r2"], kind=kw.get("kind") or "log"
            )
        elif which == "t5":
            both = kw.get("bidirectional", True)
            want = posenc.t5_bias(kw["table"].numpy(), query, key, bidirectional=both)
        else:
            want = posenc.sandwich_bias(heads, query, key, dim=kw["dim"])
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(got, want, atol=4 * 2**-23 * scale)

    if which == "alibi":
        run(a.call("posenc.torch.alibi_score_mod", pt.alibi_score_mod, check))
    elif which == "kerple":
        run(a.call("posenc.torch.kerple_score_mod", pt.kerple_score_mod, check))
    elif which == "t5":
        run(a.call("posenc.torch.t5_score_mod", pt.t5_score_mod, check))
    else:
        run(a.call("posenc.torch.sandwich_score_mod", pt.sandwich_score_mod, check))


@torch_only
@fuzz()
@given(st.data())
def test_relative_score_mod(data: st.DataObject) -> None:
    a = Args(data)
    values = torch.linspace(-2, 2, 2 * 11).reshape(2, 11)
    a.draw(
        "values",
        choose(st.just(values), st.sampled_from([None, "x", torch.zeros(3), np.zeros((2, 11))])),
    )
    a.draw("min_relative", choose(st.just(-5), st.sampled_from([None, 2.5, "1", 2**60])))

    def check(score_mod: Any) -> None:
        got = evaluate(score_mod, 2, 4, 4)
        rel = np.arange(4)[None, :] - np.arange(4)[:, None]
        want = values.double().numpy()[:, rel + 5]
        # the table's own float32 values, looked up: at most one rounding of the largest
        assert_close_ulp(got, want, ulps=1, dtype="float32")

    run(a.call("posenc.torch.relative_score_mod", pt.relative_score_mod, check))


DOCUMENTS = choose(
    st.lists(st.integers(0, 2), min_size=4, max_size=4).map(lambda v: sorted(v))
    | st.lists(st.integers(0, 2), min_size=8, max_size=8).map(
        lambda v: torch.tensor(v).reshape(2, 4).sort(dim=1).values
    ),
    st.sampled_from(["x", [0.5, 0, 0, 1], [0, 0], np.zeros((2, 2), int), [True] * 4]),
)
WINDOWS = choose(st.integers(1, 5), st.sampled_from([0, -1, 2.5, "2", True, NAN]))
PADDING = st.deferred(
    lambda: choose(
        st.lists(st.booleans(), min_size=8, max_size=8).map(lambda v: torch.tensor(v).reshape(2, 4))
        | st.lists(st.integers(0, 1), min_size=4, max_size=4),
        st.sampled_from(
            [[[1, 2, 1, 1]], torch.ones(2, 4), torch.ones(2, 3, dtype=torch.bool), "x"]
        ),
    )
)
MASK_BIASES = choose(
    st.sampled_from(["float", "bool", "batched"]),
    st.sampled_from(["int", "5-d", "nan", "array", None]),
)


def _bias(kind: str) -> Any:
    values = torch.linspace(-1, 1, 2 * 16).reshape(2, 4, 4)
    return {
        "float": values, "bool": values > -0.5, "batched": values[None].expand(2, 2, 4, 4),
        "int": values.long(), "5-d": values[None, None], "nan": values.masked_fill(values > 0.9,
        NAN), "array": values.numpy(), None: None,
    }[kind]  # fmt: skip


def _allowed_by_hand(kwargs: dict[str, Any]) -> np.ndarray:
    """(rows, 4, 4) booleans of 4 queries against 4 keys, one pair at a time."""
    docs = kwargs.get("query_documents")
    keys = kwargs.get("key_documents", docs)
    docs = keys if docs is None else docs
    padding = kwargs.get("padding_mask")
    tables = [np.asarray(t) for t in (docs, keys, padding) if t is not None]
    rows = max([t.shape[0] for t in tables if t.ndim == 2], default=1)
    out = np.zeros((rows, 4, 4), dtype=bool)
    window = kwargs.get("window")
    for b, i, j in np.ndindex(rows, 4, 4):
        ok = j <= i or not kwargs.get("causal", False)
        ok &= window is None or abs(i - j) < window
        if docs is not None:
            mine, theirs = (np.asarray(t) for t in (docs, keys))
            mine, theirs = (t[b] if t.ndim == 2 else t for t in (mine, theirs))
            ok &= mine[i] == theirs[j]
        if padding is not None:
            pad = np.asarray(padding)
            ok &= bool((pad[b] if pad.ndim == 2 else pad)[j])
        out[b, i, j] = ok
    return out


@torch_only
@fuzz()
@given(st.data())
def test_masks(data: st.DataObject) -> None:
    a = Args(data)
    which = data.draw(st.sampled_from(["allowed", "attn_mask"]), label="which")
    if which == "allowed":
        a.draw("query_len", choose(st.just(4), st.sampled_from([-1, 2.5, None, 10**30])))
        a.draw("key_len", choose(st.just(4), st.sampled_from([-1, "4", 2**62])))
    else:
        kind = data.draw(MASK_BIASES, label="bias kind")
        a.set("bias", _bias(kind.value), kind.kind)
        a.draw("dtype", BIAS_DTYPES, optional=True)
    a.draw("causal", flag(), optional=True)
    a.draw("window", WINDOWS, optional=True)
    if data.draw(st.booleans(), label="keys' documents"):
        a.draw("key_documents", DOCUMENTS)
    a.draw("query_documents", DOCUMENTS, optional=True)
    a.draw("padding_mask", PADDING, optional=True)
    rows = {np.shape(a.kwargs[n])[0] for n in ("query_documents", "key_documents", "padding_mask")
            if a.kinds.get(n) == "valid" and np.ndim(a.kwargs[n]) == 2}  # fmt: skip
    if len(rows) > 1:  # never here (every batch is 2), kept as the rule
        a.kinds["padding_mask"] = DOUBTFUL

    def check(out: torch.Tensor) -> None:
        allowed = _allowed_by_hand(a.kwargs)
        batched = any(
            np.ndim(a.kwargs.get(n)) == 2
            for n in ("query_documents", "key_documents", "padding_mask")
        )
        if which == "allowed":
            assert out.dtype == torch.bool, out.dtype
            np.testing.assert_array_equal(out.numpy(), allowed if batched else allowed[0])
            return
        bias = a.kwargs["bias"]
        out_dtype = a.kwargs.get("dtype") or bias.dtype
        assert out.dtype == out_dtype, out.dtype
        shape = (2, 2, 4, 4) if batched or bias.ndim == 4 else (2, 4, 4)
        assert tuple(out.shape) == shape, out.shape
        allowed = np.broadcast_to(allowed[:, None] if len(shape) == 4 else allowed[0], shape)
        values = np.broadcast_to(bias.double().numpy(), shape)
        if bias.dtype == torch.bool:
            allowed = allowed & values.astype(bool)
            if a.kwargs.get("dtype") is None:
                np.testing.assert_array_equal(out.numpy(), allowed)
                return
            values = np.zeros(shape)
        want = np.where(allowed, torch.from_numpy(values.copy()).to(out_dtype).double(), -np.inf)
        np.testing.assert_array_equal(out.double().numpy(), want)

    if which == "allowed":
        run(a.call("posenc.torch.allowed_pairs", pt.allowed_pairs, check))
    else:
        run(a.call("posenc.torch.bias_attn_mask", pt.bias_attn_mask, check))


@torch_only
@fuzz(scale=0.3)
@given(st.data())
def test_bias_block_mask(data: st.DataObject) -> None:
    a = Args(data)
    a.draw("query_len", choose(st.sampled_from([4, 130]), st.sampled_from([0, -1, 2.5, None])))
    a.draw("key_len", choose(st.sampled_from([4, 130]), st.sampled_from([0, "4", 2**62])))
    a.draw("causal", flag(), optional=True)
    a.draw("window", WINDOWS, optional=True)
    q, k = a.kwargs["query_len"], a.kwargs["key_len"]
    sizes_valid = a.kinds["query_len"] == a.kinds["key_len"] == "valid"
    if data.draw(st.booleans(), label="documents"):
        valid = torch.arange(k if sizes_valid else 4) // 3
        a.draw(
            "documents",
            choose(
                st.sampled_from([valid, valid.tolist(), valid.expand(2, -1)]),
                st.sampled_from(["x", torch.zeros(2, 2), [0.5] * 4]),
            ),
        )
        if sizes_valid and q > k and a.kinds["documents"] == "valid":
            a.kinds["documents"] = "hostile"  # queries beyond the keys have no document
    if data.draw(st.booleans(), label="padding"):
        valid = torch.ones(2, k if sizes_valid else 4, dtype=torch.bool)
        valid[0, :2] = False
        a.draw("padding_mask", choose(st.just(valid), st.sampled_from([torch.ones(2, 3), "x"])))

    def check(mask: Any) -> None:
        dense = mask.to_dense()
        assert dense.shape[-2:] == ((q + 127) // 128, (k + 127) // 128), dense.shape
        pairs = pt.allowed_pairs(
            q, k, causal=a.kwargs.get("causal", True), window=a.kwargs.get("window"),
            key_documents=a.kwargs.get("documents"), padding_mask=a.kwargs.get("padding_mask"),
        )  # fmt: skip
        rows = pairs.shape[0] if pairs.ndim == 3 else 1
        b = torch.arange(rows)[:, None, None]
        got = mask.mask_mod(b, 0, torch.arange(q)[:, None], torch.arange(k))
        assert torch.equal(got.expand(rows, q, k), pairs.expand(rows, q, k))

    run(a.call("posenc.torch.bias_block_mask", pt.bias_block_mask, check))


MODULE_DTYPES = st.deferred(
    lambda: choose(
        st.sampled_from([None, torch.float32, torch.float64, torch.bfloat16]),
        st.sampled_from([torch.int64, torch.bool, np.float32, "float32", 1.5]),
        st.sampled_from([torch.float16]),  # may overflow: refused by name (dtype) or finite
    )
)


def _module_reference(module: Any, query: Any, key: Any) -> torch.Tensor:
    """The module's bias in float64 from the NumPy core (T5, Kerple) or the float64 formula
    of FIRE's MLP, before the one rounding to the parameters' dtype."""
    q, k = bias_meaning(query), bias_meaning(key)
    if isinstance(module, pt.T5RelativeBias):
        table = module.table.weight.detach().double().numpy()
        return torch.from_numpy(posenc.t5_bias(
            table, q, k, bidirectional=module.bidirectional, num_buckets=module.num_buckets,
            max_distance=module.max_distance, dtype=np.float64,
        ))  # fmt: skip
    if isinstance(module, pt.KerpleBias):
        r1, r2 = (p.detach().double().clamp(min=module.eps).numpy() for p in (module.r1, module.r2))
        r2 = np.minimum(r2, 2.0) if module.kind == "power" else r2
        return torch.from_numpy(
            posenc.kerple_bias(q, k, r1=r1, r2=r2, kind=module.kind, dtype=np.float64)
        )
    c, threshold = (float(p.detach().abs()) for p in (module.c, module.threshold))
    hidden = torch.from_numpy(posenc.fire_distance(q, k, c=c, threshold=threshold))[..., None]
    for layer in module.mlp:
        if isinstance(layer, torch.nn.Linear):
            weight, bias = layer.weight.detach().double(), layer.bias.detach().double()
            hidden = torch.nn.functional.linear(hidden, weight, bias)
        else:
            hidden = layer(hidden)
    return hidden.permute(2, 0, 1)


@torch_only
@fuzz(scale=0.5)
@given(st.data())
def test_bias_modules(data: st.DataObject) -> None:
    a = Args(data)
    which = data.draw(st.sampled_from(["T5RelativeBias", "KerpleBias", "FireBias"]), label="which")
    a.draw("heads", count(1, 4))
    if which == "T5RelativeBias":
        a.draw("num_buckets", choose(st.sampled_from([8, 32]), st.sampled_from([1, 2.5, None])))
        a.draw("max_distance", choose(st.sampled_from([64, 128]), st.sampled_from([0, NAN])))
        a.draw("bidirectional", flag(), optional=True)
    elif which == "KerpleBias":
        a.draw("kind", name(("log", "power")), optional=True)
        a.draw(
            "eps",
            choose(st.sampled_from([0.01, 1e-3]), st.sampled_from([NAN, -1.0])),
            optional=True,
        )
    else:
        a.draw("hidden", count(1, 8), optional=True)
        a.draw("c", positive(0.1, 4.0), optional=True)
        a.draw("threshold", positive(0.5, 64.0), optional=True)
        activation = choose(
            st.sampled_from([torch.nn.GELU(), torch.nn.SiLU(), torch.nn.ReLU()]),
            st.sampled_from([torch.relu, torch.nn.PReLU(), "gelu"]),
        )
        a.draw("activation", activation, optional=True)
    a.draw("dtype", MODULE_DTYPES, optional=True)
    query = data.draw(bias_positions(), label="query_positions")
    key = data.draw(bias_positions(), label="key_positions")

    def check(module: Any) -> None:
        torch.manual_seed(0)
        with torch.no_grad():  # parameters away from their initial values
            for parameter in module.parameters():
                parameter.uniform_(0.25, 1.5)
        kinds = {"query_positions": query.kind, "key_positions": key.kind}
        if which == "FireBias" and query.kind == "valid" and np.any(bias_meaning(query.value) < 0):
            kinds["query_positions"] = "hostile"  # FIRE's queries are at positions >= 0
        dtype = module.table.weight.dtype if which == "T5RelativeBias" else module.r1.dtype \
            if which == "KerpleBias" else module.c.dtype  # fmt: skip
        doubtful = {n for n, k in kinds.items() if k == "doubtful"}
        if dtype == torch.float16:  # the bias may not fit: refused, naming dtype
            doubtful |= set(kinds)
        forward = Call(
            f"posenc.torch.{which}.forward", module,
            {"query_positions": query.value, "key_positions": key.value},
            frozenset(n for n, k in kinds.items() if k == "hostile"), frozenset(doubtful),
            aliases={"query_positions": ("dtype",), "key_positions": ("dtype",)},
        )  # fmt: skip

        def check_forward(out: torch.Tensor) -> None:
            want = _module_reference(module, query.value, key.value)
            got = expect_tensor(out, tuple(want.shape), dtype)
            rounded = pt.cast_exact(want, dtype).double().numpy()
            assert_close_ulp(got, rounded, ulps=1, dtype=dtype, scale=np.abs(rounded) + 1e-30)

        forward.check = check_forward
        run(forward)
        if a.kinds.get("dtype", "valid") == "valid":
            twin = type(module).like(_as_source(module))
            same = Call(f"posenc.torch.{which}.like", twin, dict(forward.kwargs),
                        forward.hostile, forward.doubtful, aliases=forward.aliases)  # fmt: skip
            result = run(same)
            if result is not None:
                assert torch.equal(result, module(query.value, key.value))

    if which == "T5RelativeBias":
        run(a.call("posenc.torch.T5RelativeBias", pt.T5RelativeBias, check))
    elif which == "KerpleBias":
        run(a.call("posenc.torch.KerpleBias", pt.KerpleBias, check))
    else:
        run(a.call("posenc.torch.FireBias", pt.FireBias, check))


def _as_source(module: Any) -> Any:
    """The module as the model it would be taken from (T5: a T5Attention's attributes)."""
    if not isinstance(module, pt.T5RelativeBias):
        return module
    source = torch.nn.Module()
    source.relative_attention_bias = module.table
    source.relative_attention_num_buckets = module.num_buckets
    source.relative_attention_max_distance = module.max_distance
    source.is_decoder = not module.bidirectional
    return source


def _mismatched(which: str, how: str) -> Any:
    """A module of ``which``'s structure with one part broken (``how``), or a good one."""
    if which == "T5RelativeBias":
        source = _as_source(pt.T5RelativeBias(3, num_buckets=16, max_distance=64))
        broken = {
            "rows": ("relative_attention_num_buckets", 32),
            "missing": ("is_decoder", None),
            "table": ("relative_attention_bias", torch.nn.Linear(3, 3)),
            "max_distance": ("relative_attention_max_distance", 4),
        }
    elif which == "KerpleBias":
        source = pt.KerpleBias(3)
        broken = {
            "rows": ("r2", torch.nn.Parameter(torch.ones(4))),
            "missing": ("r1", None),
            "table": ("r1", torch.nn.Parameter(torch.full((3,), NAN))),
            "max_distance": ("kind", "exp"),
        }
    else:
        source = pt.FireBias(3, hidden=4)
        broken = {
            "rows": ("c", torch.nn.Parameter(torch.ones(2))),
            "missing": ("mlp", None),
            "table": ("threshold", torch.nn.Parameter(torch.tensor(-1.0))),
            "max_distance": ("c", torch.nn.Parameter(torch.tensor(0.0))),
        }
    if how != "good":
        attribute, value = broken[how]
        if value is None:
            delattr(source, attribute)
        else:
            setattr(source, attribute, value)
    return source


@torch_only
@fuzz(scale=0.2)
@given(st.data())
def test_like_of_mismatched_modules(data: st.DataObject) -> None:
    which = data.draw(st.sampled_from(["T5RelativeBias", "KerpleBias", "FireBias"]), label="which")
    how = data.draw(
        st.sampled_from(["good", "rows", "missing", "table", "max_distance"]), label="how"
    )
    source = data.draw(
        st.sampled_from([_mismatched(which, how), None, "x", torch.nn.Linear(2, 2)]),
        label="module",
    )
    good = how == "good" and isinstance(source, torch.nn.Module) and not isinstance(
        source, torch.nn.Linear
    )  # fmt: skip

    def check(module: Any) -> None:
        got = module(3, 5)
        assert got.shape == (3, 3, 5), got.shape
        if isinstance(source, pt.FireBias | pt.KerpleBias):
            assert torch.equal(got, source(3, 5))

    aliases = {"module": ("r1", "r2", "kind", "c", "threshold", "mlp", "relative_attention",
                          "is_decoder", "max_distance", "num_buckets")}  # fmt: skip
    hostile = frozenset() if good else frozenset({"module"})
    like = getattr(pt, which).like
    run(Call(f"posenc.torch.{which}.like", like, {"module": source}, hostile, check=check,
             aliases=aliases))  # fmt: skip
