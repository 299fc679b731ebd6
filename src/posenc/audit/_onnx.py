"""An ONNX model as an audit subject: the cos/sin caches its rotary part uses.

Read with the ``onnx`` package (``onnx.load(..., load_external_data=False)``, after the file's
size is checked): every ``RotaryEmbedding`` node (ONNX's own, opset 23: inputs ``X, cos_cache,
sin_cache, position_ids``; onnxruntime's ``com.microsoft`` one: ``input, position_ids,
cos_cache, sin_cache``), its caches ``(max_positions, rotary_dim/2)`` taken from initializers
or ``Constant`` nodes and its ``interleaved`` attribute (the pair layout, which the audit then
knows). A fused node takes one position per token: a multi-axis layer (M-RoPE, 2-D RoPE) served
by one gets every pair turned by the first coordinate, and the audit says so. Without such
nodes, 2-D initializers named ``...cos...`` with a ``...sin...`` twin are read as caches.

Not read yet: caches computed inside the graph (the position subgraph is not evaluated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._features import PairLayout
from .._io.files import FileError, check_exists
from .._io.sizes import format_size
from .._rope.plan import RopeLayer
from ._forms import Form
from ._subjects import F32_RECIPE, SubjectTables, check_finite

_F64 = npt.NDArray[np.float64]
_DTYPES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}


@dataclass(frozen=True)
class _Cache:
    """One pair of caches and how a node uses them."""

    cos: _F64
    sin: _F64
    dtype: str
    pairs: PairLayout | None
    nodes: tuple[str, ...]


def _tensors(model: Any, numpy_helper: Any) -> dict[str, Any]:
    found = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.HasField("t"):
                    found[node.output[0]] = attr.t
    return found


def _array(tensors: dict[str, Any], name: str, path: Path, budget: int, numpy_helper: Any) -> Any:
    if name not in tensors:
        raise FileError(
            f"{path}: the cache {name!r} is computed in the graph, not stored: evaluating the "
            "position subgraph is not supported yet"
        )
    tensor = tensors[name]
    size = math.prod(tensor.dims) * 4
    if size > budget:
        raise FileError(f"{path}: the cache {name!r} ({format_size(size)}) exceeds --max-bytes")
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as exc:  # external data not loaded, unknown types
        raise FileError(f"{path}: the cache {name!r} cannot be read ({exc})") from None
    if array.ndim == 3 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 2:
        raise FileError(
            f"{path}: the cache {name!r} has shape {array.shape}, expected "
            "(max_positions, rotary_dim/2)"
        )
    values = np.asarray(array, dtype=np.float64)
    check_finite(values, f"{path} [{name}]")
    return values, _DTYPES.get(tensor.data_type, "float32")


def read_onnx(path: Path, max_bytes: int) -> tuple[list[_Cache], int]:
    """The caches of an ONNX file and the number of fused nodes."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise ImportError(
            "reading .onnx files needs the onnx package: pip install onnx (or, from a clone of "
            "posenc, pip install '.[audit]')"
        ) from None

    check_exists(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise FileError(f"{path} holds {format_size(size)}, more than --max-bytes")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises several kinds
        raise FileError(f"{path} is not a readable ONNX model ({type(exc).__name__})") from None
    tensors = _tensors(model, numpy_helper)
    caches: dict[tuple[str, str, int], _Cache] = {}
    nodes = [n for n in model.graph.node if n.op_type == "RotaryEmbedding"]
    for node in nodes:
        if node.domain == "com.microsoft":
            names = (node.input[2], node.input[3]) if len(node.input) >= 4 else None
        else:
            names = (node.input[1], node.input[2]) if len(node.input) >= 3 else None
        if names is None:
            raise FileError(f"{path}: RotaryEmbedding node {node.name!r} has no cos/sin caches")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        interleaved = int(attrs.get("interleaved", 0))
        key = (names[0], names[1], interleaved)
        if key in caches:
            old = caches[key]
            caches[key] = _Cache(old.cos, old.sin, old.dtype, old.pairs, (*old.nodes, node.name))
            continue
        cos, dtype = _array(tensors, names[0], path, max_bytes, numpy_helper)
        sin, _ = _array(tensors, names[1], path, max_bytes, numpy_helper)
        if cos.shape != sin.shape:
            raise FileError(
                f"{path}: node {node.name!r} has cos {cos.shape} and sin {sin.shape} caches"
            )
        pairs: PairLayout = "interleaved" if interleaved else "half"
        caches[key] = _Cache(cos, sin, dtype, pairs, (node.name,))
    if not nodes:
        for name in tensors:
            twin = name.replace("cos", "sin")
            if "cos" in name and twin in tensors and len(tensors[name].dims) == 2:
                cos, dtype = _array(tensors, name, path, max_bytes, numpy_helper)
                sin, _ = _array(tensors, twin, path, max_bytes, numpy_helper)
                caches[(name, twin, -1)] = _Cache(cos, sin, dtype, None, ())
    if not caches:
        raise FileError(
            f"{path} holds no RotaryEmbedding node and no cos/sin cache initializers: no rotary "
            "part to audit"
        )
    return list(caches.values()), len(nodes)


@dataclass
class OnnxSubject:
    """The caches of an ONNX model: one for every layer, or one per layer in node order."""

    caches: list[_Cache]
    description: str
    fused: int
    kind: str = "onnx"
    per_layer: bool = False
    fixed_positions: bool = True
    recipe: str = F32_RECIPE

    def __post_init__(self) -> None:
        self.per_layer = len(self.caches) > 1

    def tables(self, index: int | None, layer: RopeLayer, positions: _F64) -> SubjectTables | None:
        if not layer.uses_positions and self.per_layer:
            return None
        cache = self.caches[0]
        if self.per_layer:
            if index is None or index >= len(self.caches):
                raise ValueError(
                    f"{self.description} has {len(self.caches)} distinct caches: they cannot be "
                    "matched to the config's layers one to one"
                )
            cache = self.caches[index]
        coordinate = positions[:, 0]
        keep = (coordinate >= 0) & (coordinate < cache.cos.shape[0])
        if cache.pairs is None:  # bare caches: compared on text rows
            keep &= (positions == positions[:, :1]).all(axis=1)
        rows = coordinate[keep].astype(np.int64)
        n = cache.cos.shape[1]
        form = Form(np.zeros((1, n)), np.ones(n), cache.pairs or layer.pairs)
        notes: tuple[str, ...] = ()
        if cache.nodes:
            notes = (
                f"fused RotaryEmbedding nodes ({', '.join(cache.nodes[:4])}"
                + (", ..." if len(cache.nodes) > 4 else "")
                + "): one position per token",
            )
        return SubjectTables(
            positions[keep],
            form.spread(cache.cos[rows]),
            form.spread(cache.sin[rows]),
            cache.dtype,
            cache.pairs,
            notes,
        )


def onnx_subject(path: Path, max_bytes: int) -> OnnxSubject:
    caches, fused = read_onnx(path, max_bytes)
    return OnnxSubject(caches, str(path), fused)
