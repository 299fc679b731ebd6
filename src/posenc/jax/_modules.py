"""Flax NNX modules: a sinusoidal encoding and a rotary embedding, MaxText-style.

Inputs are batch-first with explicit positions, as MaxText's embedding layers take them:
embeddings ``(batch, seq, d_model)``, queries and keys ``(batch, seq, heads, head_dim)``,
positions ``(batch, seq)`` or ``(seq,)`` (``(..., n_axes)`` for multi-axis RoPE). Neither
module holds a parameter or a cached table: tables of known positions are the NumPy core's
(constants of a jitted graph), traced positions go through the float32 engine of
:mod:`posenc.jax._exact` (within one ulp).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._checks import check_base, check_int
from .._conventions import ConventionName, get_convention
from .._features import PairLayout, check_pairs, pair_slices
from .._rope.multi_axis import _count_axes, _Request
from .._rope.plan import RopeLayer
from .._rope.rotary import resolve_rotary_dim
from .._rope.scaling import rope_base, rope_scaling
from ._checks import check_array, is_traced
from ._functional import (
    layer_cos_sin,
    multi_axis_cos_sin,
    rotary_cos_sin,
    rotate,
    sinusoidal,
)

__all__ = ["RotaryEmbedding", "SinusoidalEncoding"]


@dataclass(frozen=True, eq=False)
class _Settings:
    """A module's multi-axis arguments, as given (checked by the core when the module is
    made)."""

    values: dict[str, Any]


def _default_positions(length: int, offset: Any) -> Any:
    """Positions ``offset .. offset + length - 1``: a NumPy range when ``offset`` is known
    (the core's exact table), a traced one otherwise."""
    if is_traced(offset):
        return jnp.arange(length) + offset
    offset = check_int("offset", offset, minimum=0)
    return np.arange(offset, offset + length, dtype=np.int64)


def _check_positions_shape(positions: Any, batch: int, length: int, tail: tuple[int, ...]) -> None:
    shape = tuple(getattr(positions, "shape", ()))
    lead = shape[: len(shape) - len(tail)]
    if shape[len(lead) :] != tail or lead not in ((length,), (batch, length), (1, length)):
        end = "".join(f", {n}" for n in tail)
        raise ValueError(
            f"positions must have shape (s{end}) = ({length}{end}) or (b, s{end}) = "
            f"({batch}, {length}{end}), got {shape}"
        )


class SinusoidalEncoding(nnx.Module):
    """``x + PE``: the sinusoidal table of :func:`posenc.jax.sinusoidal` added to embeddings.

    Args:
        d_model: channels of the embeddings, an integer >= 1.
        base: wavelength base, a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.

    Call with ``x`` ``(batch, seq, d_model)`` (or ``(seq, d_model)``), and ``positions``
    ``(seq,)`` or ``(batch, seq)`` or ``offset`` (tokens already in a cache; may be traced).
    The table is rounded once to ``x.dtype`` and added: ``x + PE``.

    >>> pe = SinusoidalEncoding(8)
    >>> pe(jnp.zeros((2, 3, 8)))[0, 1, :2]
    Array([0.84147096, 0.5403023 ], dtype=float32)
    """

    def __init__(
        self, d_model: int, *, base: float = 10000.0, convention: ConventionName = "paper"
    ) -> None:
        self.d_model = check_int("d_model", d_model, minimum=1)
        self.base = check_base("base", base)
        get_convention(convention)
        self.convention = convention

    def __call__(self, x: Any, *, positions: Any = None, offset: Any = 0) -> jax.Array:
        x = check_array("x", x)
        if x.ndim < 2 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (b, s, d) or (s, d) with d = d_model = {self.d_model}, "
                f"got shape {tuple(x.shape)}"
            )
        length, batch = x.shape[-2], x.shape[0] if x.ndim > 2 else 1
        if positions is None:
            positions = _default_positions(length, offset)
        else:
            _check_positions_shape(positions, batch, length, ())
            if is_traced(offset) or offset != 0:
                positions = positions + offset
        table = sinusoidal(
            positions, self.d_model, base=self.base, convention=self.convention, dtype=x.dtype
        )
        result: jax.Array = x + table
        return result


