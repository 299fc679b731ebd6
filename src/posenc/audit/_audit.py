"""``audit(reference, subject)``: read the reference's plan, read the subject, compare."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._io.config_file import read_config_file
from .._io.sizes import default_max_bytes
from .._io.tables import SUFFIXES, read_arrays
from .._rope.plan import RopePlan, rope_plan
from ._compare import compare_layer, targets
from ._report import AuditReport, LayerFinding
from ._subjects import (
    CacheSubject,
    Subject,
    TableSubject,
    inv_freq_subject,
    is_mlx_module,
    object_subject,
)

#: The array names an arrays subject is read from (a state dict's ``....inv_freq`` too).
ROLES = ("cos", "sin", "position_ids", "inv_freq", "cos_sin_cache")

#: The most positions an audit probes (its default is a few dozen).
MAX_POSITIONS = 4096

_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


# --------------------------------------------------------------------------- reference


def read_reference(reference: Any, max_bytes: int | None = None) -> tuple[Any, str]:
    """``(config, description)`` of a reference: a ``config.json`` path, a model directory
    holding one, a dict, a transformers config, or a model with a ``config``."""
    if isinstance(reference, str | Path):
        path = Path(reference)
        if path.is_dir():
            path = path / "config.json"
        limit = default_max_bytes() if max_bytes is None else max_bytes
        return read_config_file(path, limit), str(path)
    if isinstance(reference, Mapping):
        return dict(reference), "config dict"
    config = getattr(reference, "config", None)
    if config is not None and hasattr(config, "to_dict"):  # a transformers model
        reference = config
    if hasattr(reference, "to_dict"):
        return reference, type(reference).__name__
    raise TypeError(
        "reference must be a config.json path, a model directory, a dict or a transformers "
        f"config, got {type(reference).__name__}"
    )


def context_of(config: Any) -> int | None:
    """``max_position_embeddings`` of the language model (``text_config`` first)."""

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    for part in (get(config, "text_config"), config):
        if part is not None:
            value = get(part, "max_position_embeddings")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def has_vision_config(config: Any) -> bool:
    """True for a composite config with a ``vision_config`` (inside ``thinker_config`` for the
    Omni models); False for a vision tower's own config."""

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    return any(
        part is not None and get(part, "vision_config") is not None
        for part in (config, get(config, "thinker_config"))
    )


# --------------------------------------------------------------------------- subject


def is_callable_spec(subject: Any) -> bool:
    """True for ``"module:attr"`` that is not an existing path."""
    return isinstance(subject, str) and bool(_SPEC.match(subject)) and not Path(subject).exists()


def _role_of(name: str) -> str | None:
    for role in ROLES:
        if name == role or name.endswith(("." + role, "/" + role)):
            return role
    return None


def _keys(key: str | Sequence[str] | None) -> dict[str, str]:
    """``--key ROLE=NAME`` (or ``NAME``: its role from its shape, under ``"?"``)."""
    given = [key] if isinstance(key, str) else list(key or [])
    chosen: dict[str, str] = {}
    for item in given:
        role, sep, name = item.partition("=")
        if sep and role in ROLES:
            chosen[role] = name
        elif sep:
            raise ValueError(f"--key {item!r}: the role must be one of {', '.join(ROLES)}")
        else:
            chosen["?"] = item
    return chosen


def arrays_subject(
    arrays: Mapping[str, Any], description: str, key: str | Sequence[str] | None = None
) -> Subject:
    """The subject of named arrays: ``cos`` and ``sin`` (with ``position_ids``), else a
    ``cos_sin_cache``, else an ``inv_freq``; ``key`` names others."""
    chosen = _keys(key)
    by_role: dict[str, Any] = {}
    for given, name in chosen.items():
        role = given
        if name not in arrays:
            raise ValueError(f"--key {name!r} is not in {description}; it holds {sorted(arrays)}")
        if role == "?":  # its role from its shape
            ndim = (
                np.ndim(arrays[name])
                if not hasattr(arrays[name], "shape")
                else len([n for n in arrays[name].shape if n != 1])
            )
            role = "inv_freq" if ndim <= 1 else "cos_sin_cache"
        by_role[role] = arrays[name]
    for name, value in arrays.items():
        found = _role_of(name)
        if found is not None and found not in by_role and name not in chosen.values():
            by_role[found] = value
    if "cos" in by_role and "sin" in by_role:
        return TableSubject.build(
            by_role["cos"], by_role["sin"], by_role.get("position_ids"), description
        )
    if "cos_sin_cache" in by_role:
        return CacheSubject.build(by_role["cos_sin_cache"], f"{description} cos_sin_cache")
    if "inv_freq" in by_role:
        return inv_freq_subject(by_role["inv_freq"], None, f"{description} inv_freq")
    raise ValueError(
        f"{description} holds none of cos and sin, cos_sin_cache or inv_freq (it holds "
        f"{sorted(arrays)[:12]}); name the array with key= (--key ROLE=NAME)"
    )


