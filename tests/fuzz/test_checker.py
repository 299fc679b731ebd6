"""The checks of the fuzz suite can fail: each rejects a wrong result or a wrong outcome."""

from __future__ import annotations

import math

import numpy as np
import pytest

import posenc

from .checks import check_rotation, check_rows
from .contract import Call, Violation, run
from .reference import check_pair_norms, check_relative, sinusoid_channels

POSITIONS = [100, 101, 5_000_000]


def table(dtype=np.float32) -> np.ndarray:
    return posenc.sinusoidal(POSITIONS, 16, dtype=dtype).astype(np.float64)


def test_an_exact_table_passes() -> None:
    check_rows(table(), POSITIONS, sinusoid_channels(16, 10000.0, "paper"), "float32")


@pytest.mark.parametrize("error", [1.5e-7, -3e-7, 1e-3])
@pytest.mark.parametrize("row", [0, 1, 2])
def test_one_corrupted_element_is_rejected(error: float, row: int) -> None:
    bad = table()
    bad[row, 5] += error
    with pytest.raises(AssertionError, match=f"row {row} channel 5"):
        check_rows(bad, POSITIONS, sinusoid_channels(16, 10000.0, "paper"), "float32")


def test_a_float16_value_two_ulps_off_is_rejected() -> None:
    bad = posenc.sinusoidal(POSITIONS, 8, dtype=np.float16)
    bad[2, 3] = np.nextafter(np.nextafter(bad[2, 3], np.float16(2)), np.float16(2))
    with pytest.raises(AssertionError):
        check_rows(
            bad.astype(np.float64), POSITIONS, sinusoid_channels(8, 10000.0, "paper"), "float16"
        )


def test_the_other_convention_is_rejected() -> None:
    with pytest.raises(AssertionError):
        check_rows(table(), POSITIONS, sinusoid_channels(16, 10000.0, "marian"), "float32")


def _rotation(pairs: str = "half"):
    x = np.random.default_rng(0).normal(size=(3, 8))
    cos, sin = posenc.rotary_cos_sin([1, 7, 300], 8, pairs=pairs, dtype=np.float64)
    return x, cos, sin


def test_a_rotation_passes_and_a_scaled_one_is_rejected() -> None:
    x, cos, sin = _rotation()
    out = posenc.apply_rotary(x, cos, sin)
    check_rotation(x, out, cos, sin, "half", "float64")
    check_pair_norms(x, out, "half", 8, 1.0, 1e-12)
    with pytest.raises(AssertionError, match="changes its norm"):
        check_pair_norms(x, out * 1.001, "half", 8, 1.0, 1e-6)
    with pytest.raises(AssertionError, match="rotation at"):
        check_rotation(x, out * 1.001, cos, sin, "half", "float64")


def test_a_rotation_of_the_wrong_pairs_is_rejected() -> None:
    x, cos, sin = _rotation("interleaved")
    wrong = posenc.apply_rotary(x, *_rotation("half")[1:])
    with pytest.raises(AssertionError):
        check_rotation(x, wrong, cos, sin, "interleaved", "float64")


def test_dot_products_that_depend_on_absolute_positions_are_rejected() -> None:
    def quadratic(v, p):  # angles p**2 * ω: a rotation, but not a relative one
        cos, sin = posenc.rotary_cos_sin([p * p], 4, dtype=np.float64)
        return posenc.apply_rotary(np.asarray(v)[None], cos, sin)[0]

    q, k = np.array([1.0, 0.5, -0.3, 2.0]), np.array([0.2, 1.0, 0.7, -1.0])
    with pytest.raises(AssertionError, match="absolute positions"):
        check_relative(quadratic, q, k, (3, 5), 4, 1e-9)


def _fake(behaviour):
    def fn(d_model):
        return behaviour(d_model)

    return fn


def _raise(exc):
    def behaviour(_):
        raise exc

    return behaviour


@pytest.mark.parametrize(
    ("behaviour", "hostile", "kind"),
    [
        (_raise(ValueError("must be positive")), {"d_model"}, "unnamed"),
        (_raise(MemoryError("Unable to allocate")), {"d_model"}, "raised"),
        (_raise(RuntimeError("d_model boom")), {"d_model"}, "raised"),
        (_raise(ValueError("d_model must be positive")), set(), "refused"),
        (lambda d: np.zeros(d), {"d_model"}, "accepted"),
        (lambda d: np.full(d, math.nan), set(), "wrong"),
    ],
)
def test_the_contract_rejects_every_other_outcome(behaviour, hostile, kind) -> None:
    def check(result):
        assert np.all(np.isfinite(result)), "non-finite values"

    call = Call("fake", _fake(behaviour), {"d_model": 3}, frozenset(hostile), frozenset(), check)
    with pytest.raises(Violation) as info:
        run(call)
    assert info.value.kind == kind


def test_the_contract_accepts_a_named_refusal_and_a_checked_result() -> None:
    refuse = Call(
        "fake",
        _fake(_raise(ValueError("d_model must be >= 1, got 0"))),
        {"d_model": 0},
        frozenset({"d_model"}),
    )
    assert run(refuse) is None
    accept = Call("fake", _fake(lambda d: np.zeros(d)), {"d_model": 3})
    assert run(accept).shape == (3,)
