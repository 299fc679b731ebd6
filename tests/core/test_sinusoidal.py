"""The NumPy core: shapes, dtypes, conventions' layouts and argument errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc._conventions import get_convention
from posenc._features import feature_slices
from tests.tolerance import assert_close_ulp


def test_length_and_array_positions_agree() -> None:
    assert np.array_equal(posenc.sinusoidal(7, 10), posenc.sinusoidal(np.arange(7), 10))
    assert np.array_equal(posenc.sinusoidal(7, 10), posenc.sinusoidal(list(range(7)), 10))


@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3), (2, 1, 4)])
def test_any_shape_of_positions(shape: tuple[int, ...]) -> None:
    positions = np.arange(int(np.prod(shape))).reshape(shape)
    out = posenc.sinusoidal(positions, 6)
    assert out.shape == (*shape, 6)
    assert np.array_equal(out.reshape(-1, 6), posenc.sinusoidal(positions.reshape(-1), 6))


def test_zero_length_gives_empty_table() -> None:
    assert posenc.sinusoidal(0, 4).shape == (0, 4)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_output_dtype(dtype: type) -> None:
    assert posenc.sinusoidal(3, 4, dtype=dtype).dtype == dtype


def test_default_dtype_is_float32_and_rounds_the_float64_table_once() -> None:
    table64 = posenc.sinusoidal(100, 16, dtype=np.float64)
    assert np.array_equal(posenc.sinusoidal(100, 16), table64.astype(np.float32))
    assert np.array_equal(posenc.sinusoidal(100, 16, dtype="float16"), table64.astype(np.float16))


def test_integer_and_float_positions_agree_and_fractions_work() -> None:
    assert np.array_equal(posenc.sinusoidal([3, 4], 8), posenc.sinusoidal([3.0, 4.0], 8))
    half = posenc.sinusoidal([0.5], 2, dtype=np.float64)[0]
    assert half == pytest.approx([math.sin(0.5), math.cos(0.5)], abs=1e-15)


def test_negative_positions_are_the_odd_and_even_extension() -> None:
    pos = posenc.sinusoidal(np.arange(1, 20), 8, dtype=np.float64)
    neg = posenc.sinusoidal(-np.arange(1, 20), 8, dtype=np.float64)
    # the same float64 angles up to sign, sin odd and cos even: an ulp of the largest angle
    assert_close_ulp(neg[:, 0::2], -pos[:, 0::2], ulps=1, scale=19)
    assert_close_ulp(neg[:, 1::2], pos[:, 1::2], ulps=1, scale=19)


def test_chunked_build_equals_unchunked() -> None:
    """Tables larger than one internal chunk (2**18 angles) are built piecewise."""
    positions = np.arange(3000)
    big = posenc.sinusoidal(positions, 512, dtype=np.float64)
    omega = posenc.frequencies(512)
    angles = positions[:, None] * omega
    assert np.array_equal(big[:, 0::2], np.sin(angles))
    assert np.array_equal(big[:, 1::2], np.cos(angles))


@pytest.mark.parametrize("d_model", [1, 2, 3, 4, 5, 6, 7, 11, 64, 65])
@pytest.mark.parametrize("convention", sorted(posenc.CONVENTIONS))
def test_every_channel_is_filled_by_its_layout(d_model: int, convention: str) -> None:
    layout = feature_slices(d_model, convention)
    hit = np.zeros(d_model, dtype=int)
    for part in (layout.sin, layout.cos, layout.zero):
        hit[part] += 1
    assert np.all(hit == 1)
    assert len(range(d_model)[layout.sin]) == layout.n_sin
    assert len(range(d_model)[layout.cos]) == layout.n_cos


@pytest.mark.parametrize("d_model", [1, 2, 3, 8, 11])
def test_odd_d_rules(d_model: int) -> None:
    p = np.arange(1, 6)
    paper = posenc.sinusoidal(p, d_model, dtype=np.float64)
    # paper: interleaved, ceil(d/2) sin columns and floor(d/2) cos columns
    omega = 10000.0 ** (-2 * np.arange((d_model + 1) // 2) / d_model)
    # float64 angles p·ω (ω by two formulas), then sin/cos: 4 ulps of the largest angle (5)
    assert_close_ulp(paper[:, 0::2], np.sin(p[:, None] * omega), ulps=4, scale=5)
    assert_close_ulp(paper[:, 1::2], np.cos(p[:, None] * omega[: d_model // 2]), ulps=4, scale=5)
    t2t = posenc.sinusoidal(p, d_model, convention="tensor2tensor", dtype=np.float64)
    if d_model % 2:
        assert np.all(t2t[:, -1] == 0.0)
    marian = posenc.sinusoidal(p, d_model, convention="marian", dtype=np.float64)
    n_sin = (d_model + 1) // 2
    np.testing.assert_array_equal(marian[:, :n_sin], paper[:, 0::2])  # the same columns
    np.testing.assert_array_equal(marian[:, n_sin:], paper[:, 1::2])


@pytest.mark.parametrize("d_model", [1, 2, 3, 8, 11, 64])
def test_musicgen_is_tensor2tensor_with_its_halves_swapped(d_model: int) -> None:
    p = np.arange(-3, 40)
    t2t = posenc.sinusoidal(p, d_model, convention="tensor2tensor", dtype=np.float64)
    musicgen = posenc.sinusoidal(p, d_model, convention="musicgen", dtype=np.float64)
    h = d_model // 2
    assert np.array_equal(musicgen[:, :h], t2t[:, h : 2 * h])
    assert np.array_equal(musicgen[:, h : 2 * h], t2t[:, :h])
    assert np.all(musicgen[:, 2 * h :] == 0.0)
    omega = posenc.frequencies(d_model, convention="musicgen")
    assert np.array_equal(omega, posenc.frequencies(d_model, convention="tensor2tensor"))


def test_tensor2tensor_frequencies_end_at_one_over_base() -> None:
    omega = posenc.frequencies(10, base=500.0, convention="tensor2tensor")
    assert omega.shape == (5,)
    assert omega[0] == 1.0
    assert omega[-1] == pytest.approx(1 / 500.0, rel=1e-15)
    # d = 2 and 3 have one frequency (tensor2tensor's max(h - 1, 1) guard), d = 1 none.
    assert posenc.frequencies(3, convention="tensor2tensor").tolist() == [1.0]
    assert posenc.frequencies(1, convention="tensor2tensor").shape == (0,)
    assert np.all(posenc.sinusoidal(4, 1, convention="tensor2tensor") == 0)


@given(
    d_model=st.integers(1, 40),
    base=st.floats(1.0, 1e6),
    position=st.integers(-(10**6), 10**6),
)
def test_paper_formula_per_element(d_model: int, base: float, position: int) -> None:
    row = posenc.sinusoidal([position], d_model, base=base, dtype=np.float64)[0]
    for j in range(d_model):
        angle = position / base ** (2 * (j // 2) / d_model)
        expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
        assert abs(row[j] - expected) <= 1e-9


def test_base_changes_the_table_and_one_is_allowed() -> None:
    assert not np.array_equal(posenc.sinusoidal(5, 8, base=100.0), posenc.sinusoidal(5, 8))
    flat = posenc.sinusoidal(5, 4, base=1.0, dtype=np.float64)
    assert np.array_equal(flat[:, 0], flat[:, 2])


def test_conventions_mapping_is_documented_and_read_only() -> None:
    assert set(posenc.CONVENTIONS) == {"paper", "tensor2tensor", "marian", "musicgen"}
    assert "get_timing_signal_1d" in posenc.CONVENTIONS["tensor2tensor"]
    assert "MusicgenSinusoidalPositionalEmbedding" in posenc.CONVENTIONS["musicgen"]
    assert "MarianSinusoidalPositionalEmbedding" in posenc.CONVENTIONS["marian"]
    with pytest.raises(TypeError):
        posenc.CONVENTIONS["mine"] = "x"  # type: ignore[index]
    assert get_convention(get_convention("paper")).name == "paper"


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"d_model": 0}, ValueError, r"d_model must be an integer >= 1, got 0"),
        ({"d_model": -3}, ValueError, r"d_model must be an integer >= 1, got -3"),
        ({"d_model": 2.0}, TypeError, r"d_model must be an integer >= 1, got 2\.0"),
        ({"d_model": True}, TypeError, r"d_model must be an integer"),
        ({"d_model": "8"}, TypeError, r"d_model must be an integer"),
        ({"base": 0.0}, ValueError, r"base must be a positive finite number, got 0\.0"),
        ({"base": -10.0}, ValueError, r"base must be a positive finite number, got -10\.0"),
        ({"base": float("nan")}, ValueError, r"base must be a positive finite number, got nan"),
        ({"base": float("inf")}, ValueError, r"base must be a positive finite number, got inf"),
        ({"base": "1e4"}, TypeError, r"base must be a positive finite number, got '1e4'"),
        ({"convention": "bert"}, ValueError, r"convention must be one of 'marian', 'musicgen', "),
        ({"convention": 3}, TypeError, r"convention must be a string"),
        ({"dtype": np.int32}, TypeError, r"dtype must be one of float16, float32, float64"),
        ({"dtype": "bfloat16"}, TypeError, r"got 'bfloat16' \(for bfloat16 use posenc.torch\)"),
        ({"positions": -1}, ValueError, r"positions must be an integer >= 0, got -1"),
        ({"positions": [0.0, float("nan")]}, ValueError, r"positions must be finite, got nan"),
        ({"positions": [1.0, float("inf")]}, ValueError, r"positions must be finite, got inf"),
        ({"positions": [True, False]}, TypeError, r"booleans are not positions"),
        ({"positions": ["a"]}, TypeError, r"positions must contain integers or real numbers"),
        ({"positions": [1 + 2j]}, TypeError, r"positions must contain integers or real"),
        ({"positions": [[1, 2], [3]]}, TypeError, r"positions must be an array of numbers"),
        ({"positions": [2.0**60]}, ValueError, r"positions must lie within \+-2\*\*53"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict, error: type, match: str) -> None:
    args = {"positions": 4, "d_model": 8} | kwargs
    positions, d_model = args.pop("positions"), args.pop("d_model")
    with pytest.raises(error, match=match):
        posenc.sinusoidal(positions, d_model, **args)


def test_frequencies_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="d_model"):
        posenc.frequencies(0)
    with pytest.raises(ValueError, match="base"):
        posenc.frequencies(8, base=-1.0)
