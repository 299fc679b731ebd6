"""2-D and 3-D sin-cos grids: one 1-D sinusoidal table per axis, placed in the channels.

A grid encoding of ``shape`` (``(h, w)`` or ``(t, h, w)``) gives every cell the 1-D
encodings of its coordinates along each axis, side by side in the ``d`` channels. A grid
convention names which 1-D table each axis gets (width and 1-D convention, see
:data:`posenc.CONVENTIONS`) and where its sin/cos columns go. Channel diagrams (``S(x)`` and
``C(x)`` are the ``sin(x·ω_k)`` and ``cos(x·ω_k)`` columns for all k, ``h``/``w``/``t`` the
row/column/frame coordinates)::

    mae                   [S(w) C(w) | S(h) C(h)]      ω_k = base^(-k/(d/4)), k < d/4
    timm                  [S(h) S(w) | C(h) C(w)]      same ω_k
    timm_interleaved      [S(h) C(h) | S(w) C(w)]      same ω_k
    diffusers_3d          [S(t) C(t) | S(w) C(w) S(h) C(h)]
                          ν_k = base^(-k/(d/8)) for t (d/4 channels),
                          ω_k = base^(-k/(3d/16)) for w and h (3d/8 channels each)
    positional_encodings  [s0 c0 s1 c1 ... (axis 0) | ... (axis 1) | ...][:d]
                          c = 2·ceil(d/(2n)) channels per axis for n axes, ω_k = base^(-2k/c)

Positions. Cell ``i`` of an axis with ``n`` cells has the coordinate ::

    p = (offset + i) · base_size / (n · interpolation_scale)    (base_size given)
    p = (offset + i) / interpolation_scale                      (base_size=None, the default)

computed in float64 (so integer coordinates stay exact). Rows are the cells in row-major
(C) order of ``shape`` (the last axis varies fastest), after ``extra_tokens`` zero rows.

>>> sorted(GRID_CONVENTIONS)
['diffusers_3d', 'mae', 'positional_encodings', 'timm', 'timm_interleaved']
>>> sinusoidal_grid((2, 3), 8).shape
(6, 8)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from ._checks import (
    check_allocation,
    check_base,
    check_bool,
    check_float_dtype,
    check_int,
    check_position_magnitude,
    check_real,
)
from ._conventions import ConventionName
from ._sinusoidal import sinusoidal

__all__ = [
    "GRID_CONVENTIONS",
    "AxisBlock",
    "GridConvention",
    "GridConventionName",
    "GridKnobs",
    "GridPlan",
    "axis_positions",
    "check_grid_width",
    "get_grid_convention",
    "grid_knobs",
    "grid_plan",
    "plan_grid",
    "sinusoidal_grid",
]


#: The names of the grid conventions (for type annotations).
GridConventionName = Literal[
    "mae", "timm", "timm_interleaved", "diffusers_3d", "positional_encodings"
]


class AxisBlock(NamedTuple):
    """The 1-D table of one axis and where its columns go.

    ``table = posenc.sinusoidal(positions_of_axis, width, convention=convention)``, then
    ``out[..., dst] = table[:, src]`` for each ``(src, dst)`` in ``columns``.
    """

    axis: int
    width: int
    convention: ConventionName
    columns: tuple[tuple[slice, slice], ...]


def _whole(axis: int, width: int, convention: ConventionName, start: int) -> AxisBlock:
    """Block putting the whole table of ``axis`` at channels ``start .. start + width``."""
    return AxisBlock(axis, width, convention, ((slice(0, width), slice(start, start + width)),))


def _mae_blocks(d: int, ndim: int) -> tuple[AxisBlock, ...]:
    half = d // 2
    return (_whole(1, half, "marian", 0), _whole(0, half, "marian", half))


def _timm_blocks(d: int, ndim: int) -> tuple[AxisBlock, ...]:
    half, quarter = d // 2, d // 4
    sin, cos = slice(0, quarter), slice(quarter, half)  # of each axis' [sin | cos] table
    return tuple(
        AxisBlock(
            axis,
            half,
            "marian",
            (
                (sin, slice(axis * quarter, (axis + 1) * quarter)),
                (cos, slice(half + axis * quarter, half + (axis + 1) * quarter)),
            ),
        )
        for axis in (0, 1)
    )


def _timm_interleaved_blocks(d: int, ndim: int) -> tuple[AxisBlock, ...]:
    half = d // 2
    return (_whole(0, half, "marian", 0), _whole(1, half, "marian", half))


def _diffusers_3d_blocks(d: int, ndim: int) -> tuple[AxisBlock, ...]:
    temporal, spatial = d // 4, 3 * d // 8
    return (
        _whole(0, temporal, "marian", 0),
        _whole(2, spatial, "marian", temporal),
        _whole(1, spatial, "marian", temporal + spatial),
    )


def _positional_encodings_blocks(d: int, ndim: int) -> tuple[AxisBlock, ...]:
    per_axis = 2 * math.ceil(d / (2 * ndim))
    blocks = []
    for axis in range(ndim):
        start = axis * per_axis
        used = min(per_axis, d - start)
        if used > 0:
            columns = ((slice(0, used), slice(start, start + used)),)
            blocks.append(AxisBlock(axis, per_axis, "paper", columns))
    return tuple(blocks)


@dataclass(frozen=True)
class GridConvention:
    """One grid convention: the axes it takes and how the per-axis tables fill the channels.

    Attributes:
        name: the key in :data:`GRID_CONVENTIONS`.
        ndims: the numbers of axes allowed (``len(shape)``).
        axes: what the axes of ``shape`` mean, per number of axes, e.g. ``{2: "(h, w)"}``.
        multiple: ``d_model`` must be a multiple of this.
        why: the reason for ``multiple`` (in error messages).
        description: the channel layout in one line.
        reproduces: the framework calls this convention equals, with the reshape needed.
        blocks: ``(d_model, ndim) -> tuple[AxisBlock, ...]``.
    """

    name: str
    ndims: tuple[int, ...]
    axes: Mapping[int, str]
    multiple: int
    why: str
    description: str
    reproduces: tuple[str, ...]
    blocks: Callable[[int, int], tuple[AxisBlock, ...]]

    def __str__(self) -> str:
        return f"{self.name}: {self.description} Reproduces: {'; '.join(self.reproduces)}."


_ALL = (
    GridConvention(
        name="mae",
        ndims=(2,),
        axes={2: "(h, w)"},
        multiple=4,
        why="two [sin | cos] halves of even width",
        description=(
            "2-D, shape (h, w): [sin(w*w_k), cos(w*w_k) | sin(h*w_k), cos(h*w_k)], "
            "w_k = base^(-k/(d/4)); the column coordinate w fills the first half."
        ),
        reproduces=(
            "MAE util/pos_embed.py get_2d_sincos_pos_embed(d, n, cls_token) "
            "(square grids; computed in float32; cls_token=True here)",
            "diffusers get_2d_sincos_pos_embed(d, (h, w), cls_token=True, extra_tokens=e, "
            "interpolation_scale=s, base_size=b) (pass base_size=b, interpolation_scale=s, "
            "extra_tokens=e here; diffusers' own default is base_size=16)",
        ),
        blocks=_mae_blocks,
    ),
    GridConvention(
        name="timm",
        ndims=(2,),
        axes={2: "(h, w)"},
        multiple=4,
        why="sin and cos of two axes in four equal parts",
        description=(
            "2-D, shape (h, w): [sin(h*w_k), sin(w*w_k) | cos(h*w_k), cos(w*w_k)], "
            "w_k = base^(-k/(d/4))."
        ),
        reproduces=(
            "timm build_sincos2d_pos_embed([h, w], d, temperature=base) "
            "(reverse_coord=True equals shape (w, h) here; computed in float32)",
        ),
        blocks=_timm_blocks,
    ),
    GridConvention(
        name="timm_interleaved",
        ndims=(2,),
        axes={2: "(h, w)"},
        multiple=4,
        why="two [sin | cos] halves of even width",
        description=(
            "2-D, shape (h, w): [sin(h*w_k), cos(h*w_k) | sin(w*w_k), cos(w*w_k)], "
            "w_k = base^(-k/(d/4)) (the mae layout with the axes swapped)."
        ),
        reproduces=(
            "timm build_sincos2d_pos_embed([h, w], d, temperature=base, interleave_sin_cos=True)",
        ),
        blocks=_timm_interleaved_blocks,
    ),
    GridConvention(
        name="diffusers_3d",
        ndims=(3,),
        axes={3: "(t, h, w)"},
        multiple=16,
        why="a [sin | cos] temporal quarter and two [sin | cos] spatial parts of even width",
        description=(
            "3-D, shape (t, h, w): [sin(t*v_k), cos(t*v_k) | sin(w*w_k), cos(w*w_k) | "
            "sin(h*w_k), cos(h*w_k)], v_k = base^(-k/(d/8)) on d/4 channels, "
            "w_k = base^(-k/(3d/16)) on 3d/8 channels per spatial axis."
        ),
        reproduces=(
            "diffusers get_3d_sincos_pos_embed(d, (w, h), t, spatial_interpolation_scale=s, "
            "temporal_interpolation_scale=r) == "
            "sinusoidal_grid((t, h, w), d, interpolation_scale=(r, s, s)).reshape(t, h*w, d)",
        ),
        blocks=_diffusers_3d_blocks,
    ),
    GridConvention(
        name="positional_encodings",
        ndims=(1, 2, 3),
        axes={1: "(x,)", 2: "(x, y)", 3: "(x, y, z)"},
        multiple=1,
        why="",
        description=(
            "1-D/2-D/3-D: each of the n axes gets the interleaved paper table of "
            "c = 2*ceil(d/(2n)) channels, w_k = base^(-2k/c), concatenated and cut to d "
            "(any d: for d not a multiple of 2n the last axis loses columns)."
        ),
        reproduces=(
            "positional-encodings PositionalEncoding1D, PositionalEncoding2D and "
            "PositionalEncoding3D(d) on a (b, *shape, d) input == "
            "sinusoidal_grid(shape, d, flatten=False) for every batch element "
            "(computed in float32)",
        ),
        blocks=_positional_encodings_blocks,
    ),
)

_BY_NAME: dict[str, GridConvention] = {c.name: c for c in _ALL}

#: Read-only mapping from grid convention name to its layout and the calls it reproduces.
GRID_CONVENTIONS: Mapping[str, str] = MappingProxyType({c.name: str(c) for c in _ALL})


def get_grid_convention(convention: Any) -> GridConvention:
    """Return the :class:`GridConvention` called ``convention`` (one passes through).

    >>> get_grid_convention("timm").multiple
    4
    >>> get_grid_convention("vit")
    Traceback (most recent call last):
    ...
    ValueError: convention must be one of 'diffusers_3d', 'mae', ..., got 'vit'
    """
    if isinstance(convention, GridConvention):
        return convention
    if not isinstance(convention, str):
        raise TypeError(
            f"convention must be a string naming a grid convention, got {type(convention).__name__}"
        )
    try:
        return _BY_NAME[convention]
    except KeyError:
        names = ", ".join(repr(n) for n in sorted(_BY_NAME))
        raise ValueError(f"convention must be one of {names}, got {convention!r}") from None


class GridPlan(NamedTuple):
    """Everything a grid builder needs, checked: see :func:`grid_plan`.

    Axis ``a`` has positions ``(offsets[a] + arange(shape[a])) * factors[a]`` (float64).
    """

    shape: tuple[int, ...]
    d_model: int
    blocks: tuple[AxisBlock, ...]
    offsets: tuple[float, ...]
    factors: tuple[float, ...]
    extra_tokens: int

    @property
    def rows(self) -> int:
        """Rows of the flattened encoding: ``extra_tokens + prod(shape)``."""
        return self.extra_tokens + math.prod(self.shape)


def _check_shape(shape: Any, conv: GridConvention) -> tuple[int, ...]:
    allowed = " or ".join(f"a tuple of {n} positive integers {conv.axes[n]}" for n in conv.ndims)
    if isinstance(shape, np.ndarray) and shape.ndim == 1:
        shape = shape.tolist()
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(
            f"shape must be {allowed} for convention {conv.name!r}, got {shape!r} "
            f"({type(shape).__name__})"
        )
    if len(shape) not in conv.ndims:
        raise ValueError(
            f"shape must be {allowed} for convention {conv.name!r}, got {tuple(shape)!r}"
        )
    return tuple(check_int(f"shape[{i}]", n, minimum=1) for i, n in enumerate(shape))


def _per_axis(
    name: str, value: Any, ndim: int, check: Callable[[str, Any], float]
) -> tuple[float, ...]:
    """A number for every axis, or one per axis (a sequence of ``ndim`` numbers)."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if len(value) != ndim:
            raise ValueError(
                f"{name} must be a number or a sequence of {ndim} numbers (one per axis), "
                f"got {len(value)} values: {tuple(value)!r}"
            )
        return tuple(check(f"{name}[{i}]", v) for i, v in enumerate(value))
    if isinstance(value, np.ndarray) and value.ndim > 0:
        return _per_axis(name, value.tolist(), ndim, check)
    return (check(name, value),) * ndim


