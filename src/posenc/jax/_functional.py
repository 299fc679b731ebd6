"""The functional JAX API: the float64 core's tables as JAX arrays, rounded once, and RoPE.

Shapes: ``S`` is any shape of positions, ``d`` is ``d_model``, ``r`` the rotated channels,
``n = r / 2`` the rotated pairs.

Known positions (Python ints, lists, NumPy arrays, JAX arrays outside a transformation, or
constants closed over by a jitted function) go to the NumPy core: the float64 table rounded
once, bit-equal to :func:`posenc.rotary_cos_sin` / :func:`posenc.sinusoidal`. Traced
positions (arguments of a jitted function: decode offsets, per-token ids) go through
:mod:`posenc.jax._exact`: within one float32 ulp of the exact value without 64-bit mode.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_base, check_int
from .._conventions import ConventionName, get_convention
from .._features import (
    PairLayout,
    channel_frequency_index,
    channel_kinds,
    check_pairs,
    feature_slices,
    layout_error,
    pair_slices,
)
from .._frequencies import frequencies
from .._rope.multi_axis import MultiAxisFrequencies, _count_axes, _Request, _resolve
from .._rope.multi_axis import multi_axis_cos_sin as _core_multi_axis
from .._rope.plan import RopeLayer
from .._rope.rotary import check_rotation_shapes, resolve_rotary_dim
from .._rope.rotary import rotary_cos_sin as _core_rotary
from .._rope.scaling import rope_base, rope_frequencies, rope_scaling
from .._sinusoidal import sinusoidal as _core_sinusoidal
from ._checks import as_host_positions, check_array, check_dtype, is_traced, traced_positions
from ._exact import round_once_numpy, traced_phasors

__all__ = [
    "apply_rotary",
    "layer_cos_sin",
    "multi_axis_cos_sin",
    "rotary_cos_sin",
    "sinusoidal",
]

_NATIVE = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _core_table(make: Any, dtype: np.dtype[Any]) -> Any:
    """The core's ``make(dtype)`` as JAX arrays: computed in ``dtype`` when the core has it
    (float16/32/64), else in float64 and rounded once (bfloat16). ``make`` returns one array
    or a tuple of them."""
    native = dtype in _NATIVE
    made = make(dtype if native else np.float64)
    if isinstance(made, tuple):
        return tuple(jnp.asarray(t if native else round_once_numpy(t, dtype)) for t in made)
    return jnp.asarray(made if native else round_once_numpy(made, dtype))


def _spread(cos: jax.Array, sin: jax.Array, pairs: str) -> tuple[jax.Array, jax.Array]:
    """Tables of one column per pair ``(..., n)`` laid out for ``pairs`` ``(..., 2n)``."""
    if pairs == "half":
        return jnp.concatenate((cos, cos), axis=-1), jnp.concatenate((sin, sin), axis=-1)
    shape = (*cos.shape[:-1], 2 * cos.shape[-1])
    return (
        jnp.repeat(cos[..., None], 2, axis=-1).reshape(shape),
        jnp.repeat(sin[..., None], 2, axis=-1).reshape(shape),
    )


def _needs_seq_len(spec: Any, seq_len: Any) -> None:
    if seq_len is None and spec is not None and spec.depends_on_length:
        raise ValueError(
            f"rope_type {spec.rope_type!r} selects its frequencies by the sequence length, "
            "which traced positions do not give: pass seq_len= (a Python int)"
        )


def sinusoidal(
    positions: Any,
    d_model: int,
    *,
    base: float = 10000.0,
    convention: ConventionName = "paper",
    dtype: Any = None,
) -> jax.Array:
    """:func:`posenc.sinusoidal` as a JAX array, in any float dtype including bfloat16.

    Args:
        positions: an int ``L`` (positions ``0 .. L-1``) or an array of positions of any
            shape ``S`` (integer or real); traced positions are allowed (inside ``jit``).
        d_model: number of channels, an integer >= 1.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.
        dtype: float16, bfloat16, float32 (default) or float64 (with ``jax_enable_x64``).

    Returns:
        array ``(L, d_model)`` or ``(*S, d_model)``: the float64 table rounded once (known
        positions: bit-equal to :func:`posenc.sinusoidal`; traced: within one float32 ulp).

    >>> sinusoidal(2, 4)
    Array([[0.        , 1.        , 0.        , 1.        ],
           [0.84147096, 0.5403023 , 0.00999983, 0.99995   ]], dtype=float32)
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    out = check_dtype("dtype", dtype)
    if not is_traced(positions):
        host = as_host_positions(positions)
        return _core_table(  # type: ignore[no-any-return]
            lambda t: _core_sinusoidal(host, d_model, base=base, convention=convention, dtype=t),
            out,
        )
    pos = traced_positions("positions", positions)
    omega = frequencies(d_model, base=base, convention=convention)
    layout = feature_slices(d_model, get_convention(convention))
    cos, sin = traced_phasors(pos[..., None], omega[None], 1.0, out)
    index = channel_frequency_index(layout, d_model)
    kinds = channel_kinds(layout, d_model)
    n = omega.shape[0]
    # columns [sin_0 .. sin_{n-1}, cos_0 .. cos_{n-1}, 0]: one gather lays them out
    source = np.array(
        [
            k if kind == "sin" else n + k if kind == "cos" else 2 * n
            for k, kind in zip(index.tolist(), kinds, strict=True)
        ],
        dtype=np.int32,
    )
    zero = jnp.zeros((*pos.shape, 1), dtype=cos.dtype)
    return jnp.concatenate((sin, cos, zero), axis=-1)[..., source]


