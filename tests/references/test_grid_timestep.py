"""Grids and timestep embeddings against the REAL diffusers, timm and positional-encodings code.

Each library is optional: a test whose library cannot be imported is skipped with the reason.
Reference values come from the library; the exact values that posenc must be closer to come
from the float64 formulas written in ``tests/core/test_grid.py`` and ``tests/core/test_timestep.py``
(neither calls posenc).

Tolerances. diffusers' grids compute the angles in float64 from float32 coordinates: where the
coordinates are integers (base_size equal to the grid, scales 1) the tables agree to float64
rounding (1e-13); where diffusers divides the coordinates in float32 they differ by the
coordinate's rounding, about 1.2e-7 relative (``2e-7 * max_coordinate``). timm,
positional-encodings and diffusers' timestep embedding compute frequencies and angles in
float32: ``1e-6 + 2e-7 * max_angle`` (as in ``test_references.py``). In every case posenc's
float32 table is within half a float32 ulp (6e-8) of the exact value and closer to it than
the reference.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posenc import sinusoidal_grid, timestep_embedding  # noqa: E402
from posenc.torch import SinusoidalGridEncoding, TimestepEmbedding  # noqa: E402
from tests.core.test_grid import expected_grid  # noqa: E402
from tests.core.test_timestep import diffusers_formula  # noqa: E402
from tests.tolerance import assert_close_float32_recipe, assert_close_ulp  # noqa: E402

HALF_ULP = 6e-8  # float32 rounding of a value of magnitude <= 1


def _import(module: str, what: str):
    """Import ``module`` or skip: missing, or failing to import (a broken dependency)."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or e.g. RuntimeError from a mismatched build
        pytest.skip(f"{what} cannot be imported ({type(exc).__name__}: {exc})")


def diffusers_embeddings():
    return _import("diffusers.models.embeddings", "diffusers (reference grids and timesteps)")


def timm_sincos():
    """timm's ``layers/pos_embed_sincos.py``, imported normally when timm imports.

    ``import timm`` imports torchvision, and a torchvision build that does not match torch
    (a CUDA torchvision beside CPU torch) raises RuntimeError there. The functions tested here
    need only torch, so then the installed files ``pos_embed_sincos.py``, ``grid.py``,
    ``trace_utils.py`` and ``_fx.py`` are loaded as a package of their own, with torchvision
    hidden while they load (``_fx.py`` treats it as optional). The code run is timm's own.
    """
    spec = importlib.util.find_spec("timm")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("timm is not installed (reference build_sincos2d_pos_embed)")
    try:
        return importlib.import_module("timm.layers.pos_embed_sincos")
    except Exception as exc:
        failure = f"{type(exc).__name__}: {exc}"
    name = "_timm_layers_for_posenc_tests"
    if f"{name}.pos_embed_sincos" in sys.modules:
        return sys.modules[f"{name}.pos_embed_sincos"]
    package = types.ModuleType(name)
    package.__path__ = [str(Path(spec.submodule_search_locations[0]) / "layers")]
    sys.modules[name] = package
    missing = object()
    saved = sys.modules.get("torchvision", missing)
    sys.modules["torchvision"] = None  # type: ignore[assignment]
    try:
        return importlib.import_module(f"{name}.pos_embed_sincos")
    except Exception as exc:
        pytest.skip(f"timm cannot be imported ({failure}) nor loaded alone ({exc})")
    finally:
        if saved is missing:
            del sys.modules["torchvision"]
        else:
            sys.modules["torchvision"] = saved


def positional_encodings():
    return _import("positional_encodings.torch_encodings", "positional-encodings")


def as64(tensor) -> np.ndarray:
    return np.asarray(torch.as_tensor(tensor).to(torch.float64))


def max_error(table, exact: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(table, dtype=np.float64) - exact)))


# -- diffusers: get_2d_sincos_pos_embed ----------------------------------------------------------


@pytest.mark.parametrize(("n", "d"), [(2, 8), (7, 64), (16, 1152), (32, 256)])
@pytest.mark.parametrize("extra_tokens", [0, 1, 4])
def test_diffusers_2d_with_integer_coordinates_agrees_to_float64(n, d, extra_tokens) -> None:
    emb = diffusers_embeddings()
    reference = emb.get_2d_sincos_pos_embed(
        d, n, cls_token=extra_tokens > 0, extra_tokens=extra_tokens, base_size=n
    )
    assert reference.dtype == torch.float64
    ours = sinusoidal_grid((n, n), d, extra_tokens=extra_tokens, dtype=np.float64)
    # Both float64: a few float64 roundings of angles below n (4 ulps at scale n).
    assert_close_ulp(ours, as64(reference), ulps=4, dtype=np.float64, scale=n)
    # Rounded once to float32 they are the same table (diffusers' PatchEmbed keeps .float()):
    # the float64 tables differ by ~1e-16, which moves a float32 rounding with odds ~1e-9.
    ours32 = sinusoidal_grid((n, n), d, extra_tokens=extra_tokens)
    assert np.array_equal(ours32, reference.float().numpy())