class GridKnobs(NamedTuple):
    """The checked per-axis settings of a grid for one number of axes (see :func:`grid_knobs`)."""

    scales: tuple[float, ...]
    offsets: tuple[float, ...]
    sizes: tuple[float, ...] | None
    extra_tokens: int


def grid_knobs(
    ndim: int,
    *,
    base_size: Any = None,
    interpolation_scale: Any = 1.0,
    offset: Any = 0,
    cls_token: bool = False,
    extra_tokens: int = 0,
) -> GridKnobs:
    """Check the knobs of :func:`sinusoidal_grid` for grids of ``ndim`` axes.

    >>> grid_knobs(2, interpolation_scale=(1, 2)).scales
    (1.0, 2.0)
    """
    scales = _per_axis("interpolation_scale", interpolation_scale, ndim, check_base)
    offsets = _per_axis("offset", offset, ndim, check_real)
    sizes = None if base_size is None else _per_axis("base_size", base_size, ndim, check_base)
    cls = check_bool("cls_token", cls_token)
    extra = check_int("extra_tokens", extra_tokens, minimum=0)
    if cls and extra:
        raise ValueError(
            f"pass cls_token=True (one zero row, as MAE) or extra_tokens={extra} "
            "(that many zero rows, as diffusers' cls_token=True, extra_tokens=n), not both"
        )
    return GridKnobs(scales, offsets, sizes, extra or int(cls))


