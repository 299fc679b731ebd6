"""JAX and Flax front-end: the float64 core's tables as JAX arrays, rounded once.

Requires JAX and Flax (``pip install jax flax``, or from a clone of posenc ``pip install
'.[jax]'``; Python >= 3.11). ``import posenc`` never imports JAX.

- **Known positions** (ints, lists, NumPy arrays, concrete JAX arrays, constants of a
  jitted function): the NumPy core's float64 tables rounded once, bit-equal to
  :func:`posenc.rotary_cos_sin` and :func:`posenc.sinusoidal` in every dtype (bfloat16
  included).
- **Traced positions** (arguments of ``jax.jit``, ``vmap``, ``shard_map``): without 64-bit
  mode, integer positions give values within one float32 ulp of the exact value (absolute
  floor 2**-25) up to 2**24, integer or real (beyond, the float64 angle's own rounding,
  ``|p|·2**-53``, adds to it, as in the NumPy core), 16-bit dtypes rounded once from it. With
  ``jax_enable_x64``, the angles are float64.

>>> import posenc.jax as pj
>>> pj.rotary_cos_sin(4, 8)[0].shape
(4, 8)
"""

try:
    import flax as _flax  # noqa: F401
    import jax as _jax  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without jax
    raise ImportError(
        "posenc.jax needs JAX and Flax (Python >= 3.11): pip install jax flax (or, from a "
        "clone of posenc, pip install '.[jax]')"
    ) from exc

from .._rope.plan import RopeLayer, RopePlan, rope_plan
from ._functional import (
    apply_rotary,
    layer_cos_sin,
    multi_axis_cos_sin,
    rotary_cos_sin,
    sinusoidal,
)
from ._get_rope import RotaryEmbeddingForTokens, get_rope
from ._modules import RotaryEmbedding, SinusoidalEncoding
from ._positions import (
    MultimodalIds,
    multimodal_positions,
    positions_from_cu_seqlens,
    positions_from_mask,
    positions_from_segments,
    positions_from_tokens,
)

__all__ = [
    "MultimodalIds",
    "RopeLayer",
    "RopePlan",
    "RotaryEmbedding",
    "RotaryEmbeddingForTokens",
    "SinusoidalEncoding",
    "apply_rotary",
    "get_rope",
    "layer_cos_sin",
    "multi_axis_cos_sin",
    "multimodal_positions",
    "positions_from_cu_seqlens",
    "positions_from_mask",
    "positions_from_segments",
    "positions_from_tokens",
    "rope_plan",
    "rotary_cos_sin",
    "sinusoidal",
]
