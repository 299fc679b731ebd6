"""Rotary modules: recognised by their call and output, verified against posenc's tables.

A rotary module is called ``module(x, position_ids)`` (or ``module(x, position_ids,
layer_type)``) and returns the RoPE tables of ``position_ids`` in one of five forms (``n``
pairs, ``r = 2n`` rotated channels, ``θ_k = p·ω_k``)::

    half         (cos, sin), each (..., r): [θ_0 .. θ_{n-1}, θ_0 .. θ_{n-1}]  (rotate_half)
    interleaved  (cos, sin), each (..., r): [θ_0, θ_0, θ_1, θ_1, ...]          (pairs 2k, 2k+1)
    columns      (cos, sin), each (..., n): [θ_0 .. θ_{n-1}]                    (one per pair)
    columns_sin_first  (sin, cos), each (..., n)          (GPT-J and CodeGen from 5.24 on)
    complex      one complex tensor (..., n): a·exp(iθ_k)                       (freqs_cis)

A module without a config or ``dim``/``base`` that reads its tables from a fixed ``[sin | cos]``
buffer of ``rows`` positions (GPT-J's and CodeGen's ``embed_positions``) gets its frequencies
from that buffer (the swap recognises it as posenc's ``marian`` table of width ``r``, RoPE's
ω_k = base^(-2k/r)), and is probed at positions below ``rows`` only.

posenc computes its own float64 tables from the module's config (or its ``dim`` and ``base``)
and compares them with what the module returns for the same call, on a batch of two rows with
different positions (each row compared on its own); only a module whose output is posenc's in
one of these forms is replaced: within a float32 build's error for a float32 ``x``, and for a
bfloat16 and a float16 ``x`` within that error plus one unit in the last place of its output
dtype (posenc rounds its float64 table once, a module that computes in float32 rounds its own
float32 table once: the two may differ by one ulp; a module that computes its angles in 16 bits
differs by far more).

Multi-axis modules (M-RoPE) take ``position_ids`` of shape ``(n_axes, b, s)`` and return one
table per token, ``(b, s, ·)``; the 2-D rotary modules of vision towers take ``(N, n_axes)``
(coordinates last) and return ``(N, ·)``. Every module is also called with distinct ids on each
axis: where the config's plan gives several axes, the output must be posenc's multi-axis table
of those ids (so a wrong section split or axis order is rejected); where it gives one, a module
that folds three axes into one table per token is not 1-D RoPE and is left.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn

from ..._rope.xdrope import DOUBLED_SPLIT, doubled_split_axes, doubled_split_note
from .._kernels._cast import cast_exact
from ._config import layer_types, rope_module
from ._multi_axis import MultiAxisRotary
from ._probe import forward_parameters, probing, signature_text
from ._rotary import LlamaRotary

__all__ = [
    "LAYOUTS",
    "Difference",
    "RotaryFinding",
    "RotaryTables",
    "examine_rotary",
    "largest_difference",
    "worst_difference",
]

LAYOUTS = ("half", "interleaved", "columns", "columns_sin_first", "complex")

# Probe positions: the first 256, then far ones (a second call, so that rope types whose
# frequencies depend on the length are verified on both sides of their switch), in a batch of
# two rows: the positions, then the same reversed (the largest position, which length-dependent
# rope types read, is the same; a module that reads only the first row is caught).
_NEAR = torch.arange(256)
_FAR = torch.cat([_NEAR, torch.tensor([1000, 2500, 4095])])
_NEAR_IDS = torch.stack([_NEAR, _NEAR.flip(-1)])
_FAR_IDS = torch.stack([_FAR, _FAR.flip(-1)])
# The dtypes ``x`` also has in the probes (models are cast or run under autocast after a swap).
_LOW = (torch.bfloat16, torch.float16)


def _axis_ids(n_axes: int, rows: int = 4096) -> torch.Tensor:
    """``(n_axes, 2, s)`` probe ids, different on every axis and in each row, near and far
    (below ``rows``)."""
    steps = _FAR_IDS[None]
    return torch.cat([(steps * (2 * a + 1) + 5 * a) % rows for a in range(n_axes)])


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _ulp(magnitude: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One unit in the last place of ``dtype`` at each (float64) ``magnitude``."""
    info = torch.finfo(dtype)
    return torch.exp2(torch.floor(torch.log2(magnitude.clamp(min=info.tiny)))) * info.eps


