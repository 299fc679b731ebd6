"""xPos: the per-channel decay that xPos (Sun et al. 2023, "A Length-Extrapolatable
Transformer") applies with RoPE.

Query channel pair ``k`` of a token at position ``p`` is multiplied by
``ζ_k^(p / scale_base)`` and the key's by its inverse, ``ζ_k = (2k + γ·d) / ((1 + γ)·d)``,
``γ = 0.4``; the score of query ``i`` and key ``j`` then decays like ``ζ^((i − j)/scale_base)``.
The libraries centre the positions before scaling; pass the positions the model uses:

- rotary-embedding-torch (``use_xpos=True``): ``p − L // 2`` for ``p = 0 .. L-1``;
- torchscale's ``XPOS(x, offset)``: ``p + (−(L + offset) // 2)`` in Python, that is
  ``p − ceil((L + offset) / 2)``, for the last ``L`` of ``p = 0 .. L + offset − 1`` (one
  less than ``p − (L + offset) // 2`` when ``L + offset`` is odd).

>>> xpos_scales([0, 512], 4)
array([[1.        , 1.        , 1.        , 1.        ],
       [0.28571429, 0.28571429, 0.64285714, 0.64285714]])
>>> L, offset = 3, 2                     # torchscale's positions of 3 tokens after 2
>>> np.arange(L + offset)[-L:] - (L + offset + 1) // 2
array([-1,  0,  1])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import check_allocation, check_int, check_positions, check_real, detached
from .positions import check_number

__all__ = ["xpos_scales"]


def xpos_scales(
    positions: Any,
    head_dim: int,
    *,
    scale_base: float = 512.0,
    gamma: float = 0.4,
    pairs: str = "interleaved",
) -> npt.NDArray[np.float64]:
    """The xPos query scales ``(*S, head_dim)``: float64; keys use ``1 / scales``.

    Args:
        positions: integer or real positions, any shape ``S`` (an int is one position array
            of that many: ``0 .. L-1``).
        head_dim: channels per head, an even int >= 2.
        scale_base: the decay length, > 0 (512 in the paper and both libraries).
        gamma: ``γ`` of ζ_k, > 0 (0.4).
        pairs: ``"interleaved"`` (channels 2k, 2k+1 share ζ_k; rotary-embedding-torch and
            torchscale) or ``"half"`` (channels k and k + d/2).

    Accuracy: within a few float64 ulps of the exact power. A position whose scale or its
    inverse is beyond float64 (``|p| / scale_base`` above about ``708 / |ln ζ_0|``) is a
    ``ValueError``, never an infinite or zero scale.

    >>> xpos_scales(2, 2, scale_base=1.0)
    array([[1.        , 1.        ],
           [0.28571429, 0.28571429]])
    """
    dim = check_int("head_dim", head_dim, minimum=2)
    if dim % 2:
        raise ValueError(f"head_dim must be even, got {dim}")
    base = check_number("scale_base", scale_base, positive=True)
    g = check_number("gamma", gamma, positive=True)
    check_real("scale_base", base)
    if pairs not in ("interleaved", "half"):
        raise ValueError(f"pairs must be 'interleaved' or 'half', got {pairs!r}")
    if isinstance(positions, int | np.integer) and not isinstance(positions, bool):
        length = check_int("positions", positions, minimum=0)
        check_allocation("positions and head_dim", (length, dim), 8, 3)
        positions = np.arange(length)
    where = check_positions("positions", detached(positions)).astype(np.float64)
    check_allocation("positions and head_dim", (*where.shape, dim), 8, 3)
    check_allocation("head_dim", (dim // 2,), 8, 2)
    if np.isfinite((1.0 + g) * float(dim)):
        zeta = (np.arange(0, dim, 2) + g * dim) / ((1.0 + g) * dim)
    else:  # γ near 1e308: the same ζ without overflowing
        zeta = (np.arange(0, dim, 2) / dim + g) / (1.0 + g)
    with np.errstate(over="ignore", under="ignore"):  # refused below by name
        scales = zeta ** (where[..., None] / base)
    beyond = ~np.isfinite(scales) | (scales < np.finfo(np.float64).tiny)
    if beyond.any():  # the query scale or its inverse (the key's) is not a float64
        first = where[beyond.any(axis=-1)].flat[0]
        limit = np.log(np.finfo(np.float64).tiny) / np.log(zeta[0])
        raise ValueError(
            f"positions: xPos scales of position {first:g} are beyond float64 "
            f"(ζ^(position / scale_base) with ζ = {zeta[0]:.6g}, scale_base = {base:g}); "
            f"|position| / scale_base must stay below {limit:.6g}"
        )
    if pairs == "interleaved":
        return np.repeat(scales, 2, axis=-1)
    return np.concatenate([scales, scales], axis=-1)