def test_diffusers_cls_token_without_extra_tokens_adds_nothing() -> None:
    emb = diffusers_embeddings()
    reference = emb.get_2d_sincos_pos_embed(16, 4, cls_token=True, extra_tokens=0, base_size=4)
    assert reference.shape == (16, 16)  # unlike MAE's cls_token=True
    ours = sinusoidal_grid((4, 4), 16, dtype=np.float64)
    assert_close_ulp(ours, as64(reference), ulps=4, dtype=np.float64, scale=4)  # as above


@pytest.mark.parametrize(
    ("shape", "base_size", "scale"),
    [((3, 5), 16, 1.0), ((16, 16), 20, 3.0), ((24, 40), 16, 0.5), ((6, 6), 7, 1.5)],
)
def test_diffusers_2d_base_size_and_interpolation_scale(shape, base_size, scale) -> None:
    emb = diffusers_embeddings()
    d = 64
    reference = as64(
        emb.get_2d_sincos_pos_embed(
            d, shape, base_size=base_size, interpolation_scale=scale, output_type="pt"
        )
    )
    ours = sinusoidal_grid(
        shape, d, base_size=base_size, interpolation_scale=scale, dtype=np.float64
    )
    coords = [np.arange(n) * base_size / (n * scale) for n in shape]
    largest = max(float(c.max()) for c in coords)
    # diffusers rounds the coordinates to float32 (half an ulp of each, the angle follows)
    assert_close_ulp(ours, reference, ulps=1, dtype=np.float32, scale=largest + 1)
    # diffusers rounds the rescaled coordinates to float32; posenc keeps them in float64.
    exact = expected_grid("mae", coords, d)
    assert max_error(ours, exact) <= 1e-13
    assert max_error(reference, exact) > 1e-9
    assert (
        max_error(sinusoidal_grid(shape, d, base_size=base_size, interpolation_scale=scale), exact)
        <= HALF_ULP
    )


def test_diffusers_patch_embed_buffer_and_resolution_change() -> None:
    emb = diffusers_embeddings()
    torch.manual_seed(0)
    patch = emb.PatchEmbed(height=32, width=32, patch_size=4, in_channels=3, embed_dim=64)
    buffer = patch.pos_embed[0]  # float32, (8 * 8, 64), base_size = 32 // 4
    ours = SinusoidalGridEncoding(64, grid_shape=(8, 8), base_size=8)
    assert torch.equal(ours.pe, buffer)
    # Another resolution: PatchEmbed recomputes with the same base_size, as the module does.
    image = torch.randn(1, 3, 24, 40)
    tokens = patch.proj(image).flatten(2).transpose(1, 2)
    reference = patch(image)
    ours_out = ours(tokens, grid_shape=(6, 10))
    # coordinates up to 7.2 rounded to float32 by diffusers (an ulp of the angle), then the
    # float32 addition rounds once at the output's magnitude
    scale = 7.2 + float(reference.abs().max())
    assert_close_ulp(ours_out, reference, ulps=2, scale=scale, what="patch embeddings")


# -- diffusers: get_3d_sincos_pos_embed ---------------------------------------------------------


@pytest.mark.parametrize("d", [16, 64, 192])
@pytest.mark.parametrize(("t", "h", "w"), [(4, 3, 5), (1, 6, 6), (13, 2, 9)])
def test_diffusers_3d_with_unit_scales_agrees_to_float64(d, t, h, w) -> None:
    emb = diffusers_embeddings()
    reference = emb.get_3d_sincos_pos_embed(d, (w, h), t)  # spatial_size is (width, height)
    assert reference.shape == (t, h * w, d)
    ours = sinusoidal_grid((t, h, w), d, convention="diffusers_3d", dtype=np.float64)
    # Both float64: a few float64 roundings of angles below max(t, h, w) (4 ulps there).
    got = ours.reshape(t, h * w, d)
    assert_close_ulp(got, as64(reference), ulps=4, dtype=np.float64, scale=max(t, h, w))


