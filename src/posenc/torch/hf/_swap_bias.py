"""Attention biases in :func:`posenc.torch.hf.swap_positions`: found by what a module holds
and computes, verified, then replaced or reported.

- T5's bucketed bias is a method of the attention layer (``compute_bias``, reading the layer's
  ``relative_attention_bias`` table; T5, mT5, UMT5, LongT5's local and transient-global
  attention, Switch Transformers, Pix2Struct, Pop2Piano): a copy of the layer sharing its
  parameters gets ``compute_bias`` and ``_relative_position_bucket`` bound to posenc's
  (:func:`posenc.torch.t5_buckets`, convention ``"transformers"``, then the layer's own
  table); the projections stay as they are.
- The relative sinusoid tables of Conformer speech encoders are modules: replaced by
  :class:`RelativeSinusoidPositions`.
- Inkling's content-conditioned relative logits are modules holding a bank of profiles
  (``proj``), called with per-query states and positions (Inkling, Inkling2) or with hidden
  states, a distance map and position ids (Inkling2-loop): replaced by
  :class:`RelativeLogitsPositions` / :class:`RelativeBiasPositions`, which keep the model's
  parameters and read the distances by posenc's :func:`posenc.torch.relative_logits`.
- ALiBi (BLOOM, MPT, Falcon) and DeBERTa's relative positions are built by functions: there is
  nothing to swap, and the report names the function and the posenc call equal to it.
"""

from __future__ import annotations

import copy
import inspect
import math
import types
from typing import Any, NamedTuple

import torch
from torch import nn

from .._bias.dense import t5_buckets, transformers_t5_buckets
from ._bias_layers import RelativeBiasPositions, RelativeLogitsPositions, RelativeSinusoidPositions
from ._examine_rotary import largest_difference
from ._probe import forward_parameters, probing
from ._report import Replaced

__all__ = ["Biases", "bias_swapped", "built_by_function", "examine_biases"]

# (query_length, key_length, past) at which compute_bias is compared: both signs of the
# relative positions, the log bins and far beyond max_distance
_T5_PROBES = ((1, 1, 0), (9, 9, 0), (300, 300, 0), (1, 1, 700), (4, 40, 2000))
_BLOCK_PROBES = (1, 3, 16, 200)
_RELATIVE_LENGTHS = (1, 7, 300)


class Biases(NamedTuple):
    """What :func:`examine_biases` found, by qualified name: ``found`` maps a module to
    ``(record, replacement)`` or the reason it stays; ``already`` names the layers whose
    ``compute_bias`` is posenc's (swapped before)."""

    found: dict[str, tuple[Replaced, nn.Module] | str]
    already: frozenset[str]


def examine_biases(model: nn.Module) -> Biases:
    """One walk over ``model``'s modules (the root excluded) for the attention biases posenc
    knows."""
    found: dict[str, tuple[Replaced, nn.Module] | str] = {}
    already = []
    for name, module in model.named_modules():
        if not name:
            continue
        if bias_swapped(module):
            already.append(name)
            continue
        result = _examine_bias(module)
        if result is not None:
            found[name] = result
    return Biases(found, frozenset(already))


def _examine_bias(module: nn.Module) -> tuple[Replaced, nn.Module] | str | None:
    """``(record, replacement)``, the reason a bias stays, or None: not a bias posenc knows."""
    reason = built_by_function(module)
    if reason is not None:
        return reason
    if isinstance(getattr(module, "relative_attention_bias", None), nn.Embedding):
        return _examine_t5(module)
    if _relative_candidate(module):
        return _examine_relative(module)
    bank = _bank(module)
    if bank is not None:
        return _examine_logits(module, *bank)
    return None


# -- T5's buckets, a method of the attention ---------------------------------------------------


def _settings(module: Any, bidirectional: bool) -> tuple[bool, int, int]:
    return (
        bidirectional,
        int(module.relative_attention_num_buckets),
        int(module.relative_attention_max_distance),
    )


