"""Walk a model, recognise its positional modules by what they compute, replace them."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch
from torch import nn

from ..._checks import check_bool
from ._examine_rotary import examine_rotary
from ._examine_tables import examine_computed, examine_table, rotary_of_table
from ._probe import rotary_call
from ._report import Left, Replaced, SwapReport
from ._swap_bias import examine_biases
from ._swap_temperature import examine_temperatures, temperature_swapped
from ._timestamps import examine_timestamps
from ._version import check_transformers

__all__ = ["swap_positions"]

# Names that make a module look positional, for the report only (what is replaced is decided
# by what a module computes, never by a name).
_ATTRIBUTE = re.compile(r"(^|_)(pos|positions?|positional|rotary|rope|sinusoidal)(_|$)|^wpe$")
_CLASS = re.compile(r"Position|Rotary|Rope[A-Z]|RoPE|Sinusoid")


def _looks_positional(child_name: str, module: nn.Module) -> bool:
    return bool(_ATTRIBUTE.search(child_name.lower()) or _CLASS.search(type(module).__name__))


def _is_posenc(module: nn.Module) -> bool:
    return type(module).__module__.startswith("posenc.")


def _carry_attributes(old: nn.Module, new: nn.Module) -> None:
    """Give ``new`` the plain public attributes of ``old`` that it lacks: models read some from
    their rotary module (``config``, ``layer_types``...)."""
    for key, value in vars(old).items():
        if key.startswith("_") or value is None or hasattr(new, key):
            continue
        if not isinstance(value, torch.Tensor | nn.Module):
            setattr(new, key, value)


def table_of(module: nn.Module) -> tuple[str, torch.Tensor] | None:
    """The module's own 2-D floating tensor (a parameter, a buffer, or a plain tensor
    attribute as TrOCR's sinusoidal ``weights``), if it has one."""
    own = [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]
    own += [(k, v) for k, v in vars(module).items() if type(v) is torch.Tensor]
    for name, tensor in own:
        if tensor.dim() == 2 and tensor.is_floating_point() and min(tensor.shape) >= 2:
            return name, tensor
    return None


def _looks_like_a_table(table: torch.Tensor) -> bool:
    """Cheap: values within [-1, 1] and row 0 made of zeros and ones (or all zero)."""
    first = table[0].detach().double()
    ones_and_zeros = bool(((first.abs() < 1e-6) | ((first - 1).abs() < 1e-6)).all())
    return ones_and_zeros and float(table.detach().abs().max()) <= 1.0 + 1e-3


def _table(module: nn.Module, positional: bool) -> tuple[str, torch.Tensor, bool, bool] | None:
    """``(attribute, table, trainable, tabular)`` of a module worth examining as a sinusoidal
    table, or None: no 2-D table, or a weight matrix that neither looks positional nor holds
    values a sinusoidal table can have."""
    found = table_of(module)
    if found is None:
        return None
    attribute, table = found
    trainable = isinstance(table, nn.Parameter) and table.requires_grad
    if not positional and trainable:
        return None  # a weight matrix
    tabular = _looks_like_a_table(table)
    return (attribute, table, trainable, tabular) if positional or tabular else None


