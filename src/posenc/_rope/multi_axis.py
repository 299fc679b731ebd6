"""Multi-axis RoPE: tokens with several coordinates (t, h, w), each rotary pair turning with one.

Images, video and multimodal sequences give each token several coordinates: a patch has a row
``h`` and a column ``w``, a video patch also a frame ``t``, and a multimodal language model gives
every token a ``(t, h, w)`` triple (a text token has the same value on all three). Multi-axis
RoPE splits the rotary pairs between the axes: pair ``k`` turns with one coordinate ``p[a_k]``
at its own frequency ``ω_k``, ``θ_k = p[a_k]·ω_k``.

All of it is one matrix ``F`` of shape ``(n_axes, n_pairs)``: ``θ_k = Σ_a p[a]·F[a, k]``,
computed in float64 and rounded once to the output dtype. Every recipe below has one non-zero
entry per column (the sum is then the single product ``p[a_k]·ω_k``: adding exact zeros
changes nothing); a column of zeros is a pair left unrotated, and a column with several
non-zero entries turns with a combination of coordinates (RoPE-Mixed, whose frequencies are
learned). The channels are then filled by the pair layout (``half`` or ``interleaved``) exactly
as for 1-D RoPE, so :func:`posenc.apply_rotary` applies these tables unchanged.

``sections`` gives the number of pairs of each axis. Two choices turn it into ``F``:

``order``, which pair slots belong to which axis (``A`` axes, ``s_a`` pairs each)::

    sectioned     axis 0 takes the first s_0 pairs, axis 1 the next s_1, ...
                  (Qwen2-VL / Qwen2.5-VL mrope_section, Flux / HunyuanVideo axes_dim)
    interleaved   T, H, W, T, H, W, ...: axis a >= 1 takes pairs a, a + A, a + 2A, ...
                  (s_a of them) and axis 0 takes all the others (Qwen3-VL)
    turns_then_last  the axes but the last take turns over the first pairs, as
                  "interleaved" places them, and the last axis takes the last s_{A-1}
                  pairs (ERNIE 4.5 VL: H, W, H, W, ..., T, T)

``schedule``, which frequency each pair gets::

    shared     one RoPE schedule Ω over all 2n rotated channels; pair k gets Ω_k
               (M-RoPE: Qwen2-VL, Qwen2.5-VL, Qwen3-VL)
    dealt      the same Ω, dealt to the axes in turn (Ω_0 to axis 0, Ω_1 to axis 1, ... as
               order="interleaved" places pairs); each axis's pairs take its share in
               increasing k (Pixtral: even frequencies to rows, odd ones to columns)
    per_axis   each axis its own schedule over its own 2·s_a channels, with its own base
               (Flux, HunyuanVideo, Wan, CogVideoX, the Qwen2-VL vision tower, timm)

A RoPE scaling (``scaling=``) transforms the shared schedule, or each axis's own schedule.
"""

from __future__ import annotations

import numbers
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from .._angles import angles, row_blocks
from .._checks import (
    _show,
    check_allocation,
    check_base,
    check_float_dtype,
    check_int,
    check_position_magnitude,
    check_positions,
    check_sequence,
)
from .._features import PairLayout, check_pairs, pair_slices
from .rotary import default_seq_len, resolve_rotary_dim
from .scaling import RopeScaling, rope_base, rope_frequencies, rope_scaling

__all__ = [
    "AxisOrder",
    "AxisSchedule",
    "MultiAxisFrequencies",
    "multi_axis_cos_sin",
    "multi_axis_frequencies",
    "multi_axis_positions",
]

_F64 = npt.NDArray[np.float64]

#: How pair slots are given to axes.
AxisOrder = Literal["sectioned", "interleaved", "turns_then_last"]
#: Which frequency each pair slot gets.
AxisSchedule = Literal["shared", "dealt", "per_axis"]
_ORDERS: tuple[AxisOrder, ...] = ("sectioned", "interleaved", "turns_then_last")
_SCHEDULES: tuple[AxisSchedule, ...] = ("shared", "dealt", "per_axis")