def posenc_bucket(
    self: Any,
    relative_position: torch.Tensor,
    bidirectional: bool | None = None,
    num_buckets: int | None = None,
    max_distance: int | None = None,
) -> torch.Tensor:
    """``_relative_position_bucket`` by posenc's T5 buckets (convention "transformers",
    :func:`posenc.torch.t5_buckets` without its host-side checks: the settings are the
    layer's, checked when it was swapped, and the positions come from the model), so that
    the model still compiles into one graph; the settings default to the layer's."""
    default = vars(self)["_posenc_bucket_settings"]
    return transformers_t5_buckets(
        relative_position.to(torch.int64),
        default[0] if bidirectional is None else bidirectional,
        default[1] if num_buckets is None else num_buckets,
        default[2] if max_distance is None else max_distance,
    )


def posenc_compute_bias(
    self: Any, query_length: int, key_length: int, device: Any = None, past_seen_tokens: Any = 0
) -> torch.Tensor:
    """T5's ``compute_bias``: ``(1, heads, q, k)`` from posenc's buckets and the layer's table."""
    table = self.relative_attention_bias
    device = table.weight.device if device is None else device
    query = torch.arange(query_length, dtype=torch.long, device=device)[:, None] + past_seen_tokens
    key = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
    values: torch.Tensor = table(posenc_bucket(self, key - query))
    return values.permute(2, 0, 1).unsqueeze(0)


def posenc_block_bias(self: Any, block_length: int) -> torch.Tensor:
    """LongT5's local ``compute_bias``: ``(1, 1, heads, block, 3·block)``."""
    table = self.relative_attention_bias
    device = table.weight.device if table.weight.device.type != "meta" else None
    key = torch.arange(3 * block_length, dtype=torch.long, device=device)
    query = key[block_length:-block_length]
    values: torch.Tensor = table(posenc_bucket(self, key[None, :] - query[:, None]))
    return values.permute(2, 0, 1).unsqueeze(0).unsqueeze(0)


def bias_swapped(module: nn.Module) -> bool:
    """Whether ``module``'s ``compute_bias`` is posenc's (a layer swapped before)."""
    method = vars(module).get("compute_bias")
    return getattr(method, "__func__", None) in (posenc_compute_bias, posenc_block_bias)


def _call_form(module: nn.Module) -> str | None:
    """``"t5"`` (query_length, key_length, device, past_seen_tokens), ``"block"``
    (block_length) or None."""
    method = getattr(module, "compute_bias", None)
    try:
        names = list(inspect.signature(method).parameters) if callable(method) else []
    except (TypeError, ValueError):
        return None
    if names[:2] == ["query_length", "key_length"]:
        return "t5"
    return "block" if names == ["block_length"] else None


def module_copy(module: nn.Module) -> nn.Module:
    """A module of the same class sharing parameters, buffers and submodules, with its own
    registries (binding methods on it leaves ``module`` as it was)."""
    new = copy.copy(module)
    for key, value in vars(module).items():
        if isinstance(value, dict):
            vars(new)[key] = copy.copy(value)
    return new


def _bind(module: nn.Module, form: str, bidirectional: bool) -> nn.Module:
    settings = _settings(module, bidirectional)
    zero = torch.zeros(1, dtype=torch.int64)  # checks the settings, once
    b, n, m = settings
    t5_buckets(zero, bidirectional=b, num_buckets=n, max_distance=m, convention="transformers")
    new = module_copy(module)
    vars(new)["_posenc_bucket_settings"] = settings
    compute = posenc_compute_bias if form == "t5" else posenc_block_bias
    vars(new)["compute_bias"] = types.MethodType(compute, new)
    vars(new)["_relative_position_bucket"] = types.MethodType(posenc_bucket, new)
    return new


def _same_bias(module: nn.Module, new: nn.Module, form: str) -> bool:
    probes: Any = _T5_PROBES if form == "t5" else _BLOCK_PROBES
    with torch.no_grad():
        for probe in probes:
            args, kwargs = (
                (probe[:2], {"past_seen_tokens": probe[2]}) if form == "t5" else ((probe,), {})
            )
            theirs = module.compute_bias(*args, **kwargs)  # type: ignore[operator]
            ours = new.compute_bias(*args, **kwargs)  # type: ignore[operator]
            if theirs.shape != ours.shape or not torch.equal(theirs, ours):
                return False
    return _same_buckets(module, new)


