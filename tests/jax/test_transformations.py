"""posenc.jax under JAX's transformations: jit, vmap, grad, jax.export with a symbolic
sequence length, and a sequence sharded over four CPU devices (NamedSharding, shard_map)
that gets the tables of its global positions, equal to the unsharded result."""

from __future__ import annotations

import numpy as np
import pytest

from tests.jax.helpers import import_jax, same_bits, ulp_errors

jax, jnp = import_jax()

from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import posenc  # noqa: E402
import posenc.jax as pj  # noqa: E402

HEAD_DIM = 16


def _rope(x, positions):
    cos, sin = pj.rotary_cos_sin(positions, HEAD_DIM, base=1e4)
    return pj.apply_rotary(x, cos[:, :, None], sin[:, :, None])


def test_jit_with_a_traced_decode_offset_equals_known_positions() -> None:
    x = jnp.asarray(np.random.default_rng(0).standard_normal((2, 1, 3, HEAD_DIM)), jnp.float32)

    @jax.jit
    def decode(x, offset):
        positions = jnp.broadcast_to(jnp.arange(1) + offset, (2, 1))
        return _rope(x, positions)

    for offset in (0, 7, 100_000):
        known = _rope(x, np.full((2, 1), offset))
        traced = decode(x, offset)
        # tables within an ulp of each other: the rotation within a few ulps of |x|
        assert np.abs(np.asarray(traced) - np.asarray(known)).max() <= 8 * 2.0**-24 * 4


def test_vmap_over_a_batch_of_position_rows() -> None:
    positions = jnp.asarray([[0, 1, 2], [5, 9, 4096]])
    cos, sin = jax.jit(jax.vmap(lambda p: pj.rotary_cos_sin(p, 8)))(positions)
    want = posenc.rotary_cos_sin(np.asarray(positions), 8, dtype=np.float64)
    assert cos.shape == (2, 3, 8)
    assert ulp_errors(cos, want[0]).max() <= 1.0
    assert ulp_errors(sin, want[1]).max() <= 1.0


@pytest.mark.slow
def test_grad_flows_to_activations_not_positions() -> None:
    x = jnp.asarray(np.random.default_rng(1).standard_normal((1, 4, 2, HEAD_DIM)), jnp.float32)
    positions = jnp.arange(4.0)[None]

    def loss(x, positions):
        return jnp.sum(_rope(x, positions) ** 2)

    grad_x, grad_p = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, positions)
    # a rotation keeps norms: d|Rx|^2/dx = 2x, and the positions get none
    np.testing.assert_allclose(np.asarray(grad_x), 2 * np.asarray(x), rtol=0, atol=1e-5)
    assert not np.asarray(grad_p).any()
    # and the same through known positions (constants)
    grad_known = jax.jit(jax.grad(lambda x: jnp.sum(_rope(x, np.arange(4)[None]) ** 2)))(x)
    np.testing.assert_allclose(np.asarray(grad_known), 2 * np.asarray(x), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_export_round_trip_with_a_symbolic_sequence_length() -> None:
    from jax import export

    def block(x, positions):
        return _rope(x, positions)

    s = export.symbolic_shape("s")[0]
    args = (
        jax.ShapeDtypeStruct((2, s, 3, HEAD_DIM), jnp.float32),
        jax.ShapeDtypeStruct((2, s), jnp.int32),
    )
    exported = export.deserialize(export.export(jax.jit(block))(*args).serialize())
    for length in (1, 5):
        x = jnp.asarray(
            np.random.default_rng(length).standard_normal((2, length, 3, HEAD_DIM)), jnp.float32
        )
        positions = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32) + 3, (2, length))
        assert same_bits(exported.call(x, positions), jax.jit(block)(x, positions))


def _mesh():
    devices = jax.devices()
    assert len(devices) >= 4, "tests/jax/conftest.py asks for four CPU devices (XLA_FLAGS)"
    return Mesh(np.array(devices[:4]), ("seq",))


@pytest.mark.slow
def test_named_sharding_of_the_sequence_equals_the_unsharded_result() -> None:
    mesh = _mesh()
    length = 16
    positions = jnp.arange(length, dtype=jnp.int32) + 1000
    sharded = jax.device_put(positions, NamedSharding(mesh, P("seq")))
    tables = jax.jit(lambda p: pj.rotary_cos_sin(p, 8))
    got = tables(sharded)
    assert len(got[0].sharding.device_set) == 4
    assert all(same_bits(g, w) for g, w in zip(got, tables(positions), strict=True))
    want = posenc.rotary_cos_sin(np.asarray(positions), 8, dtype=np.float64)
    assert ulp_errors(got[0], want[0]).max() <= 1.0


@pytest.mark.slow
def test_shard_map_shards_get_the_tables_of_their_global_offset() -> None:
    mesh = _mesh()
    length, per_shard = 16, 4
    x = jnp.asarray(np.random.default_rng(3).standard_normal((1, length, 2, 8)), jnp.float32)

    def local(x_shard):
        # each device rotates its block of the sequence by its global positions
        start = jax.lax.axis_index("seq") * per_shard
        positions = (jnp.arange(per_shard) + start)[None]
        cos, sin = pj.rotary_cos_sin(positions, 8)
        return pj.apply_rotary(x_shard, cos[:, :, None], sin[:, :, None])

    sharded = jax.jit(
        jax.shard_map(local, mesh=mesh, in_specs=P(None, "seq"), out_specs=P(None, "seq"))
    )(x)

    @jax.jit
    def whole(x, positions):  # the whole sequence on one device, the same traced tables
        cos, sin = pj.rotary_cos_sin(positions, 8)
        return pj.apply_rotary(x, cos[:, :, None], sin[:, :, None])

    assert same_bits(sharded, whole(x, jnp.arange(length)[None]))
