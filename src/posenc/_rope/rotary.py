"""Rotary position embeddings (RoPE): cos/sin tables in float64 and a NumPy reference rotation.

RoPE rotates pair ``k`` of the first ``rotary_dim`` channels of a query or key at position
``p`` by the angle ``θ_k = p·ω_k`` (ω_k from :func:`posenc.rope_frequencies`,
``n = rotary_dim / 2`` pairs). Frameworks disagree on which channels form a pair:

- ``pairs="half"``: channel ``i`` pairs with ``i + n`` (GPT-NeoX, Hugging Face
  ``rotate_half``, keras-hub, Qwen). cos/sin tables are ``[θ_0 .. θ_{n-1}, θ_0 .. θ_{n-1}]``.
- ``pairs="interleaved"``: channel ``2k`` pairs with ``2k + 1`` (Meta's original Llama,
  torchtune, rotary-embedding-torch, timm). Tables are ``[θ_0, θ_0, θ_1, θ_1, ...]``.

Both rotate a pair ``(a, b)`` to ``(a·cos θ − b·sin θ, b·cos θ + a·sin θ)``; the two layouts
are permutations of each other. Channels past ``rotary_dim`` pass through unchanged.

The layout rule of :func:`apply_rotary`: tables of ``rotary_dim`` columns must be laid out for
the ``pairs`` they are applied with. Such a table holds each angle in both channels of its
pair, so its layout is in its values, and a table of the other layout is refused (applied, it
would turn pairs by the wrong angles, or not rotate at all). Tables of ``rotary_dim / 2``
columns, one per pair (the form of flash-attn's and vLLM's caches), have no layout to get
wrong; pass ``rotary_dim`` to say that the tables have that form.

Where a scaling defines an attention factor (YaRN, LongRoPE), the tables returned here are
already multiplied by it, as Hugging Face's rotary modules return them
(``cos * attention_scaling``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from .._angles import angles, row_blocks
from .._checks import check_float_dtype, check_int
from .._features import PairLayout, check_pairs, layout_error, pair_slices
from .._frequencies import check_omega_size
from .._positions.sequence import table_positions
from .scaling import RopeScaling, rope_frequencies, rope_scaling

__all__ = [
    "apply_rotary",
    "check_rotation_shapes",
    "default_seq_len",
    "resolve_rotary_dim",
    "rotary_cos_sin",
]


def resolve_rotary_dim(
    head_dim: int, rotary_dim: Any = None, scaling: RopeScaling | None = None
) -> int:
    """The number of rotated channels: ``rotary_dim``, or ``head_dim`` × the scaling's
    ``partial_rotary_factor`` (truncated, as Hugging Face does), or ``head_dim``.

    It must be even and at most ``head_dim``; given both ways, they must agree.

    >>> resolve_rotary_dim(64, None, RopeScaling(partial_rotary_factor=0.25))
    16
    >>> resolve_rotary_dim(7)
    Traceback (most recent call last):
    ...
    ValueError: rotary_dim must be even (RoPE rotates pairs of channels), got 7 (head_dim is 7: \
pass an even rotary_dim <= 7)
    """
    head_dim = check_int("head_dim", head_dim, minimum=1)
    # A type that keeps the head's size (``proportional``) reads the factor itself.
    keeps = scaling is not None and scaling.record.keeps_head_dim
    partial = None if scaling is None or keeps else scaling.partial_rotary_factor
    from_factor = None if partial is None else int(head_dim * partial)
    if rotary_dim is None:
        dim = head_dim if from_factor is None else from_factor
    else:
        dim = check_int("rotary_dim", rotary_dim, minimum=2)
        if from_factor is not None and dim != from_factor:
            raise ValueError(
                f"rotary_dim = {dim} disagrees with scaling['partial_rotary_factor'] = "
                f"{partial!r} (int({head_dim} * {partial!r}) = {from_factor}); give one of them"
            )
    if dim > head_dim:
        raise ValueError(f"rotary_dim must be <= head_dim = {head_dim}, got {dim}")
    if rotary_dim is None and from_factor is not None and (dim < 2 or dim % 2):
        raise ValueError(
            f"scaling['partial_rotary_factor'] = {partial!r} rotates int({head_dim} * "
            f"{partial!r}) = {dim} channels of head_dim {head_dim}: it must give an even number "
            ">= 2 (RoPE rotates pairs of channels)"
        )
    if dim < 2 or dim % 2:
        hint = f" (head_dim is {head_dim}: pass an even rotary_dim <= {head_dim})"
        raise ValueError(
            f"rotary_dim must be even (RoPE rotates pairs of channels), got {dim}"
            + (hint if rotary_dim is None else "")
        )
    check_omega_size("head_dim" if rotary_dim is None else "rotary_dim", dim)
    return dim


def default_seq_len(largest_position: float | None) -> int | None:
    """The sequence length a length-dependent scaling sees: largest position + 1 (as in
    Hugging Face), ``None`` for no positions.

    >>> default_seq_len(4095), default_seq_len(2.5), default_seq_len(None)
    (4096, 3, None)
    """
    if largest_position is None:
        return None
    return max(int(np.floor(largest_position)) + 1, 0)


def rotary_cos_sin(
    positions: Any,
    head_dim: int,
    *,
    base: float | None = None,
    scaling: Any = None,
    rotary_dim: int | None = None,
    pairs: PairLayout = "half",
    dtype: Any = np.float32,
    seq_len: int | None = None,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The RoPE cos and sin tables of ``positions``, computed in float64 and rounded once.

    Args:
        positions: an int ``L`` (positions ``0 .. L-1``) or an array-like of integer or real
            positions of any shape ``S``.
        head_dim: channels per attention head, an integer >= 2.
        base: the wavelength base (``rope_theta``), a finite number > 0; default the
            scaling's ``rope_theta``, else 10000.0.
        scaling: ``None``, a dict of Hugging Face rope parameters (``config.rope_parameters``
            or the older ``config.rope_scaling``) or a :class:`posenc.RopeScaling`:
            ``linear``, ``dynamic``, ``yarn``, ``llama3`` or ``longrope``.
        rotary_dim: rotate only the first ``rotary_dim`` channels (even, <= ``head_dim``);
            default ``head_dim``, or ``int(head_dim * partial_rotary_factor)`` when the
            scaling has one.
        pairs: ``"half"`` (Hugging Face / GPT-NeoX) or ``"interleaved"`` (Meta / torchtune /
            rotary-embedding-torch); see the module docstring.
        dtype: output dtype: float32 (default), float16 or float64.
        seq_len: the sequence length ``dynamic`` and ``longrope`` select their frequencies
            by; default the largest position + 1 (Hugging Face's rule). Ignored otherwise.

    Returns:
        ``(cos, sin)``, each of shape ``(L, rotary_dim)`` or ``(*S, rotary_dim)``, laid out for
        ``pairs`` and already multiplied by the scaling's attention factor (YaRN, LongRoPE;
        1 otherwise), exactly what Hugging Face's rotary modules return.

    >>> cos, sin = rotary_cos_sin(3, 4)
    >>> cos
    array([[ 1.        ,  1.        ,  1.        ,  1.        ],
           [ 0.5403023 ,  0.99995   ,  0.5403023 ,  0.99995   ],
           [-0.41614684,  0.9998    , -0.41614684,  0.9998    ]], dtype=float32)
    >>> rotary_cos_sin(3, 4, pairs="interleaved")[1][1]
    array([0.84147096, 0.84147096, 0.00999983, 0.00999983], dtype=float32)
    >>> yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    >>> rotary_cos_sin([0], 8, scaling=yarn)[0]  # cos(0) times YaRN's attention factor
    array([[1.1386294, 1.1386294, 1.1386294, 1.1386294, 1.1386294, 1.1386294, 1.1386294,
            1.1386294]], dtype=float32)
    """
    head_dim = check_int("head_dim", head_dim, minimum=2)
    spec = rope_scaling(scaling)
    dim = resolve_rotary_dim(head_dim, rotary_dim, spec)
    pairs = check_pairs(pairs)
    out_dtype = check_float_dtype("dtype", dtype)
    pos = table_positions(positions, "positions and head_dim", dim, out_dtype.itemsize, 2)
    flat = pos.reshape(-1)
    if seq_len is None and spec is not None and spec.depends_on_length and flat.size:
        seq_len = default_seq_len(float(np.max(flat)))
    omega, attention = rope_frequencies(dim, base=base, scaling=spec, seq_len=seq_len)

    n = dim // 2
    first, second = pair_slices(pairs, n)
    cos = np.empty((flat.shape[0], dim), dtype=out_dtype)
    sin = np.empty((flat.shape[0], dim), dtype=out_dtype)
    for rows in row_blocks(flat.shape[0], n):
        theta = angles(flat[rows], omega)
        for out, fn in ((cos, np.cos), (sin, np.sin)):
            values = fn(theta)
            if attention != 1.0:
                values *= attention
            out[rows, first] = values
            out[rows, second] = values
    return cos.reshape(*pos.shape, dim), sin.reshape(*pos.shape, dim)