class MultiAxisFrequencies(NamedTuple):
    """The frequencies of a multi-axis RoPE: pair ``k`` turns by ``Σ_a p[a]·frequencies[a, k]``.

    Attributes:
        frequencies: float64 ``(n_axes, n_pairs)``; column ``k`` holds pair ``k``'s frequency
            on the axis it turns with and zeros elsewhere (for the recipes of
            :func:`multi_axis_frequencies`).
        attention: float64 ``(n_pairs,)``, the factor a scaling multiplies cos and sin by
            (YaRN, LongRoPE; 1 otherwise).
    """

    frequencies: _F64
    attention: _F64

    @property
    def axis(self) -> npt.NDArray[np.int64]:
        """The axis each pair turns with: ``(n_pairs,)`` int64, ``-1`` for a pair that turns
        with no axis or with several.

        >>> multi_axis_frequencies((2, 1, 1), order="interleaved").axis
        array([0, 1, 2, 0])
        """
        nonzero = self.frequencies != 0
        single = nonzero.sum(axis=0) == 1
        return np.where(single, np.argmax(nonzero, axis=0), -1).astype(np.int64)


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> Any:
    if not isinstance(value, str) or value not in allowed:
        names = [repr(a) for a in allowed]
        options = ", ".join(names[:-1]) + f" or {names[-1]}"
        raise (ValueError if isinstance(value, str) else TypeError)(
            f"{name} must be {options}, got {_show(value)}"
        )
    return value


def _check_sections(sections: Any) -> tuple[int, ...]:
    """A non-empty sequence of integers >= 0 with a positive sum."""
    sections = check_sequence(
        "sections",
        sections,
        "a sequence of integers (rotary pairs per axis, e.g. mrope_section [16, 24, 24])",
    )
    if not sections:
        raise ValueError("sections must name at least one axis, got []")
    counts = tuple(check_int(f"sections[{i}]", s, minimum=0) for i, s in enumerate(sections))
    if sum(counts) == 0:
        raise ValueError(f"sections must give at least one pair in all, got {list(counts)}")
    # the frequency matrix (n_axes, n_pairs) and its slot indices, refused before allocating
    check_allocation("sections", (len(counts), sum(counts)), 8, 2)
    return counts


def _check_bases(base: Any, n_axes: int, schedule: str) -> tuple[float, ...]:
    """One base per axis: a number (every axis) or, for ``per_axis``, a sequence of n_axes."""
    if isinstance(base, numbers.Real) and not isinstance(base, (bool, np.bool_)):
        return (check_base("base", base),) * n_axes
    if schedule != "per_axis":
        raise TypeError(
            f"base must be a positive number for schedule={schedule!r} (one base per axis "
            f"needs schedule='per_axis'), got {_show(base)}"
        )
    base = check_sequence("base", base, f"a positive number or a sequence of {n_axes}")
    if len(base) != n_axes:
        raise ValueError(
            f"base must give one value per axis ({n_axes} sections), got {len(base)}: {base!r}"
        )
    return tuple(check_base(f"base[{i}]", b) for i, b in enumerate(base))