def _examine(child_name: str, module: nn.Module) -> tuple[Replaced, nn.Module] | str | None:
    """``(record, replacement)``, the reason it stays, or None for a non-positional module."""
    positional = _looks_positional(child_name, module)
    parameter_free = next(module.parameters(), None) is None
    timed = examine_timestamps(module) if parameter_free else None
    if timed is not None:  # called forward(timestamps, seq_len): angles from times
        return timed
    call = rotary_call(module) if parameter_free else None
    if parameter_free and not isinstance(call, str):
        own = table_of(module)  # a fixed [sin | cos] table it reads its RoPE tables from
        given, rows = rotary_of_table(own[1]) if own is not None else (None, None)
        found = examine_rotary(module, bool(call), given, rows)
        if isinstance(found, str):  # reported when it looks positional or returned RoPE tables
            rope_like = "differs from posenc's" in found or "pairs)" in found
            return found if rope_like or positional else None
        new = found.replacement()
        _carry_attributes(module, new)
        record = Replaced("", "rotary", found.layout, found.detail(), type(new).__name__)
        return record, new
    if table_of(module) is not None:
        candidate = _table(module, positional)
        if candidate is None:
            return None
        attribute, table, trainable, tabular = candidate
        examined: tuple[Replaced, nn.Module] | str | None = examine_table(
            module, attribute, table, trainable=trainable, tabular=tabular
        )
        return examined
    container = type(module).forward is nn.Module.forward  # ModuleList, ModuleDict
    if not positional or container:
        return None
    if parameter_free:  # a table computed on the fly, or the reason its call is not understood
        computed: tuple[Replaced, nn.Module] | str | None = examine_computed(module)
        return str(call) if computed is None else computed
    return _learned(module)


def _learned(module: nn.Module) -> str | None:
    """The reason a positional module made of trainable parameters (no single table: factors
    in a ParameterList, as Reformer's axial embeddings) stays; None when it holds other
    modules, which are examined on their own."""
    lists = nn.ParameterList | nn.ParameterDict
    if any(not isinstance(child, lists) for child in module.children()):
        return None
    names = ", ".join(repr(n) for n, p in module.named_parameters() if p.requires_grad)
    if not names:
        return None
    return f"learned table (trainable parameters {names}, not a sinusoidal table)"


def _shares_children(old: nn.Module, new: nn.Module) -> bool:
    """Whether ``new`` holds ``old``'s submodules themselves (a replacement keeping the
    model's projections: what is swapped below them is swapped in both)."""
    mine = [id(m) for m in old.children()]
    return bool(mine) and sorted(mine) == sorted(id(m) for m in new.children())


def _swap(model: nn.Module, strict: bool) -> SwapReport:
    """See :func:`swap_positions`."""
    plan: list[tuple[nn.Module, str, nn.Module]] = []
    replaced: list[Replaced] = []
    left: list[Left] = []
    already: list[str] = []
    skip: list[str] = []
    biases = examine_biases(model)  # attention biases, one walk (see _swap_bias)
    temperatures = examine_temperatures(model)  # attention layers (see _swap_temperature)
    for parent_name, parent in model.named_modules():
        if any(parent_name == s or parent_name.startswith(s + ".") for s in skip):
            continue
        for child_name, child in parent.named_children():
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            if _is_posenc(child) or name in biases.already or temperature_swapped(child):
                already.append(name)
                skip.append(name)
                continue
            found: Any = (
                biases.found.get(name) or temperatures.get(name) or _examine(child_name, child)
            )
            if isinstance(found, str):
                left.append(Left(name, found))
            elif found is not None:
                record, new = found
                replaced.append(dataclasses.replace(record, name=name))
                plan.append((parent, child_name, new))
                if isinstance(new, type(child)) or not _shares_children(child, new):
                    skip.append(name)  # else its children, the replacement's, are examined
    report = SwapReport(tuple(replaced), tuple(left), tuple(already))
    if strict and left:
        raise ValueError(f"swap_positions(strict=True) left positional modules in place:\n{report}")
    for parent, child_name, new in plan:
        setattr(parent, child_name, new)
    return report