@pytest.mark.parametrize(("temporal", "spatial"), [(1.5, 1.875), (0.75, 3.0)])
def test_diffusers_3d_interpolation_scales(temporal: float, spatial: float) -> None:
    emb = diffusers_embeddings()
    t, h, w, d = 7, 5, 9, 64
    reference = as64(
        emb.get_3d_sincos_pos_embed(
            d,
            (w, h),
            t,
            spatial_interpolation_scale=spatial,
            temporal_interpolation_scale=temporal,
        )
    ).reshape(-1, d)
    ours = sinusoidal_grid(
        (t, h, w),
        d,
        convention="diffusers_3d",
        interpolation_scale=(temporal, spatial, spatial),
        dtype=np.float64,
    )
    coords = [np.arange(t) / temporal, np.arange(h) / spatial, np.arange(w) / spatial]
    # diffusers rounds the coordinates (<= 12) to float32: half an ulp of the angle
    assert_close_ulp(ours, reference, ulps=1, dtype=np.float32, scale=13)
    exact = expected_grid("diffusers_3d", coords, d)
    assert max_error(ours, exact) <= 1e-13
    assert max_error(reference, exact) > 1e-9


# -- diffusers: get_timestep_embedding and Timesteps ---------------------------------------------

TIMESTEP_CONFIGS = [
    # dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period
    (320, True, 0.0, 1.0, 10000),  # Stable Diffusion UNet
    (256, True, 0.0, 1.0, 10000),  # DiT / PixArt
    (256, False, 1.0, 1.0, 10000),  # the function's defaults
    (33, False, 1.0, 1.0, 10000),  # odd dim: zero column
    (64, True, 0.5, 1000.0, 100),
]


@pytest.mark.parametrize(("dim", "flip", "shift", "scale", "max_period"), TIMESTEP_CONFIGS)
def test_diffusers_get_timestep_embedding(dim, flip, shift, scale, max_period) -> None:
    emb = diffusers_embeddings()
    t = torch.tensor([0.0, 0.5, 1.0, 2.25, 10.0, 99.5, 500.0, 999.0])
    if scale != 1.0:
        t = t / 1000.0  # timesteps in [0, 1], scaled back up
    reference = emb.get_timestep_embedding(
        t,
        dim,
        flip_sin_to_cos=flip,
        downscale_freq_shift=shift,
        scale=scale,
        max_period=max_period,
    )
    t64 = t.numpy().astype(np.float64)
    kwargs = {
        "flip_sin_to_cos": flip,
        "downscale_freq_shift": shift,
        "scale": scale,
        "max_period": max_period,
    }
    ours = timestep_embedding(t64, dim, **kwargs)
    largest = float(np.max(np.abs(scale * t64)))
    assert_close_float32_recipe(ours, as64(reference), max_angle=largest)
    exact = diffusers_formula(t64, dim, flip=flip, shift=shift, scale=scale, max_period=max_period)
    assert max_error(ours, exact) <= HALF_ULP
    assert max_error(reference, exact) > 1e-6  # float32 frequencies and angles
    module = TimestepEmbedding(dim, **kwargs)
    assert torch.equal(module(t), torch.from_numpy(ours))


def test_diffusers_timesteps_module_equal_where_its_arithmetic_is_exact() -> None:
    emb = diffusers_embeddings()
    dim = 320
    reference = emb.Timesteps(dim, flip_sin_to_cos=True, downscale_freq_shift=0)
    ours = TimestepEmbedding(dim, flip_sin_to_cos=True, downscale_freq_shift=0)
    t = torch.arange(0, 1000, 7, dtype=torch.float32)
    ref_out, our_out = reference(t), ours(t)
    assert ref_out.dtype == our_out.dtype == torch.float32
    # t = 0: no rounding anywhere, so the rows are identical.
    assert torch.equal(ref_out[0], our_out[0])
    # Column k = 0 has ω_0 = exp(0) = 1 exactly, so diffusers' angle t·1 is exact too: only
    # its float32 cos/sin round (to within one ulp; posenc rounds the exact value once).
    half = dim // 2
    for column in (0, half):
        ref_col, our_col = ref_out[:, column].numpy(), our_out[:, column].numpy()
        assert np.all(np.abs(ref_col - our_col) <= np.spacing(np.abs(our_col)))
    exact = diffusers_formula(t.numpy().astype(np.float64), dim, flip=True, shift=0.0)
    assert np.array_equal(our_out[:, [0, half]].numpy(), exact[:, [0, half]].astype(np.float32))
    # Elsewhere its float32 frequencies move the angles by up to ~1e-7·t.
    assert_close_float32_recipe(as64(our_out), as64(ref_out), max_angle=994)
    assert max_error(our_out, exact) <= HALF_ULP < 1e-6 < max_error(ref_out, exact)


