"""The NumPy grid encodings (``posenc.sinusoidal_grid``): layouts, positions, knobs, MAE, errors.

References are written here from the channel diagrams in the grid module's docstring with
NumPy float64 (``expected_grid``, which never calls posenc), and MAE's
``get_2d_sincos_pos_embed``, re-typed from facebookresearch/mae ``util/pos_embed.py`` (that
repository is not installable) with its float32 arithmetic. The framework functions that do
install (diffusers, timm, positional-encodings) are compared in
``tests/references/test_grid_timestep.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc import GRID_CONVENTIONS, sinusoidal, sinusoidal_grid
from posenc._grid import get_grid_convention, grid_plan
from tests.tolerance import assert_close_float32_recipe, assert_close_ulp

# -- independent float64 references -----------------------------------------------------------


def _sin_cos_halves(x: np.ndarray, width: int, base: float) -> np.ndarray:
    """[sin(x ω_k) | cos(x ω_k)] with ω_k = base^(-k/(width/2)), k < width/2 (width even)."""
    k = np.arange(width // 2)
    angles = x[:, None] * base ** (-k / (width / 2))
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def _interleaved(x: np.ndarray, width: int, base: float) -> np.ndarray:
    """[sin, cos] pairs with ω_k = base^(-2k/width), k < width/2 (width even)."""
    k = np.arange(width // 2)
    angles = x[:, None] * base ** (-2 * k / width)
    out = np.empty((x.shape[0], width))
    out[:, 0::2], out[:, 1::2] = np.sin(angles), np.cos(angles)
    return out


def expected_grid(convention: str, coords: list[np.ndarray], d: int, base: float = 1e4):
    """The documented layout of ``convention`` for per-axis float64 coordinates, (prod, d).

    Cells are in row-major order of the axes (``indexing="ij"``).
    """
    mesh = [m.reshape(-1) for m in np.meshgrid(*coords, indexing="ij")]
    if convention == "mae":
        h, w = mesh
        return np.hstack([_sin_cos_halves(w, d // 2, base), _sin_cos_halves(h, d // 2, base)])
    if convention == "timm_interleaved":
        h, w = mesh
        return np.hstack([_sin_cos_halves(h, d // 2, base), _sin_cos_halves(w, d // 2, base)])
    if convention == "timm":
        h, w = mesh
        q = d // 4
        hh, ww = _sin_cos_halves(h, d // 2, base), _sin_cos_halves(w, d // 2, base)
        return np.hstack([hh[:, :q], ww[:, :q], hh[:, q:], ww[:, q:]])
    if convention == "diffusers_3d":
        t, h, w = mesh
        s = 3 * d // 8
        return np.hstack(
            [
                _sin_cos_halves(t, d // 4, base),
                _sin_cos_halves(w, s, base),
                _sin_cos_halves(h, s, base),
            ]
        )
    if convention == "positional_encodings":
        c = 2 * math.ceil(d / (2 * len(mesh)))
        return np.hstack([_interleaved(x, c, base) for x in mesh])[:, :d]
    raise AssertionError(convention)


def mae_get_2d_sincos_pos_embed(embed_dim: int, grid_size: int, cls_token: bool = False):
    """MAE's get_2d_sincos_pos_embed, re-typed (not imported) from reading its source.

    Its arithmetic: float32 cell indices, float32 frequencies 1/10000**(k/(D/4)), float32
    angles (einsum of two float32 arrays) and float32 sin/cos; meshgrid(w, h) so the column
    coordinate fills the first half; a float64 zero row in front when ``cls_token``.
    """
    cells = np.arange(grid_size, dtype=np.float32)
    cols, rows = np.meshgrid(cells, cells)  # cols varies along a row: MAE's "w goes first"

    def one_axis(half_dim: int, coordinate: np.ndarray) -> np.ndarray:
        exponent = np.arange(half_dim // 2, dtype=np.float32)
        exponent /= half_dim / 2.0
        omega = 1.0 / 10000**exponent  # float32 (NumPy 2 keeps the array's dtype)
        angles = np.einsum("m,d->md", coordinate.reshape(-1), omega)
        return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)

    emb = np.concatenate([one_axis(embed_dim // 2, cols), one_axis(embed_dim // 2, rows)], axis=1)
    if cls_token:
        emb = np.concatenate([np.zeros([1, embed_dim]), emb], axis=0)
    return emb


SIZES = {"mae": 2, "timm": 2, "timm_interleaved": 2, "diffusers_3d": 3}
MULTIPLE = {"mae": 4, "timm": 4, "timm_interleaved": 4, "diffusers_3d": 16}


# -- layouts ----------------------------------------------------------------------------------


@given(data=st.data())
def test_every_convention_follows_its_channel_diagram(data) -> None:
    convention = data.draw(st.sampled_from(sorted(GRID_CONVENTIONS)))
    if convention == "positional_encodings":
        ndim, d = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 40))
    else:
        ndim, d = SIZES[convention], MULTIPLE[convention] * data.draw(st.integers(1, 6))
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=ndim, max_size=ndim)))
    base = data.draw(st.sampled_from([10000.0, 100.0, 7.5]))
    ours = sinusoidal_grid(shape, d, convention=convention, base=base, dtype=np.float64)
    coords = [np.arange(n, dtype=np.float64) for n in shape]
    expected = expected_grid(convention, coords, d, base)
    # float64 angles below 6: a few roundings of the largest (4 float64 ulps of 6 + 1)
    assert_close_ulp(ours, expected, ulps=4, scale=max(shape) + 1)
    assert ours.shape == (math.prod(shape), d)


@pytest.mark.parametrize("convention", sorted(GRID_CONVENTIONS))
@pytest.mark.parametrize("d", [16, 48, 13, 1, 4])
def test_every_channel_is_filled_exactly_once(convention: str, d: int) -> None:
    conv = get_grid_convention(convention)
    d *= conv.multiple if d % conv.multiple else 1
    for ndim in conv.ndims:
        hits = np.zeros(d, dtype=int)
        for block in conv.blocks(d, ndim):
            for src, dst in block.columns:
                hits[dst] += 1
                assert len(range(block.width)[src]) == len(range(d)[dst])
        assert np.all(hits == 1), (ndim, hits)


def test_mae_is_timm_interleaved_with_the_axes_swapped() -> None:
    h, w, d = 3, 5, 32
    mae = sinusoidal_grid((h, w), d, flatten=False)
    swapped = sinusoidal_grid((w, h), d, convention="timm_interleaved", flatten=False)
    assert np.array_equal(mae, swapped.transpose(1, 0, 2))


def test_timm_layouts_are_a_channel_permutation_of_each_other() -> None:
    d = 24
    q = d // 4
    interleaved = sinusoidal_grid((4, 6), d, convention="timm_interleaved")
    plain = sinusoidal_grid((4, 6), d, convention="timm")
    # interleaved: [S(h) C(h) S(w) C(w)]; plain: [S(h) S(w) C(h) C(w)]
    order = np.r_[0:q, 2 * q : 3 * q, q : 2 * q, 3 * q : 4 * q]
    assert np.array_equal(plain, interleaved[:, order])
    assert not np.array_equal(plain, interleaved)


def test_each_axis_is_the_one_dimensional_table() -> None:
    d = 16
    grid = sinusoidal_grid((3, 7), d, dtype=np.float64, flatten=False)
    # mae: first half is the marian table of the column index, second half of the row index
    columns = sinusoidal(7, d // 2, convention="marian", dtype=np.float64)
    rows = sinusoidal(3, d // 2, convention="marian", dtype=np.float64)
    assert np.array_equal(grid[..., : d // 2], np.broadcast_to(columns, (3, 7, d // 2)))
    assert np.array_equal(grid[..., d // 2 :], np.broadcast_to(rows[:, None], (3, 7, d // 2)))


@pytest.mark.parametrize("d", [2, 3, 7, 8, 11])
def test_positional_encodings_one_axis_is_the_paper_table_of_even_width(d: int) -> None:
    ours = sinusoidal_grid((9,), d, convention="positional_encodings", dtype=np.float64)
    even = d + d % 2  # positional-encodings rounds the channels up to even and cuts after
    assert np.array_equal(ours, sinusoidal(9, even, dtype=np.float64)[:, :d])
    if d % 2:
        assert not np.allclose(ours, sinusoidal(9, d, dtype=np.float64))


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_positional_encodings_every_d(ndim: int) -> None:
    shape = (3, 4, 5)[:ndim]
    coords = [np.arange(n, dtype=np.float64) for n in shape]
    for d in range(1, 50):
        ours = sinusoidal_grid(shape, d, convention="positional_encodings", dtype=np.float64)
        expected = expected_grid("positional_encodings", coords, d)
        # float64 angles below 5 (4 float64 ulps of the largest + 1)
        assert_close_ulp(ours, expected, ulps=4, scale=max(shape) + 1, what=f"d={d}")


@pytest.mark.parametrize("d", [1, 2, 5])
def test_positional_encodings_small_odd_d_cut_the_last_axes(d: int) -> None:
    ours = sinusoidal_grid((2, 3, 4), d, convention="positional_encodings", dtype=np.float64)
    coords = [np.arange(n, dtype=np.float64) for n in (2, 3, 4)]
    expected = expected_grid("positional_encodings", coords, d)
    assert_close_ulp(ours, expected, ulps=4, scale=5)  # float64 angles below 4, as above
    if d <= 2:  # c = 2: only the first axis gets channels
        assert np.array_equal(ours.reshape(2, 3, 4, d)[0], np.broadcast_to(ours[0], (3, 4, d)))


# -- positions: base_size, interpolation_scale, offset -----------------------------------------


@given(
    convention=st.sampled_from(["mae", "timm", "timm_interleaved"]),
    shape=st.tuples(st.integers(1, 7), st.integers(1, 7)),
    base_size=st.one_of(st.none(), st.integers(1, 32), st.floats(0.5, 40.0)),
    scale=st.floats(0.25, 4.0),
    offset=st.tuples(st.integers(-5, 5), st.floats(-3.0, 3.0)),
)
def test_positions_follow_the_documented_formula(convention, shape, base_size, scale, offset):
    ours = sinusoidal_grid(
        shape,
        16,
        convention=convention,
        dtype=np.float64,
        base_size=base_size,
        interpolation_scale=scale,
        offset=offset,
    )
    coords = []
    for n, start in zip(shape, offset, strict=True):
        i = np.arange(n, dtype=np.float64)
        coords.append((start + i) * (base_size / n if base_size else 1.0) / scale)
    # float64 angles up to the largest |coordinate| (4 float64 ulps of it + 1)
    largest = max(float(np.abs(c).max()) for c in coords)
    assert_close_ulp(ours, expected_grid(convention, coords, 16), ulps=4, scale=largest + 1)


def test_per_axis_knobs_for_diffusers_3d() -> None:
    shape, d = (3, 2, 4), 32
    ours = sinusoidal_grid(
        shape, d, convention="diffusers_3d", interpolation_scale=(1.5, 0.5, 0.5), dtype="float64"
    )
    coords = [np.arange(3) / 1.5, np.arange(2) / 0.5, np.arange(4) / 0.5]
    expected = expected_grid("diffusers_3d", coords, d)
    assert_close_ulp(ours, expected, ulps=4, scale=7)  # float64 angles below 6, 4 ulps


@pytest.mark.parametrize("convention", sorted(GRID_CONVENTIONS))
def test_offset_encodes_a_crop_of_a_larger_grid(convention: str) -> None:
    ndim = get_grid_convention(convention).ndims[-1]
    d = 32 if convention != "positional_encodings" else 11
    big_shape = (5, 6, 7)[-ndim:]
    crop = (slice(1, 4), slice(2, 5), slice(3, 7))[-ndim:]
    big = sinusoidal_grid(big_shape, d, convention=convention, flatten=False)
    starts = tuple(s.start for s in crop)
    shape = tuple(s.stop - s.start for s in crop)
    cropped = sinusoidal_grid(shape, d, convention=convention, offset=starts, flatten=False)
    assert np.array_equal(cropped, big[crop])


def test_base_size_equal_to_the_grid_changes_nothing() -> None:
    plain = sinusoidal_grid((6, 6), 32)
    assert np.array_equal(sinusoidal_grid((6, 6), 32, base_size=6), plain)
    assert not np.array_equal(sinusoidal_grid((6, 6), 32, base_size=16), plain)
    plan = grid_plan((4, 8), 16, base_size=2, interpolation_scale=2.0)
    assert plan.factors == (0.25, 0.125)


# -- MAE (re-typed) -----------------------------------------------------------------------------


@pytest.mark.parametrize(("grid_size", "d"), [(2, 8), (7, 64), (14, 768), (16, 1024)])
@pytest.mark.parametrize("cls_token", [False, True])
def test_mae_get_2d_sincos_pos_embed(grid_size: int, d: int, cls_token: bool) -> None:
    reference = mae_get_2d_sincos_pos_embed(d, grid_size, cls_token=cls_token)
    ours = sinusoidal_grid((grid_size, grid_size), d, cls_token=cls_token)
    assert ours.shape == reference.shape
    assert_close_float32_recipe(ours, reference, max_angle=grid_size - 1)
    # MAE rounds in float32 at every step; posenc rounds the exact value once.
    coords = [np.arange(grid_size, dtype=np.float64)] * 2
    exact = expected_grid("mae", coords, d)
    start = int(cls_token)
    our_error = np.max(np.abs(ours[start:] - exact))
    mae_error = np.max(np.abs(reference[start:] - exact))
    assert our_error <= 6e-8
    assert our_error <= mae_error
    if grid_size >= 14:
        assert mae_error > 1e-7  # its float32 frequencies cost more than one rounding
    if cls_token:
        assert np.all(ours[0] == 0)
        assert np.all(reference[0] == 0)


# -- extra tokens, flatten, dtype --------------------------------------------------------------


def test_extra_tokens_prepend_zero_rows() -> None:
    plain = sinusoidal_grid((3, 4), 16)
    with_cls = sinusoidal_grid((3, 4), 16, cls_token=True)
    with_three = sinusoidal_grid((3, 4), 16, extra_tokens=3)
    assert with_cls.shape == (13, 16)
    assert with_three.shape == (15, 16)
    assert np.all(with_cls[0] == 0)
    assert np.all(with_three[:3] == 0)
    assert np.array_equal(with_cls[1:], plain)
    assert np.array_equal(with_three[3:], plain)
    assert np.array_equal(sinusoidal_grid((3, 4), 16, extra_tokens=0), plain)


def test_flatten_false_is_the_row_major_reshape() -> None:
    flat = sinusoidal_grid((2, 3, 4), 16, convention="diffusers_3d")
    grid = sinusoidal_grid((2, 3, 4), 16, convention="diffusers_3d", flatten=False)
    assert grid.shape == (2, 3, 4, 16)
    assert np.array_equal(grid.reshape(-1, 16), flat)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_output_dtype_is_the_float64_table_rounded_once(dtype) -> None:
    table64 = sinusoidal_grid((5, 6), 32, dtype=np.float64, interpolation_scale=0.3)
    out = sinusoidal_grid((5, 6), 32, dtype=dtype, interpolation_scale=0.3)
    assert out.dtype == dtype
    assert np.array_equal(out, table64.astype(dtype))


def test_shape_as_list_array_and_numpy_ints() -> None:
    expected = sinusoidal_grid((3, 5), 8)
    assert np.array_equal(sinusoidal_grid([3, 5], 8), expected)
    assert np.array_equal(sinusoidal_grid(np.array([3, 5]), 8), expected)
    assert np.array_equal(sinusoidal_grid((np.int64(3), np.int32(5)), 8), expected)


def test_registry_is_documented_and_read_only() -> None:
    assert set(GRID_CONVENTIONS) == {
        "mae",
        "timm",
        "timm_interleaved",
        "diffusers_3d",
        "positional_encodings",
    }
    assert "get_2d_sincos_pos_embed" in GRID_CONVENTIONS["mae"]
    assert "build_sincos2d_pos_embed" in GRID_CONVENTIONS["timm"]
    assert "interleave_sin_cos=True" in GRID_CONVENTIONS["timm_interleaved"]
    assert "get_3d_sincos_pos_embed" in GRID_CONVENTIONS["diffusers_3d"]
    assert "PositionalEncoding2D" in GRID_CONVENTIONS["positional_encodings"]
    with pytest.raises(TypeError):
        GRID_CONVENTIONS["mine"] = "x"  # type: ignore[index]
    conv = get_grid_convention("mae")
    assert get_grid_convention(conv) is conv


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (((3, 4), 6), {}, ValueError, r"d_model must be a multiple of 4 for convention 'mae'"),
        (((3, 4), 0), {}, ValueError, r"d_model must be an integer >= 1, got 0"),
        (((3, 4), 8.0), {}, TypeError, r"d_model must be an integer >= 1, got 8\.0"),
        (
            ((2, 3, 4), 24),
            {"convention": "diffusers_3d"},
            ValueError,
            r"d_model must be a multiple of 16 for convention 'diffusers_3d' .*got 24",
        ),
        (((3, 4), 10), {"convention": "timm"}, ValueError, r"multiple of 4 .*'timm'.*got 10"),
        (((3, 4, 5), 8), {}, ValueError, r"shape must be a tuple of 2 positive integers \(h, w\)"),
        (
            ((3, 4), 32),
            {"convention": "diffusers_3d"},
            ValueError,
            r"shape must be a tuple of 3 positive integers \(t, h, w\) .*got \(3, 4\)",
        ),
        (
            ((1, 2, 3, 4), 8),
            {"convention": "positional_encodings"},
            ValueError,
            r"shape must be a tuple of 1 .* or a tuple of 3",
        ),
        ((5, 8), {}, TypeError, r"shape must be a tuple of 2 positive integers .*got 5 \(int\)"),
        (("ab", 8), {}, TypeError, r"shape must be a tuple"),
        (((0, 4), 8), {}, ValueError, r"shape\[0\] must be an integer >= 1, got 0"),
        (((3, 2.0), 8), {}, TypeError, r"shape\[1\] must be an integer >= 1, got 2\.0"),
        (((3, 4), 8), {"convention": "vit"}, ValueError, r"convention must be one of 'diffus"),
        (((3, 4), 8), {"convention": 1}, TypeError, r"convention must be a string"),
        (((3, 4), 8), {"base": 0}, ValueError, r"base must be a positive finite number, got 0"),
        (((3, 4), 8), {"dtype": np.int8}, TypeError, r"dtype must be one of float16"),
        (((3, 4), 8), {"base_size": 0}, ValueError, r"base_size must be a positive finite"),
        (((3, 4), 8), {"base_size": "16"}, TypeError, r"base_size must be a positive finite"),
        (
            ((3, 4), 8),
            {"interpolation_scale": -1.0},
            ValueError,
            r"interpolation_scale must be a positive finite number, got -1\.0",
        ),
        (
            ((3, 4), 8),
            {"interpolation_scale": (1.0, 2.0, 3.0)},
            ValueError,
            r"interpolation_scale must be a number or a sequence of 2 numbers \(one per axis\)",
        ),
        (
            ((3, 4), 8),
            {"interpolation_scale": (1.0, 0.0)},
            ValueError,
            r"interpolation_scale\[1\] must be a positive finite number, got 0\.0",
        ),
        (
            ((3, 4), 8),
            {"interpolation_scale": 1e-320},
            ValueError,
            r"base_size / \(n \* interpolation_scale\) for axis 0 is inf",
        ),
        (((3, 4), 8), {"offset": float("nan")}, ValueError, r"offset must be a finite real"),
        (((3, 4), 8), {"offset": (0, "1")}, TypeError, r"offset\[1\] must be a finite real"),
        (((3, 4), 8), {"offset": 2.0**60}, ValueError, r"grid positions must lie within"),
        (((3, 4), 8), {"cls_token": 1}, TypeError, r"cls_token must be True or False, got 1"),
        (((3, 4), 8), {"extra_tokens": -1}, ValueError, r"extra_tokens must be an integer >= 0"),
        (
            ((3, 4), 8),
            {"cls_token": True, "extra_tokens": 2},
            ValueError,
            r"pass cls_token=True .* or extra_tokens=2 .*not both",
        ),
        (
            ((3, 4), 8),
            {"cls_token": True, "flatten": False},
            ValueError,
            r"flatten=False .* no place for 1 extra zero rows",
        ),
        (((3, 4), 8), {"flatten": "yes"}, TypeError, r"flatten must be True or False"),
    ],
)
def test_bad_arguments_name_the_argument(args, kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        sinusoidal_grid(*args, **kwargs)