def _slot_axes(
    sections: tuple[int, ...], order: str, rule: str = "order='interleaved'"
) -> npt.NDArray[np.intp]:
    """The axis of each pair slot: ``(n,)`` for ``sum(sections) = n`` slots."""
    n = sum(sections)
    if order == "sectioned":
        return np.repeat(np.arange(len(sections)), sections)
    if order == "turns_then_last" and len(sections) > 1:  # the last axis's block at the end
        last = len(sections) - 1
        turns = sections[:last]
        if sum(turns) == 0:
            return np.full(n, last, dtype=np.intp)
        head = _slot_axes(turns, "interleaved", rule="order='turns_then_last'")
        return np.concatenate([head, np.full(sections[last], last, dtype=np.intp)])
    slots = np.arange(n)
    axes = np.zeros(n, dtype=np.intp)
    stride = len(sections)
    for a in range(1, stride):
        mine = slots[a::stride]
        if sections[a] > mine.size:
            raise ValueError(
                f"sections[{a}] = {sections[a]} is more than {rule} can give axis "
                f"{a}: of {n} pairs, {mine.size} are at {a} + {stride}*j "
                f"(sections {list(sections)}); put the largest section first"
            )
        axes[mine[: sections[a]]] = a
    return axes


def multi_axis_frequencies(
    sections: Any,
    *,
    order: AxisOrder = "sectioned",
    schedule: AxisSchedule = "shared",
    base: Any = None,
    scaling: Any = None,
    seq_len: int | None = None,
) -> MultiAxisFrequencies:
    """The frequency matrix of a multi-axis RoPE (float64), from pairs per axis.

    Args:
        sections: the number of rotary pairs of each axis (``mrope_section``; half of Flux's
            ``axes_dim``), integers >= 0 summing to ``n_pairs = rotary_dim / 2``.
        order: ``"sectioned"``, ``"interleaved"`` or ``"turns_then_last"``: which pair
            slots belong to which axis (see the module docstring).
        schedule: ``"shared"``, ``"dealt"`` or ``"per_axis"``: which frequency each pair gets.
        base: the wavelength base (``rope_theta``), a number > 0; for ``per_axis`` also a
            sequence with one base per axis; default the scaling's ``rope_theta``, else 10000.0.
        scaling: ``None``, Hugging Face rope parameters or a :class:`posenc.RopeScaling`,
            applied to the shared schedule (over ``2·n_pairs`` channels) or to each axis's own
            schedule (over ``2·sections[a]`` channels). A ``partial_rotary_factor`` in it is
            not applied here (:func:`multi_axis_cos_sin` applies it).
        seq_len: the sequence length ``dynamic`` and ``longrope`` select their frequencies by.

    Returns:
        :class:`MultiAxisFrequencies`: ``frequencies`` float64 ``(len(sections), n_pairs)`` and
        ``attention`` float64 ``(n_pairs,)``.

    >>> f = multi_axis_frequencies((2, 1, 1), base=100.0)           # sectioned, shared
    >>> f.frequencies
    array([[1.        , 0.31622777, 0.        , 0.        ],
           [0.        , 0.        , 0.1       , 0.        ],
           [0.        , 0.        , 0.        , 0.03162278]])
    >>> multi_axis_frequencies((2, 2, 1), order="turns_then_last").axis    # H, W, H, W, T
    array([0, 1, 0, 1, 2])
    >>> multi_axis_frequencies((2, 2), schedule="dealt", base=100.0).frequencies
    array([[1.        , 0.1       , 0.        , 0.        ],
           [0.        , 0.        , 0.31622777, 0.03162278]])
    >>> multi_axis_frequencies((2, 2), schedule="per_axis", base=(100.0, 10000.0)).frequencies
    array([[1.  , 0.1 , 0.  , 0.  ],
           [0.  , 0.  , 1.  , 0.01]])
    """
    counts = _check_sections(sections)
    order = _check_choice("order", order, _ORDERS)
    schedule = _check_choice("schedule", schedule, _SCHEDULES)
    spec = rope_scaling(scaling)
    bases = _check_bases(rope_base(base, spec), len(counts), schedule)
    n = sum(counts)
    axes = _slot_axes(counts, order)
    slots = np.arange(n)
    matrix = np.zeros((len(counts), n), dtype=np.float64)
    attention = np.ones(n, dtype=np.float64)
    if schedule == "per_axis":
        for a, count in enumerate(counts):
            if count:
                omega, factor = rope_frequencies(
                    2 * count, base=bases[a], scaling=spec, seq_len=seq_len
                )
                matrix[a, slots[axes == a]] = omega
                attention[axes == a] = factor
        return MultiAxisFrequencies(matrix, attention)
    omega, factor = rope_frequencies(2 * n, base=bases[0], scaling=spec, seq_len=seq_len)
    attention[:] = factor
    if schedule == "shared":
        matrix[axes, slots] = omega
    else:  # "dealt": frequency i goes to the axis that order="interleaved" gives slot i
        owner = _slot_axes(counts, "interleaved", rule="schedule='dealt' (frequencies in turn)")
        for a in range(len(counts)):
            matrix[a, slots[axes == a]] = omega[owner == a]
    return MultiAxisFrequencies(matrix, attention)


