"""What an audit compares with the plan: a stack's cos/sin at probe positions.

Every subject answers one question, :meth:`Subject.tables`: the cos and sin tables this stack
uses for one layer at some positions (float64 arrays ``(P, width)``, with the dtype they came
in), or None when the stack does not rotate that layer. Subjects of the Python API:

- :class:`TableSubject`: cos and sin at fixed positions (arrays from anywhere);
- :class:`CacheSubject`: a ``cos_sin_cache`` ``(max_positions, rotary_dim)`` (vLLM, SGLang:
  each row the cosines of the pairs, then their sines);
- :class:`FormSubject`: frequencies (an ``inv_freq``, a GGUF file's metadata) evaluated in
  float64 at any position;
- :class:`FunctionSubject`: a callable ``positions -> (cos, sin)``;
- :class:`RotationSubject`: a callable ``(positions, q, k) -> (q, k)``, probed with basis
  vectors, so that its pair layout and direction of rotation are measured.

:func:`as_subject` turns what a user passes into one of them.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .._features import PairLayout
from .._rope.plan import RopeLayer
from ._forms import Form, one_axis_form

_F64 = npt.NDArray[np.float64]

#: The largest probe a callable subject is asked for at once: positions x channels x channels
#: (a rotation probed with basis vectors) stays below this many elements.
MAX_PROBE_ELEMENTS = 2**25


@dataclass(frozen=True)
class SubjectTables:
    """A subject's tables for one layer.

    Attributes:
        positions: float64 ``(P, n_axes)``: the positions of the rows.
        cos, sin: float64 ``(P, width)``.
        dtype: the dtype the values came in (``"bfloat16"`` arrives as float32 values).
        pairs: the pair layout when the subject shows it (a rotation, a GGUF file), else None
            (the tables are read in the plan's layout).
        notes: what the reading found worth saying.
    """

    positions: _F64
    cos: _F64
    sin: _F64
    dtype: str
    pairs: PairLayout | None = None
    notes: tuple[str, ...] = ()


class Subject(Protocol):
    """What the comparison needs from a subject."""

    description: str
    kind: str
    per_layer: bool
    fixed_positions: bool
    recipe: str

    def tables(self, index: int | None, layer: RopeLayer, positions: _F64) -> SubjectTables | None:
        """The tables at ``positions`` ``(P, n_axes)`` (a subject with fixed positions returns
        its own); None when the stack does not rotate the layer."""
        ...


F32_RECIPE = "float32 angles"


# --------------------------------------------------------------------------- values


def dtype_of(value: Any) -> str:
    """The dtype name of an array or tensor (``"bfloat16"`` for torch's)."""
    dtype = getattr(value, "dtype", None)
    name = str(dtype).removeprefix("torch.") if dtype is not None else "float64"
    return name


def to_numpy(value: Any, what: str) -> npt.NDArray[Any]:
    """A float64 array from a NumPy array, a tensor (any device; bfloat16 included) or a
    sequence; TypeError naming ``what`` otherwise."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, not imported here
        value = value.detach().cpu()
        if str(value.dtype) in ("torch.bfloat16", "torch.float8_e4m3fn", "torch.float8_e5m2"):
            value = value.float()
        value = value.numpy()
    elif hasattr(value, "__array__") or isinstance(value, list | tuple):
        pass
    else:
        raise TypeError(f"{what} must be an array or a tensor, got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} cannot be read as an array ({exc})") from None
    if array.dtype.kind not in "fiub":
        raise TypeError(f"{what} must hold numbers, got dtype {array.dtype}")
    return array.astype(np.float64)


def check_finite(array: _F64, what: str, positions: _F64 | None = None) -> None:
    """ValueError naming the first NaN or infinite element of ``array`` ``(P, ...)``."""
    bad = ~np.isfinite(array)
    if bad.any():
        index = np.unravel_index(int(np.argmax(bad)), array.shape)
        where = f"row {index[0]}"
        if positions is not None and array.ndim == 2:
            where = f"position {int(positions[index[0], 0])}, channel {index[1]}"
        raise ValueError(f"{what} holds {array[index]} at {where}: no finite table to audit")


def as_table(array: _F64, what: str, rows: int | None = None) -> _F64:
    """``array`` as ``(rows, width)``: axes of size 1 dropped (``(1, P, W)``, ``(P, 1, W)``;
    ``(W,)`` is one row)."""
    shape = array.shape
    sizes = [n for n in shape if n != 1]
    if array.size == 0 or len(sizes) > 2 or (len(sizes) < 2 and rows not in (None, 1)):
        expected = "" if rows is None else f" with {rows} rows, one per position asked for"
        raise ValueError(f"{what} must be a table (positions x channels{expected}), got {shape}")
    table = array.reshape(sizes if len(sizes) == 2 else [1, array.size])
    if rows is not None and table.shape[0] != rows:
        raise ValueError(
            f"{what} has shape {shape}, expected {rows} rows (one per position asked for)"
        )
    return table


# --------------------------------------------------------------------------- subjects


@dataclass
class TableSubject:
    """cos and sin tables at fixed positions (``position_ids``, or ``0 .. P-1``)."""

    cos: _F64
    sin: _F64
    positions: _F64
    dtype: str
    description: str = "cos/sin arrays"
    kind: str = "arrays"
    per_layer: bool = False
    fixed_positions: bool = True
    recipe: str = F32_RECIPE

    @classmethod
    def build(
        cls, cos: Any, sin: Any, positions: Any = None, description: str = "cos/sin arrays"
    ) -> TableSubject:
        dtype = dtype_of(cos)
        c = as_table(to_numpy(cos, "cos"), "cos")
        s = as_table(to_numpy(sin, "sin"), "sin")
        if c.shape != s.shape:
            raise ValueError(f"cos and sin must have the same shape, got {c.shape} and {s.shape}")
        if positions is None:
            pos = np.arange(c.shape[0], dtype=np.float64)[:, None]
        else:
            pos = to_numpy(positions, "position_ids")
            pos = _positions_table(pos, c.shape[0])
        check_finite(c, "cos", pos)
        check_finite(s, "sin", pos)
        return cls(c, s, pos, dtype, description)

    def tables(self, index: int | None, layer: RopeLayer, positions: _F64) -> SubjectTables:
        return SubjectTables(self.positions, self.cos, self.sin, self.dtype)


def _positions_table(pos: _F64, rows: int) -> _F64:
    """``position_ids`` as ``(rows, n_axes)``: ``(P,)``, ``(1, P)``, or M-RoPE's ``(3, 1, P)``."""
    squeezed = pos.reshape([n for n in pos.shape if n != 1] or [1])
    if squeezed.ndim == 1 and squeezed.shape[0] == rows:
        return squeezed[:, None]
    if squeezed.ndim == 2 and squeezed.shape[1] == rows and squeezed.shape[0] <= 4:
        return np.ascontiguousarray(squeezed.T)
    if squeezed.ndim == 2 and squeezed.shape[0] == rows and squeezed.shape[1] <= 4:
        return squeezed
    raise ValueError(
        f"position_ids has shape {pos.shape}: expected one position per row of cos ({rows}), "
        "as (P,), (1, P) or (n_axes, 1, P)"
    )


@dataclass
class CacheSubject:
    """A ``cos_sin_cache`` ``(max_positions, rotary_dim)``: row ``p`` holds the cosines of the
    pairs at position ``p``, then their sines (vLLM's and SGLang's layout)."""

    cache: _F64
    dtype: str
    description: str = "cos_sin_cache"
    #: the pair layout the cache is used with, where its object says (vLLM's and SGLang's
    #: ``is_neox_style``: True pairs halves); None: laid out as the plan's pairs
    pairs: PairLayout | None = None
    kind: str = "cos_sin_cache"
    per_layer: bool = False
    fixed_positions: bool = True
    recipe: str = F32_RECIPE

    @classmethod
    def build(
        cls, cache: Any, description: str = "cos_sin_cache", pairs: PairLayout | None = None
    ) -> CacheSubject:
        dtype = dtype_of(cache)
        table = to_numpy(cache, "cos_sin_cache")
        if table.ndim != 2 or table.shape[1] % 2 or table.shape[1] == 0:
            raise ValueError(
                "cos_sin_cache must be (max_positions, rotary_dim) with an even rotary_dim "
                f"(cosines, then sines), got shape {table.shape}"
            )
        check_finite(table, "cos_sin_cache")
        return cls(table, dtype, description, pairs)

    def tables(self, index: int | None, layer: RopeLayer, positions: _F64) -> SubjectTables:
        wanted = np.unique(positions[:, 0])
        rows = wanted[(wanted >= 0) & (wanted < self.cache.shape[0])].astype(np.int64)
        half = self.cache.shape[1] // 2
        cos, sin = self.cache[rows, :half], self.cache[rows, half:]
        form = Form(np.zeros((1, half)), np.ones(half), self.pairs or layer.pairs)
        pos = np.repeat(rows.astype(np.float64)[:, None], positions.shape[1], axis=1)
        if self.pairs is not None:
            return SubjectTables(
                pos, form.spread(cos), form.spread(sin), self.dtype, self.pairs, ()
            )
        note = f"rows laid out as the plan's pairs ({layer.pairs}): the cache holds one per pair"
        return SubjectTables(pos, form.spread(cos), form.spread(sin), self.dtype, None, (note,))


@dataclass
class FormSubject:
    """Frequencies evaluated in float64 at any position: an ``inv_freq`` buffer, or the RoPE
    llama.cpp builds from a GGUF file (``forms(index, layer, seq_len)``: one form per layer,
    None for a layer without RoPE). A one-axis form probed with several coordinates turns
    every pair with the first (``axis_aware``), or is compared on text rows only. ``vision``:
    the RoPE of a vision tower (a GGUF vision projector), audited against the plan of the
    config's ``vision_config``."""

    forms: Callable[[int | None, RopeLayer, int | None], Form | None]
    dtype: str
    description: str
    kind: str
    per_layer: bool
    recipe: str
    notes: tuple[str, ...] = ()
    pairs_known: bool = False
    axis_aware: bool = False
    fixed_positions: bool = False
    exact_possible: bool = True
    layer_count: int | None = None
    vision: bool = False

    def tables(self, index: int | None, layer: RopeLayer, positions: _F64) -> SubjectTables | None:
        seq_len = int(positions.max()) + 1 if positions.size else None
        form = self.forms(index, layer, seq_len)
        if form is None:
            return None
        evaluated = positions
        if form.frequencies.shape[0] != positions.shape[1]:
            if not self.axis_aware:
                text = (positions == positions[:, :1]).all(axis=1)
                positions = positions[text]
            evaluated = positions[:, :1]
        cos, sin = form.tables(evaluated)
        pairs = form.pairs if self.pairs_known else None
        return SubjectTables(positions, cos, sin, self.dtype, pairs, self.notes)


def inv_freq_subject(
    inv_freq: Any, attention: float | None = None, description: str = "inv_freq"
) -> FormSubject:
    """An ``inv_freq`` buffer ``(rotary_dim/2,)`` (and the module's ``attention_scaling``)."""
    dtype = dtype_of(inv_freq)
    omega = to_numpy(inv_freq, "inv_freq").reshape(-1)
    if omega.size == 0:
        raise ValueError("inv_freq is empty: expected one frequency per rotated pair")
    check_finite(omega, "inv_freq")
    notes: tuple[str, ...] = ()
    if attention is None:
        notes = ("the attention factor is not in an inv_freq: the plan's is used",)

    def forms(index: int | None, layer: RopeLayer, seq_len: int | None) -> Form:
        att = layer.attention_factor if attention is None else attention
        return one_axis_form(omega, att, layer.pairs)

    recipe = F32_RECIPE + (f" (the inv_freq buffer is {dtype})" if dtype != "float64" else "")
    return FormSubject(forms, "float64", description, "inv_freq", False, recipe, notes)


@dataclass
class FunctionSubject:
    """A callable ``positions -> (cos, sin)`` (``layer=`` too when it takes that keyword)."""

    function: Callable[..., Any]
    description: str
    kind: str = "callable"
    fixed_positions: bool = False
    recipe: str = F32_RECIPE
    per_layer: bool = False

    def __post_init__(self) -> None:
        self.per_layer = _takes_layer(self.function)

    def tables(self, index: int | None, layer: RopeLayer, positions: _F64) -> SubjectTables | None:
        given = positions[:, 0] if positions.shape[1] == 1 else positions
        args = np.ascontiguousarray(given).astype(np.int64)
        result = self.function(args, layer=index) if self.per_layer else self.function(args)
        if result is None:
            return None
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise TypeError(
                f"{self.description} must return (cos, sin), got {type(result).__name__}"
            )
        dtype = dtype_of(result[0])
        rows = positions.shape[0]
        cos = as_table(to_numpy(result[0], "the returned cos"), "the returned cos", rows)
        sin = as_table(to_numpy(result[1], "the returned sin"), "the returned sin", rows)
        if cos.shape != sin.shape:
            raise ValueError(
                f"{self.description} returned cos {cos.shape} and sin {sin.shape}: the shapes "
                "must agree"
            )
        check_finite(cos, "the returned cos", positions)
        check_finite(sin, "the returned sin", positions)
        return SubjectTables(positions, cos, sin, dtype)


def _takes_layer(function: Callable[..., Any]) -> bool:
    try:
        return "layer" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def _positional_count(function: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds and p.name != "layer")


@dataclass
class RotationSubject:
    """A callable ``(positions, q, k) -> (q, k)``: q and k ``(P, heads, head_dim)`` float64,
    probed with one basis vector per head, so the rotation matrix of each position is measured
    and its pairs, direction and tables read off it."""

    function: Callable[..., Any]
    description: str
    kind: str = "rotation"
    fixed_positions: bool = False
    recipe: str = F32_RECIPE
    per_layer: bool = False
    found: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.per_layer = _takes_layer(self.function)

    def tables(self, index: int | None, layer: RopeLayer, positions: _F64) -> SubjectTables | None:
        dim = layer.head_dim
        rows = positions.shape[0]
        if rows * dim * dim > MAX_PROBE_ELEMENTS:
            rows = max(1, MAX_PROBE_ELEMENTS // (dim * dim))
            positions = positions[:rows]
        basis = np.broadcast_to(np.eye(dim), (rows, dim, dim)).copy()
        given = positions[:, 0] if positions.shape[1] == 1 else positions
        args = np.ascontiguousarray(given).astype(np.int64)
        if self.per_layer:
            result = self.function(args, basis, basis.copy(), layer=index)
        else:
            result = self.function(args, basis, basis.copy())
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise TypeError(f"{self.description} must return (q, k), got {type(result).__name__}")
        dtype = dtype_of(result[0])
        q = to_numpy(result[0], "the rotated q")
        k = to_numpy(result[1], "the rotated k")
        for name, out in (("q", q), ("k", k)):
            if out.shape != (rows, dim, dim):
                raise ValueError(
                    f"{self.description} returned {name} of shape {out.shape}, expected "
                    f"{(rows, dim, dim)} (positions, heads, head_dim) like its input"
                )
            check_finite(out.reshape(rows, -1), f"the rotated {name}")
        notes: tuple[str, ...] = ()
        if np.max(np.abs(q - k)) > 1e-6:
            notes = ("q and k are rotated differently; the tables are read from q",)
        # out[p, j, :] is R_p e_j: the matrix R_p[i, j] = out[p, j, i]
        matrix = np.swapaxes(q, 1, 2)
        return _read_rotation(matrix, positions, dtype, notes)


def _read_rotation(
    matrix: _F64, positions: _F64, dtype: str, notes: tuple[str, ...]
) -> SubjectTables | None:
    """The tables of rotation matrices ``(P, D, D)``: each rotated channel's partner is where
    its basis vector moves to (at the position that moves channel 0 most); channels that never
    move are not rotated."""
    dim = matrix.shape[1]
    off = np.abs(matrix).copy()
    idx = np.arange(dim)
    off[:, idx, idx] = 0.0
    movement = off.max(axis=1)  # (P, D): how far each basis vector leaves its channel
    if movement.max() < 1e-12:
        return None  # the identity at every position: no rotation
    best = (
        int(np.argmax(movement[:, 0]))
        if movement[:, 0].max() > 0
        else int(np.argmax(movement.max(axis=1)))
    )
    partner = np.argmax(off[best], axis=0)  # partner[j]: the channel e_j moves into
    rotated = off.max(axis=(0, 1)) > 1e-12
    channels = np.flatnonzero(rotated)
    width = len(channels)
    if width % 2 or not np.array_equal(channels, np.arange(width)):
        raise ValueError(
            f"the rotation moves channels {channels.tolist()[:8]}...: expected the first rotated "
            "channels of each head, in pairs"
        )
    n = width // 2
    pairs: PairLayout = "interleaved" if width >= 2 and partner[0] == 1 else "half"
    first = np.arange(0, width, 2) if pairs == "interleaved" else np.arange(n)
    second = first + 1 if pairs == "interleaved" else first + n
    if not np.array_equal(partner[first], second):
        raise ValueError(
            "the rotation does not pair channels in halves (k with k + n/2) nor as neighbours "
            f"(2k with 2k + 1): channel 0 moves into channel {int(partner[0])}"
        )
    cos = np.empty((matrix.shape[0], width))
    sin = np.empty((matrix.shape[0], width))
    cos[:, first] = matrix[:, first, first]
    cos[:, second] = matrix[:, second, second]
    sin[:, first] = matrix[:, second, first]  # e_first turns towards e_second by +θ
    sin[:, second] = -matrix[:, first, second]
    return SubjectTables(positions, cos, sin, dtype, pairs, notes)


@dataclass
class MlxRopeSubject:
    """An MLX rope module, called the ways MLX stacks call one:

    - ``module.apply_rotary(q, k, position_ids) -> (q, k)`` where the module has that method
      (how MLX vision-language stacks apply M-RoPE): q and k ``(1, heads, P, head_dim)`` hold
      one basis vector per head at every row, ``position_ids`` as below, so the pairs and the
      direction of rotation are measured;
    - ``module(x, offset=p)`` rotates ``x`` ``(1, heads, 1, dims)`` as position ``p``
      (``mlx.nn.RoPE`` and what mlx-lm's ``initialize_rope`` builds: ``Llama3RoPE``,
      ``YarnRoPE``, ``SuScaledRoPE``, ...): probed with one basis vector per head, so its
      pairs and direction are measured. Such a module takes one position per token: for a
      multi-axis layer every row is given its first coordinate, as a stack that passes it
      one id per token does, so an M-RoPE config served by it shows its sections ignored;
    - ``module(x, position_ids) -> (cos, sin)`` (a multi-axis rotary embedding: M-RoPE's
      ``position_ids`` ``(n_axes, batch, P)``): called with int32 ``position_ids``
      ``(n_axes, 1, P)`` (``(1, P)`` for 1-D layers) and a float32 ``x`` ``(1, 1, P, dims)``
      whose dtype is all such modules read; the tables ``(1, P, width)`` are read in the
      plan's pair layout.
    """

    module: Any
    description: str
    kind: str = "mlx"
    fixed_positions: bool = False
    recipe: str = F32_RECIPE + " (MLX)"
    per_layer: bool = False

    def tables(self, index: int | None, layer: RopeLayer, positions: _F64) -> SubjectTables | None:
        if callable(_method(self.module, "apply_rotary")):
            return self._applied(layer, positions)
        if _takes(self.module, "position_ids"):
            return self._position_ids_tables(layer, positions)
        import mlx.core as mx

        dims = int(getattr(self.module, "dims", getattr(self.module, "dim", layer.rotary_dim)))
        first, rows = np.unique(positions[:, 0], return_inverse=True)
        basis = mx.eye(dims)[None, :, None, :]
        matrices = []
        for p in first:
            out = np.asarray(self.module(basis, offset=int(p)), dtype=np.float64)
            matrices.append(out[0, :, 0, :].T)  # column j: where e_j goes
        matrix = np.stack(matrices)[rows.reshape(-1)]
        check_finite(matrix.reshape(len(matrix), -1), f"{self.description}'s rotation")
        notes: tuple[str, ...] = ()
        if layer.multi_axis:
            notes = (
                f"{self.description} is called as module(x, offset=p): one position per token, "
                f"so a row of several coordinates (an image patch) gets its {layer.axes[0]} "
                "coordinate for every pair",
            )
        return _read_rotation(matrix, positions, "float32", notes)

    def _ids(self, layer: RopeLayer, positions: _F64) -> Any:
        """int32 position ids as MLX stacks pass them: ``(n_axes, 1, P)``, or ``(1, P)``."""
        import mlx.core as mx

        ids = positions.T[:, None, :] if layer.multi_axis else positions[:, :1].T
        return mx.array(ids.astype(np.int32))

    def _applied(self, layer: RopeLayer, positions: _F64) -> SubjectTables | None:
        """``module.apply_rotary(q, k, position_ids) -> (q, k)``, q and k ``(1, heads, P,
        head_dim)``: probed with one basis vector per head at every row, so the pairs and
        the direction of rotation are measured."""
        import mlx.core as mx

        dim = layer.head_dim
        rows = positions.shape[0]
        if rows * dim * dim > MAX_PROBE_ELEMENTS:
            rows = max(1, MAX_PROBE_ELEMENTS // (dim * dim))
            positions = positions[:rows]
        basis = mx.broadcast_to(mx.eye(dim)[None, :, None, :], (1, dim, rows, dim))
        result = self.module.apply_rotary(basis, basis, self._ids(layer, positions))
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise TypeError(
                f"{self.description}.apply_rotary(q, k, position_ids) must return (q, k), got "
                f"{type(result).__name__}"
            )
        out = np.asarray(result[0].astype(mx.float32), dtype=np.float64)
        if out.shape != (1, dim, rows, dim):
            raise ValueError(
                f"{self.description}.apply_rotary returned q of shape {out.shape}, expected "
                f"{(1, dim, rows, dim)} (batch, heads, positions, head_dim) like its input"
            )
        matrix = np.transpose(out[0], (1, 2, 0))  # (P, D, D): column j is where e_j goes
        check_finite(matrix.reshape(rows, -1), f"{self.description}'s rotation")
        return _read_rotation(matrix, positions, "float32", ())

    def _position_ids_tables(self, layer: RopeLayer, positions: _F64) -> SubjectTables:
        import mlx.core as mx

        rows = positions.shape[0]
        x = mx.zeros((1, 1, rows, layer.rotary_dim), dtype=mx.float32)
        result = self.module(x, self._ids(layer, positions))
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise TypeError(
                f"{self.description}(x, position_ids) must return (cos, sin), got "
                f"{type(result).__name__}"
            )
        dtype = str(getattr(result[0], "dtype", "float32")).rsplit(".", 1)[-1]
        tables = []
        for name, value in zip(("cos", "sin"), result, strict=True):
            what = f"the returned {name}"
            array = np.asarray(value.astype(mx.float32) if hasattr(value, "astype") else value)
            table = as_table(to_numpy(array, what), what, rows)
            check_finite(table, what, positions)
            tables.append(table)
        cos, sin = tables
        if cos.shape != sin.shape:
            raise ValueError(
                f"{self.description} returned cos {cos.shape} and sin {sin.shape}: the shapes "
                "must agree"
            )
        return SubjectTables(positions, cos, sin, dtype)


@dataclass
class MlxModelSubject:
    """An mlx-lm model (``model.layers``, each with its attention's ``rope``): every layer's
    rope module audited as :class:`MlxRopeSubject`; None for a layer without one (a linear
    attention layer, a layer whose attention has no rope)."""

    ropes: list[Any]
    description: str
    kind: str = "mlx"
    fixed_positions: bool = False
    recipe: str = F32_RECIPE + " (MLX)"
    per_layer: bool = True
    layer_count: int | None = None

    def __post_init__(self) -> None:
        self.layer_count = len(self.ropes)

    def tables(self, index: int | None, layer: RopeLayer, positions: _F64) -> SubjectTables | None:
        if index is None or index >= len(self.ropes):
            return None
        rope = self.ropes[index]
        if rope is None:
            return None
        name = f"{self.description}.layers[{index}] {type(rope).__name__}"
        return MlxRopeSubject(rope, name).tables(index, layer, positions)


#: Where an mlx-lm decoder layer keeps its attention, and the attention its rope module.
_ATTENTION_NAMES = ("self_attn", "attention", "attn", "mixer")
_ROPE_NAMES = ("rope", "rotary_emb")


def mlx_model_subject(model: Any, description: str) -> MlxModelSubject | None:
    """The subject of an mlx-lm model: its layers' rope modules; None when ``model`` has no
    ``layers`` holding one."""
    try:
        layers = model.layers
    except (AttributeError, KeyError, TypeError):
        return None
    if not isinstance(layers, list | tuple) or not layers:
        return None
    ropes: list[Any] = []
    for each in layers:
        found = None
        for attention in (_child(each, n) for n in _ATTENTION_NAMES):
            for rope in (_child(attention, n) for n in _ROPE_NAMES):
                if found is None and rope is not None and callable(rope):
                    found = rope
        ropes.append(found)
    if all(r is None for r in ropes):
        return None
    return MlxModelSubject(ropes, description)


def _child(module: Any, name: str) -> Any:
    if module is None:
        return None
    try:
        return getattr(module, name, None)
    except (KeyError, TypeError):
        return None


def is_mlx_module(value: Any) -> bool:
    """True for an ``mlx.nn.Module`` (any subclass: mlx-lm's, mlx-vlm's, a user's), without
    importing MLX when it is not loaded."""
    nn = sys.modules.get("mlx.nn")
    if nn is not None and isinstance(value, nn.Module):
        return True
    return type(value).__module__.startswith(("mlx.", "mlx_lm.", "mlx_vlm."))


def _method(module: Any, name: str) -> Any:
    """``module.name`` when it is a method of the module's class (an MLX module is a dict:
    its arrays and children are not methods)."""
    return getattr(module, name) if callable(getattr(type(module), name, None)) else None


def _takes(module: Any, name: str) -> bool:
    """True when ``module.__call__`` has a parameter ``name``."""
    try:
        return name in inspect.signature(module.__call__).parameters
    except (TypeError, ValueError):
        return False


# --------------------------------------------------------------------------- dispatch


def callable_subject(function: Callable[..., Any], description: str) -> Subject:
    """A rotation for callables of three positional parameters, else ``positions -> (cos, sin)``."""
    if _positional_count(function) >= 3:
        return RotationSubject(function, description)
    return FunctionSubject(function, description)


def model_subject(model: Any, description: str) -> FormSubject | None:
    """A transformers model (any ``torch.nn.Module``): its rotary modules' ``inv_freq``
    buffers as they are now (a cast after building included), ``{layer_type}_inv_freq`` per
    layer type where the model keeps one per type, with their ``attention_scaling``; vision
    towers' buffers are left out. None when the model holds no ``inv_freq``."""
    found: dict[str, tuple[Any, Any]] = {}
    for path, module in model.named_modules():
        if "vision" in path or "visual" in path:
            continue
        for name, buffer in getattr(module, "_buffers", {}).items():
            if buffer is None or not name.endswith("inv_freq") or "original" in name:
                continue
            kind = name.removesuffix("inv_freq").removesuffix("_") or ""
            scaling = getattr(
                module, f"{kind}_attention_scaling" if kind else "attention_scaling", None
            )
            found.setdefault(kind, (buffer, scaling))
    if not found:
        return None
    dtypes = sorted({dtype_of(b) for b, _ in found.values()})
    tables = {
        kind: (to_numpy(b, f"{kind or 'the'} inv_freq").reshape(-1), s)
        for kind, (b, s) in found.items()
    }
    for omega, _ in tables.values():
        check_finite(omega, "inv_freq")

    def forms(index: int | None, layer: RopeLayer, seq_len: int | None) -> Form | None:
        if not layer.uses_positions:
            return None  # the model's code skips the rotation there; its buffers cannot say
        omega, scaling = tables.get(layer.layer_type) or tables.get("") or (None, None)
        if omega is None:
            raise ValueError(
                f"{description} has no inv_freq for {layer.layer_type!r} layers (it has "
                f"{sorted(k or 'inv_freq' for k in tables)})"
            )
        att = float(scaling) if isinstance(scaling, int | float) else layer.attention_factor
        return one_axis_form(omega, att, layer.pairs)

    recipe = F32_RECIPE + f" (the inv_freq buffers are {', '.join(dtypes)})"
    notes = ("layers without RoPE are taken from the config: a model's buffers do not say",)
    return FormSubject(forms, "float64", description, "model", True, recipe, notes)


def object_subject(value: Any, description: str) -> Subject | None:
    """The subject of a Python object: a ``cos_sin_cache`` or ``inv_freq`` attribute (vLLM's
    and SGLang's rotary objects, Hugging Face's rotary modules), a callable; None otherwise."""
    if is_mlx_module(value) and callable(value):
        model = mlx_model_subject(value, description)
        return model if model is not None else MlxRopeSubject(value, description)
    if hasattr(value, "named_modules") and hasattr(value, "config"):  # a transformers model
        return model_subject(value, description)
    cache = getattr(value, "cos_sin_cache", None)
    if cache is not None:
        neox = getattr(value, "is_neox_style", None)
        pairs: PairLayout | None = None
        if isinstance(neox, bool | np.bool_):
            pairs = "half" if neox else "interleaved"
        return CacheSubject.build(cache, f"{description}.cos_sin_cache", pairs)
    inv_freq = getattr(value, "inv_freq", None)
    if inv_freq is not None:
        scaling = getattr(value, "attention_scaling", None)
        att = (
            float(scaling) if isinstance(scaling, int | float) and math.isfinite(scaling) else None
        )
        return inv_freq_subject(inv_freq, att, f"{description}.inv_freq")
    if callable(value):
        return callable_subject(value, description)
    return None