def where(module: nn.Module) -> torch.device:
    """The device of the module's own tensors (CPU when it has none)."""
    for tensor in [*module.buffers(), *module.parameters()]:
        return tensor.device
    return torch.device("cpu")


def _layout_of(half: torch.Tensor, layout: str) -> torch.Tensor:
    """A float64 ``half`` table ``(..., 2n)`` in ``layout`` (``complex`` takes the cos part)."""
    n = half.shape[-1] // 2
    if layout == "half":
        return half
    if layout == "interleaved":
        return half[..., :n].repeat_interleave(2, dim=-1)
    return half[..., :n].contiguous()


def rotary_outputs(
    rotary: Any, x: torch.Tensor, position_ids: torch.Tensor, layout: str, dtype: torch.dtype
) -> Any:
    """posenc's tables for ``position_ids`` in ``layout``, rounded once to ``dtype``."""
    probe = torch.empty(0, dtype=torch.float64, device=x.device)
    cos, sin = rotary(probe, position_ids)
    cos, sin = _layout_of(cos, layout), _layout_of(sin, layout)
    if layout == "complex":
        return torch.complex(cos, sin).to(dtype)
    if layout == "columns_sin_first":
        return cast_exact(sin, dtype), cast_exact(cos, dtype)
    return cast_exact(cos, dtype), cast_exact(sin, dtype)


class RotaryTables(nn.Module):
    """RoPE tables in the form and dtype of the rotary module it replaces.

    Built by :func:`posenc.torch.hf.swap_positions` for rotary modules that return interleaved
    pairs, one column per pair (``(cos, sin)`` or ``(sin, cos)``) or complex phasors, or that
    are called per layer type. Each
    layer type's frequencies are those of a :class:`posenc.torch.hf.LlamaRotary` (float64,
    every rope type); the tables are rounded once to the output dtype.

    Args:
        rotaries: layer type (``None`` when called without one) → ``LlamaRotary``.
        layout: ``"half"``, ``"interleaved"``, ``"columns"``, ``"columns_sin_first"`` or
            ``"complex"``.
        dtype: the output dtype; ``None`` follows ``x.dtype``.

    Shapes (``forward``): ``x`` any tensor (its dtype and device are used), ``position_ids``
    integer ``(b, s)``; returns ``(cos, sin)`` of ``(b, s, r)`` (``(b, s, r/2)`` for
    ``columns``; ``(sin, cos)`` for ``columns_sin_first``) or one complex ``(b, s, r/2)``.
    """

    def __init__(
        self, rotaries: dict[str | None, Any], layout: str, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        self.rotaries = dict(rotaries)
        self.layout = layout
        self.dtype = dtype

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None
    ) -> Any:
        """The tables of ``position_ids`` (for ``layer_type``), as the replaced module gave."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        rotary = self.rotaries.get(layer_type)
        if rotary is None:
            known = sorted(str(k) for k in self.rotaries)
            raise ValueError(f"layer_type must be one of {known}, got {layer_type!r}")
        dtype = x.dtype if self.dtype is None else self.dtype
        return rotary_outputs(rotary, x, position_ids, self.layout, dtype)

    def extra_repr(self) -> str:
        keys = ", ".join(str(k) for k in self.rotaries)
        return f"layout={self.layout!r}, layer_types=[{keys}], dtype={self.dtype}"


# -- recognising ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RotaryFinding:
    """A verified rotary module: its form, output dtype rule and posenc's frequencies."""

    layout: str
    rotaries: dict[str | None, Any]
    dtype: torch.dtype | None

    def detail(self) -> str:
        def one(rotary: Any) -> str:
            kind = "default" if rotary.scaling is None else rotary.scaling.rope_type
            if isinstance(rotary, MultiAxisRotary):
                return f"{kind}, r={rotary.rotary_dim}, {rotary.describe()}"
            return f"{kind}, r={rotary.rotary_dim}"

        if list(self.rotaries) == [None]:
            return one(self.rotaries[None])
        return "; ".join(f"{k}: {one(r)}" for k, r in self.rotaries.items())

    def replacement(self) -> nn.Module:
        if self.layout == "half" and self.dtype is None and list(self.rotaries) == [None]:
            public: nn.Module = self.rotaries[None]  # the public drop-in does exactly this
            return public
        return RotaryTables(self.rotaries, self.layout, self.dtype)