def _as_float_array(name: str, value: Any) -> npt.NDArray[Any]:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be an array of real numbers, got {type(value).__name__}"
        ) from exc
    if array.dtype.kind != "f":
        raise TypeError(f"{name} must be a floating-point array, got dtype {array.dtype}")
    return array


def _table_form(channels: int, shape: tuple[int, ...], rotary_dim: Any) -> tuple[int, bool]:
    """The rotated channels ``r`` and whether the tables hold one column per pair."""
    width = shape[-1]
    if rotary_dim is None or check_int("rotary_dim", rotary_dim, minimum=2) == width:
        dim, per_pair = width, False
    elif rotary_dim == 2 * width:
        dim, per_pair = rotary_dim, True
    else:
        raise ValueError(
            f"rotary_dim = {rotary_dim} must be cos.shape[-1] = {width} (tables laid out for "
            f"pairs) or 2 * cos.shape[-1] = {2 * width} (one column per pair)"
        )
    if per_pair and dim > channels:
        raise ValueError(
            f"rotary_dim = {dim} (cos/sin of {width} columns, one per pair) must be <= "
            f"x.shape[-1] = {channels}"
        )
    if dim < 2 or dim % 2 or dim > channels:
        raise ValueError(
            f"cos must have an even number of channels <= x.shape[-1] = {channels}, "
            f"got shape {shape}"
        )
    return dim, per_pair


