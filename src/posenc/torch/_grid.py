"""``SinusoidalGridEncoding``: the 2-D / 3-D sin-cos grids of ``posenc.sinusoidal_grid`` in PyTorch.

Shape legend: ``b`` batch, ``N`` tokens = ``extra_tokens + prod(grid_shape)``, ``d`` = d_model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from .._checks import check_base, check_probability
from .._features import FeatureSlices, feature_slices
from .._frequencies import frequencies
from .._grid import (
    GridConventionName,
    GridKnobs,
    GridPlan,
    get_grid_convention,
    grid_knobs,
    grid_plan,
    plan_grid,
)
from ._cache import CachedTables
from ._checks import as_device, check_dtype, check_size
from ._kernels._add import add_encoding
from ._kernels._cast import cast_exact
from ._kernels._table import sinusoidal_at, work_device

__all__ = ["SinusoidalGridEncoding", "grid_table"]


def grid_table(
    plan: GridPlan,
    omegas: dict[tuple[int, str], tuple[torch.Tensor, FeatureSlices]],
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """The encoding of ``plan``, ``(plan.rows, d)`` in ``dtype`` on ``device``.

    ``omegas`` maps each block's ``(width, convention)`` to its float64 frequencies and layout.
    Positions, angles and sin/cos are float64; :func:`cast_exact` is the only rounding. No
    argument checks (``grid_plan`` made them).
    """
    work = work_device(device)
    shape, d = plan.shape, plan.d_model
    # float64 cells and their copy with the extra rows, then the result
    names = "grid_shape, extra_tokens and d_model" if plan.extra_tokens > 1 else "grid_shape"
    check_size(names, (plan.rows, d), 16 + dtype.itemsize, device)
    cells = torch.zeros((*shape, d), dtype=torch.float64, device=work)
    for block in plan.blocks:
        omega, layout = omegas[(block.width, block.convention)]
        n = shape[block.axis]
        steps = torch.arange(n, dtype=torch.float64, device=work)
        positions = (plan.offsets[block.axis] + steps) * plan.factors[block.axis]
        table = sinusoidal_at(positions, omega, layout, block.width, torch.float64)
        along = [1] * len(shape)
        along[block.axis] = n
        for src, dst in block.columns:
            cells[..., dst] = table[:, src].reshape(*along, -1)
    flat = cells.reshape(-1, d)
    if plan.extra_tokens:
        zeros = torch.zeros((plan.extra_tokens, d), dtype=torch.float64, device=work)
        flat = torch.cat([zeros, flat])
    return cast_exact(flat, dtype).to(device)


class SinusoidalGridEncoding(CachedTables):
    """Adds the sin-cos encoding of a 2-D / 3-D grid to a sequence of patch embeddings.

    ``forward(x)`` returns ``dropout(x + PE)`` where ``PE`` is
    :func:`posenc.sinusoidal_grid(grid_shape, d_model, ...) <posenc.sinusoidal_grid>`
    (flattened, row-major, ``extra_tokens`` zero rows first); ``encoding()`` returns ``PE``.

    Args:
        d_model: number of channels ``d`` (the convention may require a multiple of 4 or 16).
        convention: ``"mae"`` (default), ``"timm"``, ``"timm_interleaved"``,
            ``"diffusers_3d"`` or ``"positional_encodings"`` (:data:`posenc.GRID_CONVENTIONS`).
        base: wavelength base, a finite number > 0 (10000).
        grid_shape: the default grid ``(h, w)`` / ``(t, h, w)``; its table is built here. If
            None, pass ``grid_shape=`` to every call.
        base_size, interpolation_scale, offset, cls_token, extra_tokens: as in
            :func:`posenc.sinusoidal_grid` (fixed for the module; diffusers' ``PatchEmbed``
            keeps ``base_size`` when the resolution changes, and so does this module).
        dropout: dropout probability after the addition, in [0, 1].
        device, dtype: where and in which dtype the cached table is built (factory kwargs).

    Shapes:
        - ``x``: ``(b, N, d)`` or ``(N, d)``, floating point; the output has its shape/dtype.
        - ``grid_shape`` (forward/encoding): a tuple of ints; default the constructor's.

    Precision and cache: the table is computed from float64 positions and angles and rounded
    once to ``x``'s dtype (also float16/bfloat16). The table of the last grid used by
    ``forward`` is kept as the non-persistent buffer ``pe`` under posenc's one cache policy
    (docs/architecture.md): a call with another grid, dtype or device rebuilds it there;
    ``encoding()`` with another grid and code traced by ``torch.compile`` compute on the fly,
    with identical values; ``.to()``, ``.half()`` and ``to_empty()`` rebuild it from float64;
    several threads may share the module.

    >>> enc = SinusoidalGridEncoding(64, grid_shape=(4, 4), cls_token=True)
    >>> enc(torch.zeros(2, 17, 64)).shape
    torch.Size([2, 17, 64])
    >>> enc.encoding((2, 3)).shape
    torch.Size([7, 64])
    """

    _table_names = ("pe",)
    pe: torch.Tensor

    def __init__(
        self,
        d_model: int,
        *,
        convention: GridConventionName = "mae",
        base: float = 10000.0,
        grid_shape: Sequence[int] | None = None,
        base_size: Any = None,
        interpolation_scale: Any = 1.0,
        offset: Any = 0,
        cls_token: bool = False,
        extra_tokens: int = 0,
        dropout: float = 0.0,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        conv = get_grid_convention(convention)
        self.convention = conv.name
        self.base = check_base("base", base)
        self._knobs: dict[str, Any] = {
            "convention": conv.name,
            "base_size": base_size,
            "interpolation_scale": interpolation_scale,
            "offset": offset,
            "cls_token": cls_token,
            "extra_tokens": extra_tokens,
        }
        # grid_plan checks every argument (on a one-cell grid when no grid_shape is given).
        self.d_model = d_model
        plan = self._plan(grid_shape if grid_shape is not None else self._probe_shape(conv.ndims))
        self.d_model = plan.d_model
        self.extra_tokens = plan.extra_tokens
        self.grid_shape = None if grid_shape is None else plan.shape
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        # Plain CPU float64 tensors, not buffers: module casts must never touch them.
        self._omegas: dict[tuple[int, str], tuple[torch.Tensor, FeatureSlices]] = {}
        for ndim in conv.ndims:
            for block in conv.blocks(self.d_model, ndim):
                omega = frequencies(block.width, base=self.base, convention=block.convention)
                layout = feature_slices(block.width, block.convention)
                self._omegas[(block.width, block.convention)] = (torch.from_numpy(omega), layout)
        self._default = plan if grid_shape is not None else None
        # The knobs, checked once per number of axes they fit: traced calls plan new grids
        # from them with arithmetic only (their sizes may be symbolic).
        self._conv = conv
        self._checked_knobs: dict[int, GridKnobs] = {}
        for ndim in conv.ndims:
            # knobs that do not fit ndim axes are left out: an eager call says why
            with contextlib.suppress(TypeError, ValueError):
                self._checked_knobs[ndim] = grid_knobs(ndim, **self._knob_values())
        dtype = check_dtype("dtype", torch.get_default_dtype() if dtype is None else dtype)
        device = as_device(device, torch.get_default_device())
        self._init_tables(0, dtype, device, key=self._default)

    # -- table ------------------------------------------------------------------------------

    def _probe_shape(self, ndims: tuple[int, ...]) -> tuple[int, ...]:
        """A one-cell grid whose rank fits the per-axis knobs, to check them in __init__."""
        for name in ("base_size", "interpolation_scale", "offset"):
            value = self._knobs[name]
            if isinstance(value, Sequence) and not isinstance(value, str) and len(value) in ndims:
                return (1,) * len(value)
        return (1,) * ndims[0]

    def _knob_values(self) -> dict[str, Any]:
        return {k: v for k, v in self._knobs.items() if k != "convention"}

    def _plan(self, grid_shape: Any) -> GridPlan:
        if torch.compiler.is_compiling() and isinstance(grid_shape, Sequence):
            knobs = self._checked_knobs.get(len(grid_shape))
            if knobs is not None:
                dims = tuple(grid_shape)
                if any(n < 1 for n in dims):
                    raise ValueError(f"grid_shape must hold positive sizes, got {dims}")
                return plan_grid(dims, self.d_model, self._conv, knobs)
        return grid_plan(grid_shape, self.d_model, **self._knobs)

    def _compute_rows(
        self, key: Any, start: int, stop: int, dtype: torch.dtype, device: torch.device
    ) -> tuple[torch.Tensor, ...]:
        """The whole table of the grid plan ``key`` (empty for None); ``start``/``stop`` are
        always ``0 .. plan.rows``."""
        if key is None:
            return (torch.empty((0, self.d_model), dtype=dtype, device=device),)
        if device.type == "meta":
            return (torch.empty((key.rows, self.d_model), dtype=dtype, device=device),)
        return (grid_table(key, self._omegas, dtype, device),)

    def _resolve(self, grid_shape: Any) -> GridPlan:
        if grid_shape is None:
            if self._default is None:
                raise ValueError(
                    "grid_shape must be given: this module was built without a default "
                    "grid_shape (pass grid_shape=(h, w) here or to the constructor)"
                )
            return self._default
        if isinstance(grid_shape, Sequence):
            # traced code must not look at the cache (its guards would follow eager calls)
            known = [self._default]
            if not torch.compiler.is_compiling():
                known.insert(0, self._snapshot.key)
            for plan in known:
                if plan is not None and tuple(grid_shape) == plan.shape:
                    return plan
        return self._plan(grid_shape)

    def _table(
        self, plan: GridPlan, dtype: torch.dtype, device: torch.device, *, adopt: bool
    ) -> torch.Tensor:
        (table,), _ = self._cached_rows(0, plan.rows, dtype, device, key=plan, adopt=adopt)
        return table

    # -- API --------------------------------------------------------------------------------

    def encoding(
        self,
        grid_shape: Any = None,
        *,
        dtype: torch.dtype | None = None,
        device: Any = None,
    ) -> torch.Tensor:
        """The grid encoding itself, ``(N, d)``, without adding it to anything.

        Args:
            grid_shape: the grid; default the constructor's ``grid_shape``.
            dtype, device: of the result; default those of the buffer ``pe``.
        """
        plan = self._resolve(grid_shape)
        dtype = check_dtype("dtype", self._tables_dtype if dtype is None else dtype)
        device = as_device(device, self._tables_device)
        return self._table(plan, dtype, device, adopt=False)

    def forward(self, x: torch.Tensor, *, grid_shape: Any = None) -> torch.Tensor:
        """``dropout(x + PE)`` for ``x`` of shape ``(b, N, d)`` or ``(N, d)``.

        Args:
            x: patch embeddings, floating point, ``N = extra_tokens + prod(grid_shape)``.
            grid_shape: the grid of ``x``'s patches; default the constructor's.

        Returns:
            tensor of ``x``'s shape and dtype.
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_floating_point():
            raise TypeError(
                f"x must be a floating-point tensor of patch embeddings, got dtype {x.dtype}"
            )
        plan = self._resolve(grid_shape)
        expected = (plan.rows, self.d_model)
        if x.dim() not in (2, 3) or tuple(x.shape[-2:]) != expected:
            extra = f"{plan.extra_tokens} extra + " if plan.extra_tokens else ""
            raise ValueError(
                f"x must have shape (b, N, d) or (N, d) with N = {extra}prod{plan.shape} = "
                f"{plan.rows} and d = d_model = {self.d_model}, got {tuple(x.shape)}; pass the "
                "grid of these patches as grid_shape="
            )
        pe = self._table(plan, x.dtype, x.device, adopt=True)
        return add_encoding(x, pe, None, self.dropout)

    def extra_repr(self) -> str:
        knobs = self._knobs
        return (
            f"d_model={self.d_model}, convention={self.convention!r}, base={self.base}, "
            f"grid_shape={self.grid_shape}, base_size={knobs['base_size']}, "
            f"interpolation_scale={knobs['interpolation_scale']}, offset={knobs['offset']}, "
            f"extra_tokens={self.extra_tokens}"
        )
