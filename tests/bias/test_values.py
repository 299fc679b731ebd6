"""Attention biases, NumPy core: float64 quantities against mpmath (within 1e-12), exact
buckets against an integer reference, the dense forms, and bad input refused by name."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from tests.references import require
from tests.tolerance import assert_close_ulp

HEADS = list(range(1, 129))


def _paper_slopes(mp, n: int, max_bias: float = 8.0) -> list:
    """The paper's recursive rule: a geometric series for powers of two, else the largest
    power of two below plus every other slope of the next one."""
    if n & (n - 1) == 0:
        start = mp.power(2, -mp.mpf(max_bias) / n)
        return [start ** (k + 1) for k in range(n)]
    lower = 2 ** math.floor(math.log2(n))
    return (
        _paper_slopes(mp, lower, max_bias)
        + _paper_slopes(mp, 2 * lower, max_bias)[0::2][: n - lower]
    )


@pytest.mark.parametrize("max_bias", [8.0, 16.0, 4.5])
def test_alibi_slopes_are_within_1e_12_of_mpmath_for_1_to_128_heads(max_bias: float) -> None:
    mp = require("mpmath").mp
    mp.dps = 40
    for heads in HEADS:
        want = np.array([float(s) for s in _paper_slopes(mp, heads, max_bias)])
        got = posenc.alibi_slopes(heads, max_bias=max_bias)
        assert got.dtype == np.float64
        assert got.shape == (heads,)
        # powers of 2: a few roundings of each slope's own magnitude
        assert_close_ulp(got, want, ulps=4, scale=want)


@pytest.mark.parametrize("heads", [8, 12, 96])
def test_a_tensor_parallel_shard_holds_the_global_heads_slopes(heads: int) -> None:
    whole = posenc.alibi_slopes(heads)
    for ranks in (1, 2, 4):
        parts = [posenc.alibi_slopes(heads, shard=(r, ranks)) for r in range(ranks)]
        np.testing.assert_array_equal(np.concatenate(parts), whole)
    assert not np.array_equal(
        posenc.alibi_slopes(heads, shard=(0, 2)), posenc.alibi_slopes(heads // 2)
    )


def test_bloom_slopes_are_the_float32_base_raised_and_rounded_once() -> None:
    mp = require("mpmath").mp
    mp.dps = 40
    for heads in HEADS:
        lower = 2 ** math.floor(math.log2(heads))
        bases = [float(np.float32(2.0 ** (-8.0 / n))) for n in (lower, 2 * lower)]
        want = [mp.mpf(bases[0]) ** k for k in range(1, lower + 1)]
        want += [mp.mpf(bases[1]) ** k for k in range(1, 2 * (heads - lower), 2)]
        got = posenc.alibi_slopes(heads, convention="bloom")
        np.testing.assert_array_equal(got, np.array([float(w) for w in want]).astype(np.float32))


@given(
    heads=st.integers(1, 40),
    q0=st.integers(-(10**6), 10**6),
    k0=st.integers(-(10**6), 10**6),
    form=st.sampled_from(posenc.AlibiForm.__args__),  # type: ignore[attr-defined]
)
def test_alibi_bias_is_the_slope_times_the_form(heads: int, q0: int, k0: int, form: str) -> None:
    query, key = np.arange(q0, q0 + 3), np.arange(k0, k0 + 5)
    bias = posenc.alibi_bias(heads, query, key, form=form, dtype=np.float64)
    slopes = posenc.alibi_slopes(heads)
    rel = key[None, :] - query[:, None]
    factor = {"distance": -np.abs(rel), "relative": rel, "key": np.broadcast_to(key, rel.shape)}
    np.testing.assert_array_equal(bias, slopes[:, None, None] * factor[form])


def test_alibi_forms_differ_by_a_constant_per_query_row_under_a_causal_mask() -> None:
    query, key = np.arange(6, 9), np.arange(9)
    forms = [
        posenc.alibi_bias(4, query, key, form=f, dtype=np.float64)
        for f in ("distance", "relative", "key")
    ]
    causal = key[None, :] <= query[:, None]
    for other in forms[1:]:
        gap = np.where(causal, other - forms[0], np.nan)
        spread = gap - np.nanmin(gap, axis=-1, keepdims=True)
        # each bias a product rounded once, then two subtractions: 4 ulps of the largest bias
        zero = np.broadcast_to(np.where(causal, 0.0, np.nan), spread.shape)
        largest = max(float(np.abs(f).max()) for f in forms)
        assert_close_ulp(spread, zero, ulps=4, scale=largest)


def test_falcon_rounds_positions_and_products_to_bfloat16() -> None:
    bias = posenc.alibi_bias(2, [0], [1000, 1001], form="key", convention="falcon")
    assert bias[0, 0, 0] == bias[0, 0, 1]  # 1001 rounds to 1000 in bfloat16


# -- buckets ----------------------------------------------------------------------------------


def _t5_reference(d: int, exact: int, far: int, n: int) -> int:
    """floor(n·ln(d/e)/ln(far/e)) by exact integer comparisons, one threshold at a time."""
    t = 0
    while t < n and d**n * exact ** (t + 1) >= exact**n * far ** (t + 1):
        t += 1
    return t


T5_SETTINGS = [
    (32, 128, True),
    (32, 128, False),
    (8, 16, True),
    (64, 512, False),
    (33, 100, True),
    (2, 7, False),
]


@pytest.mark.parametrize(("num_buckets", "max_distance", "bidirectional"), T5_SETTINGS)
def test_t5_exact_buckets_equal_the_integer_reference(
    num_buckets: int, max_distance: int, bidirectional: bool
) -> None:
    side = num_buckets // 2 if bidirectional else num_buckets
    exact = side // 2
    distances = np.arange(0, max_distance + 50)
    got = posenc.t5_buckets(
        -distances, num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional
    )
    want = [
        d
        if d < exact
        else min(exact + _t5_reference(d, exact, max_distance, side - exact), side - 1)
        for d in distances.tolist()
    ]
    np.testing.assert_array_equal(got, want)
    if bidirectional:
        positive = posenc.t5_buckets(
            distances[1:], num_buckets=num_buckets, max_distance=max_distance
        )
        np.testing.assert_array_equal(positive, np.array(want[1:]) + side)


def _deberta_reference(a: int, mid: int, top: int) -> int:
    """ceil((mid-1)·ln(a/mid)/ln(top/mid)) by integer comparisons (a > mid)."""
    scale, t = mid - 1, 0
    while a**scale * mid**t > top**t * mid**scale:
        t += 1
    return t


@pytest.mark.parametrize(("bucket_size", "max_position"), [(256, 512), (8, 64), (32, 128), (4, 10)])
def test_deberta_exact_buckets_equal_the_integer_reference(
    bucket_size: int, max_position: int
) -> None:
    mid = bucket_size // 2
    rel = np.arange(-3 * max_position, 3 * max_position)
    got = posenc.deberta_buckets(rel, bucket_size=bucket_size, max_position=max_position)
    want = [
        r
        if abs(r) <= mid
        else int(np.sign(r)) * (mid + _deberta_reference(abs(r), mid, max_position - 1))
        for r in rel.tolist()
    ]
    np.testing.assert_array_equal(got, want)


def test_t5_bias_reads_the_table_at_the_bucket() -> None:
    table = np.arange(32 * 3, dtype=np.float64).reshape(32, 3)
    rel = posenc.relative_positions([5, 9], 12)
    buckets = posenc.t5_buckets(rel)
    np.testing.assert_array_equal(
        posenc.t5_bias(table, [5, 9], 12, dtype=np.float64), np.moveaxis(table[buckets], -1, 0)
    )


# -- tables and distance functions against mpmath ------------------------------------------


def test_relative_sinusoid_table_is_within_1e_12_of_mpmath() -> None:
    mp = require("mpmath").mp
    mp.dps = 30
    length, d = 7, 6
    table = posenc.relative_sinusoid_table(length, d, dtype=np.float64)
    for row, p in enumerate(range(length - 1, -length, -1)):
        for k in range(d // 2):
            angle = p * mp.power(10000, -mp.mpf(2 * k) / d)
            assert abs(table[row, 2 * k] - float(mp.sin(angle))) < 1e-12
            assert abs(table[row, 2 * k + 1] - float(mp.cos(angle))) < 1e-12


def test_kerple_sandwich_fire_and_xpos_are_within_1e_12_of_mpmath() -> None:
    mp = require("mpmath").mp
    mp.dps = 30
    query, key = [3, 40], [0, 7, 1000]
    log = posenc.kerple_bias(query, key, r1=[0.5, 2.0], r2=[1.5, 0.1], dtype=np.float64)
    power = posenc.kerple_bias(
        query, key, r1=[0.5, 2.0], r2=[1.5, 0.1], kind="power", dtype=np.float64
    )
    sandwich = posenc.sandwich_bias(2, query, key, dim=8, dtype=np.float64)
    fire = posenc.fire_distance(query, key, c=0.5, threshold=10.0)
    scales = posenc.xpos_scales(np.array(query), 8, pairs="half")
    for a, i in enumerate(query):
        for b, j in enumerate(key):
            dist = mp.mpf(abs(j - i))
            for h, (r1, r2) in enumerate([(0.5, 1.5), (2.0, 0.1)]):
                assert abs(log[h, a, b] - float(-r1 * mp.log(1 + r2 * dist))) < 1e-12
                assert abs(power[h, a, b] - float(-r1 * dist ** mp.mpf(r2))) < 1e-12
                total = sum(mp.cos(dist * mp.power(10000, -mp.mpf(2 * k) / 8)) for k in range(4))
                assert abs(sandwich[h, a, b] - float(total * 2 / (8 * (h + 1)))) < 1e-12
            psi = lambda x: mp.log(1 + mp.mpf(0.5) * x)  # noqa: E731
            assert abs(fire[a, b] - float(psi(max(i - j, 0)) / psi(max(10, i)))) < 1e-12
        for k in range(4):
            zeta = (mp.mpf(2 * k) + mp.mpf(0.4) * 8) / (mp.mpf(1.4) * 8)
            assert abs(scales[a, k] - float(zeta ** (mp.mpf(i) / 512))) < 1e-12


# -- bad input ---------------------------------------------------------------------------------

BAD = [
    (lambda: posenc.alibi_slopes(0), ValueError, "heads"),
    (lambda: posenc.alibi_slopes(-3), ValueError, "heads"),
    (lambda: posenc.alibi_slopes(4.0), TypeError, "heads"),
    (lambda: posenc.alibi_slopes(True), TypeError, "heads"),
    (lambda: posenc.alibi_slopes(8, max_bias=float("nan")), ValueError, "max_bias"),
    (lambda: posenc.alibi_slopes(8, max_bias=float("inf")), ValueError, "max_bias"),
    (lambda: posenc.alibi_slopes(8, max_bias=4.0, convention="bloom"), ValueError, "max_bias"),
    (lambda: posenc.alibi_slopes(8, shard=(2, 2)), ValueError, "shard"),
    (lambda: posenc.alibi_slopes(6, shard=(0, 4)), ValueError, "shard"),
    (lambda: posenc.alibi_slopes(8, convention="gpt"), ValueError, "convention"),
    (lambda: posenc.alibi_bias(8, 4, 4, form="abs"), ValueError, "form"),
    (lambda: posenc.alibi_bias(8, [2**53 + 1], 4), ValueError, "query_positions"),
    (lambda: posenc.alibi_bias(8, 4, [-(2**53) - 1]), ValueError, "key_positions"),
    (lambda: posenc.alibi_bias(8, 4, [0.5]), TypeError, "key_positions"),
    (lambda: posenc.alibi_bias(8, 4, [[1, 2]]), ValueError, "key_positions"),
    (lambda: posenc.relative_positions([True], 3), TypeError, "query_positions"),
    (lambda: posenc.t5_buckets([1], num_buckets=1, bidirectional=False), ValueError, "num_buckets"),
    (lambda: posenc.t5_buckets([1], num_buckets=3), ValueError, "num_buckets"),
    (lambda: posenc.t5_buckets([1], num_buckets=32.0), TypeError, "num_buckets"),
    (lambda: posenc.t5_buckets([1], max_distance=8), ValueError, "max_distance"),
    (lambda: posenc.t5_buckets([1], max_distance=7), ValueError, "max_distance"),
    (lambda: posenc.t5_buckets([1.5]), TypeError, "relative_positions"),
    (lambda: posenc.t5_buckets([2**60]), ValueError, "relative_positions"),
    (lambda: posenc.t5_buckets([1], bidirectional=1), TypeError, "bidirectional"),
    (lambda: posenc.t5_buckets([1], convention="mesh"), ValueError, "convention"),
    (lambda: posenc.deberta_buckets([1], bucket_size=1), ValueError, "bucket_size"),
    (
        lambda: posenc.deberta_buckets([1], bucket_size=256, max_position=129),
        ValueError,
        "max_position",
    ),
    (lambda: posenc.t5_bias(np.ones((31, 2)), 3, 3), ValueError, "table"),
    (lambda: posenc.t5_bias(np.full((32, 2), np.nan), 3, 3), ValueError, "table"),
    (lambda: posenc.kerple_bias(3, 3, r1=float("nan"), r2=1.0), ValueError, "r1"),
    (lambda: posenc.kerple_bias(3, 3, r1=1.0, r2=-1.0), ValueError, "r2"),
    (lambda: posenc.kerple_bias(3, 3, r1=1.0, r2=3.0, kind="power"), ValueError, "r2"),
    (lambda: posenc.kerple_bias(3, 3, r1=[1.0, 2.0], r2=[1.0, 2.0, 3.0]), ValueError, "r1 and r2"),
    (lambda: posenc.kerple_bias(3, 3, r1=True, r2=1.0), TypeError, "r1"),
    (lambda: posenc.fire_distance(3, 3, c=float("inf")), ValueError, "c"),
    (lambda: posenc.fire_distance(3, 3, threshold=0.0), ValueError, "threshold"),
    (lambda: posenc.sandwich_bias(0, 3, 3), ValueError, "heads"),
    (lambda: posenc.sandwich_bias(2, 3, 3, dim=1), ValueError, "dim"),
    (lambda: posenc.xpos_scales(4, 7), ValueError, "head_dim"),
    (lambda: posenc.xpos_scales(4, 8, scale_base=float("nan")), ValueError, "scale_base"),
    (lambda: posenc.relative_sinusoid_table(0, 8), ValueError, "length"),
]


@pytest.mark.parametrize(("call", "error", "name"), BAD)
def test_bad_input_is_refused_by_name(call, error, name) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=name):
        call()


def test_bias_conventions_name_the_function_they_reproduce() -> None:
    for name, text in posenc.BIAS_CONVENTIONS.items():
        assert "transformers.models." in text, name
    with pytest.raises(TypeError):
        posenc.BIAS_CONVENTIONS["x"] = "y"  # type: ignore[index]


@pytest.mark.parametrize("position", [-4009, 4009, -(2**40)])
def test_xpos_scales_beyond_float64_are_refused(position):
    # ζ_0 = 0.0625 / 1.0625: ζ_0^(-4009/16) is about e^709.7, just beyond float64, and its
    # inverse (the key's scale) just below the smallest normal float64
    with pytest.raises(ValueError, match=r"positions: xPos scales of position .* beyond float64"):
        posenc.xpos_scales([0, position], 2, scale_base=16.0, gamma=0.0625)
    assert np.isfinite(posenc.xpos_scales([4000, -4000], 2, scale_base=16.0, gamma=0.0625)).all()


def test_xpos_scales_of_a_huge_head_dim_are_refused_before_allocating():
    with pytest.raises(ValueError, match="head_dim"):
        posenc.xpos_scales(0, 2**53)
