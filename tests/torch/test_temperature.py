"""The attention temperature on torch positions (what the swaps apply) is the NumPy core's:
the same float64 formulas, equal within one float64 ulp of the scale at every kind, on
positions across each step and far beyond."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from posenc._rope.temperature import _make

torch = pytest.importorskip("torch")

from posenc.torch._temperature import temperature_at  # noqa: E402

KINDS = {
    "llama4": {"attn_scale": 0.1, "floor_scale": 8192},
    "llama4_beta": {"beta": 0.1, "original_max_position_embeddings": 16384},
    "log": {"alpha": 0.1, "n_floor": 8192},
    "constant": {"scale": 2.0**0.5},
}
POSITIONS = np.array([0, 1, 8190, 8191, 8192, 16383, 16384, 32767, 10**6, 2**24 + 1, 2**40])


@pytest.mark.parametrize("kind", list(KINDS))
def test_temperature_at_is_the_core_s(kind: str) -> None:
    temperature = _make(kind, "test", **KINDS[kind])
    ours = temperature_at(torch.from_numpy(POSITIONS).view(1, -1), temperature)
    core = posenc.attention_temperature(POSITIONS, kind, **KINDS[kind])  # type: ignore[arg-type]
    assert ours.dtype == torch.float64
    assert ours.shape == (1, POSITIONS.size)
    np.testing.assert_allclose(ours.numpy()[0], core, rtol=2.0**-52, atol=0)
    assert float(ours.max()) > 1.0  # past the first step
