"""Position ids as JAX arrays: known inputs are the core's ids; traced ones (inside jit)
give the same ids."""

from __future__ import annotations

import numpy as np
import pytest

from tests.jax.helpers import import_jax

jax, jnp = import_jax()

import posenc  # noqa: E402
import posenc.jax as pj  # noqa: E402

MASK = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]])
SEGMENTS = np.array([[0, 0, 0, 1, 1, 2], [3, 3, 4, 4, 4, 4]])
TOKENS = np.array([[1, 1, 7, 8, 9], [5, 6, 7, 8, 1]])


def test_known_inputs_give_the_core_ids() -> None:
    assert np.array_equal(
        pj.positions_from_mask(MASK, offset=3), posenc.positions_from_mask(MASK, offset=3)
    )
    assert np.array_equal(
        pj.positions_from_segments(SEGMENTS), posenc.positions_from_segments(SEGMENTS)
    )
    assert np.array_equal(
        pj.positions_from_tokens(TOKENS, 1), posenc.positions_from_tokens(TOKENS, 1)
    )
    assert np.array_equal(pj.positions_from_cu_seqlens([0, 3, 5]), [0, 1, 2, 0, 1])
    types = [0, 1, 1, 1, 1, 0]
    ids, deltas = pj.multimodal_positions(types, image_grids=[[1, 4, 4]], spatial_merge=2)
    want = posenc.multimodal_positions(types, image_grids=[[1, 4, 4]], spatial_merge=2)
    assert np.array_equal(ids, want.positions)
    assert int(deltas) == int(want.deltas)
    assert ids.shape == (6, 3)
    assert ids.dtype == jnp.int32


def test_traced_inputs_give_the_same_ids() -> None:
    @jax.jit
    def all_ids(mask, segments, tokens, offset):
        return (
            pj.positions_from_mask(mask, offset=offset),
            pj.positions_from_segments(segments),
            pj.positions_from_tokens(tokens, 1, offset=offset),
        )

    mask, segments, tokens = all_ids(MASK, SEGMENTS, TOKENS, 4)
    assert np.array_equal(mask, posenc.positions_from_mask(MASK, offset=4))
    assert np.array_equal(segments, posenc.positions_from_segments(SEGMENTS))
    assert np.array_equal(tokens, posenc.positions_from_tokens(TOKENS, 1, offset=4))


def test_value_shaped_results_refuse_traced_inputs() -> None:
    with pytest.raises(TypeError, match="cu_seqlens must be known, not traced"):
        jax.jit(pj.positions_from_cu_seqlens)(jnp.array([0, 3]))
    with pytest.raises(TypeError, match="token_types must be known, not traced"):
        jax.jit(lambda t: pj.multimodal_positions(t, image_grids=[[1, 2, 2]]))(jnp.array([0, 1]))


def test_ids_beyond_int32_need_64_bit_mode() -> None:
    with pytest.raises(ValueError, match="beyond int32"):
        pj.positions_from_mask([[1, 1]], offset=2**31)
