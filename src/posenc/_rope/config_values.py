"""The values a model config gives, checked where they are read: one rule per key.

Every value :func:`posenc.rope_plan` reads from a config (``config.json`` or a
``transformers`` config object) goes through :func:`value` (top-level keys, :data:`TOP_KEYS`)
or one of the checks below (keys inside ``rope_parameters`` that are not scaling parameters:
``rope_theta``, ``mrope_section``, ``mrope_interleaved``). A check refuses what a config
cannot mean, with an error naming the key, the value and what is allowed:

- integers are ``int`` (a NumPy integer too) or a float with an integral value, read as that
  integer (transformers writes some so: ``MusicFlamingoConfig().max_position_embeddings``
  is ``1200.0``), never a bool, a float with a fraction (``8.5``), NaN, infinity or a string
  (``"8"``), and lie in their range;
- numbers are real, never a bool or a string, finite, and in their range;
- lists are lists (a string or a dict is not a list of sections or of layer types) of values
  that pass the element's check.

Wrong types raise ``TypeError``, values out of range ``ValueError``.

Per-layer settings come in three schemas, each read here: parameter sets nested by layer type
(``None`` for a type without RoPE) and sets keyed by another label (DeepSeek-V4's ``main`` and
``compress``), both by :func:`parameter_sets` and :func:`layer_labels`; and per-layer lists
(``layer_rope_theta``: :func:`layer_bases`; ``no_rope_layers``: :func:`integers`), whose
length must be ``num_hidden_layers``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from .._checks import MAX_EXACT_POSITION, _show, as_float

__all__ = [
    "COMPRESS_RATIO_BLOCKS",
    "MAX_CHANNELS",
    "MAX_LAYERS",
    "TOP_KEYS",
    "base",
    "boolean",
    "integer",
    "integers",
    "layer_bases",
    "layer_labels",
    "parameter_sets",
    "strings",
    "value",
]

#: The most layers a config may declare (real models have a few hundred at most): a plan holds
#: one entry per layer, so a config claiming billions is refused rather than built.
MAX_LAYERS = 1 << 16

#: The most channels a size key may give (hidden sizes of real models are below 2**17).
MAX_CHANNELS = 1 << 24


def _name(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def integer(
    where: str, name: str, value: Any, minimum: int = 1, maximum: int = MAX_CHANNELS
) -> int:
    """An integer in ``[minimum, maximum]``: an int, or a float with an integral value (read
    as that int); not a bool, a fraction, NaN, infinity or a string."""
    allowed = f"an integer in [{minimum}, {maximum}]"
    real = isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)
    if real and math.isfinite(value) and float(value).is_integer():
        value = int(value)  # 1200.0, as transformers writes some integer fields
    # JSON and config objects hold Python ints (NumPy's integers register as Integral too;
    # NumPy's bool does not): the test stays here, read once per key
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(
            f"{_name(where, name)} must be {allowed}, got {_show(value)} ({type(value).__name__})"
        )
    if not minimum <= int(value) <= maximum:
        raise ValueError(f"{_name(where, name)} must be {allowed}, got {_show(value)}")
    return int(value)


def _number(where: str, name: str, value: Any, allowed: str) -> float:
    result = as_float(_name(where, name), value, allowed)
    if not math.isfinite(result):
        raise ValueError(f"{_name(where, name)} must be {allowed}, got {result!r}")
    return result


def base(where: str, name: str, value: Any) -> float:
    """A wavelength base (``rope_theta``): a finite number > 0."""
    result = _number(where, name, value, "a positive finite number")
    if result <= 0.0:
        raise ValueError(f"{_name(where, name)} must be a positive finite number, got {result!r}")
    return result


def fraction(where: str, name: str, value: Any) -> float:
    """A number in (0, 1] (the rotated fraction of a head)."""
    result = _number(where, name, value, "a number in (0, 1]")
    if not 0.0 < result <= 1.0:
        raise ValueError(f"{_name(where, name)} must be a number in (0, 1], got {result!r}")
    return result


def boolean(where: str, name: str, value: Any) -> bool:
    """True or False (not 0/1, not a string)."""
    if not isinstance(value, bool):
        raise TypeError(f"{_name(where, name)} must be true or false, got {_show(value)}")
    return value


def _list(where: str, name: str, value: Any, allowed: str) -> list[Any]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, list | tuple):
        raise TypeError(
            f"{_name(where, name)} must be {allowed}, got {_show(value)} ({type(value).__name__})"
        )
    return list(value)


def _length(where: str, name: str, items: list[Any], length: int | None, per: str) -> None:
    if length is not None and len(items) != length:
        raise ValueError(
            f"{_name(where, name)} has {len(items)} entries but "
            f"{_name(where, 'num_hidden_layers')} is {length}: one {per} per layer"
        )


def integers(
    where: str,
    name: str,
    value: Any,
    *,
    minimum: int = 0,
    maximum: int = MAX_CHANNELS,
    length: int | None = None,
    per: str = "entry",
) -> tuple[int, ...]:
    """A non-empty list of integers in ``[minimum, maximum]`` (``length`` of them if given)."""
    allowed = f"a list of integers in [{minimum}, {maximum}]"
    items = _list(where, name, value, allowed)
    if not items:
        raise ValueError(f"{_name(where, name)} must be a non-empty {allowed[2:]}, got []")
    checked = tuple(
        integer(where, f"{name}[{i}]", v, minimum, maximum) for i, v in enumerate(items)
    )
    _length(where, name, items, length, per)
    return checked


def strings(where: str, name: str, value: Any, length: int | None = None) -> tuple[str, ...]:
    """A list of strings (one per layer: ``length`` of them if given)."""
    items = _list(where, name, value, "a list of strings, one per layer")
    if len(items) > MAX_LAYERS:  # before anything prints or walks them
        raise ValueError(
            f"{_name(where, name)} has {len(items)} entries, more than the {MAX_LAYERS} "
            "layers a config may declare"
        )
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{_name(where, name)}[{i}] must be a string, got {_show(item)}")
    _length(where, name, items, length, "layer type")
    return tuple(items)


def text(where: str, name: str, value: Any) -> str:
    """A string."""
    if not isinstance(value, str):
        raise TypeError(f"{_name(where, name)} must be a string, got {_show(value)}")
    return value


def _mapping(where: str, name: str, value: Any) -> Any:
    if not isinstance(value, Mapping) and hasattr(value, "to_dict"):
        return value  # a live sub-config of a config object: its to_dict() form is read
    if not isinstance(value, Mapping):
        raise TypeError(f"{_name(where, name)} must be an object (a dict), got {_show(value)}")
    return value


def _positive(where: str, name: str, value: Any) -> int:
    return integer(where, name, value)


def _even(where: str, name: str, value: Any) -> int:
    result = integer(where, name, value, 2)
    if result % 2:
        raise ValueError(
            f"{_name(where, name)} must be even (RoPE rotates pairs of channels), got {result}"
        )
    return result


def _length_key(where: str, name: str, value: Any) -> int:
    return integer(where, name, value, 1, MAX_EXACT_POSITION)


def _layers(where: str, name: str, value: Any) -> int:
    return integer(where, name, value, 0, MAX_LAYERS)


def _layer_interval(where: str, name: str, value: Any) -> int:
    return integer(where, name, value, 1, MAX_LAYERS)


def _sections(where: str, name: str, value: Any) -> tuple[int, ...]:
    return integers(where, name, value)


def layer_bases(where: str, name: str, value: Any, length: int | None = None) -> tuple[float, ...]:
    """One base per layer (``layer_rope_theta``): finite numbers >= 0, 0 for a layer without
    RoPE (``length`` of them if given)."""
    items = _list(where, name, value, "a list of numbers, one base per layer (0: no RoPE)")
    if len(items) > MAX_LAYERS:
        raise ValueError(
            f"{_name(where, name)} has {len(items)} entries, more than the {MAX_LAYERS} "
            "layers a config may declare"
        )
    bases = []
    for i, item in enumerate(items):
        found = _number(where, f"{name}[{i}]", item, "a finite number >= 0 (0: no RoPE)")
        if found < 0.0:
            raise ValueError(
                f"{_name(where, f'{name}[{i}]')} must be a finite number >= 0 (0: no RoPE), "
                f"got {found!r}"
            )
        bases.append(found)
    _length(where, name, items, length, "base")
    return tuple(bases)


def parameter_sets(where: str, name: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """Rope parameters nested by label: each label a string, each set a dict of parameters or
    None (no RoPE in the layers of that label). A copy, each set a plain dict."""
    if len(value) > MAX_LAYERS:
        raise ValueError(
            f"{_name(where, name)} has {len(value)} parameter sets, more than the {MAX_LAYERS} "
            "layers a config may declare"
        )
    sets: dict[str, Any] = {}
    for label, found in value.items():
        if not isinstance(label, str):
            raise TypeError(
                f"{_name(where, name)} is nested by layer type: its keys must be strings, got "
                f"{_show(label)} ({type(label).__name__})"
            )
        if found is not None and not isinstance(found, Mapping):
            raise TypeError(
                f"{_name(where, name)}[{label!r}] must be a dict of rope parameters or None "
                f"(no RoPE in {label!r} layers), got {_show(found)} ({type(found).__name__})"
            )
        sets[label] = None if found is None else dict(found)
    return sets


def layer_labels(
    where: str,
    name: str,
    layer_types: tuple[str, ...],
    sets: Mapping[str, Any],
    relabel: Mapping[str, str],
    no_set: frozenset[str],
) -> tuple[str, ...]:
    """The parameter set of each layer: its layer type, or the label ``relabel`` gives it
    (DeepSeek-V4: ``sliding_attention`` -> ``main``); a type in ``no_set`` (not attention)
    needs none. A layer whose type names no set is refused, naming the layer and the sets."""
    labels = []
    for i, kind in enumerate(layer_types):
        label = kind if kind in sets else relabel.get(kind, kind)
        if label not in sets and kind not in no_set:
            via = f" (read as {label!r})" if label != kind else ""
            raise ValueError(
                f"{_name(where, 'layer_types')}[{i}] = {kind!r}{via} names no parameter set of "
                f"{_name(where, name)}, which has {sorted(sets)}: give one for it, or None "
                "for no RoPE"
            )
        labels.append(label)
    return tuple(labels)


#: DeepSeek-V4's attention block for each entry of its config.json's ``compress_ratios``.
COMPRESS_RATIO_BLOCKS: Mapping[int, str] = MappingProxyType(
    {
        0: "sliding_attention",
        4: "compressed_sparse_attention",
        128: "heavily_compressed_attention",
    }
)


def _compress_ratios(where: str, name: str, value: Any) -> tuple[int, ...]:
    """DeepSeek-V4's per-layer compression ratios, each one of :data:`COMPRESS_RATIO_BLOCKS`."""
    ratios = integers(where, name, value, maximum=MAX_LAYERS, per="compression ratio")
    if len(ratios) > MAX_LAYERS:
        raise ValueError(
            f"{_name(where, name)} has {len(ratios)} entries, more than the {MAX_LAYERS} "
            "layers a config may declare"
        )
    for i, ratio in enumerate(ratios):
        if ratio not in COMPRESS_RATIO_BLOCKS:
            raise ValueError(
                f"{_name(where, name)}[{i}] must be one of {tuple(COMPRESS_RATIO_BLOCKS)} "
                f"(sliding, compressed sparse, heavily compressed attention), got {ratio}"
            )
    return ratios