def _same_buckets(module: nn.Module, new: nn.Module) -> bool:
    """The layer's ``_relative_position_bucket`` (read by other methods too: LongT5's side
    bias) equals posenc's, with the layer's settings and, where it takes them, others."""
    original: Any = getattr(module, "_relative_position_bucket", None)
    if original is None:
        return True  # nothing else reads buckets
    ours: Any = new._relative_position_bucket
    rel = torch.arange(-3000, 3001)
    try:
        takes = "bidirectional" in inspect.signature(original).parameters
    except (TypeError, ValueError):
        return False
    if not takes:
        return torch.equal(original(rel), ours(rel))
    settings: Any = vars(new)["_posenc_bucket_settings"]
    for bidirectional in (True, False):
        kwargs = {"bidirectional": bidirectional, "num_buckets": settings[1],
                  "max_distance": settings[2]}  # fmt: skip
        if not torch.equal(original(rel, **kwargs), ours(rel, **kwargs)):
            return False
    return True


def _examine_t5(module: nn.Module) -> tuple[Replaced, nn.Module] | str | None:
    if getattr(module, "compute_bias", None) is None:
        return None
    form = _call_form(module)
    if form is None:
        return f"T5-style bias, compute_bias call not understood: {module.compute_bias}"
    if module.relative_attention_bias.weight.device.type == "meta":  # type: ignore[union-attr]
        return "T5-style bias on the meta device: nothing to verify it against"
    decoder = getattr(module, "is_decoder", None)
    candidates = [not decoder] if isinstance(decoder, bool) else []
    for bidirectional in [*candidates, True, False]:
        try:
            new = _bind(module, form, bidirectional)
            same = _same_bias(module, new, form)
        except (AttributeError, TypeError, ValueError, RuntimeError) as exc:
            return f"T5-style bias not reproduced: {type(exc).__name__}: {exc}"
        if same:
            return _t5_record(module, form, bidirectional), new
    return "T5-style bias differs from posenc's t5_buckets (convention 'transformers')"


def _t5_record(module: Any, form: str, bidirectional: bool) -> Replaced:
    direction = "bidirectional" if bidirectional else "causal"
    detail = (
        f"{direction}, {module.relative_attention_num_buckets} buckets, max distance "
        f"{module.relative_attention_max_distance}"
    )
    call = "compute_bias(q, k, past)" if form == "t5" else "compute_bias(block) (local)"
    if hasattr(module, "global_relative_attention_bias"):
        call += ", side bias buckets"
    layout = "t5 buckets ('transformers')"
    return Replaced("", "bias", layout, detail, f"{call} by posenc.torch.t5_buckets")


# -- Conformer relative sinusoid tables (modules) ------------------------------------------------