def file_subject(path: Path, key: Any, max_bytes: int | None) -> Subject:
    """A GGUF file, or arrays from ``.npy``/``.npz``/``.safetensors``/PyTorch files."""
    suffix = path.suffix.lower()
    limit = default_max_bytes() if max_bytes is None else max_bytes
    if suffix == ".gguf":
        from ._gguf import gguf_subject

        return gguf_subject(path)
    if suffix == ".onnx":
        from ._onnx import onnx_subject

        return onnx_subject(path, limit)
    if suffix not in SUFFIXES:
        raise ValueError(
            f"SUBJECT {path} must be a .gguf or .onnx file, an array file "
            f"({', '.join(SUFFIXES)}) or module:attr naming a Python callable or object"
        )
    wanted = set(_keys(key).values())

    def choose(names: list[str]) -> list[str]:
        return [n for n in names if n in wanted or _role_of(n) is not None]

    tables = read_arrays(path, choose, limit)
    if list(tables) == [None]:  # a .npy: one array, its role from its shape
        array = tables[None]
        kind = "inv_freq" if len([n for n in array.array.shape if n != 1]) <= 1 else "cos_sin_cache"
        arrays = {kind: _labelled(array.array, array.dtype)}
    else:
        arrays = {str(name): _labelled(t.array, t.dtype) for name, t in tables.items()}
    return arrays_subject(arrays, str(path), key)


def _labelled(array: npt.NDArray[Any], dtype: str) -> Any:
    if dtype == "bfloat16":
        return _BFloat16(array)
    return array


class _BFloat16:
    """A float32 array that holds bfloat16 values: ``dtype`` says ``bfloat16``."""

    dtype = "bfloat16"

    def __init__(self, array: npt.NDArray[Any]) -> None:
        self.array = array
        self.shape = array.shape

    def __array__(self, dtype: Any = None, copy: Any = None) -> npt.NDArray[Any]:
        return self.array if dtype is None else self.array.astype(dtype)


def resolve_subject(subject: Any, key: Any = None, max_bytes: int | None = None) -> Subject:
    """What :func:`audit` accepts as a subject, as a :class:`Subject`."""
    if isinstance(subject, str | Path):
        return file_subject(Path(subject), key, max_bytes)
    if is_mlx_module(subject):  # MLX modules are dicts
        found = object_subject(subject, type(subject).__name__)
        if found is not None:
            return found
    if isinstance(subject, Mapping):
        return arrays_subject(subject, "arrays", key)
    if isinstance(subject, tuple) and len(subject) in (2, 3):
        cos, sin, *rest = subject
        return TableSubject.build(cos, sin, rest[0] if rest else None)
    if isinstance(subject, np.ndarray) or (hasattr(subject, "shape") and hasattr(subject, "dtype")):
        ndim = len([n for n in subject.shape if n != 1])
        if ndim <= 1:
            return inv_freq_subject(subject)
        return CacheSubject.build(subject)
    name = getattr(subject, "__qualname__", None) or type(subject).__name__
    found = object_subject(subject, name)
    if found is None:
        raise TypeError(
            "subject must be a .gguf or array file, module:attr, a dict of arrays, a (cos, sin) "
            "tuple, an inv_freq or cos_sin_cache array, a callable, or an object with "
            f"cos_sin_cache or inv_freq, got {type(subject).__name__}"
        )
    return found


# --------------------------------------------------------------------------- audit