def plan_grid(
    dims: tuple[Any, ...], d_model: int, conv: GridConvention, knobs: GridKnobs
) -> GridPlan:
    """The :class:`GridPlan` of a grid of ``dims`` cells, from checked arguments.

    Arithmetic and comparisons only, so that ``dims`` may also be ``torch.SymInt`` (a grid
    traced by ``torch.compile``); the positions must stay within +-2**53.
    """
    scales, offsets = knobs.scales, knobs.offsets
    if knobs.sizes is None:
        factors = tuple(1.0 / s for s in scales)
    else:
        factors = tuple(b / (n * s) for b, n, s in zip(knobs.sizes, dims, scales, strict=True))
    for axis, (n, start, factor) in enumerate(zip(dims, offsets, factors, strict=True)):
        if not 0.0 < factor < math.inf:
            raise ValueError(
                f"base_size / (n * interpolation_scale) for axis {axis} is {factor!r}; "
                "interpolation_scale and base_size must keep it a positive finite number"
            )
        first, last = (start + 0.0) * factor, (start + (n - 1)) * factor
        check_position_magnitude("grid positions", min(first, last), max(first, last))
    blocks = conv.blocks(d_model, len(dims))
    return GridPlan(dims, d_model, blocks, offsets, factors, knobs.extra_tokens)


