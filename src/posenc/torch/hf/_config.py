"""The one place the swap reads the rope settings of a config.

:func:`rope_module` turns a ``transformers`` config (and, for models whose rotary module is
called per layer type, that layer type) into the posenc module that computes its RoPE
frequencies in float64, through :func:`posenc.rope_plan`: ``LlamaRotary.from_config`` for
1-D RoPE, ``MultiAxisRotary.from_config`` for layers with several position axes (M-RoPE);
nothing else in the swap reads a config's rope settings. The swap replaces modules that
return tables, so it reads the plan of the tables (``table_plan``): a model whose tables are
posenc's but whose rotation rope_plan refuses (NanoChat's by -θ, which stays in the model's
attention, untouched) is swapped.
"""

from __future__ import annotations

from typing import Any

from ..._rope.plan import table_plan
from ._multi_axis import MultiAxisRotary
from ._rotary import LlamaRotary

__all__ = ["layer_types", "rope_module"]


class _LayerView:
    """``config`` as seen by one layer type: its per-layer config and rope parameters."""

    def __init__(self, config: Any, layer_type: str) -> None:
        try:  # a config may hold one config per layer type
            self._config = config.per_layer_config[layer_type]
        except Exception:  # none, or none for this layer type: the config itself
            self._config = config
        params = getattr(self._config, "rope_parameters", None) or {}
        self.rope_parameters = params.get(layer_type, params) if _nested(params) else params

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, name)


def _nested(params: Any) -> bool:
    return isinstance(params, dict) and any(isinstance(v, dict) for v in params.values())


def layer_types(config: Any) -> list[str]:
    """The layer types a rotary module of ``config`` may be called with: the config's
    ``layer_types`` and the keys of per-layer-type ``rope_parameters``."""
    params = getattr(config, "rope_parameters", None)
    items = params.items() if isinstance(params, dict) else ()
    nested = [k for k, v in items if isinstance(v, dict)]
    return sorted({str(t) for t in [*(getattr(config, "layer_types", None) or ()), *nested]})


def _from_config(config: Any, layer_type: str | None) -> Any:
    """``LlamaRotary``, or ``MultiAxisRotary`` where the plan gives the layer several axes:
    the plan is read once, and its frequencies are the module's."""
    layer = table_plan(config).layer(layer_type)
    if layer.uses_positions and layer.multi_axis:
        return MultiAxisRotary._from_layer(layer)
    return LlamaRotary._from_layer(layer)


def rope_module(config: Any, layer_type: str | None = None) -> Any:
    """The :class:`posenc.torch.hf.LlamaRotary` (1-D) or
    :class:`posenc.torch.hf.MultiAxisRotary` (several position axes) of ``config`` (for
    ``layer_type``).

    Raises ``ValueError``/``TypeError`` saying what in the config posenc cannot read (an
    unknown rope type, nested per-layer parameters without a layer type, missing keys).
    """
    if layer_type is not None:
        try:  # the plan reads per-layer-type parameters and layer_types itself
            return _from_config(config, layer_type)
        except ValueError:  # a config with one config per layer type (per_layer_config)
            config = _LayerView(config, layer_type)
    elif _nested(getattr(config, "rope_parameters", None)):
        raise ValueError(
            "config.rope_parameters holds one entry per layer type "
            f"({sorted(config.rope_parameters)}), and the module is not called with one"
        )
    return _from_config(config, None)