def check_rotation_shapes(
    x: tuple[int, ...],
    cos: tuple[int, ...],
    sin: tuple[int, ...],
    rotary_dim: Any = None,
    *,
    broadcast: Callable[..., tuple[int, ...]] = np.broadcast_shapes,
) -> tuple[int, bool]:
    """Check the shapes of a rotation's ``x`` and tables; return ``(r, per_pair)``.

    ``r`` is the number of rotated channels and ``per_pair`` whether the tables hold one
    column per pair (``rotary_dim = 2 * cos.shape[-1]``) rather than ``r`` columns laid out
    for ``pairs``. Shared by the NumPy, torch and JAX ``apply_rotary``, so all say the same;
    ``broadcast`` is the library's ``broadcast_shapes`` (JAX's knows symbolic dimensions).

    >>> check_rotation_shapes((2, 3, 5, 8), (5, 8), (5, 8))
    (8, False)
    >>> check_rotation_shapes((2, 3, 5, 8), (5, 4), (5, 4), rotary_dim=8)
    (8, True)
    """
    if cos != sin:
        raise ValueError(f"cos and sin must have the same shape, got {cos} and {sin}")
    if not x or not cos:
        raise ValueError(f"x and cos must have a channel dimension, got shapes {x} and {cos}")
    dim, per_pair = _table_form(x[-1], cos, rotary_dim)
    part = (*x[:-1], cos[-1])
    try:
        together = broadcast(part, cos)
    except ValueError:
        together = None
    if together != part:
        columns = f"x[..., :{dim}]" + (" (one column per pair)" if per_pair else "")
        raise ValueError(
            f"cos/sin of shape {cos} must broadcast against {columns} of shape "
            f"{(*x[:-1], dim)} (x has shape {x})"
        )
    return dim, per_pair


def check_inverse(inverse: Any) -> bool:
    """``inverse`` of :func:`apply_rotary`: True or False (a NumPy bool too)."""
    if not isinstance(inverse, bool | np.bool_):
        raise TypeError(f"inverse must be True or False, got {type(inverse).__name__}")
    return bool(inverse)