Check = Callable[[str, str, Any], Any]

#: Every top-level key :func:`posenc.rope_plan` reads, with its check.
TOP_KEYS: Mapping[str, Check] = MappingProxyType(
    {
        "model_type": text,
        "head_dim": _positive,
        "hidden_size": _positive,
        "num_attention_heads": _positive,
        "embed_dim": _positive,
        "num_heads": _positive,
        "global_head_dim": _positive,
        "qk_rope_head_dim": _even,
        "rotary_dim": _positive,
        "memory_attention_hidden_size": _positive,
        "memory_attention_downsample_rate": _positive,
        "memory_attention_num_attention_heads": _positive,
        "num_hidden_layers": _layers,
        "sliding_window_pattern": _layer_interval,
        "global_attn_every_n_layers": _layer_interval,
        "no_rope_layer_interval": _layer_interval,
        "max_position_embeddings": _length_key,
        "original_max_position_embeddings": _length_key,
        "rope_theta": base,
        "compress_rope_theta": base,
        "compress_ratios": _compress_ratios,
        "layer_rope_theta": layer_bases,
        "rotary_emb_base": base,
        "rope_local_base_freq": base,
        "local_rope_theta": base,
        "global_rope_theta": base,
        "partial_rotary_factor": fraction,
        "rotary_pct": fraction,
        "mrope_section": _sections,
        "mrope_interleaved": boolean,
        "rope_parameters": _mapping,
        "rope_scaling": _mapping,
        "per_layer_config": _mapping,
    }
)


def value(d: Mapping[str, Any], where: str, name: str) -> Any:
    """``d[name]`` checked by its rule in :data:`TOP_KEYS`; None when absent or null."""
    found = d.get(name)
    return None if found is None else TOP_KEYS[name](where, name, found)


def check_all(d: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Check every key of :data:`TOP_KEYS` that ``d`` gives, before anything reads them: a
    copy of ``d`` holding each such value in its checked form (ints as ``int``, sections as a
    tuple), so that readers take them as they are."""
    checked = dict(d)
    for name in TOP_KEYS:
        found = value(d, where, name)
        if found is not None:
            checked[name] = found
    return checked


def is_number(value: Any) -> bool:
    """A real number, not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