def check_grid_width(d_model: Any, conv: GridConvention) -> int:
    """``d_model`` must be a positive multiple of the convention's ``multiple``."""
    width = check_int("d_model", d_model, minimum=1)
    if width % conv.multiple:
        raise ValueError(
            f"d_model must be a multiple of {conv.multiple} for convention {conv.name!r} "
            f"({conv.why}), got {width}"
        )
    return width


def grid_plan(
    shape: Any,
    d_model: int,
    *,
    convention: Any = "mae",
    base_size: Any = None,
    interpolation_scale: Any = 1.0,
    offset: Any = 0,
    cls_token: bool = False,
    extra_tokens: int = 0,
) -> GridPlan:
    """Check the arguments of :func:`sinusoidal_grid` and turn them into a :class:`GridPlan`.

    Shared by the NumPy core and ``posenc.torch.SinusoidalGridEncoding`` so that both place the
    same positions in the same channels.

    >>> plan = grid_plan((2, 4), 8, base_size=2)
    >>> plan.factors, plan.rows
    ((1.0, 0.5), 8)
    """
    conv = get_grid_convention(convention)
    d_model = check_grid_width(d_model, conv)
    dims = _check_shape(shape, conv)
    knobs = grid_knobs(
        len(dims),
        base_size=base_size,
        interpolation_scale=interpolation_scale,
        offset=offset,
        cls_token=cls_token,
        extra_tokens=extra_tokens,
    )
    return plan_grid(dims, d_model, conv, knobs)


def axis_positions(plan: GridPlan, axis: int) -> npt.NDArray[np.float64]:
    """The float64 coordinates of the cells along ``axis``: ``(offset + arange(n)) * factor``."""
    cells = np.arange(plan.shape[axis], dtype=np.float64)
    return (plan.offsets[axis] + cells) * plan.factors[axis]