def _candidates(module: nn.Module, layer_type: str | None, table: Any = None) -> list[Any]:
    """posenc modules that may compute ``module``'s frequencies, or the reasons they cannot
    (``table``: the one its fixed table gives, or why it gives none; None: it has none)."""
    found: list[Any] = [] if table is None else [table]
    config = getattr(module, "config", None)
    if config is not None:
        try:
            found.append(rope_module(config, layer_type))
        except Exception as exc:  # a foreign config may raise anything: it is the reason
            found.append(f"its config cannot be read: {type(exc).__name__}: {exc}")
    dim, base = getattr(module, "dim", None), None
    for name in ("base", "theta", "rope_theta"):
        base = base or getattr(module, name, None)
    if isinstance(dim, int) and isinstance(base, int | float) and layer_type is None:
        try:
            found.append(LlamaRotary(dim, base=float(base)))
        except (TypeError, ValueError) as exc:
            found.append(f"its dim/base cannot be used: {exc}")
    return found or ["no config and no dim/base attributes to compute its frequencies from"]


# -- verifying -----------------------------------------------------------------------------------


def _parts(output: Any) -> tuple[str, tuple[torch.Tensor, ...]] | None:
    """``("pair", (cos, sin))`` or ``("complex", (real, imag))``, or None for anything else."""
    if isinstance(output, torch.Tensor) and output.is_complex():
        return "complex", (output.real, output.imag)
    if (
        isinstance(output, tuple | list)
        and len(output) == 2
        and all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in output)
        and output[0].shape == output[1].shape
    ):
        return "pair", (output[0], output[1])
    return None


def _describe(output: Any) -> str:
    if isinstance(output, torch.Tensor):
        return f"a {output.dtype} tensor of shape {tuple(output.shape)}"
    if isinstance(output, tuple | list):
        return f"a {type(output).__name__} of {len(output)} items"
    return f"a {type(output).__name__}"


def _layouts(form: str, width: int, rotary_dim: int) -> tuple[str, ...]:
    if form == "complex":
        return ("complex",) if width == rotary_dim // 2 else ()
    if width == rotary_dim:
        return ("half", "interleaved")
    return ("columns", "columns_sin_first") if width == rotary_dim // 2 else ()


class Difference(NamedTuple):
    """The worst element of ``|theirs - ours| / tolerance``."""

    ratio: float
    value: float
    at: tuple[int, ...]


def largest_difference(
    theirs: torch.Tensor, ours: torch.Tensor, tolerance: torch.Tensor
) -> Difference:
    """The worst difference, relative to ``tolerance`` (broadcast to the tensors' shape).

    NaN counts as infinitely far; shapes must agree (the caller checks).
    """
    error = (theirs.detach().cpu().double() - ours.detach().cpu().double()).abs()
    ratio = (error / tolerance).nan_to_num(nan=float("inf"))
    flat = int(ratio.reshape(-1).argmax()) if ratio.numel() else 0
    if not ratio.numel():
        return Difference(0.0, 0.0, ())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), ratio.shape))
    return Difference(float(ratio[index]), float(error[index]), index)


def worst_difference(
    compared: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
) -> tuple[int, Difference]:
    """The worst of :func:`largest_difference` over ``(theirs, ours, tolerance)`` triples
    (a module's cos and sin): its index and its difference."""
    found = [largest_difference(*triple) for triple in compared]
    worst = max(range(len(found)), key=lambda i: found[i].ratio)
    return worst, found[worst]


