"""HunYuan-VL's XD-RoPE: M-RoPE over four (or more) axes, and the doubled-table split.

XD-RoPE gives every token one coordinate per axis, the last three being the image patch's
``width`` and ``height`` and the image's ordinal ``image_index`` (text tokens: the sequence
position on every axis), and gives each axis ``xdrope_section[a]`` of the ``head_dim / 2``
rotary pairs, in order, over one RoPE schedule: the plain sectioned M-RoPE of
:func:`posenc.multi_axis_frequencies` with ``order="sectioned"``, ``schedule="shared"``,
``pairs="half"``. HunYuan-VL's own code builds it from the doubled table ``[θ, θ]`` split by
the section list repeated (``xdrope_section * 2``), so that both channels of a
``rotate_half`` pair turn with the same axis; vLLM's ``XDRotaryEmbedding`` (each half split
by the sections) and MLX's port do the same.

transformers (``HunYuanVLRotaryEmbedding.recomposition_frequencies``, 5.23 to 5.25) splits the
doubled table by ``[2 * s for s in mrope_section]`` instead: the ``a``-th block of ``2·s_a``
channels turns with axis ``a``, so channel ``k`` and channel ``k + head_dim/2`` of one pair
can turn with different axes. On text tokens (every axis alike) both give the same table; on
image tokens they differ. :func:`doubled_split_axes` gives the axis of each channel under that
split and :func:`doubled_split_note` says in words which pairs mix which axes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["DOUBLED_SPLIT", "axis_names", "doubled_split_axes", "doubled_split_note"]

#: Where the split by ``2·s`` is, for notes and reasons.
DOUBLED_SPLIT = (
    "transformers' HunYuanVLRotaryEmbedding.recomposition_frequencies splits the doubled "
    "table [θ, θ] by [2 * s for s in mrope_section]"
)

#: The last three axes of HunYuan-VL's position ids (``HunYuanVLModel.get_rope_index``).
_IMAGE_AXES = ("width", "height", "image_index")


def axis_names(n_axes: int, where: str) -> tuple[str, ...]:
    """The axes of HunYuan-VL's ``n_axes`` sections: sequence positions first (``position``,
    or ``position0``, ``position1``, ... for several), then width, height and image index.

    >>> axis_names(4, "xdrope_section")
    ('position', 'width', 'height', 'image_index')
    """
    if n_axes < len(_IMAGE_AXES):
        raise ValueError(
            f"{where} must give at least 3 sections for hunyuan_vl_text (its last three axes "
            f"are width, height and image_index: HunYuanVLModel.get_rope_index), got {n_axes}"
        )
    lead = n_axes - len(_IMAGE_AXES)
    first = ("position",) if lead == 1 else tuple(f"position{i}" for i in range(lead))
    return first + _IMAGE_AXES


def doubled_split_axes(sections: Sequence[int]) -> npt.NDArray[np.intp]:
    """The axis of each of the ``2n`` channels of a ``half`` table (``n = sum(sections)``)
    when the doubled table ``[θ, θ]`` is split by ``[2 * s for s in sections]`` and block
    ``a`` turns with axis ``a`` (transformers' HunYuan-VL), ``(2n,)``.

    >>> doubled_split_axes([1, 1, 2]).tolist()      # pairs (0, 4), (1, 5), (2, 6), (3, 7)
    [0, 0, 1, 1, 2, 2, 2, 2]
    """
    return np.repeat(np.arange(len(sections)), [2 * int(s) for s in sections])


def _runs(values: list[tuple[int, int]]) -> list[tuple[int, int, tuple[int, int]]]:
    runs: list[tuple[int, int, tuple[int, int]]] = []
    for k, value in enumerate(values):
        if runs and runs[-1][2] == value:
            runs[-1] = (runs[-1][0], k, value)
        else:
            runs.append((k, k, value))
    return runs


def doubled_split_note(sections: Sequence[int], names: Sequence[str]) -> str:
    """In words, which pairs turn with two axes under the doubled-table split, against the
    one axis each of HunYuan-VL's own layout; ``""`` when the two layouts agree.

    >>> print(doubled_split_note([1, 1, 2], ["width", "height", "image_index"]))
    ... # doctest: +NORMALIZE_WHITESPACE
    transformers' HunYuanVLRotaryEmbedding.recomposition_frequencies splits the doubled table
    [θ, θ] by [2 * s for s in mrope_section]: where a token's ids differ between the axes (image
    tokens), channel k of pairs 0-1 turns with width and channel k + 4 with image_index; pairs
    2-3: height and image_index; HunYuan-VL's own code (and vLLM, MLX) repeats the list (the
    sections over each half), each pair turning with one axis, and the plan follows it; text
    tokens (every axis alike) get the same tables from both
    """
    n = sum(int(s) for s in sections)
    split = doubled_split_axes(sections)
    own = np.repeat(np.arange(len(sections)), [int(s) for s in sections])
    pairs = [(int(split[k]), int(split[k + n])) for k in range(n)]
    if all(a == b == own[k] for k, (a, b) in enumerate(pairs)):
        return ""
    parts: list[str] = []
    for first, last, (a, b) in _runs(pairs):
        span = f"{first}-{last}" if last > first else f"{first}"
        if not parts:
            parts.append(
                f"channel k of pairs {span} turns with {names[a]} and channel k + {n} "
                f"with {names[b]}"
            )
        elif a == b:
            parts.append(f"pairs {span}: {names[a]} alone")
        else:
            parts.append(f"pairs {span}: {names[a]} and {names[b]}")
    return (
        f"{DOUBLED_SPLIT}: where a token's ids differ between the axes (image tokens), "
        + "; ".join(parts)
        + "; HunYuan-VL's own code (and vLLM, MLX) repeats the list (the sections over each "
        "half), each pair turning with one axis, and the plan follows it; text tokens "
        "(every axis alike) get the same tables from both"
    )