def rotary_cos_sin(
    positions: Any,
    head_dim: int,
    *,
    base: float | None = None,
    scaling: Any = None,
    rotary_dim: int | None = None,
    pairs: PairLayout = "half",
    dtype: Any = None,
    seq_len: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """:func:`posenc.rotary_cos_sin` as JAX arrays, in any float dtype including bfloat16.

    Args:
        positions: an int ``L`` (positions ``0 .. L-1``) or an array of positions of any
            shape ``S`` (e.g. ``(b, s)``); traced positions are allowed (inside ``jit``).
        head_dim, base, scaling, rotary_dim, pairs: as in :func:`posenc.rotary_cos_sin`.
        dtype: float16, bfloat16, float32 (default) or float64 (with ``jax_enable_x64``).
        seq_len: the length ``dynamic`` and ``longrope`` select their frequencies by; for
            traced positions it must be given (a Python int) with those types.

    Returns:
        ``(cos, sin)`` of shape ``(L, r)`` or ``(*S, r)``, laid out for ``pairs`` and
        multiplied by the scaling's attention factor. Known positions: bit-equal to
        :func:`posenc.rotary_cos_sin` (bfloat16: the float64 value rounded once). Traced:
        within one float32 ulp of the exact value (absolute floor 2**-25) for integer
        positions, 16-bit dtypes rounded once from it.

    >>> cos, sin = rotary_cos_sin(3, 4)
    >>> cos
    Array([[ 1.        ,  1.        ,  1.        ,  1.        ],
           [ 0.5403023 ,  0.99995   ,  0.5403023 ,  0.99995   ],
           [-0.41614684,  0.9998    , -0.41614684,  0.9998    ]], dtype=float32)
    >>> jax.jit(lambda p: rotary_cos_sin(p, 4)[0])(jnp.array([1]))  # traced: same values
    Array([[0.5403023, 0.99995  , 0.5403023, 0.99995  ]], dtype=float32)
    """
    head_dim = check_int("head_dim", head_dim, minimum=2)
    spec = rope_scaling(scaling)
    dim = resolve_rotary_dim(head_dim, rotary_dim, spec)
    pairs = check_pairs(pairs)
    base = check_base("base", rope_base(base, spec))
    out = check_dtype("dtype", dtype)
    if not is_traced(positions):
        host = as_host_positions(positions)
        return _core_table(  # type: ignore[no-any-return]
            lambda t: _core_rotary(
                host,
                head_dim,
                base=base,
                scaling=spec,
                rotary_dim=dim,
                pairs=pairs,
                dtype=t,
                seq_len=seq_len,
            ),
            out,
        )
    pos = traced_positions("positions", positions)
    _needs_seq_len(spec, seq_len)
    omega, attention = rope_frequencies(dim, base=base, scaling=spec, seq_len=seq_len)
    cos, sin = traced_phasors(pos[..., None], omega[None], attention, out)
    return _spread(cos, sin, pairs)


def multi_axis_cos_sin(
    positions: Any,
    head_dim: int,
    *,
    sections: Any = None,
    order: Any = None,
    schedule: Any = None,
    base: Any = None,
    scaling: Any = None,
    frequencies: Any = None,
    rotary_dim: int | None = None,
    pairs: PairLayout = "half",
    dtype: Any = None,
    seq_len: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """:func:`posenc.multi_axis_cos_sin` as JAX arrays (M-RoPE, 2-D/3-D RoPE).

    Positions ``(*S, n_axes)``, one coordinate per axis (Hugging Face's ``(3, b, s)``
    ``position_ids``: pass ``jnp.moveaxis(ids, 0, -1)``); traced positions are allowed.
    Every other argument as in :func:`posenc.multi_axis_cos_sin`; ``dtype`` as in
    :func:`rotary_cos_sin`.

    >>> pos = jnp.array([[0, 0, 0], [1, 2, 3]])
    >>> cos, sin = multi_axis_cos_sin(pos, 8, sections=(2, 1, 1))
    >>> cos.shape, cos.dtype
    ((2, 8), dtype('float32'))
    """
    pairs = check_pairs(pairs)
    out = check_dtype("dtype", dtype)
    if not is_traced(positions):
        host = as_host_positions(positions)
        return _core_table(  # type: ignore[no-any-return]
            lambda t: _core_multi_axis(
                host,
                head_dim,
                sections=sections,
                order=order,
                schedule=schedule,
                base=base,
                scaling=scaling,
                frequencies=frequencies,
                rotary_dim=rotary_dim,
                pairs=pairs,
                dtype=t,
                seq_len=seq_len,
            ),
            out,
        )
    head_dim = check_int("head_dim", head_dim, minimum=2)
    request = _Request(sections, order, schedule, base, scaling, frequencies)
    n_axes = _count_axes(request)
    pos = traced_positions("positions", positions)
    if pos.ndim == 0 or pos.shape[-1] != n_axes:
        raise ValueError(
            f"positions must have shape (..., {n_axes}): one coordinate per axis of the "
            f"{n_axes} axes, got shape {tuple(pos.shape)}"
        )
    if frequencies is None:
        _needs_seq_len(rope_scaling(scaling), seq_len)
    freqs, _ = _resolve(request, head_dim, rotary_dim, None, seq_len)
    cos, sin = traced_phasors(pos, freqs.frequencies, freqs.attention, out)
    return _spread(cos, sin, pairs)


def layer_cos_sin(
    layer: RopeLayer, positions: Any, *, dtype: Any = None, seq_len: int | None = None
) -> tuple[jax.Array, jax.Array]:
    """The cos/sin tables of one layer of a :func:`posenc.rope_plan`, as JAX arrays.

    :meth:`posenc.RopeLayer.cos_sin` in JAX: 1-D layers take positions ``S``, multi-axis
    layers ``(*S, len(layer.axes))``; traced positions are allowed (``seq_len`` must then
    be given for ``dynamic``/``longrope``). Tables laid out for ``layer.pairs``,
    ``(*S, layer.rotary_dim)`` each.

    >>> import posenc
    >>> plan = posenc.rope_plan({"model_type": "llama", "head_dim": 8, "rope_theta": 1e4})
    >>> cos, sin = layer_cos_sin(plan.layer(), 5)
    >>> bool(jnp.array_equal(cos, posenc.rotary_cos_sin(5, 8)[0]))
    True
    """
    if not isinstance(layer, RopeLayer):
        raise TypeError(
            f"layer must be a posenc.RopeLayer (from rope_plan), got {type(layer).__name__}"
        )
    out = check_dtype("dtype", dtype)
    if not is_traced(positions):
        host = as_host_positions(positions)
        return _core_table(  # type: ignore[no-any-return]
            lambda t: layer.cos_sin(host, dtype=t, seq_len=seq_len), out
        )
    layer._check("cos_sin")
    pos = traced_positions("positions", positions)
    _needs_seq_len(layer.scaling, seq_len)
    if not layer.multi_axis:
        omega, factor = layer.frequencies_at(seq_len)
        cos, sin = traced_phasors(pos[..., None], omega[None], factor, out)
        return _spread(cos, sin, layer.pairs)
    n_axes = len(layer.axes)
    if pos.ndim == 0 or pos.shape[-1] != n_axes:
        raise ValueError(
            f"positions must have shape (..., {n_axes}): one coordinate per axis "
            f"{layer.axes}, got shape {tuple(pos.shape)}"
        )
    matrix, attention = layer.axis_frequencies(seq_len)
    if not layer.pairs_per_axis:
        cos, sin = traced_phasors(pos, matrix, attention, out)
        return _spread(cos, sin, layer.pairs)
    parts, start = [], 0
    for size in (layer.sections[a] for a in layer.slot_order):
        block = MultiAxisFrequencies(
            matrix[:, start : start + size], attention[start : start + size]
        )
        cos, sin = traced_phasors(pos, block.frequencies, block.attention, out)
        parts.append(_spread(cos, sin, layer.pairs))
        start += size
    return (
        jnp.concatenate([c for c, _ in parts], axis=-1),
        jnp.concatenate([s for _, s in parts], axis=-1),
    )


def _per_pair(cos: jax.Array, sin: jax.Array, pairs: str) -> tuple[jax.Array, jax.Array]:
    """Tables laid out for ``pairs`` ``(..., r)`` as one column per pair ``(..., r/2)``.

    Known tables of another layout raise the core's error. Traced ones (the values cannot be
    read while the graph is built) give NaN in each pair whose two columns disagree, an
    element-wise choice with no reduction over the tables. Where the two columns agree, they
    hold the pair's angle, whatever the layout, so no finite value is wrong."""
    first, second = pair_slices(pairs, cos.shape[-1] // 2)
    if not (is_traced(cos) or is_traced(sin)):
        error = layout_error(
            np.asarray(cos).astype(np.float64), np.asarray(sin).astype(np.float64), pairs
        )
        if error is not None:
            raise error
        return cos[..., first], sin[..., first]
    agree = (cos[..., first] == cos[..., second]) & (sin[..., first] == sin[..., second])
    nan = jnp.array(jnp.nan, dtype=cos.dtype)
    checked = jnp.where(agree, cos[..., first], nan), jnp.where(agree, sin[..., first], nan)
    # computed once, as tables: fused into the rotation, XLA would redo the check for every
    # element of x (each head and batch row), which made the rotation slower than without it
    barrier: Any = jax.lax.optimization_barrier
    cos_checked, sin_checked = barrier(checked)
    return cos_checked, sin_checked


def apply_rotary(
    x: Any,
    cos: Any,
    sin: Any,
    *,
    pairs: PairLayout = "half",
    rotary_dim: int | None = None,
) -> jax.Array:
    """Rotate the first ``r`` channels of ``x``; the rest pass through.

    Each pair ``(a, b)`` becomes ``(a·cos θ − b·sin θ, b·cos θ + a·sin θ)``: Hugging Face's
    ``apply_rotary_pos_emb`` for ``pairs="half"`` (GPT-NeoX, keras-hub, MaxText's default),
    the Meta/torchtune rotation for ``"interleaved"``; partial rotation when ``r`` is less
    than ``x.shape[-1]``.

    Args:
        x: floating array ``(..., d)``, e.g. ``(batch, seq, heads, head_dim)``.
        cos, sin: tables of the same shape, broadcastable against ``x`` but for their last
            dimension (``(b, s, 1, ·)`` for ``x`` of shape ``(b, s, h, d)``), either laid
            out for ``pairs`` ``(..., r)`` (from :func:`rotary_cos_sin`) or one column per
            pair ``(..., r/2)`` with ``rotary_dim=r``. A table of the other layout is a
            ``ValueError`` when its values are known; traced, each pair whose two columns
            disagree comes out NaN.
        pairs: ``"half"`` or ``"interleaved"``, how ``x`` pairs its channels.
        rotary_dim: ``r``: ``cos.shape[-1]`` (default) or ``2 * cos.shape[-1]``.

    Returns:
        array of ``x``'s shape and dtype. The arithmetic runs in float32 (float64 if ``x``
        or the tables are float64) and is rounded once to ``x.dtype``. Gradients flow to
        ``x`` (and to the tables).

    >>> cos, sin = rotary_cos_sin(jnp.array([1]), 4)
    >>> apply_rotary(jnp.array([[1.0, 0.0, 0.0, 0.0]]), cos, sin)
    Array([[0.5403023 , 0.        , 0.84147096, 0.        ]], dtype=float32)
    """
    pairs = check_pairs(pairs)
    x = check_array("x", x)
    cos = check_array("cos", cos)
    sin = check_array("sin", sin)
    dim, per_pair = check_rotation_shapes(
        tuple(x.shape),
        tuple(cos.shape),
        tuple(sin.shape),
        rotary_dim,
        broadcast=jnp.broadcast_shapes,
    )
    if not per_pair:
        cos, sin = _per_pair(cos, sin, pairs)
    return rotate(x, cos, sin, pairs, dim)


def rotate(x: jax.Array, cos: jax.Array, sin: jax.Array, pairs: str, dim: int) -> jax.Array:
    """The rotation of :func:`apply_rotary` with tables of one column per pair ``(..., r/2)``,
    unchecked: float32 arithmetic (float64 if any input is), rounded once to ``x.dtype``."""
    n = dim // 2
    wide = jnp.float64 if jnp.float64 in (x.dtype, cos.dtype, sin.dtype) else jnp.float32
    c, s = cos.astype(wide), sin.astype(wide)
    rotated = x[..., :dim].astype(wide)
    if pairs == "half":
        a, b = rotated[..., :n], rotated[..., n:]
        out = jnp.concatenate((a * c - b * s, b * c + a * s), axis=-1)
    else:
        split = rotated.reshape(*rotated.shape[:-1], n, 2)
        a, b = split[..., 0], split[..., 1]
        out = jnp.stack((a * c - b * s, b * c + a * s), axis=-1).reshape(rotated.shape)
    out = out.astype(x.dtype)
    if dim == x.shape[-1]:
        return out
    return jnp.concatenate((out, x[..., dim:]), axis=-1)
