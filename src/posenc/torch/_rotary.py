"""``RotaryEmbedding``: rotary position embeddings of queries and keys, in PyTorch.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``d`` = ``head_dim``, ``r`` =
``rotary_dim``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from .._checks import check_base, check_int, check_length
from .._features import PairLayout, check_pairs
from .._rope.multi_axis import AxisOrder, AxisSchedule, _Request
from .._rope.rotary import resolve_rotary_dim
from .._rope.scaling import RopeScaling, rope_base, rope_frequencies, rope_scaling
from .._switches import fast_paths_enabled
from ._cache import CachedTables
from ._checks import as_device, as_positions, check_offset, check_size, check_tensor
from ._functional import PASS_SEQ_LEN, largest_position_seq_len, refuse_length_export
from ._kernels._rope import RopeTables, by_phasors, phasors, rotate
from ._kernels._table import rope_cos_sin
from ._length_frequencies import length_frequencies, recipe_text
from ._multi_axis import AxisFrequencies, MultiAxisSpec, hf_hint, multi_axis_spec

__all__ = ["RotaryEmbedding"]


def _table_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """Tables are float64 for float64 inputs and float32 otherwise (never 16-bit)."""
    return torch.float64 if torch.float64 in dtypes else torch.float32


class _Frequencies(NamedTuple):
    """The float64 frequencies of a 1-D RoPE, as CPU tensors (never cast with a module):
    ``omega`` ``(n,)`` and the scaling's attention factor."""

    omega: torch.Tensor
    attention: float

    def cos_sin(
        self, positions: torch.Tensor, pairs: str, dtype: torch.dtype, checked: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin ``(*S, 2n)`` of positions ``S``."""
        return rope_cos_sin(positions, self.omega, self.attention, pairs, dtype, checked=checked)

    def text_positions(self, start: int, stop: int, device: torch.device) -> torch.Tensor:
        """Positions ``start .. stop-1``: what the module's cache holds."""
        return torch.arange(start, stop, device=device)


@dataclass(frozen=True)
class _Recipe:
    """What a module's frequencies are made of: 1-D (``axes`` None) or multi-axis. Picklable:
    compiled graphs compute length-dependent frequencies from it (``_length_frequencies``)."""

    rotary_dim: int
    base: Any
    scaling: RopeScaling | None
    axes: MultiAxisSpec | None

    def frequencies(self, seq_len: int | None) -> _Frequencies | AxisFrequencies:
        """The float64 frequencies for ``seq_len`` (what ``dynamic`` and ``longrope`` select
        by; None: no longer than the original length)."""
        if self.axes is not None:
            return self.axes.frequencies(seq_len)
        omega, attention = rope_frequencies(
            self.rotary_dim, base=self.base, scaling=self.scaling, seq_len=seq_len
        )
        return _Frequencies(torch.from_numpy(omega), attention)

    def frequency_table(self, seq_len: int | None) -> torch.Tensor:
        """The frequencies alone: ω ``(n,)`` or the matrix ``(n_axes, n)``."""
        made = self.frequencies(seq_len)
        return made.omega if isinstance(made, _Frequencies) else made.table

    def traced(
        self, text: str, seq_len: Any, free: _Frequencies | AxisFrequencies
    ) -> _Frequencies | AxisFrequencies:
        """:meth:`frequencies` inside a graph traced by Dynamo, from ``text`` (this recipe as
        :func:`recipe_text` wrote it); the attention factor and the axes in use are those of
        ``free``, the frequencies without a length (they do not change with it: ``dynamic``)."""
        table = length_frequencies(text, seq_len)
        if isinstance(free, _Frequencies):
            return _Frequencies(table, free.attention)
        return AxisFrequencies(table, free.attention, free.axes)


def _explicit_positions(
    x: torch.Tensor, axis: int, positions: Any, offset: Any, n_axes: int | None, name: str = "x"
) -> tuple[torch.Tensor, bool, bool]:
    """Checked positions plus ``offset`` for ``x`` (sequence at ``axis``): the tensor, whether
    its values were checked, and whether it is per batch element. 1-D RoPE (``n_axes`` None):
    ``(s,)``, ``(b, s)`` or ``(1, s)``; multi-axis: the same with ``n_axes`` coordinates last
    (the offset is added to every coordinate). ``name``: what ``x`` is called in errors."""
    length = x.shape[axis]
    pos, checked = as_positions("positions", positions, x.device, offset=offset, against=name)
    tail = () if n_axes is None else (n_axes,)  # one coordinate per axis
    lead = tuple(pos.shape[: pos.dim() - len(tail)])
    fits = tuple(pos.shape[len(lead) :]) == tail
    per_batch = (
        fits
        and x.dim() + axis > 0
        and len(lead) == 2
        and lead[1] == length
        and lead[0] in (1, x.shape[0])
    )
    # len() first: comparing (b, s) with (s,) item by item would compare b with the length,
    # a guard (length != b) in a graph traced with a dynamic length
    one_row = len(lead) == 1 and lead[0] == length
    if not fits or not (one_row or per_batch):
        end = "".join(f", {n}" for n in tail)
        allowed = f"(s{end or ','}) = ({length}{end or ','})"
        if x.dim() + axis > 0:
            allowed += f" or (b, s{end}) = ({x.shape[0]}, {length}{end})"
            allowed += f" or (1, {length}{end})" if x.shape[0] != 1 else ""
        raise ValueError(
            f"positions must have shape {allowed} for inputs of shape {tuple(x.shape)}, "
            f"got {tuple(pos.shape)}" + (hf_hint(tuple(pos.shape), tail[0]) if tail else "")
        )
    return pos.to(x.device), checked, per_batch


#: What a traced call with a tensor offset (whose value a graph cannot read) and a
#: length-dependent scaling must pass instead.
_TENSOR_OFFSET = "under torch.compile, with a tensor offset, pass seq_len= (or an int offset)"


def _check_inputs(tensors: dict[str, Any], head_dim: int, seq_dim: int) -> int:
    """Check q and k (or x alone) of a module with ``head_dim`` channels and its sequence at
    ``seq_dim``; return the sequence axis as a negative index (at most -2)."""
    for name, x in tensors.items():
        check_tensor(name, x)
        if x.dim() < 2 or x.shape[-1] != head_dim:
            raise ValueError(
                f"{name} must have shape (..., s, d) with d = head_dim = {head_dim} "
                f"channels last, got shape {tuple(x.shape)}"
            )
    first, *rest = tensors.values()
    axis = seq_dim if seq_dim < 0 else seq_dim - first.dim()
    if not -first.dim() <= axis <= -2:
        raise ValueError(
            f"seq_dim = {seq_dim} is not a dimension before the last of a "
            f"{first.dim()}-D input of shape {tuple(first.shape)}"
        )
    for x in rest:
        if x.device != first.device:
            raise ValueError(f"q and k must be on one device, got {first.device} and {x.device}")
        if x.dim() != first.dim() or x.shape[axis] != first.shape[axis]:
            raise ValueError(
                "q and k must have the same number of dimensions and the same sequence "
                f"length (dimension {seq_dim}), got shapes {tuple(first.shape)} "
                f"and {tuple(x.shape)}"
            )
    return axis


class RotaryEmbedding(CachedTables):
    """Rotary position embedding of queries and keys, with the scalings of Hugging Face.

    ``forward(q, k)`` rotates the first ``rotary_dim`` channels of each head of ``q`` and
    ``k`` by the angles of their positions (:func:`posenc.rotary_cos_sin`) and returns them in
    their own dtypes.

    With ``sections=`` (or ``frequencies=``) it is a multi-axis RoPE
    (:func:`posenc.multi_axis_cos_sin`, docs/multi-axis.md): each token has ``n_axes``
    coordinates, e.g. the ``(t, h, w)`` ids of Qwen2-VL, and pair ``k`` turns by
    ``Σ_a p[a]·F[a, k]``.

    Args:
        head_dim: channels per head ``d``, an integer >= 2.
        base: the wavelength base (``rope_theta``), a finite number > 0; default the
            scaling's ``rope_theta``, else 10000.0.
            Multi-axis ``schedule="per_axis"`` also takes one base per axis.
        pairs: ``"half"`` (Hugging Face / GPT-NeoX) or ``"interleaved"`` (Meta / torchtune /
            rotary-embedding-torch); see ``posenc.PairLayout``.
        scaling: ``None``, a dict of Hugging Face rope parameters or a
            :class:`posenc.RopeScaling` (``linear``, ``dynamic``, ``yarn``,
            ``llama3``, ``longrope``). An attention factor (YaRN, LongRoPE) multiplies the
            rotated channels, as Hugging Face's cos/sin do.
        rotary_dim: rotate only the first ``r`` channels (even, <= ``d``); default ``d``, or
            ``int(d * partial_rotary_factor)`` from the scaling.
        seq_dim: the sequence dimension of ``q``/``k``: ``-2`` for ``(b, h, s, d)`` (default),
            ``1`` or ``-3`` for ``(b, s, h, d)``. Any dimension except the last works.
        max_len: rows of the cos/sin cache to build in ``__init__``: an optimisation, not a
            limit.
        device: where the cache is built.
        sections, order, schedule, frequencies: multi-axis RoPE, as in
            :func:`posenc.multi_axis_cos_sin`: rotary pairs per axis (``mrope_section``,
            ``axes_dim / 2``), ``"sectioned"``/``"interleaved"``,
            ``"shared"``/``"dealt"``/``"per_axis"``, or a frequency matrix
            ``(n_axes, rotary_dim / 2)`` instead of sections .. scaling.

    Shapes:
        - ``q``, ``k``: floating tensors with the same number of dimensions (>= 2), the same
          sequence length and ``d`` channels last; heads may differ (grouped-query attention).
        - ``positions`` (optional): ``(s,)``, or ``(b, s)`` per batch element (``b`` =
          ``q.shape[0]`` or 1, as Hugging Face ``position_ids``; the sequence not in
          dimension 0). Integer or real values. Multi-axis: ``(s, n_axes)``,
          ``(b, s, n_axes)`` or ``(1, s, n_axes)``, coordinates last (Hugging Face's M-RoPE
          ``position_ids`` ``(n_axes, b, s)``: pass ``position_ids.permute(1, 2, 0)``; a
          shape such as ``(3, 3, 3)`` is read as ``(b, s, n_axes)``); without them every
          token is a text token, at ``offset + i`` on every axis.
        - ``offset``: int >= 0 added to the positions (tokens already in a KV cache).
        - ``seq_len`` (optional): the length that ``dynamic`` and ``longrope`` select their
          frequencies by; default the largest position + 1, Hugging Face's rule.

    Precision: cos/sin come from float64 angles and are rounded once, to float32 (float64
    for float64 inputs); the rotation runs in float32 and is rounded once to the input dtype,
    so bfloat16/float16 inputs never meet 16-bit angles or tables. Speed: in eager mode each
    of ``q`` and ``k`` is read once and written once (see :func:`apply_rotary`); for
    interleaved pairs the cache also keeps ``cos + i·sin`` of its rows, built on first use.

    Cache: cos/sin of positions ``0 .. n-1`` are non-persistent buffers ``cos_cached`` and
    ``sin_cached`` under posenc's one cache policy (docs/architecture.md): grown to
    ``max(needed, 2 n)`` rows when a call runs past them from inside; a far jump in
    ``offset``, explicit ``positions``, ``dynamic`` scaling beyond its original length and
    calls traced by ``torch.compile`` are computed on the fly from the float64 frequencies,
    with identical values. ``longrope`` keeps the cache of the factor set in use (short or
    long) and rebuilds it when the length crosses ``original_max_position_embeddings``. The
    cache follows the inputs' device and table dtype; ``.to()``, ``.double()`` and
    ``to_empty`` rebuild it from float64; several threads may share the module.

    ``torch.compile``: ``fullgraph=True`` traces every scaling across changing lengths
    (``dynamic=True`` included). ``dynamic`` frequencies past the original length come from
    the NumPy core at run time, through one custom operator (``posenc::length_frequencies``),
    so a compiled call uses the frequencies of the eager one; with explicit ``positions``,
    ``dynamic`` and ``longrope`` need ``seq_len=`` there (a graph cannot read the largest
    position). ``torch.export`` takes them with a fixed ``seq_len=`` only.

    Data checks: as for ``SinusoidalPositionalEncoding`` (accelerator positions are not read;
    unencodable ones give NaN rows). One exception: ``dynamic`` and ``longrope`` with
    explicit ``positions`` and no ``seq_len`` read the largest position, as Hugging Face does
    (a host synchronisation on an accelerator; pass ``seq_len=`` to avoid it).

    Dynamic scaling: Hugging Face keeps the frequencies of the longest sequence seen until a
    call is shorter than the original length; here they are always those of the current call
    (identical on a fresh module and whenever lengths only grow).

    >>> rope = RotaryEmbedding(8)
    >>> q = torch.randn(2, 4, 5, 8)                 # (b, h, s, d)
    >>> k = torch.randn(2, 1, 5, 8)                 # one key head (grouped-query attention)
    >>> q_rot, k_rot = rope(q, k)
    >>> q_rot.shape, k_rot.shape
    (torch.Size([2, 4, 5, 8]), torch.Size([2, 1, 5, 8]))
    >>> torch.allclose(q_rot.norm(dim=-1), q.norm(dim=-1))   # rotations keep norms
    True
    >>> step = rope(q[:, :, 4:], k[:, :, 4:], offset=4)[0]   # decoding with a KV cache
    >>> torch.allclose(step, q_rot[:, :, 4:])
    True
    >>> mrope = RotaryEmbedding(8, sections=[2, 1, 1])      # M-RoPE: (t, h, w) per token
    >>> ids = torch.tensor([[[0, 0, 0], [1, 1, 1], [2, 2, 2], [2, 2, 3], [2, 3, 2]]])
    >>> mrope(q, k, positions=ids)[0].shape                 # ids: (1, s, 3)
    torch.Size([2, 4, 5, 8])
    """

    _table_names = ("cos_cached", "sin_cached")
    cos_cached: torch.Tensor
    sin_cached: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        *,
        base: Any = None,
        pairs: PairLayout = "half",
        scaling: Any = None,
        rotary_dim: int | None = None,
        seq_dim: int = -2,
        max_len: int | None = None,
        device: Any = None,
        sections: Any = None,
        order: AxisOrder | None = None,
        schedule: AxisSchedule | None = None,
        frequencies: Any = None,
    ) -> None:
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=2)
        self.pairs = check_pairs(pairs)
        request = _Request(sections, order, schedule, base, scaling, frequencies)
        multi = any(a is not None for a in (sections, order, schedule, frequencies))
        self.axes = multi_axis_spec(self.head_dim, rotary_dim, request) if multi else None
        self.scaling: RopeScaling | None = rope_scaling(scaling)
        if self.axes is None:
            self.base = check_base("base", rope_base(base, self.scaling))
            self.rotary_dim = resolve_rotary_dim(self.head_dim, rotary_dim, self.scaling)
        else:
            self.base, self.rotary_dim = base, self.axes.rotary_dim
        self.seq_dim = check_int("seq_dim", seq_dim)
        if self.seq_dim == -1:
            raise ValueError("seq_dim must not be -1: the last dimension holds the channels")
        self.max_len = None if max_len is None else check_length("max_len", max_len)
        self._recipe = _Recipe(self.rotary_dim, self.base, self.scaling, self.axes)
        # Plain CPU float64 tensors, not buffers: module casts must never touch them.
        # Key 0: the frequencies without a length (all types; longrope's short factors);
        # key 1: longrope's long factors.
        self._freqs: dict[int, _Frequencies | AxisFrequencies] = {0: self._frequencies(None)}
        self._original = None if self.scaling is None else self.scaling.original_length
        if self.scaling is not None and self.scaling.rope_type == "longrope":
            self._freqs[1] = self._frequencies((self._original or 0) + 1)
        # the recipe as the text that compiled graphs hand to their operator (made once)
        self._recipe_text = "" if self._original is None else recipe_text(self._recipe)
        device = as_device(device, torch.get_default_device())
        # the float32 tables and the float64 work, as the table kernels count them
        size = (self.max_len or 0, self.rotary_dim)
        check_size("max_len and head_dim", size, 24 + torch.float32.itemsize, device)
        self._init_tables(self.max_len or 0, torch.float32, device, key=0)

    # -- tables -----------------------------------------------------------------------------

    def _frequencies(self, seq_len: Any) -> _Frequencies | AxisFrequencies:
        """The frequencies for ``seq_len``: under Dynamo, which cannot trace the NumPy core,
        through the operator of ``_length_frequencies`` (the same values); an export (with a
        fixed ``seq_len``) computes them in Python, as constants of its graph."""
        if not torch.compiler.is_dynamo_compiling() or torch.compiler.is_exporting():
            return self._recipe.frequencies(seq_len)
        return self._recipe.traced(self._recipe_text, seq_len, self._freqs[0])

    def _cache_dtype(self, dtype: torch.dtype) -> torch.dtype:
        return _table_dtype(dtype)

    def _key(self, seq_len: Any) -> int | None:
        """Which cached frequency set serves ``seq_len``; ``None``: none (dynamic, long)."""
        if self.scaling is None or not self.scaling.depends_on_length:
            return 0
        longer = self._original is not None and seq_len > self._original
        if self.scaling.rope_type == "longrope":
            return 1 if longer else 0
        return None if longer else 0

    def _compute_rows(
        self, key: Any, start: int, stop: int, dtype: torch.dtype, device: torch.device
    ) -> tuple[torch.Tensor, ...]:
        if stop <= start:  # an empty cache (no max_len): nothing to compute
            return tuple(torch.empty(0, self.rotary_dim, dtype=dtype, device=device) for _ in "cs")
        freqs = self._freqs[key]
        return freqs.cos_sin(freqs.text_positions(start, stop, device), self.pairs, dtype, True)

    def _at(
        self, positions: torch.Tensor, seq_len: Any, dtype: torch.dtype, checked: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        key = self._key(seq_len)
        freqs = self._frequencies(seq_len) if key is None else self._freqs[key]
        return freqs.cos_sin(positions, self.pairs, dtype, checked)

    def _range(
        self, start: int, stop: int, seq_len: Any, dtype: torch.dtype, device: torch.device
    ) -> RopeTables:
        """cos/sin (and, from the cache, interleaved phasors) of positions ``start .. stop-1``."""
        key = self._key(seq_len)
        if key is None:
            freqs = self._frequencies(seq_len)
            positions = freqs.text_positions(start, stop, device)
            return RopeTables(*freqs.cos_sin(positions, self.pairs, dtype, True))
        (cos, sin), snapshot = self._cached_rows(start, stop, dtype, device, key=key)
        if (
            snapshot is None
            or not by_phasors(self.pairs, self.rotary_dim)
            or not fast_paths_enabled()
        ):
            return RopeTables(cos, sin)
        table = snapshot.derived.get("phasors")
        if table is None:  # built on first use, for this snapshot only
            with torch.inference_mode(False), torch.no_grad():
                table = snapshot.derived.setdefault("phasors", phasors(*snapshot.tables))
        return RopeTables(cos, sin, table[start:stop])

    def _tables_for(
        self,
        x: torch.Tensor,
        axis: int,
        dtype: torch.dtype,
        positions: Any,
        offset: Any,
        seq_len: Any,
        name: str = "x",
    ) -> RopeTables:
        """cos/sin (and phasors) shaped to broadcast against ``x`` (seq at ``axis``, r last);
        ``name``: what ``x`` is called in errors."""
        if seq_len is not None and not isinstance(seq_len, torch.SymInt):
            seq_len = check_length("seq_len", seq_len)
        switches = self.scaling is not None and self.scaling.depends_on_length
        if switches and type(seq_len) is not int and torch.compiler.is_exporting():
            assert self.scaling is not None
            refuse_length_export(repr(self.scaling.rope_type))
        length, given = x.shape[axis], positions is not None
        shape = [1] * x.dim()
        shape[axis], shape[-1] = length, self.rotary_dim
        if positions is None:
            offset = check_offset(offset, length)
            if isinstance(offset, torch.Tensor):  # unread (accelerator, traced): on the fly
                positions = torch.arange(length, device=x.device)
                if self.axes is not None:  # text tokens: the same position on every axis
                    positions = positions.unsqueeze(-1).expand(length, self.axes.n_axes)
        if positions is None:
            stop = offset + length
            tables = self._range(
                offset, stop, stop if seq_len is None else seq_len, dtype, x.device
            )
        else:
            n_axes = None if self.axes is None else self.axes.n_axes
            pos, checked, per_batch = _explicit_positions(x, axis, positions, offset, n_axes, name)
            if seq_len is None and switches:
                seq_len = largest_position_seq_len(pos, PASS_SEQ_LEN if given else _TENSOR_OFFSET)
            tables = RopeTables(*self._at(pos, seq_len, dtype, checked))
            if per_batch:
                shape[0] = pos.shape[0]
        half = tables.phasors
        return RopeTables(
            tables.cos.view(shape),
            tables.sin.view(shape),
            None if half is None else half.view(*shape[:-1], self.rotary_dim // 2),
        )

    # -- API --------------------------------------------------------------------------------

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        *,
        positions: Any = None,
        offset: int = 0,
        seq_len: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries and keys; see the class docstring for shapes.

        Args:
            q, k: ``(b, h, s, d)`` (``seq_dim=-2``) or ``(b, s, h, d)`` (``seq_dim=1``) or
                any shape with the sequence at ``seq_dim`` and ``d`` last; floating point.
            positions: optional explicit positions ``(s,)``, ``(b, s)`` or ``(1, s)``.
            offset: int >= 0 added to the positions (default positions ``0 .. s-1``).
            seq_len: the length ``dynamic``/``longrope`` scalings select frequencies by.

        Returns:
            ``(q_rot, k_rot)`` with the shapes and dtypes of ``q`` and ``k``.
        """
        axis = _check_inputs({"q": q, "k": k}, self.head_dim, self.seq_dim)
        dtype = _table_dtype(q.dtype, k.dtype)
        tables = self._tables_for(q, axis, dtype, positions, offset, seq_len, "q")
        if q.dim() + axis > 0 and tables.cos.shape[0] not in (1, k.shape[0]):
            raise ValueError(
                f"k must have the batch size of the per-batch positions, "
                f"{tables.cos.shape[0]} (q's), got k of shape {tuple(k.shape)}; pass "
                "positions of shape (s,) or (1, s) to share them across batches of "
                "different sizes"
            )
        q_rot, k_rot = rotate((q, k), tables, self.pairs)
        return q_rot, k_rot

    def rotate(
        self,
        x: torch.Tensor,
        *,
        positions: Any = None,
        offset: int = 0,
        seq_len: int | None = None,
    ) -> torch.Tensor:
        """Rotate one tensor (queries or keys alone); arguments as in :meth:`forward`."""
        axis = _check_inputs({"x": x}, self.head_dim, self.seq_dim)
        tables = self._tables_for(x, axis, _table_dtype(x.dtype), positions, offset, seq_len)
        return rotate((x,), tables, self.pairs)[0]

    def extra_repr(self) -> str:
        text = (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, pairs={self.pairs!r}, "
            f"base={self.base}, seq_dim={self.seq_dim}"
        )
        if self.axes is not None:
            text += f", {self.axes.describe()}"
        return text if self.scaling is None else f"{text}, scaling={self.scaling!r}"