def _check_frequency_matrix(frequencies: Any) -> MultiAxisFrequencies:
    """A given frequency matrix: finite float64 ``(n_axes, n_pairs)``, both >= 1."""
    if isinstance(frequencies, MultiAxisFrequencies):
        matrix, attention = frequencies
    else:
        matrix, attention = frequencies, None
    try:
        array = np.asarray(matrix)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"frequencies must be a 2-D array of numbers, got {_show(matrix)}") from exc
    if array.dtype.kind not in "iuf":
        raise TypeError(f"frequencies must be an array of real numbers, got dtype {array.dtype}")
    if array.ndim != 2 or 0 in array.shape:
        raise ValueError(
            f"frequencies must have shape (n_axes, n_pairs), both >= 1, got {array.shape}"
        )
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError("frequencies must be finite, got a NaN or an infinity among them")
    factors = np.ones(array.shape[1]) if attention is None else np.asarray(attention, np.float64)
    if factors.shape != (array.shape[1],) or not np.all(np.isfinite(factors)):
        raise ValueError(
            f"frequencies.attention must be finite, of shape ({array.shape[1]},), got "
            f"{_show(factors)}"
        )
    return MultiAxisFrequencies(array, factors)


def multi_axis_positions(positions: Any, n_axes: int) -> npt.NDArray[Any]:
    """Checked positions of shape ``(..., n_axes)``: int64 or float64, within +-2**53."""
    if isinstance(positions, numbers.Number):
        raise TypeError(
            f"positions must be an array of shape (..., {n_axes}) (one coordinate per axis), "
            f"got the number {positions!r}"
        )
    array = check_positions("positions", positions)
    if array.ndim == 0 or array.shape[-1] != n_axes:
        raise ValueError(
            f"positions must have shape (..., {n_axes}): one coordinate per axis of the "
            f"{n_axes} axes, got shape {array.shape}"
            + (
                " (Hugging Face position_ids (3, b, s): pass np.moveaxis(ids, 0, -1))"
                if array.ndim >= 2 and array.shape[0] == n_axes
                else ""
            )
        )
    if array.size:  # .item(): exact Python ints for integer positions
        check_position_magnitude("positions", array.min().item(), array.max().item())
    return array


class _Request(NamedTuple):
    sections: Any
    order: Any
    schedule: Any
    base: Any
    scaling: Any
    frequencies: Any


