"""keras-hub's JAX backend as a reference: RotaryEmbedding (default, linear, dynamic, YaRN)
and SinePositionEncoding agree with posenc.jax within the error of their float32 angles.

keras-hub computes ``p·ω`` in float32 (and its frequencies with float32 powers), so the bound
is :func:`~tests.tolerance.assert_close_float32_recipe`'s: float32 ulps at the scale of the
largest angle, times what the tables multiply. Its ``dynamic`` divides every frequency by
``factor^(d/(d-2))`` (the NTK exponent, applied to the frequencies rather than to the base):
posenc's ``linear`` with that factor, whatever the length.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.jax.helpers import import_jax
from tests.tolerance import assert_close_float32_recipe

jax, jnp = import_jax()

os.environ["KERAS_BACKEND"] = "jax"  # before keras is imported: keras-hub on JAX
keras = pytest.importorskip("keras", reason="keras is not installed (requirements-dev.txt)")
keras_hub = pytest.importorskip(
    "keras_hub", reason="keras-hub is not installed (requirements-nodeps.txt, --no-deps)"
)

import posenc.jax as pj  # noqa: E402

LENGTH, HEADS, HEAD_DIM, BASE = 512, 2, 32, 10000.0

#: keras-hub's RotaryEmbedding arguments -> the Hugging Face scaling dict of the same RoPE
CASES = {
    "default": ({}, None),
    "linear": (
        {"rope_type": "linear", "scaling_factor": 4.0},
        {"rope_type": "linear", "factor": 4.0},
    ),
    "dynamic": (
        {"rope_type": "dynamic", "scaling_factor": 4.0},
        {"rope_type": "linear", "factor": 4.0 ** (HEAD_DIM / (HEAD_DIM - 2))},
    ),
    "yarn": (
        {"rope_type": "yarn", "scaling_factor": 4.0, "original_max_position_embeddings": 128},
        {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 128,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        },
    ),
}


def test_keras_runs_on_jax() -> None:
    assert keras.backend.backend() == "jax"


@pytest.mark.parametrize("case", sorted(CASES))
def test_rotary_embedding_and_its_scalings(case: str) -> None:
    theirs, scaling = CASES[case]
    layer = keras_hub.layers.RotaryEmbedding(max_wavelength=BASE, **theirs)
    x = np.random.default_rng(0).standard_normal((1, LENGTH, HEADS, HEAD_DIM)).astype(np.float32)
    reference = np.asarray(jax.jit(layer)(x))
    cos, sin = pj.rotary_cos_sin(LENGTH, HEAD_DIM, base=BASE, scaling=scaling)
    ours = np.asarray(jax.jit(lambda x: pj.apply_rotary(x, cos[:, None], sin[:, None]))(x))
    attention = float(np.abs(np.asarray(cos)).max())  # YaRN's factor; 1 otherwise
    assert_close_float32_recipe(
        ours,
        reference,
        max_angle=LENGTH - 1,
        magnitude=float(np.abs(x).max()) * attention,
        terms=2,
        what=f"keras-hub RotaryEmbedding ({case})",
    )


def test_decode_offset_under_jit() -> None:
    layer = keras_hub.layers.RotaryEmbedding(max_wavelength=BASE)
    x = jnp.asarray(np.random.default_rng(1).standard_normal((1, 1, HEADS, HEAD_DIM)), jnp.float32)
    start = 3000
    reference = np.asarray(jax.jit(lambda x, s: layer(x, start_index=s))(x, start))
    rope = pj.RotaryEmbedding(HEAD_DIM, base=BASE)
    ours = np.asarray(jax.jit(lambda x, s: rope(x, jnp.arange(1)[None] + s))(x, start))
    assert_close_float32_recipe(
        ours, reference, max_angle=start, magnitude=float(jnp.abs(x).max()), terms=2
    )


@pytest.mark.parametrize("d", [11, 64])
def test_sine_position_encoding(d: int) -> None:
    layer = keras_hub.layers.SinePositionEncoding()
    reference = np.asarray(jax.jit(layer)(jnp.zeros((1, LENGTH, d))))[0]
    assert_close_float32_recipe(
        np.asarray(pj.sinusoidal(LENGTH, d)), reference, max_angle=LENGTH - 1
    )