class RotaryEmbedding(nnx.Module):
    """Rotary position embedding of queries and keys ``(batch, seq, heads, head_dim)``.

    Args:
        head_dim: channels per head, an integer >= 2.
        base, scaling, rotary_dim, pairs: as in :func:`posenc.jax.rotary_cos_sin` (a Hugging
            Face ``rope_parameters`` dict for ``scaling``).
        sections, order, schedule, frequencies: multi-axis RoPE, as in
            :func:`posenc.jax.multi_axis_cos_sin`; positions then end in one coordinate per
            axis.
        layer: instead of the above, one layer of a :func:`posenc.rope_plan` (see
            :meth:`from_layer`).

    Call ``rope(x, positions)`` (or ``rope(q, positions, k=k)`` for both): ``positions``
    ``(seq,)`` or ``(batch, seq)`` (traced allowed; ``seq_len=`` is then needed for
    ``dynamic``/``longrope``). The tables are float32 (float64 for float64 inputs) and the
    rotation is rounded once to the input's dtype.

    >>> rope = RotaryEmbedding(8)
    >>> q = jnp.ones((1, 3, 2, 8))
    >>> rope(q, jnp.arange(3)).shape
    (1, 3, 2, 8)
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: Any = None,
        scaling: Any = None,
        rotary_dim: int | None = None,
        pairs: PairLayout = "half",
        sections: Any = None,
        order: Any = None,
        schedule: Any = None,
        frequencies: Any = None,
        layer: RopeLayer | None = None,
    ) -> None:
        self.head_dim = check_int("head_dim", head_dim, minimum=2)
        self.layer = layer
        multi = any(a is not None for a in (sections, order, schedule, frequencies))
        settings = {
            "sections": sections,
            "order": order,
            "schedule": schedule,
            "frequencies": frequencies,
            "base": base,
            "scaling": scaling,
        }
        # held in a frozen dataclass: Flax keeps it static (a frequency matrix is an array,
        # which NNX would take for data in a dict)
        self._multi = _Settings(settings) if multi else None
        if layer is not None:
            if not isinstance(layer, RopeLayer):
                raise TypeError(
                    f"layer must be a posenc.RopeLayer (from rope_plan), got {type(layer).__name__}"
                )
            layer._check("cos_sin")
            self.pairs: str = layer.pairs
            self.rotary_dim = layer.rotary_dim
            self.n_axes = len(layer.axes) if layer.multi_axis else 0
            return
        self.pairs = check_pairs(pairs)
        spec = rope_scaling(scaling)
        self.scaling = spec
        if self._multi is not None:
            m = self._multi.values
            self.n_axes = _count_axes(
                _Request(m["sections"], m["order"], m["schedule"], base, scaling, frequencies)
            )
            # checked by the core, and rotary_dim resolved, on one table at the origin
            origin = np.zeros((1, self.n_axes), dtype=np.int64)
            table, _ = multi_axis_cos_sin(origin, self.head_dim, rotary_dim=rotary_dim, **m)
            self.rotary_dim = int(table.shape[-1])
            self.base = base
            return
        self.base = check_base("base", rope_base(base, spec))
        self.rotary_dim = resolve_rotary_dim(self.head_dim, rotary_dim, spec)
        self.n_axes = 0

    @classmethod
    def from_layer(cls, layer: RopeLayer) -> RotaryEmbedding:
        """The RoPE of one layer of a plan: ``RotaryEmbedding.from_layer(plan.layer(t))``."""
        if not isinstance(layer, RopeLayer):
            raise TypeError(
                f"layer must be a posenc.RopeLayer (from rope_plan), got {type(layer).__name__}"
            )
        return cls(layer.head_dim, layer=layer)

    def cos_sin(
        self, positions: Any, *, dtype: Any = None, seq_len: int | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """The tables of ``positions`` (``(*S,)``, or ``(*S, n_axes)``): ``(*S, rotary_dim)``."""
        if self.layer is not None:
            return layer_cos_sin(self.layer, positions, dtype=dtype, seq_len=seq_len)
        if self._multi is not None:
            return multi_axis_cos_sin(
                positions,
                self.head_dim,
                rotary_dim=self.rotary_dim,
                pairs=self.pairs,  # type: ignore[arg-type]
                dtype=dtype,
                seq_len=seq_len,
                **self._multi.values,
            )
        return rotary_cos_sin(
            positions,
            self.head_dim,
            base=self.base,
            scaling=self.scaling,
            rotary_dim=self.rotary_dim,
            pairs=self.pairs,  # type: ignore[arg-type]
            dtype=dtype,
            seq_len=seq_len,
        )

    def __call__(self, x: Any, positions: Any, *, k: Any = None, seq_len: int | None = None) -> Any:
        """Rotate ``x`` (and ``k``) ``(batch, seq, heads, head_dim)`` by ``positions``."""
        inputs = {"x": check_array("x", x)}
        if k is not None:
            inputs["k"] = check_array("k", k)
        for name, value in inputs.items():
            if value.ndim != 4 or value.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} must have shape (batch, seq, heads, head_dim) with head_dim = "
                    f"{self.head_dim}, got shape {tuple(value.shape)}"
                )
        first = inputs["x"]
        tail = (self.n_axes,) if self.n_axes else ()
        _check_positions_shape(positions, first.shape[0], first.shape[1], tail)
        wide = any(v.dtype == jnp.float64 for v in inputs.values())
        cos, sin = self.cos_sin(positions, dtype=jnp.float64 if wide else None, seq_len=seq_len)
        # one column per pair (the tables are laid out by construction), over the heads
        columns, _ = pair_slices(self.pairs, self.rotary_dim // 2)
        cos, sin = cos[..., None, columns], sin[..., None, columns]
        rotated = [rotate(v, cos, sin, self.pairs, self.rotary_dim) for v in inputs.values()]
        return rotated[0] if k is None else (rotated[0], rotated[1])
