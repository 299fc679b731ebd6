"""``posenc.torch.TimestepEmbedding`` and ``posenc.torch.timestep_embedding`` against the
NumPy core.

References: ``posenc.timestep_embedding`` in float64 (rounded with ``cast_exact``, tested on its
own in ``test_cast.py``) and float32. diffusers' timestep embedding is compared in
``test_grid_timestep_references.py``.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posenc import timestep_embedding as np_timestep_embedding  # noqa: E402
from posenc.torch import TimestepEmbedding, cast_exact, timestep_embedding  # noqa: E402
from tests.torch.conftest import assert_same  # noqa: E402

TIMESTEPS = [0.0, 0.25, 1.0, 2.5, 37.3, 999.0, 999.875]
CONFIGS = [
    {"dim": 320, "flip_sin_to_cos": True, "downscale_freq_shift": 0.0},
    {"dim": 256, "flip_sin_to_cos": False, "downscale_freq_shift": 1.0},
    {"dim": 7},
    {"dim": 3, "downscale_freq_shift": 0.0, "scale": 1000.0, "max_period": 500.0},
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"dim{c['dim']}")
def test_timestep_module_equals_the_numpy_core(config) -> None:
    kwargs = dict(config)
    dim = kwargs.pop("dim")
    emb = TimestepEmbedding(dim, **kwargs)
    t = torch.tensor(TIMESTEPS)  # float32: the reference takes their exact float64 values
    t64 = t.numpy().astype(np.float64)
    expected = torch.from_numpy(np_timestep_embedding(t64, dim, **kwargs))
    assert torch.equal(emb(t), expected)
    assert torch.equal(timestep_embedding(t, dim, **kwargs), expected)
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        table64 = np_timestep_embedding(t64, dim, dtype=np.float64, **kwargs)
        assert_same(emb(t, dtype=dtype), cast_exact(torch.from_numpy(table64), dtype))


def test_timestep_shapes_and_inputs() -> None:
    emb = TimestepEmbedding(8)
    assert emb(torch.tensor(5.0)).shape == (8,)
    assert emb(torch.tensor([[1.0, 2.0]])).shape == (1, 2, 8)
    assert emb(torch.zeros(0)).shape == (0, 8)
    assert torch.equal(emb([1.5, 2.0]), emb(torch.tensor([1.5, 2.0])))
    assert torch.equal(emb(torch.tensor([3], dtype=torch.int64)), emb(torch.tensor([3.0])))
    # float32 timesteps are used as given (their float64 value), never rounded again
    t = torch.tensor([0.1], dtype=torch.float32)
    expected = np_timestep_embedding(np.float64(np.float32(0.1)), 8)
    assert torch.equal(emb(t)[0], torch.from_numpy(expected))
    assert emb(t).dtype == torch.get_default_dtype()


def test_timestep_module_ignores_module_casts_and_has_no_state() -> None:
    emb = TimestepEmbedding(16, downscale_freq_shift=0.0)
    t = torch.tensor([3.0, 700.5])
    before = emb(t)
    emb.half()
    assert emb.state_dict() == {}
    assert torch.equal(emb(t), before)
    assert torch.equal(copy.deepcopy(emb)(t), before)
    assert "dim=16, max_period=10000.0, flip_sin_to_cos=False" in repr(emb)


def test_timestep_torch_compile_fullgraph_matches_eager() -> None:
    torch._dynamo.reset()
    emb = TimestepEmbedding(64, flip_sin_to_cos=True, downscale_freq_shift=0.0)
    compiled = torch.compile(emb, fullgraph=True, backend="aot_eager")
    t = torch.tensor([0.0, 10.5, 999.0])
    assert torch.equal(compiled(t), emb(t))


def test_timestep_module_errors() -> None:
    with pytest.raises(ValueError, match=r"dim must be an integer >= 1, got 0"):
        TimestepEmbedding(0)
    with pytest.raises(ValueError, match=r"downscale_freq_shift must differ from dim // 2 = 4"):
        TimestepEmbedding(8, downscale_freq_shift=4)
    with pytest.raises(TypeError, match=r"scale must be a finite real number"):
        TimestepEmbedding(8, scale=None)
    emb = TimestepEmbedding(8, scale=1e300)
    with pytest.raises(ValueError, match=r"scale \* timesteps \* frequency overflows"):
        emb(torch.tensor([1e10]))
    with pytest.raises(ValueError, match=r"timesteps must be finite"):
        emb(torch.tensor([float("nan")]))
    with pytest.raises(TypeError, match=r"timesteps must hold integers or real numbers"):
        emb(torch.tensor([True]))
    with pytest.raises(TypeError, match=r"dtype must be one of torch.float16"):
        TimestepEmbedding(8)(torch.tensor([1.0]), dtype=torch.int8)
