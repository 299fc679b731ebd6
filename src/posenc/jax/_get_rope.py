"""``get_rope``: the factory signature of vLLM's and sglang-jax's rotary embeddings.

``get_rope(head_size, rotary_dim, max_position, base, is_neox_style, rope_scaling, dtype)``
returns an object called with ``(positions, query, key)`` that returns the rotated
``(query, key)``: the shape those stacks (and their TPU backends) use, so posenc can stand in
for their rotary layer or serve as the oracle in their tests.
"""

from __future__ import annotations

from typing import Any

import jax

from .._checks import check_bool, check_int
from .._features import pair_slices
from .._rope.rotary import resolve_rotary_dim
from .._rope.scaling import rope_base
from .._rope.scaling import rope_scaling as _rope_scaling
from ._checks import check_array, check_dtype
from ._functional import rotary_cos_sin, rotate

__all__ = ["RotaryEmbeddingForTokens", "get_rope"]


class RotaryEmbeddingForTokens:
    """The object :func:`get_rope` returns: ``rope(positions, query, key)``.

    ``positions`` ``(tokens,)`` (flattened batch, known or traced); ``query`` and ``key``
    ``(tokens, heads * head_size)`` or ``(tokens, heads, head_size)`` (``key`` may have
    fewer heads: grouped-query attention). Returns ``(query, key)`` rotated, in their shapes
    and dtypes.
    """

    def __init__(
        self,
        head_size: int,
        rotary_dim: int,
        max_position: int,
        base: float,
        pairs: str,
        scaling: Any,
        dtype: Any,
    ) -> None:
        self.head_size = head_size
        self.rotary_dim = rotary_dim
        self.max_position = max_position
        self.base = base
        self.pairs = pairs
        self.scaling = scaling
        self.dtype = dtype
        # dynamic / longrope: the frequencies of max_position (the length the cache covers)
        self._seq_len = max_position if scaling is not None and scaling.depends_on_length else None

    def __repr__(self) -> str:
        return (
            f"RotaryEmbeddingForTokens(head_size={self.head_size}, rotary_dim="
            f"{self.rotary_dim}, max_position={self.max_position}, base={self.base}, "
            f"pairs={self.pairs!r})"
        )

    def _rotate(self, name: str, x: Any, cos: jax.Array, sin: jax.Array) -> jax.Array:
        x = check_array(name, x)
        tokens = cos.shape[0]
        if x.ndim == 2 and x.shape[0] == tokens and x.shape[1] % self.head_size == 0:
            heads = x.reshape(tokens, x.shape[1] // self.head_size, self.head_size)
        elif x.ndim == 3 and x.shape[0] == tokens and x.shape[2] == self.head_size:
            heads = x
        else:
            raise ValueError(
                f"{name} must have shape (tokens, heads * head_size) or (tokens, heads, "
                f"head_size) with tokens = {tokens} and head_size = {self.head_size}, got "
                f"shape {tuple(x.shape)}"
            )
        out = rotate(heads, cos[:, None, :], sin[:, None, :], self.pairs, self.rotary_dim)
        return out.reshape(x.shape)

    def __call__(self, positions: Any, query: Any, key: Any) -> tuple[jax.Array, jax.Array]:
        if getattr(positions, "ndim", 1) != 1:
            raise ValueError(
                "positions must have shape (tokens,) (a flattened batch), got shape "
                f"{tuple(getattr(positions, 'shape', ()))}"
            )
        cos, sin = rotary_cos_sin(
            positions,
            self.rotary_dim,
            base=self.base,
            scaling=self.scaling,
            pairs=self.pairs,  # type: ignore[arg-type]
            dtype=self.dtype,
            seq_len=self._seq_len,
        )
        first, _ = pair_slices(self.pairs, self.rotary_dim // 2)
        cos, sin = cos[:, first], sin[:, first]
        return self._rotate("query", query, cos, sin), self._rotate("key", key, cos, sin)


def get_rope(
    head_size: int,
    rotary_dim: int,
    max_position: int,
    base: float,
    is_neox_style: bool = True,
    rope_scaling: dict[str, Any] | None = None,
    dtype: Any = None,
) -> RotaryEmbeddingForTokens:
    """A rotary embedding with vLLM's / sglang-jax's ``get_rope`` signature.

    Args:
        head_size: channels per head.
        rotary_dim: rotated channels (even, <= ``head_size``; partial rotation below it).
        max_position: the model's ``max_position_embeddings``; ``dynamic`` and ``longrope``
            take the frequencies of this length.
        base: ``rope_theta``.
        is_neox_style: True: ``pairs="half"`` (GPT-NeoX, Llama in Hugging Face); False:
            ``"interleaved"`` (GPT-J, Meta's Llama).
        rope_scaling: Hugging Face's ``rope_scaling`` / ``rope_parameters`` dict, or None.
        dtype: the dtype of the cos/sin tables (as those stacks cache them): float32
            (default), bfloat16, float16; the rotation itself runs in float32 and is rounded
            once to the query's dtype.

    >>> import jax.numpy as jnp
    >>> rope = get_rope(64, 64, 4096, 10000.0)
    >>> q, k = jax.jit(rope)(jnp.arange(3), jnp.ones((3, 8 * 64)), jnp.ones((3, 2 * 64)))
    >>> q.shape, k.shape
    ((3, 512), (3, 128))
    """
    head_size = check_int("head_size", head_size, minimum=2)
    max_position = check_int("max_position", max_position, minimum=1)
    neox = check_bool("is_neox_style", is_neox_style)
    spec = _rope_scaling(rope_scaling)
    if spec is not None and spec.partial_rotary_factor is not None:
        raise ValueError(
            "rope_scaling['partial_rotary_factor'] is given by rotary_dim in get_rope: "
            "leave it out of the dict"
        )
    dim = resolve_rotary_dim(head_size, rotary_dim, spec)
    table_dtype = check_dtype("dtype", dtype)
    return RotaryEmbeddingForTokens(
        head_size,
        dim,
        max_position,
        float(rope_base(base, spec)),
        "half" if neox else "interleaved",
        spec,
        table_dtype,
    )
