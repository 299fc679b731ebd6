"""A RoPE plan and an attention-bias plan as plain JSON data: what ``posenc plan --json``
prints (docs/reference/cli.md describes its fields) and what the explorer's plan panel shows."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["bias_dict", "plan_dict"]


def _plain(value: Any) -> Any:
    """``value`` with tuples as lists and NumPy numbers and arrays as Python ones."""
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _layer_dict(layer: Any, indices: list[int] | None) -> dict[str, Any]:
    scaling = layer.scaling
    return {
        "layer_type": layer.layer_type,
        "layers": indices,
        "uses_positions": layer.uses_positions,
        "rope_type": layer.rope_type,
        "base": layer.base,
        "scaling": None if scaling is None else _plain(dict(scaling.params)),
        "head_dim": layer.head_dim,
        "rotary_dim": layer.rotary_dim,
        "pairs": layer.pairs,
        "pairs_source": layer.pairs_source,
        "attention_factor": layer.attention_factor,
        "axes": list(layer.axes),
        "sections": list(layer.sections),
        "interleaved_sections": layer.interleaved_sections,
        "schedule": layer.schedule,
        "slot_order": list(layer.slot_order),
        "order": layer.order,
        "pairs_per_axis": layer.pairs_per_axis,
        "unsupported": layer.unsupported or None,
        "inert": {str(k): _plain(v) for k, v in layer.inert},
        "notes": list(layer.notes),
        "temperature": _temperature(layer.temperature),
        "frequencies": [float(w) for w in layer.frequencies],
    }


def _temperature(found: Any) -> dict[str, Any] | None:
    """The layer's attention temperature: its kind, parameters, what it scales, its source."""
    if found is None:
        return None
    return {
        "kind": found.kind,
        "params": {k: v for k, v in found.params},
        "scales": found.scales,
        "source": found.source,
    }


def plan_dict(plan: Any, layer_type: str | None = None) -> dict[str, Any]:
    """The plan as plain JSON data: one entry in ``"kinds"`` per distinct layer kind.

    Linear in the number of layers: layers are bucketed by layer type and head size (layers in
    different buckets never share a row), and each row's notes are an ordered set.
    """
    groups: list[tuple[Any, list[int] | None, dict[str, None]]] = []
    if plan.layers:
        buckets: dict[tuple[str, int], list[int]] = {}  # (layer_type, head_dim) -> groups
        for i, layer in enumerate(plan.layers):
            bucket = buckets.setdefault((layer.layer_type, layer.head_dim), [])
            for g in bucket:
                kind, indices, notes = groups[g]
                if _same_kind(kind, layer) and indices is not None:
                    indices.append(i)
                    notes.update(dict.fromkeys(layer.notes))
                    break
            else:
                bucket.append(len(groups))
                groups.append((layer, [i], dict.fromkeys(layer.notes)))
    else:  # the config does not say which layer uses which set
        groups = [(kind, None, dict.fromkeys(kind.notes)) for kind in plan.kinds.values()]
    if layer_type is not None:
        groups = [g for g in groups if g[0].layer_type == layer_type]
    return {
        "model_type": plan.model_type,
        "source": plan.source,
        "num_layers": len(plan.layers),
        "kinds": [
            _layer_dict(kind, indices) | {"notes": list(notes)} for kind, indices, notes in groups
        ],
        "notes": list(plan.notes),
    }


def bias_dict(plan: Any) -> dict[str, Any]:
    """The attention bias of :func:`posenc._bias.config.bias_plan` as plain JSON data: one
    entry in ``"kinds"`` per run of equal layers of a stack."""
    kinds: list[dict[str, Any]] = []
    for stack, index, layer in plan.layers:
        if kinds and kinds[-1]["stack"] == stack and kinds[-1]["_layer"] == layer:
            kinds[-1]["layers"].append(index)
            continue
        kinds.append(
            {
                "_layer": layer,
                "stack": stack,
                "layers": [index],
                "kind": layer.kind,
                "heads": layer.heads,
                "direction": layer.direction,
                "slope_rule": layer.slope_rule,
                "max_bias": layer.max_bias,
                "form": layer.form,
                "slopes": None if layer.kind != "alibi" else _plain(layer.slopes()),
                "num_buckets": layer.num_buckets,
                "max_distance": layer.max_distance,
                "shared_table": layer.shared_table,
                "notes": list(layer.notes),
            }
        )
    for kind in kinds:
        del kind["_layer"]
    return {"source": plan.source, "kinds": kinds, "notes": list(plan.notes)}


def _same_kind(a: Any, b: Any) -> bool:
    """Whether two layers go in one row: equal, or both without RoPE (their notes, which name
    the layer, are merged)."""
    if a.uses_positions or b.uses_positions:
        return bool(a == b)
    return bool(a.layer_type == b.layer_type and a.head_dim == b.head_dim)
