"""``posenc.torch.SinusoidalGridEncoding`` against the NumPy core.

References: ``posenc.sinusoidal_grid`` in float64 (rounded with ``cast_exact``, tested on its own
in ``test_cast.py``) and float32. Real diffusers, timm and positional-encodings grids are
compared in ``test_grid_timestep_references.py``.
"""

from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posenc import sinusoidal_grid  # noqa: E402
from posenc.torch import SinusoidalGridEncoding, cast_exact  # noqa: E402
from tests.torch.conftest import assert_same  # noqa: E402

GRIDS = [
    ("mae", (5, 7), 64, {}),
    ("mae", (3, 4), 32, {"base_size": 16, "interpolation_scale": 0.5, "cls_token": True}),
    ("timm", (6, 2), 16, {"offset": (1, 2.5)}),
    ("timm_interleaved", (4, 4), 32, {"extra_tokens": 3}),
    ("diffusers_3d", (3, 4, 5), 48, {"interpolation_scale": (1.5, 2.0, 2.0)}),
    ("positional_encodings", (4, 6), 13, {}),
    ("positional_encodings", (2, 3, 4), 7, {}),
    ("positional_encodings", (9,), 5, {}),
]

IDS = [f"{c}-{'x'.join(map(str, s))}-{d}" for c, s, d, _ in GRIDS]


def core(shape, d, dtype=torch.float32, **kwargs) -> torch.Tensor:
    """The NumPy core's grid, rounded once from float64 to ``dtype``."""
    table = torch.from_numpy(sinusoidal_grid(shape, d, dtype=np.float64, **kwargs))
    return cast_exact(table, dtype)


# -- SinusoidalGridEncoding ----------------------------------------------------------------------


@pytest.mark.parametrize(("convention", "shape", "d", "kwargs"), GRIDS, ids=IDS)
def test_grid_module_equals_the_numpy_core(convention, shape, d, kwargs) -> None:
    enc = SinusoidalGridEncoding(d, convention=convention, grid_shape=shape, **kwargs)
    expected = core(shape, d, convention=convention, **kwargs)
    assert torch.equal(enc.pe, expected)
    assert torch.equal(
        enc.pe, torch.from_numpy(sinusoidal_grid(shape, d, convention=convention, **kwargs))
    )
    x = torch.randn(2, *expected.shape)
    assert torch.equal(enc(x), x + expected)
    assert torch.equal(enc(x[0]), x[0] + expected)  # unbatched (N, d)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_grid_table_is_rounded_once_to_the_input_dtype(dtype) -> None:
    enc = SinusoidalGridEncoding(32, grid_shape=(6, 6), base_size=16, interpolation_scale=0.75)
    x = torch.zeros(1, 36, 32, dtype=dtype)
    expected = core((6, 6), 32, dtype, base_size=16, interpolation_scale=0.75)
    out = enc(x)
    assert out.dtype == dtype
    assert_same(out[0], expected)
    assert enc.pe.dtype == dtype  # the cache follows the input
    assert torch.equal(
        enc.encoding(dtype=torch.float32), core((6, 6), 32, base_size=16, interpolation_scale=0.75)
    )


def test_other_grid_shapes_per_call_keep_base_size() -> None:
    enc = SinusoidalGridEncoding(32, grid_shape=(4, 4), base_size=4)
    x = torch.randn(2, 6, 32)
    expected = core((2, 3), 32, base_size=4)
    assert torch.equal(enc(x, grid_shape=(2, 3)), x + expected)
    assert torch.equal(enc.encoding((2, 3)), expected)
    assert torch.equal(enc.encoding(), core((4, 4), 32, base_size=4))  # the default is kept
    assert enc.grid_shape == (4, 4)


def test_module_without_default_grid_needs_grid_shape() -> None:
    enc = SinusoidalGridEncoding(16, convention="timm")
    assert enc.pe.shape == (0, 16)
    x = torch.randn(3, 12, 16)
    assert torch.equal(enc(x, grid_shape=[3, 4]), x + core((3, 4), 16, convention="timm"))
    with pytest.raises(ValueError, match=r"grid_shape must be given"):
        enc(x)


def test_grid_cache_is_non_persistent_and_rebuilt_from_float64_on_casts() -> None:
    enc = SinusoidalGridEncoding(32, grid_shape=(5, 5), interpolation_scale=0.3)
    assert enc.state_dict() == {}
    assert "pe" in dict(enc.named_buffers())
    enc.to(torch.bfloat16)
    assert torch.equal(enc.pe, core((5, 5), 32, torch.bfloat16, interpolation_scale=0.3))
    enc.half()
    assert torch.equal(enc.pe, core((5, 5), 32, torch.float16, interpolation_scale=0.3))
    enc.float()
    assert torch.equal(enc.pe, core((5, 5), 32, interpolation_scale=0.3))