def _check_positions(positions: Any) -> npt.NDArray[np.int64] | None:
    if positions is None:
        return None
    array = np.asarray(positions)
    if array.ndim == 1 and array.size > MAX_POSITIONS:
        raise ValueError(
            f"positions: at most {MAX_POSITIONS} positions are probed, got {array.size:,}"
        )
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "iu":
        raise ValueError(
            f"positions must be a non-empty 1-D sequence of integers, got {positions!r}"[:200]
        )
    if array.min() < 0 or array.max() > 2**24:
        raise ValueError(
            f"positions must lie in [0, 2**24], got {int(array.min())}..{int(array.max())}"
        )
    return np.unique(array.astype(np.int64))


def audit_plan(
    plan: RopePlan,
    subject: Subject,
    *,
    reference: str,
    context: int | None,
    layer_type: str | None = None,
    positions: Any = None,
) -> AuditReport:
    """The report of ``subject`` against ``plan``."""
    probes = _check_positions(positions)
    findings = [
        compare_layer(layer, index, layers, subject, plan, context, probes)
        for index, layer, layers in targets(plan, subject, layer_type)
    ]
    notes = tuple(dict.fromkeys(n for f in findings for n in f.notes))
    count = getattr(subject, "layer_count", None)
    if count is not None and plan.layers and count != len(plan.layers):
        notes += (
            f"the subject has {count} layers where the config has {len(plan.layers)}: the "
            "first layers of each were compared",
        )
    merged = _merge([_without_notes(f) for f in findings])
    return AuditReport(
        reference=reference,
        model_type=plan.model_type,
        subject=subject.description,
        subject_kind=subject.kind,
        context=context,
        findings=tuple(merged),
        notes=notes,
    )


def _without_notes(finding: LayerFinding) -> LayerFinding:
    return replace(finding, notes=())


def _merge(findings: list[LayerFinding]) -> list[LayerFinding]:
    """Findings of layers with the same type, verdict and cause, as one (worst errors kept)."""
    merged: dict[tuple[str, str, str], LayerFinding] = {}
    for f in findings:
        key = (f.layer_type, f.status, f.cause)
        if key not in merged:
            merged[key] = f
            continue
        m = merged[key]
        layers = tuple(sorted(set(m.layers) | set(f.layers)))
        worse = f if (f.max_error or 0.0) > (m.max_error or 0.0) else m
        merged[key] = replace(worse, layers=layers)
    return sorted(merged.values(), key=lambda f: (f.layers[:1] or (0,), f.layer_type))