def _ours(rotary: Any, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """posenc's float64 ``half`` tables of ``positions`` (on the CPU)."""
    cos, sin = rotary(torch.empty(0, dtype=torch.float64), positions.cpu())
    return cos, sin


def _compare(
    output: Any, rotary: Any, positions: torch.Tensor, ours: Any = None, only: str = ""
) -> tuple[str | None, str]:
    """The layout in which ``output`` is posenc's table of ``positions`` (``ours``: those
    tables, when already computed), or why none is.

    Within a float32 build's error; with ``only`` (the layout found in float32; the output of
    a 16-bit ``x``), posenc's table is rounded once to the output's dtype and may differ by one
    more unit in the last place of that dtype (at the larger of the magnitudes compared).
    """
    found = _parts(output)
    if found is None:
        return None, f"returns {_describe(output)}, not (cos, sin) or complex phasors"
    form, theirs = found
    width, r = theirs[0].shape[-1], rotary.rotary_dim
    layouts = _layouts(form, width, r)
    layouts = tuple(x for x in layouts if x == only) if only else layouts
    if not layouts:
        return None, f"its tables are {width} wide; posenc's rotary_dim is {r} ({r // 2} pairs)"
    cos, sin = _ours(rotary, positions) if ours is None else ours
    scale = max(1.0, float(cos.abs().max()))
    eps = float(torch.finfo(torch.float32 if only else theirs[0].dtype).eps)
    p = _magnitude(positions, rotary).unsqueeze(-1)
    tolerance = 1e-6 + scale * (4 * eps + 1e-6 * p * float(rotary._omega.max()))
    best: tuple[float, str] = (float("inf"), "")
    for layout in layouts:
        ours = (_layout_of(cos, layout), _layout_of(sin, layout))
        names = ("cos", "sin")
        if layout == "columns_sin_first":
            ours, names = (ours[1], ours[0]), ("sin", "cos")
        if theirs[0].shape != ours[0].shape:
            return None, (
                f"returns shape {tuple(theirs[0].shape)} for position_ids of shape "
                f"{tuple(positions.shape)}; posenc's is {tuple(ours[0].shape)}"
            )
        compared = [(t, *_bound(t, o, tolerance, only)) for t, o in zip(theirs, ours, strict=True)]
        worst, diff = worst_difference(compared)
        if diff.ratio <= 1.0:
            return layout, ""
        if diff.ratio < best[0]:
            *at, channel = diff.at
            pairs = zip(theirs, ours, strict=True)
            largest = max(float((t.double() - o).abs().max()) for t, o in pairs)
            best = (
                diff.ratio,
                f"its {names[worst]} differs from posenc's ({layout} layout) at "
                f"channel {channel}, {_position_text(positions, rotary, tuple(at))}, by "
                f"{diff.value:.2g}" + (f" (the largest difference: {largest:.3g})" if only else ""),
            )
    return None, best[1]


def _bound(
    theirs: torch.Tensor, ours: torch.Tensor, tolerance: torch.Tensor, low: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """posenc's table and the tolerance it is compared with: float64 within ``tolerance``;
    for a 16-bit ``x`` (``low``), rounded once to ``theirs``' dtype, within one more ulp."""
    if not low:
        return ours, tolerance
    ours = ours.to(theirs.dtype).double()
    magnitude = torch.maximum(theirs.detach().cpu().double().abs(), ours.abs())
    return ours, tolerance + _ulp(magnitude, theirs.dtype)


def _magnitude(positions: torch.Tensor, rotary: Any) -> torch.Tensor:
    """``|position|`` per token (the largest over the axes of multi-axis ids), float64."""
    if isinstance(rotary, MultiAxisRotary):
        positions = rotary.coordinates(positions, torch.device("cpu"))[0].amax(dim=-1)
    return positions.cpu().double().abs()


def _position_text(positions: torch.Tensor, rotary: Any, at: tuple[int, ...]) -> str:
    """``position 7 in row 1``, or ``position ids (7, 19, 40) in row 1``, for the token
    ``at`` (``(row, token)`` of ids ``(b, s)`` or ``(n_axes, b, s)``, ``(token,)`` of
    ``(s, n_axes)``)."""
    row = f" in row {at[0]}" if len(at) == 2 else ""
    if not isinstance(rotary, MultiAxisRotary):
        return f"position {int(positions.cpu()[at])}{row}"
    coordinates = rotary.coordinates(positions, torch.device("cpu"))[0]
    values = coordinates[at].tolist()
    return f"position ids ({', '.join(str(v) for v in values)}){row}"


def _axes_check(
    module: nn.Module, rotary: Any, layout: str, extra: tuple[Any, ...], rows: int
) -> str:
    """``""`` when ``module`` treats ids of several axes as ``rotary`` does, else the reason.

    Multi-axis ``rotary``: the module's tables of distinct ids on each axis must be posenc's.
    1-D ``rotary``: a module that returns one table per token for ``(3, b, s)`` ids folds the
    axes together, which 1-D RoPE does not describe (any other answer, a refusal included,
    is how a 1-D module treats ids it is never given).
    """
    multi = isinstance(rotary, MultiAxisRotary)
    ids = _axis_ids(rotary.n_axes if multi else 3, rows)
    x32 = torch.zeros(1, 1, 1, device=where(module))
    with probing(module) as call:
        try:
            output = call(x32, ids.to(x32.device), *extra)
        except Exception as exc:  # any failure of a foreign module is a reason
            if not multi:
                return ""
            return (
                f"calling it with position_ids of shape {tuple(ids.shape)} failed: "
                f"{type(exc).__name__}: {exc}"
            )
    if not multi:
        parts = _parts(output)
        if parts is not None and parts[1][0].shape[:-1] == ids.shape[1:]:
            return (
                f"it returns one table per token for position_ids of shape {tuple(ids.shape)} "
                "(several position axes), but its config describes 1-D RoPE"
            )
        return ""
    found, why = _compare(output, rotary, ids)
    if found == layout:
        return ""
    split = _doubled_split(output, rotary, ids) if layout == "half" else ""
    return split or why or f"with several axes its tables are laid out {found!r}, not {layout!r}"


def _doubled_split(output: Any, rotary: MultiAxisRotary, ids: torch.Tensor) -> str:
    """The reason naming the axes mixed when ``output`` is the doubled table ``[θ, θ]`` split
    by ``2·sections`` (transformers' HunYuan-VL XD-RoPE: channel ``k`` and ``k + n`` of a pair
    turn with different axes), else ``""``. Sectioned, shared layouts in their own axis order
    with frequencies that do not depend on the length only."""
    request = rotary._spec.request
    parts = _parts(output)
    plain = rotary.scaling is None or not rotary.scaling.depends_on_length
    if (
        parts is None
        or not plain
        or request.frequencies is not None
        or (request.order or "sectioned") != "sectioned"
        or (request.schedule or "shared") != "shared"
        or rotary.slot_order != tuple(range(rotary.n_axes))
    ):
        return ""
    sections = [int(s) for s in request.sections]
    n = sum(sections)
    coordinates = rotary.coordinates(ids, torch.device("cpu"))[0].double()
    if parts[1][0].shape != (*coordinates.shape[:-1], 2 * n):
        return ""
    axes = torch.from_numpy(doubled_split_axes(sections))
    omega = rotary._omega.double()
    theta = coordinates[..., axes] * torch.cat([omega, omega])
    attention = rotary._fixed.attention
    factor = 1.0 if attention is None else torch.cat([attention, attention])
    p = coordinates.abs().amax(dim=-1, keepdim=True)
    tolerance = 1e-6 + 4 * float(torch.finfo(torch.float32).eps) + 1e-6 * p * float(omega.max())
    for theirs, ours in zip(parts[1], (theta.cos() * factor, theta.sin() * factor), strict=True):
        if largest_difference(theirs, ours, tolerance).ratio > 1.0:
            return ""
    note = doubled_split_note(sections, rotary.axis_names)
    return (
        f"on position ids that differ between the axes, its tables are not posenc's: {note}; "
        "replacing it would change what the model computes for image tokens, so it stays"
    )


def _layer_types(module: nn.Module) -> list[str | None] | str:
    """The layer types to probe ``module`` with; ``[None]`` when its config names none and
    ``layer_type`` may be left out (ESM's ``forward(x, position_ids, layer_type=None)``)."""
    config = getattr(module, "config", None)
    types: list[str | None] = [] if config is None else list(layer_types(config))
    if not types:
        optional = [p for p in forward_parameters(module) or () if p.name == "layer_type"]
        if optional and optional[0].default is None:
            return [None]
        return "it is called with a layer_type, but its config names no layer types"
    return types


def _probe(module: nn.Module, key: str | None, rows: int) -> tuple[Any, Any, Any] | str | None:
    """The module's outputs for near and far positions (below ``rows``) with a float32 ``x``,
    and ``{dtype: (far, near)}`` with a bfloat16 and a float16 one; None when it refuses
    ``key`` (a layer type without RoPE), or why the call failed."""
    device = where(module)
    near, far = (_NEAR_IDS % rows).to(device), (_FAR_IDS % rows).to(device)
    extra = () if key is None else (key,)
    x32 = torch.zeros(1, 1, 1, device=device)
    with probing(module) as call:
        try:
            # near before far in every dtype: Hugging Face's dynamic modules keep the
            # frequencies of the longest call so far
            xs = [x32, *(x32.to(d) for d in _LOW)]
            near_out = [call(x, near, *extra) for x in xs]
            far_out = [call(x, far, *extra) for x in xs]
            low = {d: (far_out[i], near_out[i]) for i, d in enumerate(_LOW, start=1)}
            return near_out[0], far_out[0], low
        except Exception as exc:  # any failure of a foreign module is a reason
            if key is not None and isinstance(exc, AttributeError | KeyError):
                return None
            return f"calling it as {signature_text(module)} failed: {type(exc).__name__}: {exc}"


def _in_16_bits(
    low: dict[torch.dtype, tuple[Any, ...]], rotary: Any, layout: str, probes: list[Any]
) -> tuple[torch.dtype | None, str] | str:
    """``(dtype rule, layout)`` when the module's outputs for 16-bit ``x`` (``low``: dtype →
    its outputs for ``probes``, ``(position_ids, posenc's tables or None)``) are posenc's
    within one ulp (see :func:`_compare`), else the reason naming the dtype. The rule: None
    when the output dtype follows ``x``, else the one dtype it always has."""
    rules = set()
    for dtype, outputs in low.items():
        for output, (positions, tables) in zip(outputs, probes, strict=True):
            found, why = _compare(output, rotary, positions, tables, only=layout)
            if found is None:
                return f"in {_name(dtype)}: {why}"
        output = outputs[0]
        got = output.dtype if layout == "complex" else output[0].dtype
        rules.add(None if got == dtype else got)
    if len(rules) > 1:
        return f"its output dtype neither follows x nor is one dtype ({sorted(map(str, rules))})"
    return rules.pop(), layout


def _axes_last(module: nn.Module, rotary: Any, key: str | None) -> tuple[Any, str, Any] | str:
    """The vision towers' call: ``position_ids`` ``(N, n_axes)``, coordinates last."""
    last = copy.deepcopy(rotary)  # the same tables, for ids with the coordinates last
    last.axes_dim = -1
    ids = _axis_ids(last.n_axes)[:, 0].T.contiguous()
    extra = () if key is None else (key,)
    x32 = torch.zeros(1, 1, 1, device=where(module))
    with probing(module) as call:
        try:
            output = call(x32, ids.to(x32.device), *extra)
            low = {d: (call(x32.to(d), ids.to(x32.device), *extra),) for d in _LOW}
        except Exception as exc:  # any failure of a foreign module is a reason
            return f"{type(exc).__name__}: {exc}"
    layout, why = _compare(output, last, ids)
    if layout is None:
        return why
    found = _in_16_bits(low, last, layout, [(ids, None)])
    return found if isinstance(found, str) else (last, layout, found[0])


def _verified(
    module: nn.Module, key: str | None, table: Any = None, rows: int = 4096
) -> tuple[Any, str, torch.dtype | None] | str:
    """(posenc's module, layout, dtype rule) that reproduce ``module`` for ``key``, or why not
    (``table``, ``rows``: see :func:`examine_rotary`)."""
    outputs = _probe(module, key, rows)
    if outputs is None:
        return ""
    reasons = []
    for candidate in _candidates(module, key, table):
        if isinstance(candidate, str):
            reasons.append(candidate)
            continue
        found = (
            outputs if isinstance(outputs, str) else _check(module, candidate, key, outputs, rows)
        )
        if not isinstance(found, str):
            return found
        named = DOUBLED_SPLIT in found  # a language model's layout, named: not a tower's
        if isinstance(candidate, MultiAxisRotary) and not named:  # the towers' call, axes last
            last = _axes_last(module, candidate, key)
            if not isinstance(last, str):
                return last
            n = candidate.n_axes
            found = f"as position_ids ({n}, b, s): {found}; as ({n} coordinates last): {last}"
        reasons.append(found)
    return reasons[0] if reasons else str(outputs)


def _check(
    module: nn.Module, candidate: Any, key: str | None, outputs: tuple[Any, Any, Any], rows: int
) -> tuple[Any, str, torch.dtype | None] | str:
    """``candidate`` checked against the module's outputs for 1-D ids (below ``rows``), then
    for ids that differ between the axes: ``(candidate, layout, dtype rule)``, or why not."""
    near, far, low = outputs
    near_ids, far_ids = _NEAR_IDS % rows, _FAR_IDS % rows
    far_tables = _ours(candidate, far_ids)
    scaling = getattr(candidate, "scaling", None)
    if scaling is not None and scaling.depends_on_length:  # other frequencies at 256
        near_tables = _ours(candidate, near_ids)
    else:  # the first 256 positions of the far probe, in each row
        cos, sin = (torch.stack([t[0, :256], t[1, -256:]]) for t in far_tables)
        near_tables = cos, sin
    layout, why = _compare(near, candidate, near_ids, near_tables)
    if layout is not None:
        far_layout, why = _compare(far, candidate, far_ids, far_tables)
        layout = layout if far_layout == layout else None
    if layout is not None:
        why = _axes_check(module, candidate, layout, () if key is None else (key,), rows)
        layout = None if why else layout
    if layout is None:
        return why
    probes = [(far_ids, far_tables), (near_ids, near_tables)]
    found = _in_16_bits(low, candidate, layout, probes)
    return found if isinstance(found, str) else (candidate, layout, found[0])


def _cast_cause(module: nn.Module, reason: str) -> str:
    """Why a module's tables differ when it computes them from a 16-bit buffer, and what to do
    (``""`` otherwise): ``model.to(torch.bfloat16)`` casts the frequencies a rotary module
    keeps (transformers' ``inv_freq``), which then lose all but 8 bits of precision."""
    if "differs from posenc's" not in reason:
        return ""
    low = [
        (name, buffer.dtype)
        for name, buffer in module.named_buffers(recurse=False)
        if buffer.dtype in _LOW
    ]
    if not low:
        return ""
    name, dtype = low[0][0], _name(low[0][1])
    return (
        f": its rotary buffer {name!r} was cast to {dtype} (model.to(torch.{dtype}) casts it "
        f"after the model is built), and its tables come from those rounded frequencies; "
        f"swap before casting (swap_positions(model), then model.to(torch.{dtype})), or build "
        f"the model with dtype=torch.{dtype} (from_pretrained(..., dtype=torch.{dtype}) keeps "
        f"{name!r} in float32)"
    )


def examine_rotary(
    module: nn.Module, with_layer: bool, table: Any = None, rows: int | None = None
) -> RotaryFinding | str:
    """What ``module`` computes, verified, or the reason it is left in place; ``with_layer``:
    it is called with a layer type (:func:`rotary_call`). ``table``: the posenc module its
    fixed table gives (or why it gives none), ``rows``: that table's positions, the probes'
    limit (None: the module has no table)."""
    if where(module).type == "meta":
        return "its tensors are on the meta device: nothing to verify"
    keys = _layer_types(module) if with_layer else [None]
    if isinstance(keys, str):
        return keys
    rotaries: dict[str | None, Any] = {}
    layouts, dtypes = set(), set()
    for key in keys:
        found = _verified(module, key, table, rows or 4096)
        if found == "":
            continue  # a layer type without RoPE: the module refuses it too
        if isinstance(found, str):
            found = found + _cast_cause(module, found)
            return found if key is None else f"layer type {key!r}: {found}"
        rotaries[key], layout, dtype = found
        layouts.add(layout)
        dtypes.add(dtype)
    if not rotaries:
        return f"it refuses every layer type of its config ({', '.join(map(str, keys))})"
    if len(layouts) > 1 or len(dtypes) > 1:
        return f"its layer types use different forms ({sorted(layouts)}, {dtypes})"
    return RotaryFinding(layouts.pop(), rotaries, dtypes.pop())
