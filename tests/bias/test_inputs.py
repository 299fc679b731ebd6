"""Attention biases, NumPy core: the inputs a demanding or hostile user passes.

Per-head parameter lists that hold no head, parameters whose products overflow float64 while
the bias itself is finite, a model's learned table passed as a tensor that requires grad,
sizes refused before anything proportional to them is allocated, and bucket settings whose
exact log comparisons would otherwise need integers with millions of digits.
"""

from __future__ import annotations

import math
import time
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import posenc
from posenc._checks import TooLargeError
from tests.references import require

# -- per-head parameters -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("r1", "r2", "name"),
    [
        ([], 1.0, "r1"),
        (1.0, [], "r2"),
        (np.array([]), np.array([]), "r1"),
        ([1.0, 2.0], [1.0, 2.0, 3.0], "r1 and r2"),
        ([1.0, 2.0], [[1.0, 2.0]], "r2"),
    ],
)
def test_kerple_refuses_parameter_lists_without_heads_or_of_other_lengths(
    r1: Any, r2: Any, name: str
) -> None:
    with pytest.raises(ValueError, match=name):
        posenc.kerple_bias(3, 3, r1=r1, r2=r2)


def test_kerple_takes_one_list_per_head_beside_a_shared_number() -> None:
    bias = posenc.kerple_bias(3, 3, r1=[1.0, 2.0], r2=1.0, dtype=np.float64)
    assert bias.shape == (2, 3, 3)
    np.testing.assert_array_equal(bias[1], 2.0 * bias[0])


# -- products beyond float64, values within it -------------------------------------------


@pytest.mark.parametrize("c", [1e308, 1.7976931348623157e308, 1e200, 5e-324, 1e-320, 1e-300])
@pytest.mark.parametrize("threshold", [1.0, 0.1, 1e-300, 1e300])
def test_fire_distance_is_finite_and_exact_for_every_finite_c(c: float, threshold: float) -> None:
    mp = require("mpmath").mp
    mp.dps = 60
    query, key = [0, 1, 2, 7, 2**40], [-3, 0, 1, 5, 2**40]
    got = posenc.fire_distance(query, key, c=c, threshold=threshold)
    assert np.isfinite(got).all()

    def psi(x: int | float) -> Any:
        return mp.log1p(mp.mpf(c) * mp.mpf(x))

    for a, i in enumerate(query):
        for b, j in enumerate(key):
            want = psi(max(i - j, 0)) / psi(max(mp.mpf(threshold), i))
            # two logarithms and a quotient, each rounded: a few ulps of the value
            assert abs(got[a, b] - float(want)) <= 8 * 2**-52 * abs(float(want)), (a, b)


def test_fire_distance_beyond_float64_is_refused_by_name() -> None:
    # ψ(5) / ψ(5e-324) is about 1.8 / 5e-324: beyond float64
    with pytest.raises(ValueError, match="threshold"):
        posenc.fire_distance([0], [-5], threshold=5e-324)


def test_kerple_log_with_a_huge_rate_is_the_finite_logarithm() -> None:
    got = posenc.kerple_bias([0], [0, 1, 3], r1=1.0, r2=1e308, dtype=np.float64)
    want = [0.0, -math.log(1e308), -(math.log(1e308) + math.log(3.0))]
    np.testing.assert_allclose(got[0, 0], want, rtol=4 * 2**-52)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"r1": 1e308, "r2": 2.0, "kind": "power"}, "r1"),
        ({"r1": 1e308, "r2": 1e308}, "r1"),
    ],
)
def test_kerple_beyond_float64_names_its_parameters(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name) as info:
        posenc.kerple_bias([0], [0, 3], dtype=np.float64, **kwargs)
    assert "pass dtype=float64" not in str(info.value)  # it was float64 already


# -- tables and parameters held by a model ---------------------------------------------------