def audit(
    reference: Any,
    subject: Any,
    *,
    layer_type: str | None = None,
    positions: Any = None,
    key: str | Sequence[str] | None = None,
    timeout: float | None = 60.0,
    max_bytes: int | None = None,
) -> AuditReport:
    """Audit another stack's RoPE against the plan of the config it claims to implement.

    Args:
        reference: a Hugging Face ``config.json`` path, a model directory holding one, a dict,
            a transformers config or a model with a ``config``: the plan is
            :func:`posenc.rope_plan` of it.
        subject: the stack's positional numbers:

            - a ``.gguf`` file (the RoPE llama.cpp builds from its metadata and rope tensors;
              for a vision projector, an mmproj file, the RoPE of the vision tower, audited
              against the plan of the config's ``vision_config``);
            - a ``.onnx`` file (its ``RotaryEmbedding`` nodes' caches and pair layout, bare
              cos/sin cache initializers, or the cos/sin the graph computes from a position
              input, evaluated with onnxruntime at the probe positions);
            - an array file (``.npy``, ``.npz``, ``.safetensors``, ``.pt``) or a dict of arrays
              named ``cos`` and ``sin`` (with ``position_ids``), ``cos_sin_cache`` or
              ``inv_freq`` (``key`` names others: ``"cos=my_cos"``, or a name whose role its
              shape tells);
            - a ``(cos, sin)`` or ``(cos, sin, position_ids)`` tuple; an ``inv_freq`` array
              ``(rotary_dim/2,)``; a ``cos_sin_cache`` array ``(max_positions, rotary_dim)``;
            - a callable ``positions -> (cos, sin)`` (positions int64 ``(P,)``, or ``(P,
              n_axes)`` for multi-axis layers; tables ``(P, width)``), or ``(positions, q, k)
              -> (q, k)`` with q and k ``(P, heads, head_dim)``; either may take ``layer=``
              (the layer index) to be audited layer by layer;
            - an object with ``cos_sin_cache`` (vLLM, SGLang) or ``inv_freq`` (and
              ``attention_scaling``: Hugging Face's rotary modules);
            - an MLX rope module (``module(x, offset=p)``: ``mlx.nn.RoPE`` and mlx-lm's; or
              ``module(x, position_ids) -> (cos, sin)`` or ``module.apply_rotary(q, k,
              position_ids)``, called with ``(n_axes, 1, P)`` ids for multi-axis layers), or
              an mlx-lm model (each layer's attention ``rope``,
              audited layer by layer);
            - a transformers model: its rotary buffers as they are now (``inv_freq``, or
              ``{layer_type}_inv_freq`` per layer type), audited layer by layer;
            - ``"module:attr"``: such a callable or object, imported and run in a subprocess
              that is killed after ``timeout`` seconds.
        layer_type: the kind of layer a single-table subject implements, when the config has
            several rotating kinds.
        positions: the positions to probe (default: 0 .. 16, powers of two and their
            neighbours up to 2**20, the model's full context).
        key: array names for array subjects (see ``subject``).
        timeout: seconds a ``"module:attr"`` subject may run.
        max_bytes: the largest config or array file to read (default a quarter of memory).

    Returns:
        an :class:`AuditReport`: ``report.passed``, ``report.findings`` (one per group of
        layers: status, errors, cause), ``str(report)`` and ``report.as_dict()``.

    Raises:
        ValueError: a reference or subject that cannot be used, with one line saying why (NaN
            in a table, a truncated file, a ``"module:attr"`` subject that raised).
        TypeError: a reference or subject of a type the audit does not read.
        OSError: a file that cannot be opened; ``TimeoutError`` for a ``"module:attr"``
            subject that ran past ``timeout``.
    """
    config, described = read_reference(reference, max_bytes)
    if is_callable_spec(subject):
        from ._child import run_child

        plain = config if isinstance(config, dict) else config.to_dict()
        document = run_child(
            json.loads(json.dumps(plain, default=str)),
            described,
            subject,
            layer_type=layer_type,
            positions=None if positions is None else [int(p) for p in np.asarray(positions)],
            timeout=timeout,
        )
        return report_from_dict(document)
    found = resolve_subject(subject, key, max_bytes)
    vision = getattr(found, "vision", False)
    plan = rope_plan(config, vision=vision and has_vision_config(config))
    return audit_plan(
        plan,
        found,
        reference=described,
        context=None if vision else context_of(config),
        layer_type=layer_type,
        positions=positions,
    )


def report_from_dict(document: Mapping[str, Any]) -> AuditReport:
    """The :class:`AuditReport` of :meth:`AuditReport.as_dict`'s data (fields added within
    a schema version may be missing: they take their defaults)."""
    from ._report import AxisFinding

    findings = []
    for f in document["findings"]:
        findings.append(
            LayerFinding(
                layers=tuple(f["layers"]),
                layer_type=f["layer_type"],
                status=f["status"],
                recipe=f["recipe"],
                bound=f["bound"],
                max_error=f["max_error"],
                first_difference=_difference(f["first_difference"]),
                error_at_context=f["error_at_context"],
                error_at_1m=f["error_at_1m"],
                cause=f["cause"],
                positions=(f["positions_compared"], f["largest_position"]),
                notes=tuple(f["notes"]),
                axes=tuple(
                    AxisFinding(
                        a["axis"],
                        a["pairs"],
                        a["status"],
                        a["max_error"],
                        _difference(a["first_difference"]),
                    )
                    for a in f.get("axes", ())
                ),
            )
        )
    return AuditReport(
        reference=document["reference"],
        model_type=document["model_type"],
        subject=document["subject"],
        subject_kind=document["subject_kind"],
        context=document["context"],
        findings=tuple(findings),
        notes=tuple(document["notes"]),
    )


def _difference(diff: Mapping[str, Any] | None) -> Any:
    from ._report import Difference

    if diff is None:
        return None
    return Difference(
        diff["position"],
        diff["channel"],
        diff["table"],
        diff["subject"],
        diff["expected"],
        tuple(diff.get("coordinates", ())),
    )