def _resolve(
    request: _Request, head_dim: int, rotary_dim: Any, largest: float | None, seq_len: Any
) -> tuple[MultiAxisFrequencies, int]:
    """The frequency matrix of a request and the rotated dimension it must fill."""
    if request.frequencies is not None:
        freqs = _check_frequency_matrix(request.frequencies)
        dim = resolve_rotary_dim(head_dim, rotary_dim)
        made_of = f"frequencies of shape {freqs.frequencies.shape}"
    else:
        spec: RopeScaling | None = rope_scaling(request.scaling)
        dim = resolve_rotary_dim(head_dim, rotary_dim, spec)
        if seq_len is None and spec is not None and spec.depends_on_length:
            seq_len = default_seq_len(largest)
        freqs = multi_axis_frequencies(
            request.sections,
            order="sectioned" if request.order is None else request.order,
            schedule="shared" if request.schedule is None else request.schedule,
            base=request.base,
            scaling=spec,
            seq_len=seq_len,
        )
        made_of = f"sections {list(_check_sections(request.sections))}"
    n_pairs = freqs.frequencies.shape[1]
    if 2 * n_pairs != dim:
        fix = (
            f"or pass rotary_dim={2 * n_pairs} to rotate only the first {2 * n_pairs} channels"
            if 2 * n_pairs < head_dim
            else f"at most head_dim / 2 = {head_dim // 2} (a head has {head_dim} channels)"
        )
        raise ValueError(
            f"{made_of} give {n_pairs} rotary pairs ({2 * n_pairs} channels) but {dim} "
            f"channels rotate (head_dim = {head_dim}, rotary_dim = {rotary_dim!r}): they must "
            f"give {dim // 2} pairs, {fix}"
        )
    return freqs, dim