def test_grid_meta_device_init_then_to_empty() -> None:
    with torch.device("meta"):
        enc = SinusoidalGridEncoding(16, grid_shape=(3, 3), cls_token=True)
    assert enc.pe.device.type == "meta"
    assert enc.pe.shape == (10, 16)
    enc.to_empty(device="cpu")
    assert torch.equal(enc.pe, core((3, 3), 16, cls_token=True))


def test_grid_state_dict_pickle_and_deepcopy_round_trip() -> None:
    enc = SinusoidalGridEncoding(16, convention="timm", grid_shape=(2, 5), dropout=0.0)
    x = torch.randn(2, 10, 16)
    for clone in (copy.deepcopy(enc), pickle.loads(pickle.dumps(enc))):
        assert torch.equal(clone(x), enc(x))
    other = SinusoidalGridEncoding(16, convention="timm", grid_shape=(2, 5))
    other.load_state_dict(enc.state_dict())
    buffer = io.BytesIO()
    torch.save(enc.state_dict(), buffer)
    assert torch.load(io.BytesIO(buffer.getvalue())) == {}


def test_grid_gradient_flows_to_x_and_dropout_applies() -> None:
    enc = SinusoidalGridEncoding(16, grid_shape=(2, 2))
    x = torch.randn(1, 4, 16, requires_grad=True)
    enc(x).sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))
    torch.manual_seed(0)
    dropped = SinusoidalGridEncoding(16, grid_shape=(2, 2), dropout=0.5).train()
    out = dropped(torch.zeros(1, 4, 16))
    kept = out != 0
    assert 0 < int(kept.sum()) < 64
    assert torch.equal(out[kept], 2 * core((2, 2), 16).expand(1, 4, 16)[kept])


def test_grid_repr_shows_the_configuration() -> None:
    text = repr(SinusoidalGridEncoding(32, convention="timm", grid_shape=(4, 4), base_size=8))
    assert "d_model=32, convention='timm', base=10000.0, grid_shape=(4, 4), base_size=8" in text


def test_grid_torch_compile_fullgraph_matches_eager() -> None:
    # backend="aot_eager": Dynamo must capture one graph (fullgraph) and AOTAutograd must
    # functionalise it; inductor's code generation is left out to keep the file fast.
    torch._dynamo.reset()
    enc = SinusoidalGridEncoding(32, grid_shape=(4, 4), cls_token=True).eval()
    compiled = torch.compile(enc, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 17, 32)
    assert torch.equal(compiled(x), x + core((4, 4), 32, cls_token=True))  # cached table
    y = torch.randn(2, 7, 32)
    assert torch.equal(compiled(y, grid_shape=(2, 3)), y + core((2, 3), 32, cls_token=True))
    assert enc.pe.shape == (17, 32)  # the buffer is not replaced while compiled


def test_grid_module_errors() -> None:
    with pytest.raises(ValueError, match=r"d_model must be a multiple of 4 for convention 'mae'"):
        SinusoidalGridEncoding(30, grid_shape=(2, 2))
    with pytest.raises(ValueError, match=r"multiple of 16"):
        SinusoidalGridEncoding(24, convention="diffusers_3d")
    with pytest.raises(ValueError, match=r"interpolation_scale\[1\] must be a positive"):
        SinusoidalGridEncoding(8, interpolation_scale=(1.0, 0.0))
    with pytest.raises(ValueError, match=r"pass cls_token=True .* not both"):
        SinusoidalGridEncoding(8, cls_token=True, extra_tokens=1)
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\]"):
        SinusoidalGridEncoding(8, dropout=2.0)
    with pytest.raises(ValueError, match=r"shape must be a tuple of 2 positive integers"):
        SinusoidalGridEncoding(8, grid_shape=(2, 2, 2))
    enc = SinusoidalGridEncoding(8, grid_shape=(2, 3), cls_token=True)
    with pytest.raises(ValueError, match=r"N = 1 extra \+ prod\(2, 3\) = 7 and d = d_model = 8"):
        enc(torch.zeros(2, 6, 8))
    with pytest.raises(ValueError, match=r"got \(2, 7, 4\)"):
        enc(torch.zeros(2, 7, 4))
    with pytest.raises(ValueError, match=r"x must have shape \(b, N, d\)"):
        enc(torch.zeros(1, 1, 7, 8))
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor"):
        enc(torch.zeros(7, 8, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"x must be a torch.Tensor"):
        enc(np.zeros((7, 8)))
    with pytest.raises(ValueError, match=r"shape\[0\] must be an integer >= 1, got 0"):
        enc.encoding((0, 3))
    with pytest.raises(TypeError, match=r"dtype must be one of torch.float16"):
        enc.encoding(dtype=torch.int32)