def swap_positions(model: nn.Module, *, strict: bool = False) -> SwapReport:
    """Replace, in place, every positional module of ``model`` that posenc reproduces.

    Modules are found by what they compute, never by their class name (``transformers`` is
    never imported). Each candidate is called on probe inputs (the first 256 positions and
    some far ones, in two batch rows that differ, compared row by row) and compared with
    posenc's float64 table before anything is replaced; rotary modules are called with a
    float32, a bfloat16 and a float16 ``x`` and must match in each: within a float32 build's
    error, and in 16 bits within one more unit in the last place of their output dtype (a
    module that computes its angles in ``x.dtype`` is left, the report names the dtype):

    - rotary modules, called ``module(x, position_ids)`` or ``module(x, position_ids,
      layer_type)``, returning ``(cos, sin)`` in the ``half`` layout (→ :class:`LlamaRotary`),
      with interleaved pairs or one column per pair (``(cos, sin)``, or ``(sin, cos)`` as
      GPT-J's and CodeGen's from transformers 5.24 on), or complex phasors (``freqs_cis``); the
      frequencies come from the module's config (every rope type of :class:`posenc.RopeScaling`,
      partial rotation, per-layer-type parameters), from its ``dim`` and ``base``, or from the
      fixed ``[sin | cos]`` table it reads (probed within that table's rows);
    - rotary time embeddings, called ``module(timestamps, seq_len)`` with the frames' times
      in seconds (MusicFlamingo's; → :class:`TimestampRotary`), from the module's config,
      probed on several windows of float32 timestamps;
    - multi-axis rotary modules (M-RoPE), called ``module(x, position_ids)`` with ids
      ``(n_axes, b, s)`` (language models: Qwen2-VL, Qwen3-VL, ...) or ``(N, n_axes)``
      (vision towers: Qwen2-VL's, Pixtral's) (→ :class:`MultiAxisRotary`); the sections and
      their order come from the config's rope plan and are verified on ids that differ
      between the axes;
    - fixed sinusoidal tables (a buffer, a parameter that is not trained, or a plain tensor
      attribute as TrOCR's) in the ``marian``, ``tensor2tensor``, ``musicgen`` or ``paper``
      convention, or Marian's with the halves swapped, read by shape (→
      :class:`MarianPositions`), by fairseq numbering of token ids (→
      :class:`M2M100Positions`), at the given positions (→ :class:`WhisperEncoderPositions`)
      or by the input's length (MusicGen's ``(b, codebooks, s)`` ids, MusicGen-Melody's
      ``(b, s, d)`` embeddings);
    - attention biases: T5's ``compute_bias`` and the positional part of Inkling's relative
      logits (which distance each pair reads; the model's bank and projections stay), both
      verified bit for bit, and the relative sinusoid tables of Conformer speech encoders;
    - attention temperature, where the config's rope plan gives a layer one: Ministral 3's
      and Mistral 4's ``get_llama_4_attn_scale`` (bound to posenc's in the layer's own
      ``forward``), Llama 4's scale on its layers without RoPE (its switch off, the queries
      scaled by posenc's where they reach the attention function), Ergo's ``qk_scale`` and
      Inkling2-loop's log-scaling modules; verified against the model's scale on probes up to
      2**20 (4 float32 ulps), the report naming the position where they differ.

    A replacement returns what the module returned, in the same form, dtype and device; it
    never calls the module. Modules that look positional (by name, or by their call) but
    are not reproduced stay, and the report says why.

    The calls above are those of transformers ``>=5.23,<6`` (the ``hf`` extra; 5.24 renamed
    the cache length ``past_key_values_length`` to ``cache_length``, and both are taken). A
    model holding modules of an installed transformers outside that range (4.x, say) is
    refused with ``RuntimeError``, naming the installed and the supported versions.

    Args:
        model: any ``nn.Module``, e.g. a ``LlamaForCausalLM`` or a ``MarianMTModel``.
        strict: raise ``ValueError`` listing the modules left in place (the model is then
            unchanged) instead of reporting them.

    Raises:
        RuntimeError: ``model`` holds transformers modules and the installed transformers is
            outside ``>=5.23,<6``; nothing is replaced.

    Returns:
        a :class:`SwapReport`: ``replaced`` (name, kind, layout, detail, replacement),
        ``left`` (name, reason) and ``names`` (the replaced modules' names).

    >>> print(swap_positions(nn.Linear(2, 2)))
    SwapReport: no positional module found
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    strict = check_bool("strict", strict)
    check_transformers(model)
    return _swap(model, strict)