def apply_rotary(
    x: Any,
    cos: Any,
    sin: Any,
    *,
    pairs: PairLayout = "half",
    rotary_dim: int | None = None,
    inverse: bool = False,
) -> npt.NDArray[Any]:
    """Rotate the first ``rotary_dim`` channels of ``x`` by the angles in ``cos``/``sin``.

    The NumPy reference of RoPE: each pair ``(a, b)`` of the rotated channels becomes
    ``(a·cos θ − b·sin θ, b·cos θ + a·sin θ)``; the other channels pass through. With
    ``inverse=True`` each pair turns by ``−θ`` instead (``sin θ`` negated, which is exact):
    the rotation that undoes it, as DeepSeek-V4 applies to the rotary slice of its attention
    output (transformers' ``apply_rotary_pos_emb(..., cos, -sin)``).

    Args:
        x: floating array ``(..., head_dim)`` (float16, float32 or float64).
        cos, sin: the tables, of one of two forms, broadcastable against ``x`` but for their
            last dimension (e.g. ``(s, ·)`` for ``x`` of shape ``(b, h, s, head_dim)``, or
            ``(b, 1, s, ·)`` per batch element):

            - ``(..., r)``: laid out for ``pairs``, as :func:`rotary_cos_sin` (with the same
              ``pairs``) and Hugging Face return them. A table of the other layout raises
              ``ValueError`` (each angle must fill both channels of its pair: ``half``,
              channels ``k`` and ``k + r/2``; ``interleaved``, ``2k`` and ``2k + 1``).
            - ``(..., r/2)``: one column per pair, with ``rotary_dim=r``; no layout.
        pairs: ``"half"`` or ``"interleaved"``, how ``x`` pairs its channels.
        rotary_dim: the number ``r`` of rotated channels: ``cos.shape[-1]`` (the default:
            tables laid out for ``pairs``) or ``2 * cos.shape[-1]`` (one column per pair).
        inverse: turn by ``−θ`` (undo the rotation by ``θ``), True or False.

    Returns:
        array of ``x``'s shape and dtype; computed in float64 and rounded once.

    >>> cos, sin = rotary_cos_sin([1], 4, dtype=np.float64)
    >>> apply_rotary(np.array([[1.0, 0.0, 0.0, 0.0]]), cos, sin).round(4)  # pair (0, 2) turns 1 rad
    array([[0.5403, 0.    , 0.8415, 0.    ]])
    >>> x = np.arange(6.0).reshape(1, 6)
    >>> apply_rotary(x, *rotary_cos_sin([0], 6, rotary_dim=4))  # position 0: identity
    array([[0., 1., 2., 3., 4., 5.]])
    >>> apply_rotary(x, cos[:, :2], sin[:, :2], rotary_dim=4).round(4)  # one column per pair
    array([[-1.6829,  0.97  ,  1.0806,  3.0098,  4.    ,  5.    ]])
    >>> apply_rotary(np.ones((1, 4)), cos, sin, pairs="interleaved")
    Traceback (most recent call last):
    ...
    ValueError: pairs='interleaved' does not match cos/sin: they are laid out for pairs='half' \
(channels k and k + 2 hold the same angle); pass pairs='half' if x pairs its channels that way, \
or build the tables with pairs='interleaved'
    """
    pairs = check_pairs(pairs)
    undo = check_inverse(inverse)
    x = _as_float_array("x", x)
    cos = _as_float_array("cos", cos)
    sin = _as_float_array("sin", sin)
    dim, per_pair = check_rotation_shapes(x.shape, cos.shape, sin.shape, rotary_dim)
    first, second = pair_slices(pairs, dim // 2)
    if not per_pair:
        error = layout_error(cos, sin, pairs)
        if error is not None:
            raise error
        cos, sin = cos[..., first], sin[..., first]
    c, s = cos.astype(np.float64), sin.astype(np.float64)
    if undo:
        s = -s
    a, b = x[..., first].astype(np.float64), x[..., second].astype(np.float64)
    out = np.array(x, copy=True)
    out[..., first] = a * c - b * s
    out[..., second] = b * c + a * s
    return out