def multi_axis_cos_sin(
    positions: Any,
    head_dim: int,
    *,
    sections: Any = None,
    order: AxisOrder | None = None,
    schedule: AxisSchedule | None = None,
    base: Any = None,
    scaling: Any = None,
    frequencies: Any = None,
    rotary_dim: int | None = None,
    pairs: PairLayout = "half",
    dtype: Any = np.float32,
    seq_len: int | None = None,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The cos and sin tables of a multi-axis RoPE, computed in float64 and rounded once.

    Pair ``k`` of the rotated channels turns by ``θ_k = Σ_a p[a]·F[a, k]``: one coordinate
    times its frequency for every recipe of :func:`multi_axis_frequencies`. Apply the tables
    with :func:`posenc.apply_rotary` (same ``pairs``).

    Args:
        positions: integer or real coordinates of shape ``(..., n_axes)`` (``S`` + one
            coordinate per axis), e.g. ``(t, h, w)`` triples from :func:`posenc.grid_positions`.
            Hugging Face's M-RoPE ``position_ids`` have shape ``(3, b, s)``: pass
            ``np.moveaxis(position_ids, 0, -1)``.
        head_dim: channels per attention head, an integer >= 2.
        sections: rotary pairs per axis (``mrope_section``, or ``axes_dim / 2``), summing to
            ``rotary_dim / 2``.
        order: ``"sectioned"`` (default), ``"interleaved"`` (Qwen3-VL) or
            ``"turns_then_last"`` (ERNIE 4.5 VL).
        schedule: ``"shared"`` (default, M-RoPE), ``"dealt"`` (Pixtral) or ``"per_axis"``
            (Flux, HunyuanVideo, Wan, CogVideoX, vision towers).
        base: the wavelength base, default 10000.0; for ``per_axis`` one per axis allowed.
        scaling: a RoPE scaling (Hugging Face ``rope_parameters``), as in
            :func:`posenc.rotary_cos_sin`; its ``partial_rotary_factor`` sets ``rotary_dim``.
        frequencies: instead of ``sections`` .. ``scaling``: a frequency matrix
            ``(n_axes, n_pairs)`` or a :class:`MultiAxisFrequencies` (custom schedules,
            unrotated pairs as zero columns, RoPE-Mixed).
        rotary_dim: rotate only the first ``rotary_dim`` channels; default ``head_dim`` (or
            ``int(head_dim * partial_rotary_factor)``). The others pass through
            :func:`posenc.apply_rotary` unchanged.
        pairs: ``"half"`` (Hugging Face ``rotate_half``) or ``"interleaved"`` (diffusers,
            timm's default): the channel layout, as for 1-D RoPE.
        dtype: output dtype: float32 (default), float16 or float64.
        seq_len: the sequence length ``dynamic`` and ``longrope`` select their frequencies
            by; default the largest coordinate + 1 (Hugging Face's rule).

    Returns:
        ``(cos, sin)``, each of shape ``(*S, rotary_dim)`` and ``dtype``, laid out for
        ``pairs`` and multiplied by the scaling's attention factor.

    Raises:
        ValueError: positions whose last axis is not one coordinate per axis; sections that
            do not give ``rotary_dim / 2`` pairs; an impossible interleaving.

    >>> import numpy as np
    >>> pos = np.array([[0, 0, 0], [1, 2, 3]])                  # (t, h, w) of two tokens
    >>> cos, sin = multi_axis_cos_sin(pos, 8, sections=(2, 1, 1), base=100.0)
    >>> np.round(np.arccos(cos[1, :4]), 4)          # θ = (1·1, 1·0.316, 2·0.1, 3·0.0316)
    array([1.    , 0.3162, 0.2   , 0.0949], dtype=float32)
    >>> text = np.repeat(np.arange(5)[:, None], 3, axis=1)      # text tokens: t = h = w
    >>> from posenc import rotary_cos_sin
    >>> all(np.array_equal(a, b) for a, b in zip(
    ...     multi_axis_cos_sin(text, 8, sections=(2, 1, 1)), rotary_cos_sin(5, 8)))
    True
    """
    pairs = check_pairs(pairs)
    out_dtype = check_float_dtype("dtype", dtype)
    head_dim = check_int("head_dim", head_dim, minimum=2)
    request = _Request(sections, order, schedule, base, scaling, frequencies)
    n_axes = _count_axes(request)
    pos = multi_axis_positions(positions, n_axes)
    largest = float(np.max(pos)) if pos.size else None
    freqs, dim = _resolve(request, head_dim, rotary_dim, largest, seq_len)
    flat = pos.reshape(-1, n_axes)
    cos, sin = _fill_tables(flat, freqs, pairs, out_dtype)
    return cos.reshape(*pos.shape[:-1], dim), sin.reshape(*pos.shape[:-1], dim)


def _count_axes(request: _Request) -> int:
    """The number of axes a request describes: sections, or a frequency matrix, not both."""
    if request.frequencies is not None:
        given = [
            name
            for name in ("sections", "order", "schedule", "base", "scaling")
            if getattr(request, name) is not None
        ]
        if given:
            raise TypeError(
                "give frequencies or sections (with order, schedule, base, scaling), not both: "
                f"got frequencies and {', '.join(given)}"
            )
        return int(_check_frequency_matrix(request.frequencies).frequencies.shape[0])
    if request.sections is None:
        raise TypeError(
            "multi_axis_cos_sin needs sections (rotary pairs per axis, e.g. [16, 24, 24]) "
            "or a frequencies matrix"
        )
    return len(_check_sections(request.sections))


def _fill_tables(
    flat: npt.NDArray[Any], freqs: MultiAxisFrequencies, pairs: str, out_dtype: np.dtype[Any]
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """cos/sin ``(rows, 2n)`` of positions ``(rows, n_axes)``: angles in float64, one rounding."""
    matrix, attention = freqs
    n = matrix.shape[1]
    used = [a for a in range(matrix.shape[0]) if np.any(matrix[a])]
    scaled = not np.all(attention == 1.0)
    first, second = pair_slices(pairs, n)
    check_allocation("positions and head_dim", (flat.shape[0], 2 * n), out_dtype.itemsize, 2)
    cos = np.empty((flat.shape[0], 2 * n), dtype=out_dtype)
    sin = np.empty((flat.shape[0], 2 * n), dtype=out_dtype)
    for rows in row_blocks(flat.shape[0], n):
        block = flat[rows]
        theta = np.zeros((block.shape[0], n), dtype=np.float64)
        for a in used:
            theta += angles(block[:, a], matrix[a])
        for out, fn in ((cos, np.cos), (sin, np.sin)):
            values = fn(theta)
            if scaled:
                values *= attention
            out[rows, first] = values
            out[rows, second] = values
    return cos, sin