def test_diffusers_gives_nan_for_one_frequency_with_shift_one_and_posenc_does_not() -> None:
    emb = diffusers_embeddings()
    t = torch.tensor([0.0, 3.0])
    reference = emb.get_timestep_embedding(t, 2, downscale_freq_shift=1)
    assert torch.isnan(reference).all()  # 0 / (1 - 1)
    ours = TimestepEmbedding(2, downscale_freq_shift=1.0)(t)
    assert torch.equal(ours, torch.stack([torch.sin(t), torch.cos(t)], dim=-1))


# -- timm: build_sincos2d_pos_embed ---------------------------------------------------------------


@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize(("shape", "dim"), [((4, 4), 8), ((3, 7), 64), ((14, 14), 384)])
@pytest.mark.parametrize("temperature", [10000.0, 100.0])
def test_timm_build_sincos2d_pos_embed(interleave, shape, dim, temperature) -> None:
    timm = timm_sincos()
    reference = timm.build_sincos2d_pos_embed(
        list(shape), dim=dim, temperature=temperature, interleave_sin_cos=interleave
    )
    convention = "timm_interleaved" if interleave else "timm"
    ours = sinusoidal_grid(shape, dim, base=temperature, convention=convention)
    assert reference.shape == ours.shape
    largest = max(shape) - 1
    assert_close_float32_recipe(ours, as64(reference), max_angle=largest)
    exact = expected_grid(
        convention, [np.arange(n, dtype=np.float64) for n in shape], dim, temperature
    )
    our_error, timm_error = max_error(ours, exact), max_error(reference, exact)
    assert our_error <= HALF_ULP
    assert our_error <= timm_error
    if max(shape) >= 14:
        assert timm_error > 1e-7  # float32 frequencies


def test_timm_reverse_coord_is_the_transposed_shape() -> None:
    timm = timm_sincos()
    reference = timm.build_sincos2d_pos_embed([3, 5], dim=32, reverse_coord=True)
    ours = sinusoidal_grid((5, 3), 32, convention="timm")
    assert_close_float32_recipe(ours, as64(reference), max_angle=4)
    assert not np.allclose(sinusoidal_grid((3, 5), 32, convention="timm")[1:], as64(reference)[1:])


# -- positional-encodings: PositionalEncoding2D / 3D ---------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3, 5, 8, 13, 64])
def test_positional_encodings_2d(d: int) -> None:
    module = positional_encodings().PositionalEncoding2D(d)
    x, y = 5, 9
    reference = module(torch.zeros(2, x, y, d))
    ours = sinusoidal_grid((x, y), d, convention="positional_encodings", flatten=False)
    assert reference.shape == (2, *ours.shape)
    for b in range(2):
        assert_close_float32_recipe(ours, as64(reference[b]), max_angle=8)
    coords = [np.arange(x, dtype=np.float64), np.arange(y, dtype=np.float64)]
    exact = expected_grid("positional_encodings", coords, d).reshape(x, y, d)
    assert max_error(ours, exact) <= HALF_ULP
    assert max_error(ours, exact) <= max_error(reference[0], exact)


@pytest.mark.parametrize("d", [1, 4, 6, 7, 13, 48])
def test_positional_encodings_3d(d: int) -> None:
    module = positional_encodings().PositionalEncoding3D(d)
    shape = (3, 4, 6)
    reference = module(torch.zeros(1, *shape, d))[0]
    ours = sinusoidal_grid(shape, d, convention="positional_encodings", flatten=False)
    assert_close_float32_recipe(ours, as64(reference), max_angle=5)
    exact = expected_grid(
        "positional_encodings", [np.arange(n, dtype=np.float64) for n in shape], d
    )
    assert max_error(ours.reshape(-1, d), exact) <= HALF_ULP


@pytest.mark.parametrize("d", [3, 8, 11])
def test_positional_encodings_1d_is_the_one_axis_grid(d: int) -> None:
    module = positional_encodings().PositionalEncoding1D(d)
    reference = module(torch.zeros(1, 300, d))[0]
    ours = sinusoidal_grid((300,), d, convention="positional_encodings")
    assert_close_float32_recipe(ours, as64(reference), max_angle=299)
