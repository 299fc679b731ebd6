"""Walk a model, recognise its positional modules by what they compute, replace them."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch
from torch import nn

from ._absolute import examine_table, table_of
from ._report import Left, Replaced, SwapReport
from ._rotary import examine_rotary, rotary_call

__all__ = ["swap"]

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


def _examine(child_name: str, module: nn.Module) -> tuple[Replaced, nn.Module] | str | None:
    """``(record, replacement)``, the reason it stays, or None for a non-positional module."""
    parameter_free = next(module.parameters(), None) is None
    if parameter_free and not isinstance(rotary_call(module), str):
        found = examine_rotary(module)
        if isinstance(found, str):  # reported when it looks positional or returned RoPE tables
            rope_like = "differs from posenc's" in found or "pairs)" in found
            return found if rope_like or _looks_positional(child_name, module) else None
        new = found.replacement()
        _carry_attributes(module, new)
        record = Replaced("", "rotary", found.layout, found.detail(), type(new).__name__)
        return record, new
    if table_of(module) is not None:
        table: tuple[Replaced, nn.Module] | str | None = examine_table(
            module, looks_positional=_looks_positional(child_name, module)
        )
        return table
    container = type(module).forward is nn.Module.forward  # ModuleList, ModuleDict
    if not _looks_positional(child_name, module) or container:
        return None
    if parameter_free:
        return str(rotary_call(module))  # the reason its call is not understood
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


def swap(model: nn.Module, strict: bool) -> SwapReport:
    """See :func:`posenc.torch.hf.swap_positions`."""
    plan: list[tuple[nn.Module, str, nn.Module]] = []
    replaced: list[Replaced] = []
    left: list[Left] = []
    already: list[str] = []
    skip: list[str] = []
    for parent_name, parent in model.named_modules():
        if any(parent_name == s or parent_name.startswith(s + ".") for s in skip):
            continue
        for child_name, child in parent.named_children():
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            if _is_posenc(child):
                already.append(name)
                skip.append(name)
                continue
            found: Any = _examine(child_name, child)
            if isinstance(found, str):
                left.append(Left(name, found))
            elif found is not None:
                record, new = found
                replaced.append(dataclasses.replace(record, name=name))
                plan.append((parent, child_name, new))
                skip.append(name)
    report = SwapReport(tuple(replaced), tuple(left), tuple(already))
    if strict and left:
        raise ValueError(f"swap_positions(strict=True) left positional modules in place:\n{report}")
    for parent, child_name, new in plan:
        setattr(parent, child_name, new)
    return report