class _Held:
    """An array-like that exposes ``detach()``, as a framework's parameter does."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.detached = False

    def detach(self) -> np.ndarray:
        self.detached = True
        return self.values

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad")


def test_t5_bias_detaches_a_table_that_exposes_detach() -> None:
    table = np.arange(64.0).reshape(32, 2)
    held = _Held(table)
    np.testing.assert_array_equal(posenc.t5_bias(held, 3, 3), posenc.t5_bias(table, 3, 3))
    assert held.detached
    bias = posenc.kerple_bias(2, 2, r1=_Held(np.array([1.0, 2.0])), r2=1.0)
    assert bias.shape == (2, 2, 2)


def test_t5_bias_reads_an_embedding_weight_that_requires_grad() -> None:
    torch = pytest.importorskip("torch")
    embedding = torch.nn.Embedding(32, 4)
    assert embedding.weight.requires_grad
    want = embedding.weight.detach().numpy().astype(np.float64)
    got = posenc.t5_bias(embedding.weight, 5, 5, dtype=np.float64)
    np.testing.assert_array_equal(got, posenc.t5_bias(want, 5, 5, dtype=np.float64))
    # a bfloat16 model's table: its values are exact in float64
    half = posenc.t5_bias(embedding.weight.bfloat16(), 5, 5, dtype=np.float64)
    exact = embedding.weight.detach().bfloat16().double().numpy()
    np.testing.assert_array_equal(half, posenc.t5_bias(exact, 5, 5, dtype=np.float64))
    kerple = posenc.kerple_bias(3, 3, r1=torch.nn.Parameter(torch.ones(2)), r2=1.0)
    assert kerple.shape == (2, 3, 3)


@pytest.mark.parametrize(
    ("table", "error"),
    [
        (np.zeros((32, 0)), ValueError),
        (np.zeros((0, 4)), ValueError),
        (np.zeros(32), ValueError),
        (np.zeros((32, 2, 1)), ValueError),
        (np.zeros((32, 2), dtype=bool), TypeError),
        (np.zeros((32, 2), dtype=complex), TypeError),
        (np.array([["a"] * 2] * 32), TypeError),
        ([[1.0, 2.0], [3.0]], TypeError),
        (None, TypeError),
    ],
)
def test_a_malformed_t5_table_is_refused_naming_table(table: Any, error: type) -> None:
    with pytest.raises(error, match="table"):
        posenc.t5_bias(table, 3, 3)


# -- sizes checked before anything proportional to them is allocated --------------------------

LENGTH = 10**6  # positions of 8 MB each: a result of 2 * 10**12 values is refused

REFUSED: list[tuple[str, Callable[[], Any]]] = [
    ("alibi_bias", lambda: posenc.alibi_bias(2, LENGTH, LENGTH)),
    ("relative_positions", lambda: posenc.relative_positions(LENGTH, LENGTH)),
    ("t5_bias", lambda: posenc.t5_bias(np.zeros((32, 2)), LENGTH, LENGTH)),
    ("kerple_bias", lambda: posenc.kerple_bias(LENGTH, LENGTH, r1=1.0, r2=1.0)),
    ("fire_distance", lambda: posenc.fire_distance(LENGTH, LENGTH)),
    ("sandwich_bias", lambda: posenc.sandwich_bias(2, LENGTH, LENGTH)),
    ("deberta_relative_positions", lambda: posenc.deberta_relative_positions(LENGTH, LENGTH)),
]


@pytest.mark.parametrize(("label", "call"), REFUSED, ids=[label for label, _ in REFUSED])
def test_a_bias_too_large_is_refused_before_its_positions_are_built(
    label: str, call: Callable[[], Any]
) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(TooLargeError, match="query_positions"):
            call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < LENGTH, f"{label} allocated {peak} bytes before refusing"


# -- bucket settings whose exact comparisons would need huge integers ---------------------------


def _within_a_second(call: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    result = call()
    assert time.perf_counter() - start < 1.0
    return result


def test_t5_buckets_of_millions_of_buckets_are_exact_and_fast() -> None:
    n = 2**24  # the most taken; 3 * 2**23 is refused by name (below)
    got = _within_a_second(
        lambda: posenc.t5_buckets([0, 5, -7, 10**9, -(2**54)], num_buckets=n, max_distance=n)
    )
    side = n // 2
    np.testing.assert_array_equal(got, [0, side + 5, 7, n - 1, side - 1])


def test_deberta_buckets_near_the_smallest_max_position_are_exact_and_fast() -> None:
    mp = require("mpmath").mp
    mp.dps = 60
    size, top = 2**12, 2**11 + 2  # log bins of ln(2049/2048): bucket ~ 4·10^7 at 2**54
    rel = np.concatenate([np.arange(-3000, 3001), [10**6, -(2**54)]])
    got = _within_a_second(lambda: posenc.deberta_buckets(rel, bucket_size=size, max_position=top))
    mid = size // 2
    pairs = list(zip(rel.tolist(), got.tolist(), strict=True))
    for r, bucket in [*pairs[::97], pairs[-1]]:
        if abs(r) <= mid:
            assert bucket == r
            continue
        value = (mid - 1) * mp.log(mp.mpf(abs(r)) / mid) / mp.log(mp.mpf(top - 1) / mid)
        assert bucket == int(math.copysign(mid + int(mp.ceil(value)), r)), r


@pytest.mark.parametrize(
    ("d", "low", "high", "scale"),
    [(16, 8, 128, 8), (2**20, 2**4, 2**36, 5), (27, 1, 9, 4), (64, 4, 1024, 10), (10, 5, 20, 3)],
)
def test_bucket_edges_that_land_exactly_on_an_integer_are_decided_exactly(
    d: int, low: int, high: int, scale: int
) -> None:
    """(d/low)^scale == (high/low)^t exactly at these: the floor is t and the ceiling t."""
    from posenc._bias.buckets import _floor_log_ratio

    value = scale * math.log(d / low) / math.log(high / low)
    t = round(value)
    distances = np.array([d, d - 1, d + 1])
    floors = _floor_log_ratio(distances, low, high, low, scale, ceil=False)
    ceils = _floor_log_ratio(distances, low, high, low, scale, ceil=True)
    exact = (d / low) ** scale == (high / low) ** t  # these are exact ties (powers of two, 3)
    assert floors[0] == (t if exact else math.floor(value))
    assert ceils[0] == (t if exact else math.ceil(value))
    for index, distance in ((1, d - 1), (2, d + 1)):
        near = scale * math.log(distance / low) / math.log(high / low)
        assert floors[index] == math.floor(near)
        assert ceils[index] == math.ceil(near)


def test_deberta_buckets_of_the_smallest_bucket_size_are_one_log_bucket() -> None:
    # bucket_size 2 or 3: mid = 1, so (mid - 1)·ln(...) is 0 for every distance (a zero
    # difference of logarithms that is decided exactly, not by ever finer decimals)
    for size in (2, 3):
        got = posenc.deberta_buckets([5, -5, 2, 1, 0, -(2**54)], bucket_size=size, max_position=4)
        np.testing.assert_array_equal(got, [1, -1, 1, 1, 0, -1])


# -- ALiBi on the first heads of a larger attention -----------------------------------------


@pytest.mark.parametrize(
    ("total_heads", "error"),
    [(3, ValueError), (0, ValueError), (-4, ValueError), (8.0, TypeError), (True, TypeError),
     ("8", TypeError), (2**70, ValueError)],
)  # fmt: skip
def test_total_heads_must_be_an_integer_at_least_heads(total_heads: Any, error: type) -> None:
    with pytest.raises(error, match="total_heads"):
        posenc.alibi_slopes(4, total_heads=total_heads)
    with pytest.raises(error, match="total_heads"):
        posenc.alibi_bias(4, 2, 2, total_heads=total_heads)


def test_total_heads_shards_the_whole_attention() -> None:
    whole = posenc.alibi_slopes(6, total_heads=8, convention="mpt")
    assert whole.dtype == np.float32
    assert whole.shape == (8,)
    parts = [
        posenc.alibi_slopes(6, total_heads=8, shard=(r, 4), convention="mpt") for r in range(4)
    ]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    np.testing.assert_array_equal(parts[3], [0.0, 0.0])
    with pytest.raises(ValueError, match="shard"):
        posenc.alibi_slopes(6, total_heads=8, shard=(0, 3))  # 3 divides 6, not 8
    bias = posenc.alibi_bias(6, 3, 3, total_heads=8, shard=(3, 4), dtype=np.float16)
    assert bias.shape == (2, 3, 3)
    assert not bias.any()
    assert not np.signbit(bias).any()


# -- what else a hostile caller passes -------------------------------------------------------


def test_relative_positions_as_python_integers_in_an_object_array() -> None:
    objects = np.array([3, -200, 0], dtype=object)
    np.testing.assert_array_equal(posenc.t5_buckets(objects), posenc.t5_buckets([3, -200, 0]))
    np.testing.assert_array_equal(posenc.disentangled_index(objects, 4), [7, 0, 4])
    for beyond in ([2**64], np.array([-(2**70)], dtype=object), np.array([2**63], np.uint64)):
        with pytest.raises(ValueError, match=r"relative_positions must lie within \+-2\*\*54"):
            posenc.t5_buckets(beyond)
    with pytest.raises(TypeError, match="relative_positions"):
        posenc.deberta_buckets(np.array([1, None], dtype=object))


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda v: posenc.t5_buckets([3], max_distance=v), "max_distance"),
        (lambda v: posenc.deberta_buckets([3], max_position=v), "max_position"),
        (lambda v: posenc.t5_bias(np.ones((32, 1)), 2, 2, max_distance=v), "max_distance"),
    ],
)
@pytest.mark.parametrize("value", [2**53 + 1, 2**200, np.uint64(2**64 - 1)])
def test_a_bucket_distance_beyond_2_53_is_refused_as_such(call: Any, name: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"{name} must be an integer .* at most 2\*\*53") as info:
        call(value)
    assert "memory" not in str(info.value)  # not a size: nothing is allocated for it


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda v: posenc.t5_buckets([3], num_buckets=v, max_distance=2**53), "num_buckets"),
        (lambda v: posenc.deberta_buckets([3], bucket_size=v, max_position=2**53), "bucket_size"),
    ],
)
def test_bucket_counts_are_bounded_by_what_is_decided_fast_and_exactly(
    call: Any, name: str
) -> None:
    assert call(2**24).shape == (1,)
    for value in (2**24 + 1, 3 * 2**23, 2**40, 2**70):
        with pytest.raises(ValueError, match=rf"{name} must be an integer .* at most 2\*\*24"):
            call(value)


@pytest.mark.parametrize("convention", ["exact", "mpt"])
@pytest.mark.parametrize("max_bias", [1e308, 1e39, 5e-324])
def test_extreme_max_bias_gives_the_rounded_slopes_without_warnings(
    convention: str, max_bias: float
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        slopes = posenc.alibi_slopes(6, max_bias=max_bias, convention=convention)  # type: ignore[arg-type]
    # 2^(-max_bias·k/n): 0 once the exponent is beyond the float range, 1 when it is tiny
    assert slopes.tolist() == ([1.0] * 6 if max_bias < 1 else [0.0] * 6)


def test_xpos_scales_of_a_huge_gamma_are_finite() -> None:
    scales = posenc.xpos_scales([0, 100, -100], 8, gamma=1e308)
    assert np.isfinite(scales).all()
    np.testing.assert_allclose(scales, 1.0, rtol=1e-15)  # ζ = (2k/d + γ)/(1 + γ) → 1


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: posenc.fire_distance(2, 2, c=[1.0, 2.0]), "c"),
        (lambda: posenc.fire_distance(2, 2, threshold=np.ones(1)), "threshold"),
        (lambda: posenc.xpos_scales(2, 4, scale_base=[512.0]), "scale_base"),
        (lambda: posenc.xpos_scales(2, 4, gamma=np.array([0.4, 0.5])), "gamma"),
    ],
)
def test_scalar_parameters_refuse_arrays_by_name(call: Callable[[], Any], name: str) -> None:
    with pytest.raises((TypeError, ValueError), match=rf"\b{name} must be a number"):
        call()


def test_sandwich_frequencies_beyond_float64_are_refused_naming_base() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="base=5e-324 with dim=64"):
            posenc.sandwich_bias(1, 3, 3, dim=64, base=5e-324)
        assert np.isfinite(posenc.sandwich_bias(1, 3, 3, dim=64, base=1e308)).all()