def sinusoidal_grid(
    shape: Any,
    d_model: int,
    *,
    base: float = 10000.0,
    convention: GridConventionName = "mae",
    dtype: Any = np.float32,
    base_size: Any = None,
    interpolation_scale: Any = 1.0,
    offset: Any = 0,
    cls_token: bool = False,
    extra_tokens: int = 0,
    flatten: bool = True,
) -> npt.NDArray[Any]:
    """The sin-cos encoding of a 2-D or 3-D grid, computed in float64 and rounded once.

    Args:
        shape: the grid, ``(h, w)`` (rows, columns) or ``(t, h, w)``, positive integers; the
            convention says which lengths it takes (:data:`GRID_CONVENTIONS`).
        d_model: number of channels; ``mae``, ``timm`` and ``timm_interleaved`` need a multiple
            of 4, ``diffusers_3d`` a multiple of 16, ``positional_encodings`` any d >= 1.
        base: wavelength base of every axis (10000; timm's ``temperature``).
        convention: ``"mae"`` (default), ``"timm"``, ``"timm_interleaved"``,
            ``"diffusers_3d"`` or ``"positional_encodings"``; see the module docstring.
        dtype: float32 (default), float16 or float64.
        base_size: None (default: coordinates are cell indices) or a number > 0 (or one per
            axis): coordinates are rescaled to ``i * base_size / n`` (diffusers).
        interpolation_scale: a number > 0 or one per axis; coordinates are divided by it.
            For ``diffusers_3d`` pass ``(temporal, spatial, spatial)`` scales.
        offset: a real number (or one per axis) added to the cell index before scaling, e.g.
            to encode a crop of a larger grid (``base_size=None``).
        cls_token: prepend one zero row (MAE's ``cls_token=True``).
        extra_tokens: prepend this many zero rows (diffusers' ``cls_token=True,
            extra_tokens=n``); not together with ``cls_token``.
        flatten: True (default) returns ``(extra + prod(shape), d_model)``, rows in row-major
            order of ``shape``; False returns ``(*shape, d_model)`` (no extra rows allowed).

    Returns:
        ``np.ndarray`` of the given dtype. Each convention's entry in
        :data:`GRID_CONVENTIONS` gives the framework call it equals and any reshape needed
        (e.g. ``.reshape(t, h*w, d)`` for diffusers' 3-D function).

    Accuracy: float32 results are within 1e-7 of the exact value while coordinates stay
    below 10^7 (as :func:`posenc.sinusoidal`). MAE and timm compute in float32, and diffusers
    rounds coordinates to float32 when it rescales them, so they differ from this table by
    up to about 1e-7 times the largest coordinate.

    >>> sinusoidal_grid((2, 3), 4, dtype=np.float64)[:, [0, 2]]   # sin(w), sin(h) for d = 4
    array([[0.        , 0.        ],
           [0.84147098, 0.        ],
           [0.90929743, 0.        ],
           [0.        , 0.84147098],
           [0.84147098, 0.84147098],
           [0.90929743, 0.84147098]])
    >>> sinusoidal_grid((4, 4), 32, cls_token=True).shape
    (17, 32)
    >>> sinusoidal_grid((2, 3, 5), 16, convention="diffusers_3d", flatten=False).shape
    (2, 3, 5, 16)
    >>> sinusoidal_grid((3, 5), 6)
    Traceback (most recent call last):
    ...
    ValueError: d_model must be a multiple of 4 for convention 'mae' (...), got 6
    """
    base = check_base("base", base)
    out_dtype = check_float_dtype("dtype", dtype)
    flat = check_bool("flatten", flatten)
    plan = grid_plan(
        shape,
        d_model,
        convention=convention,
        base_size=base_size,
        interpolation_scale=interpolation_scale,
        offset=offset,
        cls_token=cls_token,
        extra_tokens=extra_tokens,
    )
    if not flat and plan.extra_tokens:
        raise ValueError(
            f"flatten=False returns (*shape, d_model) and has no place for {plan.extra_tokens} "
            "extra zero rows; use flatten=True or drop cls_token/extra_tokens"
        )
    # extra_tokens decides the size too when it is more than cls_token's one row
    names = "shape, extra_tokens and d_model" if plan.extra_tokens > 1 else "shape and d_model"
    check_allocation(names, (plan.rows, plan.d_model), out_dtype.itemsize)
    out = np.zeros((plan.rows, plan.d_model), dtype=out_dtype)
    cells = out[plan.extra_tokens :].reshape(*plan.shape, plan.d_model)  # a view of out
    ndim = len(plan.shape)
    for block in plan.blocks:
        table = sinusoidal(
            axis_positions(plan, block.axis),
            block.width,
            base=base,
            convention=block.convention,
            dtype=np.float64,
        )
        along = [1] * ndim
        along[block.axis] = plan.shape[block.axis]
        for src, dst in block.columns:
            cells[..., dst] = table[:, src].reshape(*along, -1)  # the one rounding
    return out if flat else cells
