"""posenc.analysis: each property checked against an independent computation.

References used here do not go through the function under test: per-element ``math``
formulas, brute-force loops and sets, mpmath at 40 digits, every bfloat16 value enumerated
from its bits, and the real transformers functions where they install.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import analysis, describe
from posenc._conventions import get_convention
from posenc._features import feature_slices
from posenc.analysis import (
    _recipes,
    _rounding,
    check_shift,
    distinct_rows,
    float32_recipe,
    identify,
    odd_exponent_table,
    precision_report,
    shift_matrix,
    similarity,
    wavelengths,
)
from posenc.analysis._hypotheses import _Hypothesis
from tests.tolerance import assert_close_ulp

CONVENTIONS = tuple(posenc.CONVENTIONS)  # every registered convention, not a fixed list


def _omega(d: int, base: float, convention: str) -> np.ndarray:
    return posenc.frequencies(d, base=base, convention=convention)


def _unpaired(d: int, convention: str) -> list[int]:
    """Sine channels without a cosine partner (odd d under paper / marian)."""
    layout = feature_slices(d, convention)
    return np.arange(d)[layout.sin][layout.n_cos :].tolist()


# ---------------------------------------------------------------------------------------------
# the odd-exponent cosine bug
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [1, 2, 5, 8])
def test_odd_exponent_table_is_the_odd_exponent_formula(d_model: int) -> None:
    base = 500.0
    expected = np.array(
        [
            [
                math.sin(p / base ** (j / d_model))
                if j % 2 == 0
                else math.cos(p / base ** (j / d_model))
                for j in range(d_model)
            ]
            for p in range(12)
        ]
    )
    table = odd_exponent_table(12, d_model, base=base, dtype=np.float64)
    # float64 angles p·ω (p <= 11, ω by two formulas), then sin/cos: 4 ulps of the angle
    assert_close_ulp(table, expected, ulps=4, scale=11)
    # its sine columns are the paper's, its cosines are not
    paper = posenc.sinusoidal(12, d_model, base=base, dtype=np.float64)
    np.testing.assert_array_equal(table[:, 0::2], paper[:, 0::2])
    if d_model > 1:
        assert np.abs(table[:, 1::2] - paper[:, 1::2]).max() > 0.1


def test_odd_exponent_table_positions_and_dtype() -> None:
    out = odd_exponent_table([[0, 3], [7, 9]], 6)
    assert out.shape == (2, 2, 6)
    assert out.dtype == np.float32
    flat = odd_exponent_table(10, 6, dtype=np.float64)
    assert_close_ulp(out[1, 0], flat[7], ulps=1)  # the float64 row rounded once to float32
    assert odd_exponent_table(4, 6, dtype=np.float16).dtype == np.float16
    with pytest.raises(ValueError, match="d_model"):
        odd_exponent_table(4, 0)
    with pytest.raises(TypeError, match="dtype"):
        odd_exponent_table(4, 4, dtype=np.int32)


# ---------------------------------------------------------------------------------------------
# 1. wavelengths
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("d_model", [4, 7, 64, 513])
@pytest.mark.parametrize("base", [100.0, 10000.0, 5e5])
def test_wavelengths_are_a_geometric_progression(
    convention: str, d_model: int, base: float
) -> None:
    w = wavelengths(d_model, base=base, convention=convention)
    omega = _omega(d_model, base, convention)
    want = 2 * np.pi / omega  # one division, one product: 2 ulps of each wavelength
    assert_close_ulp(w.wavelengths, want, ulps=2, scale=want)
    assert w.shortest == pytest.approx(2 * np.pi, rel=1e-15)
    n = omega.shape[0]
    if get_convention(convention).schedule == "timescale":  # ω_k = base^(-k/(h-1)): base·2π
        expected_ratio = base ** (1 / (d_model // 2 - 1))
        assert w.longest == pytest.approx(2 * np.pi * base, rel=1e-12)
    else:  # ω_k = base^(-2k/d): towards base·2π
        expected_ratio = base ** (2 / d_model)
        assert w.longest == pytest.approx(2 * np.pi * base ** (2 * (n - 1) / d_model), rel=1e-12)
        assert w.longest < 2 * np.pi * base
    assert w.ratio == pytest.approx(expected_ratio, rel=1e-12)
    # each wavelength 2π·base^e within about |ln base| + 2 ulps (the exponent's rounding),
    # a ratio of two within twice that, base^(2/d) within |ln base| + 1 more
    ulps = 3 * abs(math.log(base)) + 6
    assert_close_ulp(
        w.ratios, np.full(w.ratios.shape, expected_ratio), ulps=ulps, scale=expected_ratio
    )
    json.dumps(w.as_dict())


def test_wavelengths_single_pair_has_no_ratio() -> None:
    w = wavelengths(2)
    assert w.ratio is None
    assert w.ratios.shape == (0,)
    with pytest.raises(ValueError, match="convention"):
        wavelengths(8, convention="bert")


# ---------------------------------------------------------------------------------------------
# 2. shift matrix
# ---------------------------------------------------------------------------------------------


@given(
    convention=st.sampled_from(CONVENTIONS),
    d_model=st.integers(1, 40),
    base=st.sampled_from([2.0, 100.0, 10000.0, 5e5, 1e6]),
    k=st.one_of(st.integers(-1000, 1000), st.floats(-1000, 1000, allow_nan=False)),
    p=st.integers(-1000, 1000),
)
def test_shift_matrix_maps_pe_p_to_pe_p_plus_k(
    convention: str, d_model: int, base: float, k: float, p: int
) -> None:
    unpaired = _unpaired(d_model, convention)
    m = shift_matrix(k, d_model, base=base, convention=convention, unpaired="drop")
    pe = posenc.sinusoidal(np.array([p, p + k], dtype=np.float64), d_model, base=base,
                           convention=convention, dtype=np.float64)  # fmt: skip
    mapped = m @ pe[0]
    keep = [c for c in range(d_model) if c not in unpaired]
    # float64 angles of |p| + |k| at most, rounded once each, then a sum of two products
    assert_close_ulp(mapped[keep], pe[1][keep], ulps=4, scale=abs(p) + abs(k) + 1)
    assert np.all(mapped[unpaired] == 0)
    if not unpaired:  # then the default (unpaired="raise") works and agrees
        np.testing.assert_array_equal(shift_matrix(k, d_model, base=base, convention=convention), m)


@given(
    convention=st.sampled_from(CONVENTIONS),
    d_model=st.integers(1, 33),
    j=st.integers(-500, 500),
    k=st.integers(-500, 500),
)
def test_shift_matrices_compose_and_are_orthogonal(
    convention: str, d_model: int, j: int, k: int
) -> None:
    def m(shift: float) -> np.ndarray:
        return shift_matrix(shift, d_model, base=1000.0, convention=convention, unpaired="drop")

    # angles of |j| + |k| at most, rounded once each, then a sum of two products
    assert_close_ulp(m(j) @ m(k), m(j + k), ulps=4, scale=abs(j) + abs(k) + 1)
    # orthogonal on the channels it maps (the zero / unpaired ones are zero rows and columns)
    active = np.diag(m(0)).copy()
    assert_close_ulp(m(k) @ m(k).T, np.diag(active), ulps=2)  # cos² + sin², two roundings
    assert_close_ulp(m(k).T, m(-k), ulps=1, scale=abs(k) + 1)  # cos even, sin odd
    assert set(np.unique(active)) <= {0.0, 1.0}


def test_shift_matrix_blocks_and_unpaired_column() -> None:
    m = shift_matrix(2, 4, convention="marian")  # [s0, s1 | c0, c1]: s_k pairs with c_k = k+2
    w = _omega(4, 10000.0, "marian")
    expected = np.zeros((4, 4))
    for i, om in enumerate(w):
        c, s = math.cos(2 * om), math.sin(2 * om)
        expected[i, i], expected[i, i + 2], expected[i + 2, i], expected[i + 2, i + 2] = c, s, -s, c
    assert_close_ulp(m, expected, ulps=0.5)  # cos/sin of the same float64 angles: 1/2 ulp
    # tensor2tensor, odd d: the zero-padded column maps to 0 and needs no "drop"
    assert np.all(shift_matrix(1, 5, convention="tensor2tensor")[4] == 0)
    for convention in ("paper", "marian"):
        with pytest.raises(ValueError, match=f"d_model=5 under convention '{convention}'"):
            shift_matrix(1, 5, convention=convention)
    with pytest.raises(ValueError, match="unpaired"):
        shift_matrix(1, 4, unpaired="keep")
    with pytest.raises(TypeError, match="k must be a real number"):
        shift_matrix(True, 4)
    with pytest.raises(TypeError, match="k must be a real number"):
        shift_matrix("1", 4)
    with pytest.raises(ValueError, match="k must be finite"):
        shift_matrix(float("nan"), 4)


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("d_model", [6, 7, 64])
def test_check_shift_on_correct_and_buggy_tables(convention: str, d_model: int) -> None:
    rows = np.arange(100, 400)
    t64 = posenc.sinusoidal(rows, d_model, convention=convention, dtype=np.float64)
    t32 = posenc.sinusoidal(rows, d_model, convention=convention)
    for k in (1, 7, -13, 299):
        assert check_shift(t64, k, convention=convention) < 1e-13
        assert check_shift(t32, k, convention=convention) < 2e-7
    # the same quantity computed by hand with the matrix
    m = shift_matrix(7, d_model, convention=convention, unpaired="drop")
    keep = [c for c in range(d_model) if c not in _unpaired(d_model, convention)]
    by_hand = np.abs(t64[7:] - t64[:-7] @ m.T)[:, keep].max()
    assert check_shift(t64, 7, convention=convention) == pytest.approx(by_hand, abs=1e-16)
    # a wrong base is visible too
    assert check_shift(t64, 1, base=20000.0, convention=convention) > 1e-3


def test_check_shift_large_for_odd_exponent_bug_and_argument_errors() -> None:
    assert check_shift(odd_exponent_table(64, 8, dtype=np.float64), 1) > 0.5
    assert check_shift(odd_exponent_table(64, 512), 3) > 0.5
    table = posenc.sinusoidal(10, 8)
    with pytest.raises(ValueError, match="k must satisfy"):
        check_shift(table, 10)
    with pytest.raises(TypeError, match="k must be an integer"):
        check_shift(table, 1.5)
    with pytest.raises(ValueError, match="table must be 2-D"):
        check_shift(table[0], 1)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_check_shift_refuses_a_table_that_is_not_finite(bad: float) -> None:
    """A NaN or an infinity has no shift to check: refused, not a NaN or inf answer."""
    table = posenc.sinusoidal(10, 8, dtype=np.float64)
    table[3, 5] = bad
    with pytest.raises(ValueError, match=rf"table must be finite, got {bad!r} at row 3, column 5"):
        check_shift(table, 1)
    with pytest.raises(ValueError, match="table must be finite, got nan at row 0, column 0"):
        check_shift(np.full((3, 4), np.nan), 1)


# ---------------------------------------------------------------------------------------------
# 3. similarity
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("d_model", [8, 9, 32])
def test_dot_product_is_a_sum_of_cosines_of_the_distance(convention: str, d_model: int) -> None:
    positions = np.array([0, 3, 4, 10, 57, 300, 301])
    s = similarity(positions, d_model, base=1000.0, convention=convention)
    omega = _omega(d_model, 1000.0, convention)
    n_cos = d_model // 2  # every convention pairs d_model // 2 sines with cosines
    diff = positions[:, None] - positions[None, :]
    expected = np.cos(diff[..., None] * omega[:n_cos]).sum(axis=-1)
    unpaired = _unpaired(d_model, convention)
    if unpaired:  # the extra sine adds sin(p ω) sin(q ω): no longer a function of p - q
        extra = np.sin(positions * omega[-1])
        expected = expected + np.outer(extra, extra)
        assert abs(s.matrix[1, 2] - s.matrix[5, 6]) > 1e-6  # both at distance 1
    else:
        assert s.matrix[1, 2] == pytest.approx(s.matrix[5, 6], abs=1e-12)
    # sums of d_model products of sin/cos of angles <= 301·ω: d_model ulps of the angle
    assert_close_ulp(s.matrix, expected, ulps=d_model, scale=302)


def test_similarity_profile_is_the_mean_over_each_distance() -> None:
    s = similarity(40, 16, convention="tensor2tensor")
    np.testing.assert_array_equal(s.distances, np.arange(40))
    for dist in (0, 1, 5, 39):
        diagonal = np.diagonal(s.matrix, offset=dist)
        assert s.profile[dist] == pytest.approx(diagonal.mean(), abs=1e-12)
    assert s.profile[0] == pytest.approx(8.0)  # d/2 pairs, each cos(0) = 1
    assert s.profile[0] > s.profile[1] > s.profile[2]  # nearby positions look alike
    json.dumps(s.as_dict())


def test_similarity_cosine_real_positions_and_errors() -> None:
    s = similarity([0.0, 0.5, 1.5, 2.5], 8, metric="cosine")
    np.testing.assert_allclose(np.diag(s.matrix), 1.0)
    np.testing.assert_allclose(s.distances, [0.0, 0.5, 1.0, 1.5, 2.0, 2.5])
    assert np.isnan(similarity(3, 1, metric="cosine").matrix[0, 0])  # sin(0) = 0: zero row
    with pytest.raises(ValueError, match="metric"):
        similarity(4, 8, metric="l2")
    with pytest.raises(ValueError, match="1-D"):
        similarity([[0, 1]], 8)
    with pytest.raises(ValueError, match="at most 4096"):
        similarity(5000, 8)


# ---------------------------------------------------------------------------------------------
# 4. distinct rows and bfloat16 rounding
# ---------------------------------------------------------------------------------------------

# Every finite non-negative bfloat16 value, in increasing order, from its bit patterns.
_BF16_BITS = np.arange(0, 0x7F80, dtype=np.uint32)
_BF16_VALUES = (_BF16_BITS << 16).view(np.float32).astype(np.float64)


def _bfloat16_by_enumeration(x: float) -> float:
    """The nearest bfloat16 (ties to the even bit pattern), found among all of them."""
    a = abs(x)
    i = int(np.searchsorted(_BF16_VALUES, a))
    if i >= len(_BF16_VALUES):  # beyond the largest: inf unless within half an ulp
        top, ulp = _BF16_VALUES[-1], 2.0**120
        return math.copysign(math.inf if a >= top + ulp / 2 else top, x)
    lo, hi = _BF16_VALUES[max(i - 1, 0)], _BF16_VALUES[i]
    if a - lo < hi - a:
        best = lo
    elif hi - a < a - lo:
        best = hi
    else:
        best = lo if int(_BF16_BITS[i - 1]) % 2 == 0 else hi
    return math.copysign(best, x)


def test_round_bfloat16_matches_enumeration() -> None:
    rng = np.random.default_rng(1)
    mid = (_BF16_VALUES[1:] + _BF16_VALUES[:-1]) / 2  # exact ties
    xs = np.concatenate(
        [
            rng.uniform(-1, 1, 2000),
            rng.standard_normal(500) * 10.0 ** rng.integers(-40, 38, 500),
            rng.choice(mid, 500) * rng.choice([-1, 1], 500),
            np.nextafter(rng.choice(mid, 200), 0),
            [0.0, -0.0, 2.0**-133, 2.0**-134, 3 * 2.0**-135, 1e-300, 3.4e38, 3.3961e38],
        ]
    )
    ours = _rounding._round_bfloat16(xs)
    expected = np.array([_bfloat16_by_enumeration(float(x)) for x in xs])
    np.testing.assert_array_equal(ours, expected)
    assert np.all(_rounding._round_bfloat16([np.inf, -np.inf]) == [np.inf, -np.inf])
    assert np.isnan(_rounding._round_bfloat16([np.nan])[0])


def test_round_bfloat16_matches_torch_from_float32() -> None:
    torch = pytest.importorskip("torch", reason="torch compares bfloat16 rounding")
    x = np.random.default_rng(2).standard_normal(10_000).astype(np.float32) * 3
    theirs = torch.from_numpy(x).to(torch.bfloat16).to(torch.float64).numpy()
    np.testing.assert_array_equal(_rounding._round_bfloat16(x), theirs)


def _brute_force_distinct(rows: np.ndarray) -> tuple[int, tuple[int, int] | None]:
    first_seen: dict[tuple[float, ...], int] = {}
    duplicate = None
    for q, row in enumerate(rows.tolist()):
        key = tuple(v + 0.0 for v in row)
        if key in first_seen:
            duplicate = duplicate or (first_seen[key], q)
        else:
            first_seen[key] = q
    return len(first_seen), duplicate


@pytest.mark.parametrize(
    ("length", "d_model", "dtype", "convention"),
    [
        (3000, 2, "float16", "paper"),
        (3000, 4, "bfloat16", "tensor2tensor"),
        (2000, 3, "float16", "marian"),
        (600, 1024, "bfloat16", "paper"),  # several chunks
        (500, 8, "float32", "paper"),
    ],
)
def test_distinct_rows_matches_brute_force(
    length: int, d_model: int, dtype: str, convention: str
) -> None:
    exact = posenc.sinusoidal(length, d_model, convention=convention, dtype=np.float64)
    rounded = (
        np.array([[_bfloat16_by_enumeration(v) for v in row] for row in exact])
        if dtype == "bfloat16" and d_model < 100
        else _rounding._round_bfloat16(exact)
        if dtype == "bfloat16"
        else exact.astype(dtype)
    )
    count, duplicate = _brute_force_distinct(rounded)
    result = distinct_rows(length, dtype, d_model=d_model, convention=convention)
    assert (result.rows, result.distinct, result.first_duplicate) == (length, count, duplicate)
    assert result.dtype == dtype
    # a table gives the same answer as a length
    assert distinct_rows(exact, dtype) == result
    json.dumps(result.as_dict())


def test_distinct_rows_float16_collides_quickly_for_d2() -> None:
    r = distinct_rows(5000, np.float16, d_model=2)
    assert r.first_duplicate is not None
    assert r.distinct < r.rows
    p, q = r.first_duplicate
    rows = posenc.sinusoidal([p, q], 2, dtype=np.float16)
    assert p < q
    assert np.array_equal(rows[0], rows[1])
    assert distinct_rows(5000, "float32", d_model=2).first_duplicate is None


def test_distinct_rows_argument_errors() -> None:
    with pytest.raises(ValueError, match="d_model is required"):
        distinct_rows(10)
    with pytest.raises(ValueError, match="d_model must match"):
        distinct_rows(np.zeros((4, 3)), d_model=4)
    with pytest.raises(TypeError, match="dtype must be one of"):
        distinct_rows(10, "int8", d_model=2)
    with pytest.raises(ValueError, match="finite"):
        distinct_rows(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="2-D"):
        distinct_rows(np.zeros(5))


# ---------------------------------------------------------------------------------------------
# 5. precision report
# ---------------------------------------------------------------------------------------------


def _mp_table(positions: np.ndarray, d_model: int, base: float, convention: str) -> np.ndarray:
    """Exact table with mpmath (40 digits); the exponent as an exact rational per schedule."""
    half = d_model // 2
    with mpmath.workdps(40):
        if get_convention(convention).schedule == "timescale":
            exps = [mpmath.mpf(k) / max(half - 1, 1) for k in range(half)]
        else:
            exps = [mpmath.mpf(2 * k) / d_model for k in range((d_model + 1) // 2)]
        omegas = [mpmath.power(mpmath.mpf(base), -e) for e in exps]
        sines = [[float(mpmath.sin(int(p) * w)) for w in omegas] for p in positions]
        cosines = [[float(mpmath.cos(int(p) * w)) for w in omegas] for p in positions]
    out = np.zeros((len(positions), d_model))
    slices = feature_slices(d_model, convention)
    out[:, slices.sin] = np.array(sines)[:, : slices.n_sin]
    out[:, slices.cos] = np.array(cosines)[:, : slices.n_cos]
    return out


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_reference_is_far_more_accurate_than_float32(convention: str) -> None:
    positions = np.array([9_999_999, 9_999_000, 7_654_321, 12_345])
    d_model = 12
    exact = _mp_table(positions, d_model, 10000.0, convention)
    ours = _recipes._reference_table(positions, d_model, 10000.0, convention)
    wider = np.finfo(np.longdouble).eps < np.finfo(np.float64).eps
    bound = 1e-11 if wider else 5e-9  # documented: far below float32's 3e-8
    assert np.abs(ours - exact).max() < bound
    report = precision_report(10**7, d_model, convention=convention, samples=4)
    assert report.reference_error < bound
    assert report.reference == ("longdouble" if wider else "float64")


def test_precision_report_float32() -> None:
    r = precision_report(10**6, 64)
    assert r.method("posenc").max_error <= 6e-8
    assert r.method("float32 recipe").max_error > 1e-3
    assert [m.name for m in r.methods] == ["posenc", "float32 recipe"]  # (c) = (b) in float32
    assert r.merged == (("recipe in float32", "float32 recipe"),)
    assert "float32 recipe itself" in describe(r)
    assert len(r.positions) == 64
    assert r.positions[-32:] == tuple(range(10**6 - 32, 10**6))
    worst = r.method("float32 recipe")
    assert worst.worst_position in r.positions
    assert 0 <= worst.worst_channel < 64
    json.dumps(r.as_dict())
    assert precision_report(10**6, 64) == r  # fixed seed: reproducible
    assert precision_report(10**6, 64, seed=1).positions != r.positions


def test_precision_report_low_precision_dtypes() -> None:
    bf = precision_report(10**6, 32, "bfloat16")
    assert bf.method("posenc").max_error <= 2.0**-9  # the exact value rounded once
    assert bf.method("recipe in bfloat16").max_error > bf.method("float32 recipe").max_error
    half = precision_report(10**4, 32, np.float16)
    assert half.method("posenc").max_error <= 2.0**-11
    assert half.method("recipe in float16").max_error > 0.1
    overflow = precision_report(10**5, 8, "float16")  # positions above 65504 are inf in float16
    assert overflow.method("recipe in float16").max_error == math.inf
    json.dumps(overflow.as_dict())
    with pytest.raises(TypeError, match="dtype must be one of"):
        precision_report(100, 8, "int8")
    with pytest.raises(ValueError, match="samples"):
        precision_report(100, 8, samples=1)
    with pytest.raises(ValueError, match="max_position"):
        precision_report(0, 8)
    with pytest.raises(ValueError, match="d_model must be >= 2 under convention 'tensor2tensor'"):
        precision_report(100, 1, convention="tensor2tensor")


def test_float32_recipe_is_the_pytorch_tutorials_and_fairseqs() -> None:
    # The PyTorch tutorial recipe, re-typed in NumPy float32 step by step as it is written in
    # torch.
    positions = np.array([0, 1, 17, 999, 65_537, 999_999])
    for d_model in (8, 9, 512):
        f32 = np.float32
        div = np.exp(np.arange(0, d_model, 2, dtype=f32) * f32(-math.log(10000.0) / d_model))
        angles = positions.astype(f32)[:, None] * div
        tutorial = np.zeros((len(positions), d_model), dtype=f32)
        tutorial[:, 0::2] = np.sin(angles)
        tutorial[:, 1::2] = np.cos(angles[:, : d_model // 2])
        np.testing.assert_array_equal(float32_recipe(positions, d_model), tutorial)
    torch = pytest.importorskip("torch", reason="fairseq's float32 recipe is written in torch")
    half = 256
    emb = math.log(10000) / (half - 1)
    freqs = torch.exp(torch.arange(half, dtype=torch.float32) * -emb)
    angles = torch.arange(2000, dtype=torch.float32)[:, None] * freqs[None]
    fairseq = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).numpy()
    ours = float32_recipe(2000, 2 * half, convention="tensor2tensor")
    # torch's and NumPy's float32 exp/sin/cos may differ by an ulp; a one-ulp change of ω
    # moves the float32 angle p·ω by up to an ulp of it: allow that, row by row
    ulps = np.spacing(np.float32(np.arange(2000)))[:, None].astype(np.float64)
    assert np.all(np.abs(ours - fairseq) <= 2 * ulps + 2**-23)
    assert np.mean(ours == fairseq) > 0.5
    exact = posenc.sinusoidal(2000, 2 * half, convention="tensor2tensor", dtype=np.float64)
    assert np.abs(ours - exact).max() > 1e-5  # both carry the float32 recipe's error


def test_exponents_reproduce_every_schedule() -> None:
    for convention in CONVENTIONS:
        for d_model in range(1, 70):
            nums, den = _recipes._exponents(d_model, convention)
            for base in (2.0, 10000.0):
                # two formulas of base^e: the exponent's rounding is |ln base| ulps
                want = _omega(d_model, base, convention)
                ulps = 4 + abs(math.log(base))
                assert_close_ulp(np.power(base, -nums / den), want, ulps=ulps, scale=want)


# ---------------------------------------------------------------------------------------------
# 6. identify
# ---------------------------------------------------------------------------------------------


def _digits(value: float) -> int:
    """Significant digits of ``value`` (to 1e-9 relative: 10000^(3/2) counts as 1e6)."""
    return next(
        d for d in range(1, 17) if math.isclose(value, float(f"{value:.{d - 1}e}"), rel_tol=1e-9)
    )


def _expect_ambiguous(convention: str, base: float, d_model: int) -> bool:
    """Whether an exact table of this kind fits another answer as well (see identify's doc)."""
    if d_model <= 2 or (d_model == 3 and convention == "tensor2tensor"):
        return True  # all conventions agree / the base has no effect
    if d_model % 2 or convention == "paper":
        return False
    h = d_model // 2  # tensor2tensor base b == marian base b^(h/(h-1)): the rounder one wins
    other = base ** (h / (h - 1)) if convention == "tensor2tensor" else base ** ((h - 1) / h)
    return _digits(other) <= _digits(base)


def _residual(table: np.ndarray, c: analysis.Candidate) -> float:
    start = 0 if c.offset is None else c.offset
    base = 10000.0 if c.base is None else c.base
    positions = np.arange(start, start + table.shape[0])
    build = odd_exponent_table if c.bug else posenc.sinusoidal
    kwargs = {} if c.bug else {"convention": c.convention}
    ref = build(positions, table.shape[1], base=base, dtype=np.float64, **kwargs)
    return float(np.abs(ref - table.astype(np.float64)).max())


def _assert_identified(
    table: np.ndarray, convention: str, base: float, offset: int, *, strict: bool
) -> None:
    r = identify(table)
    truth = (convention, base, offset)
    assert r.matched, (truth, describe(r))
    if not r.ambiguous:
        assert (r.convention, r.base, r.offset) == truth, describe(r)
        assert r.bug is None
        assert r.alternatives == (r.candidates[0],)
        return
    # ambiguous: the fields it states are right, and every alternative really fits
    for stated, true in zip((r.convention, r.base, r.offset), truth, strict=True):
        assert stated is None or stated == true, (truth, describe(r))
    assert len(r.alternatives) > 1 or None in (r.base, r.offset), describe(r)
    for alt in r.alternatives:
        assert _residual(table, alt) <= r.tolerance * (1 + 1e-9), (alt, describe(r))
    if strict:
        assert _expect_ambiguous(convention, base, table.shape[1]), (truth, describe(r))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_identify_every_convention_base_offset_and_dtype(convention: str, dtype: type) -> None:
    for d_model in (4, 5, 8, 17, 64):
        for base in (100.0, 1e4, 5e5, 1e6):
            for offset in (0, 2, 1000):
                table = posenc.sinusoidal(
                    np.arange(offset, offset + 48), d_model, base=base, convention=convention,
                    dtype=dtype,
                )  # fmt: skip
                # float16 cannot separate nearby bases at small d_model: only d >= 8 is strict
                strict = dtype != np.float16 or d_model >= 8
                _assert_identified(table, convention, base, offset, strict=strict)


@pytest.mark.parametrize("d_model", [1, 2, 3])
def test_identify_tiny_d_model_is_honest(d_model: int) -> None:
    for convention in CONVENTIONS:
        for base in (1e4,):
            for offset in (0, 2, 1000):
                for dtype in (np.float64, np.float16):
                    table = posenc.sinusoidal(
                        np.arange(offset, offset + 32), d_model, base=base, convention=convention,
                        dtype=dtype,
                    )  # fmt: skip
                    _assert_identified(table, convention, base, offset, strict=False)
    # d_model <= 2: every convention but musicgen ([cos p, sin p]) gives [sin p, cos p], and
    # the base has no effect
    if d_model == 2:
        r = identify(posenc.sinusoidal(np.arange(5, 40), 2))
        assert r.ambiguous
        assert r.convention is None
        assert r.base is None
        assert r.offset == 5
        assert {a.convention for a in r.alternatives} == set(CONVENTIONS) - {"musicgen"}


def test_identify_marian_tensor2tensor_coincidence_is_reported() -> None:
    # d_model = 4: tensor2tensor with base 100 is exactly marian with base 100^2
    table = posenc.sinusoidal(np.arange(3, 40), 4, base=100.0, convention="tensor2tensor")
    r = identify(table)
    assert r.matched
    assert r.ambiguous
    assert r.convention is None
    assert r.base is None
    assert r.offset == 3
    assert {(a.convention, a.base) for a in r.alternatives} == {
        ("tensor2tensor", 100.0),
        ("marian", 10000.0),
    }
    # at d_model = 512 the marian twin has base 10000^(256/255) = 10362.1...: not round
    r = identify(posenc.sinusoidal(64, 512, convention="tensor2tensor"))
    assert not r.ambiguous
    assert r.convention == "tensor2tensor"
    assert r.base == 10000.0


def test_identify_single_row() -> None:
    # position 0 is [0, 1, 0, 1, ...] for every base: the base is reported unknown
    r = identify(posenc.sinusoidal(1, 16))
    assert r.matched
    assert r.ambiguous
    assert r.base is None
    assert r.convention == "paper"
    assert r.offset == 0
    # far from 0 a single row pins the base among the common ones
    r = identify(posenc.sinusoidal([1000], 64))
    assert r.matched
    assert (r.convention, r.base, r.offset) == ("paper", 10000.0, 1000)
    assert r.base_guessed
    assert "single row" in describe(r)


def test_identify_finds_a_non_round_base_and_uses_given_bases() -> None:
    table = posenc.sinusoidal(np.arange(2, 200), 64, base=12345.0)
    r = identify(table)
    assert (r.convention, r.base, r.offset) == ("paper", 12345.0, 2)
    odd = 10000.0 * math.pi
    r = identify(posenc.sinusoidal(100, 32, base=odd), bases=[odd])
    assert (r.convention, r.base, r.offset) == ("paper", odd, 0)


@pytest.mark.parametrize(("base", "offset", "dtype"), [(1e4, 0, np.float32), (5e5, 2, np.float16),
                                                       (100.0, 1000, np.float64)])  # fmt: skip
def test_identify_recognises_the_odd_exponent_bug(base: float, offset: int, dtype: type) -> None:
    table = odd_exponent_table(np.arange(offset, offset + 64), 16, base=base, dtype=dtype)
    r = identify(table)
    assert not r.matched  # no convention reproduces it
    assert r.bug == "odd-exponent cosine" == analysis.ODD_EXPONENT_BUG
    assert r.outcome == "bug"
    assert (r.convention, r.base, r.offset) == (None, base, offset)
    assert r.residual <= r.tolerance
    assert r.candidates[0].bug == r.bug
    message = describe(r)
    assert "odd-exponent cosine bug" in message
    assert "sine columns match the paper table" in message
    assert "base^((2i+1)/d)" in message


def test_identify_rejects_what_is_not_a_table() -> None:
    rng = np.random.default_rng(0)
    table = posenc.sinusoidal(64, 16)
    for bad in (
        rng.standard_normal((64, 16)),
        rng.uniform(-1, 1, (64, 16)),
        2.0 * table,
        0.5 * table,
        1.05 * table,
        math.sqrt(16) * table,
        posenc.sinusoidal(64, 16, convention="tensor2tensor")[:, ::-1],
    ):
        r = identify(bad)
        assert not r.matched, describe(r)
        assert r.convention is None
        assert r.bug is None
        assert r.residual > r.tolerance
    r = identify(np.zeros((8, 6)))
    assert not r.matched
    assert r.outcome == "all_zero"
    assert "all zeros" in describe(r)
    r = identify(np.zeros((8, 1)))  # the all-zero tables: tensor2tensor and musicgen, d = 1
    assert r.matched
    assert r.ambiguous
    assert r.convention is None
    assert {a.convention for a in r.alternatives} == {"tensor2tensor", "musicgen"}
    assert r.base is None
    assert r.offset is None
    nan = table.copy()
    nan[3, 3] = np.nan
    assert not identify(nan).matched
    assert identify(nan).outcome == "non_finite"
    assert "NaN" in describe(identify(nan))


def test_identify_padding_row_hint_and_transposed_table() -> None:
    table = posenc.sinusoidal(40, 16, convention="tensor2tensor")
    table[1] = 0  # fairseq zeroes the padding_idx row
    r = identify(table)
    assert not r.matched
    assert r.zero_row == 1
    assert "table[2:]" in describe(r)
    assert identify(table[2:]).offset == 2
    r = identify(posenc.sinusoidal(np.arange(3, 300), 64).T)
    assert r.matched
    assert r.transposed
    assert r.offset == 3
    assert "transposed" in describe(r)
    assert not identify(posenc.sinusoidal(300, 64)).transposed


def test_identify_float32_recipe_tables_match_loosely() -> None:
    table = float32_recipe(np.arange(2, 3000), 256, convention="tensor2tensor")
    r = identify(table)
    assert (r.convention, r.base, r.offset) == ("tensor2tensor", 10000.0, 2)
    assert r.residual > 1e-5
    assert r.within == "float32"
    assert "float32" in describe(r)


def test_identify_argument_errors() -> None:
    with pytest.raises(ValueError, match="table must be 2-D"):
        identify(np.zeros(8))
    with pytest.raises(ValueError, match="table must be 2-D"):
        identify(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="table must not be empty"):
        identify(np.zeros((0, 4)))
    for bad in (
        "abc",
        [[1, 2], [3]],
        np.array([["a"]]),
        np.ones((2, 2), bool),
        np.ones((2, 2), complex),
    ):
        with pytest.raises(TypeError, match="table must be"):
            identify(bad)
    with pytest.raises(ValueError, match="tolerance"):
        identify(np.ones((2, 2)), tolerance=-1.0)
    with pytest.raises(TypeError, match="tolerance"):
        identify(np.ones((2, 2)), tolerance="1")
    with pytest.raises(ValueError, match="bases"):
        identify(np.ones((2, 2)), bases=[0.0])


def test_identify_result_is_json_and_its_work_is_bounded(monkeypatch) -> None:
    """The search scores a fixed number of candidates on sample rows, whatever the length;
    only the confirmation of the best reads every row (at most two full tables here)."""
    rows: list[int] = []  # the rows of every candidate table identify builds
    build = _Hypothesis.build

    def counting(self, positions, base):
        rows.append(int(np.asarray(positions).size))
        return build(self, positions, base)

    monkeypatch.setattr(_Hypothesis, "build", counting)
    work = {}
    for length in (256, 4096):
        rows.clear()
        r = identify(posenc.sinusoidal(np.arange(2, 2 + length), 1024))
        assert (r.convention, r.base, r.offset) == ("paper", 10000.0, 2)
        work[length] = (len(rows), sum(rows))
    assert work[4096][0] == work[256][0] <= 32, work  # candidate evaluations
    assert work[4096][1] - work[256][1] <= 2 * (4096 - 256), work  # rows evaluated
    data = json.loads(json.dumps(r.as_dict()))
    assert data["matched"] is True
    assert data["candidates"][0]["convention"] == "paper"


def test_identify_tables_from_transformers() -> None:
    torch = pytest.importorskip("torch", reason="transformers needs torch")
    pytest.importorskip("transformers", reason="compares with transformers' tables")
    from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    # M2M100 / NLLB (fairseq): rows from padding_idx + 1 = 2, computed in float32
    full = M2M100SinusoidalPositionalEmbedding.get_embedding(2050, 512, padding_idx=1)
    r = identify(full[2:].numpy())
    assert (r.convention, r.base, r.offset) == ("tensor2tensor", 10000.0, 2), describe(r)
    for d_model in (15, 16, 96):  # Marian and DistilBERT loop in Python: keep them small
        full = M2M100SinusoidalPositionalEmbedding.get_embedding(130, d_model, padding_idx=1)
        r = identify(full[2:].numpy())
        assert (r.convention, r.base, r.offset) == ("tensor2tensor", 10000.0, 2), describe(r)
        marian = MarianSinusoidalPositionalEmbedding(128, d_model).create_weight()
        r = identify(marian.numpy())
        assert (r.convention, r.base, r.offset) == ("marian", 10000.0, 0), describe(r)
        out = torch.empty(128, d_model)
        create_sinusoidal_embeddings(128, d_model, out)
        r = identify(out.numpy())
        assert (r.convention, r.base, r.offset) == ("paper", 10000.0, 0), describe(r)


def test_module_imports_numpy_only() -> None:
    code = (
        "import sys, posenc.analysis; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'matplotlib', 'mpmath'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
