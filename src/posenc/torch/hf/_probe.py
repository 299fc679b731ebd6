"""Calling a module to verify it, without leaving a trace; reading its call; comparing what
it returned."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

__all__ = [
    "forward_parameters",
    "probing",
    "rotary_call",
    "signature_text",
]


def forward_parameters(module: nn.Module) -> list[inspect.Parameter] | None:
    """The parameters of ``module.forward`` (``None`` when they cannot be read)."""
    try:
        return list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return None


def signature_text(module: nn.Module) -> str:
    """``forward(a, b=0)``, for reasons given in the report."""
    try:
        return f"forward{inspect.signature(module.forward)}"
    except (TypeError, ValueError):
        return "forward(?)"


@contextmanager
def probing(module: nn.Module) -> Iterator[Callable[..., Any]]:
    """A caller of ``module`` under ``torch.no_grad()`` that restores the module's buffers and
    plain attributes afterwards (some modules grow a table or change frequencies when called
    with far positions)."""
    state = {k: v for k, v in vars(module).items() if k not in ("_buffers", "_parameters")}
    buffers = dict(module._buffers)
    parameters = dict(module._parameters)
    try:
        with torch.no_grad():
            yield module
    finally:
        for key in [k for k in vars(module) if k not in state and not k.startswith("_")]:
            delattr(module, key)
        vars(module).update(state)
        module._buffers.clear()
        module._buffers.update(buffers)
        module._parameters.clear()
        module._parameters.update(parameters)


def rotary_call(module: nn.Module) -> bool | str:
    """Whether ``module`` is called with a layer type, or why its call is not understood.

    Understood: ``forward(x, position_ids)`` and ``forward(x, position_ids, layer_type)``
    (other parameters must have defaults).
    """
    params = forward_parameters(module)
    names = [p.name for p in params or ()]
    if len(names) < 2 or names[1] != "position_ids":
        return f"call signature not understood: {signature_text(module)}"
    required = [
        p.name for p in params or () if p.default is inspect.Parameter.empty and p.kind <= 2
    ]
    if any(name not in (names[0], "position_ids", "layer_type") for name in required):
        return f"call signature not understood: {signature_text(module)}"
    return "layer_type" in names[2:3]
