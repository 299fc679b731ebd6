"""Features: which channel holds sin, cos, a rotated pair or zero, for every layout.

The one place that knows the channel layouts. Sinusoidal tables place ``sin(p·ω_k)`` and
``cos(p·ω_k)`` by a convention's layout (:func:`feature_slices`); rotary embeddings rotate
pairs of channels by a pair layout (:func:`pair_slices`). Everything else (the table builders,
the analysis tools, the figures) asks here instead of re-deriving the layout.

Sinusoidal layouts (``s_k = sin(p·ω_k)``, ``c_k = cos(p·ω_k)``)::

    interleaved   [s0, c0, s1, c1, ...]      (paper)
    sin_cos       [s0, s1, ... | c0, c1, ...] (tensor2tensor, marian)
    cos_sin       [c0, c1, ... | s0, s1, ...] (musicgen)

    odd d, extra_sin: one more sin than cos column;  zero_pad: a zero column appended

RoPE pair layouts (``n`` pairs, channel ``i`` turns with its partner)::

    half          i pairs with i + n         (Hugging Face rotate_half, GPT-NeoX)
    interleaved   2k pairs with 2k + 1       (Meta Llama, torchtune, rotary-embedding-torch)

A RoPE cos/sin table laid out for ``pairs`` holds the angle of pair ``k`` in both channels of
that pair, so it carries its layout in its values: :func:`pair_columns_agree` and
:func:`layout_error` tell a table of the other layout from a table of the stated one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from ._checks import check_int
from ._conventions import get_convention

__all__ = [
    "PAIRS",
    "FeatureSlices",
    "PairLayout",
    "channel_frequency_index",
    "channel_kinds",
    "check_pairs",
    "feature_slices",
    "fill_features",
    "layout_error",
    "pair_columns_agree",
    "pair_slices",
    "sin_cos_pairs",
    "write_pairs",
]

#: The RoPE pair layouts.
PairLayout = Literal["half", "interleaved"]
PAIRS: tuple[PairLayout, ...] = ("half", "interleaved")


class FeatureSlices(NamedTuple):
    """Where the sin, cos and zero columns of a convention go, for one ``d_model``.

    ``out[..., sin] = sin(θ[..., :n_sin])``, ``out[..., cos] = cos(θ[..., :n_cos])`` and
    ``out[..., zero] = 0`` fill all ``d_model`` channels exactly once.
    """

    sin: slice
    cos: slice
    zero: slice
    n_sin: int
    n_cos: int


def feature_slices(d_model: int, convention: Any = "paper") -> FeatureSlices:
    """The channel layout of ``convention`` for ``d_model`` channels.

    >>> feature_slices(5, "paper")
    FeatureSlices(sin=slice(0, 6, 2), cos=slice(1, 4, 2), zero=slice(5, 5, None), n_sin=3, n_cos=2)
    >>> feature_slices(5, "tensor2tensor").zero
    slice(4, 5, None)
    """
    d_model = check_int("d_model", d_model, minimum=1)
    conv = get_convention(convention)
    if conv.odd == "extra_sin":
        n_sin, n_cos = (d_model + 1) // 2, d_model // 2
    else:  # "zero_pad"
        n_sin = n_cos = d_model // 2
    used = n_sin + n_cos
    if conv.layout == "interleaved":
        sin, cos = slice(0, 2 * n_sin, 2), slice(1, 2 * n_cos, 2)
    elif conv.layout == "sin_cos":
        sin, cos = slice(0, n_sin), slice(n_sin, used)
    else:  # "cos_sin"
        cos, sin = slice(0, n_cos), slice(n_cos, used)
    return FeatureSlices(sin, cos, slice(used, d_model), n_sin, n_cos)


def channel_frequency_index(layout: FeatureSlices, d_model: int) -> npt.NDArray[np.int64]:
    """For each channel, the index ``k`` of its frequency ω_k (-1 for a zero column).

    >>> channel_frequency_index(feature_slices(5, "tensor2tensor"), 5)
    array([ 0,  1,  0,  1, -1])
    """
    index = np.full(d_model, -1, dtype=np.int64)
    index[layout.sin] = np.arange(layout.n_sin)
    index[layout.cos] = np.arange(layout.n_cos)
    return index


def channel_kinds(layout: FeatureSlices, d_model: int) -> list[str]:
    """For each channel, ``"sin"``, ``"cos"`` or ``"zero"``.

    >>> channel_kinds(feature_slices(3, "paper"), 3)
    ['sin', 'cos', 'sin']
    """
    kinds = ["zero"] * d_model
    for kind, where in (("sin", layout.sin), ("cos", layout.cos)):
        for channel in range(d_model)[where]:
            kinds[channel] = kind
    return kinds


class SinCosPairs(NamedTuple):
    """Channel indices: (sin, cos) pairs of one frequency, unpaired sines, zero columns."""

    sin: npt.NDArray[np.intp]
    cos: npt.NDArray[np.intp]
    unpaired: npt.NDArray[np.intp]
    zero: npt.NDArray[np.intp]


def sin_cos_pairs(layout: FeatureSlices, d_model: int) -> SinCosPairs:
    """The (sin, cos) channel pairs of a layout (pair ``k`` holds frequency ω_k), the sines
    left without a cosine (odd ``d_model`` with ``extra_sin``) and the zero columns.

    >>> p = sin_cos_pairs(feature_slices(5, "paper"), 5)
    >>> p.sin, p.cos, p.unpaired
    (array([0, 2]), array([1, 3]), array([4]))
    """
    channels = np.arange(d_model)
    sin, cos = channels[layout.sin], channels[layout.cos]
    return SinCosPairs(sin[: layout.n_cos], cos, sin[layout.n_cos :], channels[layout.zero])


_Array = TypeVar("_Array")


def fill_features(
    out: _Array,
    angles: Any,
    layout: FeatureSlices,
    sin: Callable[[Any], Any],
    cos: Callable[[Any], Any],
) -> _Array:
    """Write sin/cos of ``angles`` (…, n) into ``out`` (…, d_model) following ``layout``.

    Array-library neutral: works for NumPy arrays and torch tensors alike (``sin``/``cos``
    are that library's functions). Assignment into ``out`` performs the single cast.
    """
    out[..., layout.sin] = sin(angles[..., : layout.n_sin])  # type: ignore[index]
    out[..., layout.cos] = cos(angles[..., : layout.n_cos])  # type: ignore[index]
    out[..., layout.zero] = 0  # type: ignore[index]
    return out


def write_pairs(
    out: Any, pairs: Any, layout: FeatureSlices, store: Callable[[Any, Any], None]
) -> None:
    """Write ``pairs`` (m, n, 2) = (sin, cos) of n angles into the sin/cos columns of ``out``.

    Array-library neutral. ``store(dst, src)`` performs the cast; the zero columns of
    ``layout`` are left alone. Layouts whose columns are the pairs in order (the paper's
    interleaving) take one contiguous copy.

    >>> pairs = np.array([[[0.1, 0.9], [0.2, 0.8]]])  # one row: (sin, cos) of two angles
    >>> def store(dst, src):
    ...     dst[...] = src
    >>> out = np.zeros((1, 4))
    >>> write_pairs(out, pairs, feature_slices(4, "marian"), store)
    >>> out
    array([[0.1, 0.2, 0.9, 0.8]])
    """
    m, n = pairs.shape[0], pairs.shape[1]
    used = layout.n_sin + layout.n_cos
    interleaved = (
        layout.n_sin == n
        and layout.n_cos in (n, n - 1)
        and layout.sin == slice(0, 2 * n, 2)
        and layout.cos == slice(1, 2 * layout.n_cos, 2)
    )
    if interleaved:
        store(out[:, :used], pairs.reshape(m, 2 * n)[:, :used])
    else:
        store(out[:, layout.sin], pairs[:, : layout.n_sin, 0])
        store(out[:, layout.cos], pairs[:, : layout.n_cos, 1])


def check_pairs(pairs: Any) -> PairLayout:
    """``pairs`` must be ``"half"`` or ``"interleaved"``.

    >>> check_pairs("half")
    'half'
    >>> check_pairs("neox")
    Traceback (most recent call last):
    ...
    ValueError: pairs must be 'half' or 'interleaved', got 'neox'
    """
    if not isinstance(pairs, str):
        raise TypeError(f"pairs must be 'half' or 'interleaved', got {pairs!r}")
    if pairs not in PAIRS:
        raise ValueError(f"pairs must be 'half' or 'interleaved', got {pairs!r}")
    return pairs


def pair_slices(pairs: str, n: int) -> tuple[slice, slice]:
    """Where the first and the second channel of each of the ``n`` RoPE pairs sit.

    ``table[..., first]`` and ``table[..., second]`` both hold ``θ_0 .. θ_{n-1}``.

    >>> pair_slices("half", 3)
    (slice(0, 3, None), slice(3, 6, None))
    >>> pair_slices("interleaved", 3)
    (slice(0, 6, 2), slice(1, 6, 2))
    """
    if pairs == "half":
        return slice(0, n), slice(n, 2 * n)
    return slice(0, 2 * n, 2), slice(1, 2 * n, 2)


def pair_columns_agree(table: Any, pairs: str) -> Any:
    """Elementwise ``(..., n)``: whether both channels of each pair of ``table`` ``(..., 2n)``
    hold the same value (two NaNs count as the same), as in a table laid out for ``pairs``.

    Array-library neutral: NumPy arrays and torch tensors alike.

    >>> table = np.array([[1.0, 2.0, 1.0, 2.0]])   # [θ0, θ1, θ0, θ1]: the half layout
    >>> pair_columns_agree(table, "half"), pair_columns_agree(table, "interleaved")
    (array([[ True,  True]]), array([[False, False]]))
    """
    first, second = pair_slices(pairs, table.shape[-1] // 2)
    a, b = table[..., first], table[..., second]
    return (a == b) | ((a != a) & (b != b))


def _agree(table: Any, pairs: str) -> bool:
    """Whether every pair of ``table`` agrees (reads the data: arrays and CPU tensors only)."""
    first, second = pair_slices(pairs, table.shape[-1] // 2)
    if bool((table[..., first] == table[..., second]).all()):  # the usual case: one pass
        return True
    return bool(pair_columns_agree(table, pairs).all())


def layout_error(cos: Any, sin: Any, pairs: str) -> ValueError | None:
    """None when ``cos`` and ``sin`` ``(..., r)`` are laid out for ``pairs``; else the error
    to raise, naming ``pairs`` and the layout the tables have.

    Reads the data (NumPy arrays and CPU tensors). Tables that fit both layouts (every pair
    of angles equal, e.g. position 0 only, or ``r = 2``) are laid out for both.

    >>> cos = np.array([[0.5, 0.5, 0.9, 0.9]])     # [θ0, θ0, θ1, θ1]: interleaved
    >>> layout_error(cos, cos, "interleaved") is None
    True
    >>> print(layout_error(cos, cos, "half"))
    pairs='half' does not match cos/sin: they are laid out for pairs='interleaved' (channels \
2k and 2k + 1 hold the same angle); pass pairs='interleaved' if x pairs its channels that way, \
or build the tables with pairs='half'
    """
    if _agree(cos, pairs) and _agree(sin, pairs):
        return None
    n = cos.shape[-1] // 2
    rule = {
        "half": f"channels k and k + {n} hold the same angle",
        "interleaved": "channels 2k and 2k + 1 hold the same angle",
    }
    other = "interleaved" if pairs == "half" else "half"
    if _agree(cos, other) and _agree(sin, other):
        return ValueError(
            f"pairs={pairs!r} does not match cos/sin: they are laid out for pairs={other!r} "
            f"({rule[other]}); pass pairs={other!r} if x pairs its channels that way, or "
            f"build the tables with pairs={pairs!r}"
        )
    return ValueError(
        f"pairs={pairs!r} does not match cos/sin: they have neither layout (for "
        f"pairs={pairs!r}, {rule[pairs]}); build them with rotary_cos_sin(..., "
        f"pairs={pairs!r}), or pass one column per pair (cos.shape[-1] = {n}) with "
        f"rotary_dim={2 * n}"
    )