def _width(module: nn.Module) -> int | None:
    for name in ("d_model", "embed_dim", "hidden_size"):
        value = getattr(module, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    value = getattr(getattr(module, "config", None), "hidden_size", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _relative_candidate(module: nn.Module) -> bool:
    """Parameter-free, holding a floating buffer of its own (the table, or the frequencies),
    called with one argument: the form of the Conformer relative positional modules."""
    if next(module.parameters(), None) is not None:
        return False
    if not any(b.is_floating_point() for b in module.buffers(recurse=False)):
        return False
    return _single_argument(module)


def _single_argument(module: nn.Module) -> bool:
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return False
    required = [p for p in params if p.default is inspect.Parameter.empty and p.kind <= 2]
    return len(required) == 1


def _dtypes(module: nn.Module) -> list[torch.dtype]:
    """float32, and the dtype the module's buffers are in when it is another."""
    found = [b.dtype for b in module.buffers() if b.is_floating_point()]
    return list(dict.fromkeys([torch.float32, *found]))


def _output_form(result: Any, x: torch.Tensor, d: int) -> tuple[str, torch.Tensor] | None:
    if isinstance(result, tuple) and len(result) == 2:
        scaled, table = result
        if isinstance(scaled, torch.Tensor) and torch.equal(scaled, x * math.sqrt(d)):
            return "scaled", table
        return None
    if not isinstance(result, torch.Tensor) or result.dim() != 3:
        return None
    return ("shared" if result.shape[0] == 1 else "batched"), result


def _examine_relative(module: nn.Module) -> tuple[Replaced, nn.Module] | str | None:
    """A parameter-free module called ``module(x)`` returning the relative sinusoid table."""
    d = _width(module)
    if d is None or d < 2 or d % 2:
        return None
    modes = [(m, m.training) for m in module.modules()]
    module.eval()  # dropout off while probing
    try:
        found = _compare_relative(module, d)
    finally:
        for m, mode in modes:
            m.training = mode
    if isinstance(found, tuple):
        found[1].train(module.training)
    return found


def _compare_relative(module: nn.Module, d: int) -> tuple[Replaced, nn.Module] | str | None:
    forms = set()
    worst = 0.0
    dropout = getattr(getattr(module, "dropout", None), "p", 0.0)
    ours_module = RelativeSinusoidPositions(d, dropout=float(dropout))
    with probing(module) as call:
        for dtype in _dtypes(module):
            for length in _RELATIVE_LENGTHS:
                x = torch.linspace(-1, 1, 2 * length * d).reshape(2, length, d).to(dtype)
                try:
                    found = _output_form(call(x), x, d)
                except Exception:  # not this call: the module is not one of these tables
                    return None
                if found is None or found[1].shape[-2:] != (2 * length - 1, d):
                    return None
                form, theirs = found
                forms.add(form)
                ours = ours_module.table(length, dtype=dtype).expand_as(theirs)
                tolerance = torch.tensor(1e-6 + 2e-7 * length + torch.finfo(dtype).eps)
                difference = largest_difference(theirs, ours, tolerance)
                if not difference.ratio <= 1.0:
                    return (
                        "relative sinusoid table differs from posenc's by "
                        f"{difference.value:.3g} at {difference.at} (length {length}, {dtype})"
                    )
                worst = max(worst, difference.value)
    if len(forms) != 1:
        return None
    (form,) = forms
    new = RelativeSinusoidPositions(d, output=form, dropout=float(dropout))  # type: ignore[arg-type]
    detail = f"2L-1 rows, query - key, {form} (max difference {worst:.2g})"
    return Replaced("", "bias", "relative sinusoid (paper)", detail, type(new).__name__), new


# -- Inkling's relative logits (modules holding a bank of profiles) -----------------------------

# (query length, key length, query offset): the first positions, a decoding step, and keys
# past the extent on both sides
_LOGITS_PROBES = ((5, 5, 0), (1, 40, 39), (6, 30, 20))


def _bank(module: nn.Module) -> tuple[str, nn.Parameter, str] | None:
    """``(name, bank, form)`` of a relative-logits module: one 2-D parameter of its own, a
    call of three required arguments, and no submodules (``"states"``: Inkling's) or a
    ``linear`` and a ``norm`` (``"hidden"``: Inkling2-loop's)."""
    own = list(module.named_parameters(recurse=False))
    if len(own) != 1 or own[0][1].dim() != 2:
        return None
    params = forward_parameters(module)
    required = [p for p in params or () if p.default is inspect.Parameter.empty and p.kind <= 2]
    if len(required) != 3:
        return None
    children = dict(module.named_children())
    if not children:
        return own[0][0], own[0][1], "states"
    linear = children.get("linear")
    if set(children) == {"linear", "norm"} and isinstance(linear, nn.Linear):
        heads = getattr(module, "num_heads", None)
        return (own[0][0], own[0][1], "hidden") if isinstance(heads, int) else None
    return None


def _logits_inputs(
    module: nn.Module, bank: nn.Parameter, form: str, probe: tuple[int, int, int]
) -> tuple[Any, ...]:
    q, k, offset = probe
    generator = torch.Generator().manual_seed(q * 1000 + k)
    query, key = torch.arange(q) + offset, torch.arange(k)
    device, dtype = bank.device, bank.dtype
    if form == "states":
        heads = 3
        states = torch.randn(2, q, heads, bank.shape[0], generator=generator)
        return states.to(device, dtype), query.to(device), key.to(device)
    width = int(module.linear.in_features)  # type: ignore[union-attr, arg-type]
    hidden = torch.randn(2, q, width, generator=generator).to(device, dtype)
    distance = (query[:, None] - key[None, :]).to(device)
    return hidden, distance, query.expand(2, q).to(device)


def _examine_logits(
    module: nn.Module, name: str, bank: nn.Parameter, form: str
) -> tuple[Replaced, nn.Module] | str | None:
    if bank.device.type == "meta":
        return "relative logits on the meta device: nothing to verify them against"
    new: nn.Module
    new = (
        RelativeLogitsPositions(bank, name)
        if form == "states"
        else RelativeBiasPositions(module, bank, name)
    )
    with probing(module) as call:
        for probe in _LOGITS_PROBES:
            inputs = _logits_inputs(module, bank, form, probe)
            try:
                theirs = call(*inputs)
            except Exception:  # not this call: not a relative-logits module
                return None
            ours = new(*inputs)
            if not isinstance(theirs, torch.Tensor) or theirs.shape != ours.shape:
                return None
            if not torch.equal(theirs, ours):
                where = tuple(int(i) for i in (theirs != ours).nonzero()[0])
                return (
                    f"relative logits differ from posenc's relative_logits at {where} "
                    f"(query length {probe[0]}, key length {probe[1]}, offset {probe[2]})"
                )
    new.train(module.training)
    d_rel, extent = bank.shape
    call_form = "states, q, k" if form == "states" else "hidden, distance, position ids"
    detail = f"extent {extent}, d_rel {d_rel}, called ({call_form}), equal bit for bit"
    record = Replaced("", "bias", "relative logits (query - key)", detail, type(new).__name__)
    return record, new


# -- biases built by functions: reported ---------------------------------------------------------


def _heads(module: Any) -> str:
    heads = getattr(module, "num_heads", None)
    return str(heads) if isinstance(heads, int) else "heads"


def built_by_function(module: nn.Module) -> str | None:
    """The reason for a bias that a function builds (nothing to swap), naming the function
    and the posenc call that equals it; None for other modules."""
    prefix = "bias built by the function {}, not a module: equals {}"
    if callable(getattr(module, "build_alibi_tensor", None)):  # BLOOM
        call = (
            f"posenc.torch.alibi_bias({_heads(module)}, [L - 1], L, form='key', convention='bloom')"
        )
        return prefix.format("build_alibi_tensor", call) + " (no padding)"
    if callable(getattr(module, "build_mpt_alibi_tensor", None)):  # MPT
        length = getattr(getattr(module, "config", None), "max_seq_len", "L")
        last = length - 1 if isinstance(length, int) else "L - 1"
        call = (
            f"posenc.torch.alibi_bias({_heads(module)}, [{last}], {length}, form='relative', "
            "convention='mpt')"
        )
        return prefix.format("build_mpt_alibi_tensor", call)
    if getattr(module, "use_alibi", None) is True:  # Falcon
        heads = _heads(module)
        call = f"posenc.torch.alibi_bias({heads}, [L - 1], L, form='key', convention='falcon')"
        return prefix.format("build_alibi_tensor", call) + " (no padding)"
    if callable(getattr(module, "get_rel_pos", None)) and getattr(
        module, "relative_attention", False
    ):
        buckets = getattr(module, "position_buckets", -1)
        largest = getattr(module, "max_relative_positions", -1)
        call = "-posenc.relative_positions(q, k)"
        if isinstance(buckets, int) and buckets > 0 and isinstance(largest, int) and largest > 0:
            call = (
                f"posenc.torch.deberta_buckets({call}, bucket_size={buckets}, "
                f"max_position={largest}, convention='transformers')"
            )
        return prefix.format("build_relative_position", call)
    return None
