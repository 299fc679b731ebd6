"""An ONNX model as an audit subject: the cos/sin its rotary part uses.

Read with the ``onnx`` package (``onnx.load(..., load_external_data=False)``, after the file's
size is checked). The rotary part is, in this order:

- every fused rotary node: ``RotaryEmbedding`` (ONNX's own, opset 23: inputs ``X, cos_cache,
  sin_cache, position_ids``; onnxruntime's ``com.microsoft`` one: ``input, position_ids,
  cos_cache, sin_cache``) and onnxruntime's ``GroupQueryAttention`` with ``do_rotary=1``
  (``cos_cache, sin_cache, position_ids`` its inputs 7 to 9), with its ``interleaved`` (or
  ``rotary_interleaved``) attribute, the pair layout, which the audit then knows. Caches
  ``(max_positions, rotary_dim/2)`` stored as initializers or ``Constant`` nodes are read
  directly; caches computed in the graph are evaluated, with the positions the node reads them
  at (transformers' exporter builds one row per token, read at the token's index);
- without such nodes, 2-D initializers named ``...cos...`` with a ``...sin...`` twin;
- without those, ``Cos`` and ``Sin`` nodes of one angle tensor that depends on a position
  input (an integer graph input whose name holds ``position``: ``position_ids``), followed
  forward through ops that move values (``Split``, ``Gather``, ``Concat``, ``Unsqueeze``,
  ``Cast``, ...: M-RoPE's choice of a section from each axis's table) and ``Mul`` by a constant
  (the attention factor) to the tensor a ``Mul`` by the queries or keys reads: the tables a
  ``torch.onnx.export`` of a transformers model computes.

Whatever is computed in the graph is evaluated with ``onnxruntime`` on the part of the graph
it depends on (the nodes it is computed from, the initializers they read, at most the file's
budget), fed the probe positions as one sequence of batch 1; other inputs that part needs get
zeros (ones for a ``...mask...``) of the smallest shape that fits. A position input
``(batch, length)`` takes one position per token: a multi-axis layer (M-RoPE, 2-D RoPE) served
by it, as by a fused node, gets every pair turned by the first coordinate, and the audit says
so; a position input ``(n_axes, batch, length)`` is fed every coordinate.
"""

from __future__ import annotations

import math
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._features import PairLayout
from .._io.files import FileError, check_regular_file
from .._io.sizes import format_size
from .._rope.plan import RopeLayer
from ._forms import Form
from ._subjects import F32_RECIPE, SubjectTables, check_finite

_F64 = npt.NDArray[np.float64]
_DTYPES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
_ITEM = {1: 4, 2: 1, 3: 1, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}
#: The most elements of one dummy input fed to the evaluated part of a graph.
MAX_DUMMY_ELEMENTS = 2**24
#: The most rows (tokens) one evaluation feeds.
MAX_TOKENS = 2**14
#: The longest one evaluation may run (seconds); onnxruntime stops it then.
MAX_SECONDS = 60.0


def _names(nodes: list[Any]) -> str:
    return ", ".join(nodes[:4]) + (", ..." if len(nodes) > 4 else "")


@dataclass(frozen=True)
class _Cache:
    """One pair of stored caches and how a node uses them."""

    cos: _F64
    sin: _F64
    dtype: str
    pairs: PairLayout | None
    nodes: tuple[str, ...]
    op: str = "RotaryEmbedding"

    def tables(self, layer: RopeLayer, positions: _F64) -> SubjectTables:
        coordinate = positions[:, 0]
        keep = (coordinate >= 0) & (coordinate < self.cos.shape[0])
        if self.pairs is None:  # bare caches: compared on text rows
            keep &= (positions == positions[:, :1]).all(axis=1)
        rows = coordinate[keep].astype(np.int64)
        n = self.cos.shape[1]
        form = Form(np.zeros((1, n)), np.ones(n), self.pairs or layer.pairs)
        notes: tuple[str, ...] = ()
        if self.nodes:
            notes = (f"fused {self.op} nodes ({_names(list(self.nodes))}): one position per token",)
        return SubjectTables(
            positions[keep],
            form.spread(self.cos[rows]),
            form.spread(self.sin[rows]),
            self.dtype,
            self.pairs,
            notes,
        )


# --------------------------------------------------------------------------- evaluation


@dataclass
class _Graph:
    """A loaded model and what evaluating a part of it needs."""

    model: Any
    path: Path
    budget: int
    tensors: dict[str, Any]
    positions: tuple[str, ...]
    sessions: dict[tuple[str, ...], tuple[Any, list[str], dict[str, str]]] = field(
        default_factory=dict
    )

    def _input(self, name: str) -> Any:
        return next(i for i in self.model.graph.input if i.name == name)

    def _slice(self, outputs: tuple[str, ...]) -> tuple[list[Any], set[str]]:
        """The nodes ``outputs`` are computed from, in graph order, and the names they read
        that no node of theirs makes (graph inputs, initializers)."""
        producer = {out: node for node in self.model.graph.node for out in node.output if out}
        wanted, needed, seen, kept = list(outputs), set(), set(), set()
        while wanted:
            name = wanted.pop()
            if name in seen:
                continue
            seen.add(name)
            node = producer.get(name)
            if node is None:
                needed.add(name)
            elif id(node) not in kept:
                kept.add(id(node))
                wanted.extend(n for n in _reads(node) if n)
        return [n for n in self.model.graph.node if id(n) in kept], needed

    def _session(self, outputs: tuple[str, ...]) -> tuple[Any, list[str], dict[str, str]]:
        if outputs in self.sessions:
            return self.sessions[outputs]
        from onnx import TensorProto, helper

        ort = _onnxruntime()
        nodes, needed = self._slice(outputs)
        inits, inputs, total = [], [], 0
        graph_inputs = {i.name for i in self.model.graph.input}
        for name in sorted(needed):
            if name in graph_inputs:
                inputs.append(self._input(name))
                if name not in self.positions:
                    _dummy(inputs[-1], 1, self.path, check_only=True)
            elif name in self.tensors and any(t.name == name for t in self.model.graph.initializer):
                tensor = self.tensors[name]
                total += math.prod(tensor.dims) * _ITEM.get(tensor.data_type, 8)
                if total + self.path.stat().st_size > self.budget:
                    raise FileError(
                        f"{self.path}: the initializers the rotary part reads exceed "
                        "--max-bytes (with the file itself)"
                    )
                inits.append(self._loaded(tensor))
        opsets = list(self.model.opset_import)
        part = helper.make_model(helper.make_graph(nodes, "rotary", inputs, [], inits),
                                 opset_imports=opsets)  # fmt: skip
        dtypes = _output_dtypes(part, self.model, outputs)
        casts, named = [], {}
        for out in outputs:
            kind = dtypes.get(out, 1)
            to = {6: 7, 7: 7, 12: 7, 13: 7, 11: 11}.get(kind, TensorProto.FLOAT)
            named[out] = _DTYPES.get(kind, "float32")
            casts.append(helper.make_node("Cast", [out], [f"{out}__posenc"], to=to))
        outs = [
            helper.make_tensor_value_info(f"{o}__posenc", int(c.attribute[0].i), None)
            for o, c in zip(outputs, casts, strict=True)
        ]
        graph = helper.make_graph(nodes + casts, "rotary", inputs, outs, inits)
        sub = helper.make_model(graph, opset_imports=opsets)
        # The IR version its opsets need (at least 10): onnx writes newer ones than onnxruntime
        # reads, and the part evaluated uses nothing of theirs.
        needed = helper.find_min_ir_version_for(opsets, ignore_unknown=True)
        sub.ir_version = min(self.model.ir_version, max(needed, 10))
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(
                sub.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own kinds
            raise FileError(
                f"{self.path}: the rotary part cannot be evaluated with onnxruntime "
                f"({_first_line(exc)})"
            ) from None
        found = (session, [i.name for i in inputs], named)
        self.sessions[outputs] = found
        return found

    def _loaded(self, tensor: Any) -> Any:
        """``tensor`` with its external data read (inside the model's folder only)."""
        from onnx.external_data_helper import load_external_data_for_tensor, uses_external_data

        if not uses_external_data(tensor):
            return tensor
        info = {e.key: e.value for e in tensor.external_data}
        location = Path(info.get("location", ""))
        folder = self.path.parent.resolve()
        if location.is_absolute() or not (folder / location).resolve().is_relative_to(folder):
            raise FileError(f"{self.path}: the tensor {tensor.name!r} points outside its folder")
        try:
            load_external_data_for_tensor(tensor, str(folder))
        except Exception as exc:  # a missing or short data file
            raise FileError(
                f"{self.path}: the tensor {tensor.name!r} cannot be read ({_first_line(exc)})"
            ) from None
        return tensor

    def chunk(self) -> int | None:
        """The sequence length the position inputs fix, None when it is free."""
        for name in self.positions:
            dims = _dims(self._input(name))
            if dims and isinstance(dims[-1], int) and dims[-1] > 0:
                return dims[-1]
        return None

    def run(
        self, outputs: tuple[str, ...], positions: _F64
    ) -> tuple[list[npt.NDArray[Any]], dict[str, str], list[str]]:
        """``outputs`` evaluated with ``positions`` ``(P, n_axes)`` as one sequence; their
        dtypes; notes on how the positions were fed."""
        unique = tuple(dict.fromkeys(outputs))  # a node may read one tensor twice
        session, names, dtypes = self._session(unique)
        tokens = positions.shape[0]
        if tokens > MAX_TOKENS:
            raise ValueError(f"{tokens} positions at once: at most {MAX_TOKENS} are evaluated")
        feeds, notes = {}, []
        for name in names:
            info = self._input(name)
            if name in self.positions:
                feeds[name], note = _position_feed(info, positions, self.path)
                if note:
                    notes.append(note)
            else:
                feeds[name] = _dummy(info, tokens, self.path)
        options = _onnxruntime().RunOptions()
        timer = threading.Timer(MAX_SECONDS, setattr, (options, "terminate", True))
        timer.start()
        try:
            values = session.run(None, feeds, options)
        except Exception as exc:  # onnxruntime raises its own kinds
            if options.terminate:
                raise FileError(
                    f"{self.path}: evaluating the rotary part took more than {MAX_SECONDS:g} s"
                ) from None
            raise FileError(
                f"{self.path}: evaluating the rotary part failed ({_first_line(exc)})"
            ) from None
        finally:
            timer.cancel()
        return [values[unique.index(o)] for o in outputs], dtypes, notes


def _first_line(exc: BaseException) -> str:
    """The first line of an error, without onnxruntime's source location and signature."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"^\S+\.(cc|h):\d+ .*?\) (?=\S)", "", text)
    return text[:300]


def _reads(node: Any) -> list[str]:
    """The names a node reads, those its subgraphs read from outside included."""
    names = list(node.input)
    for attr in node.attribute:
        graphs = list(attr.graphs) + ([attr.g] if attr.HasField("g") else [])
        for graph in graphs:
            made = {o for n in graph.node for o in n.output} | {i.name for i in graph.input}
            made |= {t.name for t in graph.initializer}
            names += [n for inner in graph.node for n in _reads(inner) if n not in made]
    return names


def _output_dtypes(part: Any, model: Any, outputs: tuple[str, ...]) -> dict[str, int]:
    """The element types of ``outputs``: shape inference on the ``part`` of ``model`` that
    computes them, the model's own value infos and ``Cast`` nodes; float32 where none tells."""
    import onnx

    found: dict[str, int] = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(part)
    except Exception:  # custom domains, unknown ops
        inferred = part
    infos = [*inferred.graph.value_info, *model.graph.value_info, *model.graph.input]
    for info in infos:
        if info.name in outputs and info.type.tensor_type.elem_type:
            found.setdefault(info.name, info.type.tensor_type.elem_type)
    for node in model.graph.node:
        if node.op_type == "Cast":
            for attr in node.attribute:
                if attr.name == "to" and node.output[0] in outputs:
                    found[node.output[0]] = attr.i
    return found


def _dims(info: Any) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in
            info.type.tensor_type.shape.dim]  # fmt: skip


_NUMPY = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64}


def _position_feed(info: Any, positions: _F64, path: Path) -> tuple[Any, str]:
    dims = _dims(info)
    dtype = _NUMPY.get(info.type.tensor_type.elem_type, np.int64)
    tokens, n_axes = positions.shape
    note = ""
    if len(dims) == 3 and isinstance(dims[0], int) and dims[0] > 1:
        if dims[0] != n_axes and n_axes > 1:
            raise FileError(
                f"{path}: the input {info.name!r} takes {dims[0]} coordinates per token, the "
                f"config's layer {n_axes}"
            )
        values = np.broadcast_to(positions.T[:, None, :], (dims[0], 1, tokens))
    else:
        values = positions[:, 0].reshape((1, tokens) if len(dims) != 1 else (tokens,))
        if n_axes > 1:
            note = f"the input {info.name!r} {tuple(dims)} takes one position per token"
    return np.ascontiguousarray(values, dtype=dtype), note


def _dummy(info: Any, tokens: int, path: Path, check_only: bool = False) -> Any:
    """Zeros (ones for a mask) for an input the rotary part reads: its fixed sizes, ``tokens``
    for a named size, 1 for an unnamed one; refused past :data:`MAX_DUMMY_ELEMENTS`."""
    dims = [d if isinstance(d, int) and d > 0 else (tokens if d else 1) for d in _dims(info)]
    if math.prod(dims) > MAX_DUMMY_ELEMENTS:
        raise FileError(
            f"{path}: the input {info.name!r} the rotary part reads has shape {tuple(dims)}, "
            "too large to feed"
        )
    if check_only:
        return None
    dtype = _NUMPY.get(info.type.tensor_type.elem_type)
    if dtype is None:
        raise FileError(f"{path}: the input {info.name!r} has a type the audit cannot feed")
    fill = 1 if "mask" in info.name.lower() else 0
    return np.full(dims, fill, dtype=dtype)


def _onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise ImportError(
            "evaluating an ONNX model's rotary part needs onnxruntime: pip install onnxruntime "
            "(or, from a clone of posenc, pip install '.[audit]')"
        ) from None
    return onnxruntime


@dataclass(frozen=True)
class _Computed:
    """cos/sin computed in the graph, evaluated at the probe positions.

    ``cos``/``sin`` are tensor names: full tables ``(..., tokens, width)`` when ``node_positions``
    is None, else a fused node's caches ``(rows, rotary_dim/2)``, read at ``node_positions``
    (a tensor name; ``""`` for the tokens' own indices).
    """

    graph: _Graph
    cos: str
    sin: str
    pairs: PairLayout | None
    nodes: tuple[str, ...] = ()
    op: str = ""
    node_positions: str | None = None

    def tables(self, layer: RopeLayer, positions: _F64) -> SubjectTables:
        """The tables at ``positions``, evaluated a sequence at a time (of the length the
        graph's position input fixes, the last one padded with its own last row)."""
        length = self.graph.chunk() or positions.shape[0]
        kept, cos_rows, sin_rows = [], [], []
        notes: tuple[str, ...] = ()
        dtype = "float32"
        for start in range(0, positions.shape[0], length):
            chunk = positions[start : start + length]
            rows = chunk.shape[0]
            if rows < length:
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], length - rows, axis=0)])
            keep, cos, sin, dtype, notes = self._evaluate(layer, chunk)
            real = int(keep[:rows].sum())  # rows of the padding come last
            kept.append(chunk[:rows][keep[:rows]])
            cos_rows.append(cos[:real])
            sin_rows.append(sin[:real])
        return SubjectTables(
            np.concatenate(kept), np.concatenate(cos_rows), np.concatenate(sin_rows), dtype,
            self.pairs, notes,
        )  # fmt: skip

    def _evaluate(
        self, layer: RopeLayer, positions: _F64
    ) -> tuple[npt.NDArray[np.bool_], _F64, _F64, str, tuple[str, ...]]:
        """``(keep, cos, sin, dtype, notes)``: which tokens have a row, and their rows in
        token order."""
        where = f"{self.graph.path} [{self.cos}, {self.sin}]"
        names = (self.cos, self.sin) + ((self.node_positions,) if self.node_positions else ())
        values, dtypes, notes = self.graph.run(names, positions)
        tokens = positions.shape[0]
        cos, sin = (np.asarray(v, dtype=np.float64) for v in values[:2])
        if self.node_positions is None:
            cos, sin = (_per_token(t, tokens, where) for t in (cos, sin))
            keep = np.ones(tokens, dtype=bool)
            found = ("cos/sin computed in the graph from the position input, evaluated with "
                     f"onnxruntime ({self.cos}, {self.sin})")  # fmt: skip
        else:
            rows = np.arange(tokens) if len(values) < 3 else np.asarray(values[2]).reshape(-1)
            if rows.size == 1 and tokens > 1:
                rows = rows[0] + np.arange(tokens)
            if rows.size != tokens or cos.ndim not in (2, 3) or cos.shape != sin.shape:
                raise FileError(
                    f"{where}: caches {cos.shape} read at {rows.size} positions for {tokens} "
                    "tokens: not a rotary cache"
                )
            cos, sin = (t.reshape(-1, t.shape[-1]) for t in (cos, sin))
            keep = (rows >= 0) & (rows < cos.shape[0])
            n = cos.shape[1]
            form = Form(np.zeros((1, n)), np.ones(n), self.pairs or layer.pairs)
            cos, sin = (form.spread(t[rows[keep]]) for t in (cos, sin))
            found = (f"fused {self.op} nodes ({_names(list(self.nodes))}): caches computed in "
                     "the graph, evaluated with onnxruntime")  # fmt: skip
        check_finite(cos, where)
        check_finite(sin, where)
        return keep, cos, sin, dtypes.get(self.cos, "float32"), (found, *notes)


def _per_token(table: _F64, tokens: int, where: str) -> _F64:
    """A computed table ``(1, tokens, width)`` (or ``(tokens, width)``, ``(1, 1, tokens,
    width)``) as ``(tokens, width)``."""
    shape = table.shape
    if table.ndim >= 2 and shape[-2] == tokens and table.size == tokens * shape[-1]:
        return table.reshape(tokens, shape[-1])
    raise FileError(
        f"{where}: the computed table has shape {shape}, expected one row of channels per "
        f"token ({tokens} tokens)"
    )


# --------------------------------------------------------------------------- reading


def _tensors(model: Any) -> dict[str, Any]:
    found = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.HasField("t"):
                    found[node.output[0]] = attr.t
    return found


def _array(graph: _Graph, name: str, numpy_helper: Any) -> Any:
    """A stored cache as float64 ``(rows, rotary_dim/2)``, its external data read from the
    model's folder only (:meth:`_Graph._loaded`), and its dtype."""
    path, tensor = graph.path, graph.tensors[name]
    size = math.prod(tensor.dims) * 8  # held as float64
    if size > graph.budget:
        raise FileError(f"{path}: the cache {name!r} ({format_size(size)}) exceeds --max-bytes")
    tensor = graph._loaded(tensor)
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


def _fused(node: Any, attrs: dict[str, Any]) -> tuple[str, str, str, int] | None:
    """``(cos, sin, positions, interleaved)`` of a fused rotary node, None for another node."""
    inputs = [*node.input, "", "", "", "", "", "", "", "", "", ""]
    if node.op_type == "RotaryEmbedding":
        if node.domain == "com.microsoft":
            return inputs[2], inputs[3], inputs[1], int(attrs.get("interleaved", 0))
        return inputs[1], inputs[2], inputs[3], int(attrs.get("interleaved", 0))
    if node.op_type == "GroupQueryAttention" and int(attrs.get("do_rotary", 0)):
        return inputs[7], inputs[8], inputs[9], int(attrs.get("rotary_interleaved", 0))
    return None


def _position_inputs(model: Any) -> tuple[str, ...]:
    return tuple(
        i.name for i in model.graph.input
        if "position" in i.name.lower() and i.type.tensor_type.elem_type in (6, 7)
    )  # fmt: skip


def _computed_tables(model: Any, graph: _Graph) -> list[_Computed]:
    """Cos/Sin pairs of one angle tensor computed from a position input."""
    consumers: dict[str, list[Any]] = {}
    for node in model.graph.node:
        for name in _reads(node):
            consumers.setdefault(name, []).append(node)
    derived, stack = set(graph.positions), list(graph.positions)
    while stack:
        for node in consumers.get(stack.pop(), []):
            for out in node.output:
                if out and out not in derived:
                    derived.add(out)
                    stack.append(out)
    cos_of = {n.input[0]: n.output[0] for n in model.graph.node if n.op_type == "Cos"}
    found = []
    for node in model.graph.node:
        angle = node.input[0] if node.op_type == "Sin" and node.input else None
        if angle is not None and angle in cos_of and angle in derived:
            cos, sin = (
                _follow(t, consumers, graph.tensors) for t in (cos_of[angle], node.output[0])
            )
            found.append(_Computed(graph, cos, sin, None))
    return found


#: Ops that move a table's values without computing new ones.
_MOVES = frozenset({"Cast", "Concat", "Expand", "Gather", "Identity", "Reshape", "Slice",
                    "Split", "Squeeze", "Transpose", "Unsqueeze"})  # fmt: skip


def _follow(name: str, consumers: dict[str, list[Any]], tensors: dict[str, Any]) -> str:
    """The table the rotation multiplies by: from a ``Cos``/``Sin`` output forward through ops
    that move values (M-RoPE's choice of a section of each axis's table included) and ``Mul``
    by a constant (the attention factor), the first tensor a ``Mul`` by a computed tensor (the
    queries or keys) reads. When no such ``Mul`` is reached: the output after a ``Mul`` by a
    constant scalar and ``Cast``s, each its only reader."""
    queue, seen = deque([name]), {name}
    while queue:
        current = queue.popleft()
        for node in consumers.get(current, []):
            constant = all(i in tensors for i in node.input if i and i != current)
            if node.op_type == "Mul" and not constant:
                return current
            if node.op_type in _MOVES or (node.op_type == "Mul" and constant):
                for out in node.output:
                    if out and out not in seen:
                        seen.add(out)
                        queue.append(out)
    while len(consumers.get(name, [])) == 1:
        node = consumers[name][0]
        other = [i for i in node.input if i != name]
        scalar = len(other) == 1 and other[0] in tensors and math.prod(tensors[other[0]].dims) == 1
        if node.op_type != "Cast" and not (node.op_type == "Mul" and scalar):
            break
        name = node.output[0]
    return name


def read_onnx(path: Path, max_bytes: int) -> tuple[list[_Cache | _Computed], int]:
    """The rotary tables of an ONNX file (stored or computed) and the number of fused nodes."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise ImportError(
            "reading .onnx files needs the onnx package: pip install onnx (or, from a clone of "
            "posenc, pip install '.[audit]')"
        ) from None

    check_regular_file(path, expected="an .onnx file")
    size = path.stat().st_size
    if size > max_bytes:
        raise FileError(f"{path} holds {format_size(size)}, more than --max-bytes")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises several kinds
        raise FileError(f"{path} is not a readable ONNX model ({type(exc).__name__})") from None
    tensors = _tensors(model)
    graph = _Graph(model, path, max_bytes, tensors, _position_inputs(model))
    graph_inputs = {i.name for i in model.graph.input}
    parts: dict[tuple[str, str, str, int], _Cache | _Computed] = {}
    fused = 0
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        found = _fused(node, attrs)
        if found is None:
            continue
        fused += 1
        cos_name, sin_name, positions, interleaved = found
        if not cos_name or not sin_name:
            raise FileError(f"{path}: {node.op_type} node {node.name!r} has no cos/sin caches")
        stored = cos_name in tensors and sin_name in tensors
        key = (cos_name, sin_name, "" if stored else positions, interleaved)
        pairs: PairLayout = "interleaved" if interleaved else "half"
        old = parts.get(key)
        if old is not None:
            parts[key] = _replace_nodes(old, (*old.nodes, node.name))
        elif stored:
            cos, dtype = _array(graph, cos_name, numpy_helper)
            sin, _ = _array(graph, sin_name, numpy_helper)
            if cos.shape != sin.shape:
                raise FileError(
                    f"{path}: node {node.name!r} has cos {cos.shape} and sin {sin.shape} caches"
                )
            parts[key] = _Cache(cos, sin, dtype, pairs, (node.name,), node.op_type)
        else:
            if positions in graph_inputs and positions not in graph.positions:
                graph.positions += (positions,)  # whatever its name, the node reads positions
            parts[key] = _Computed(graph, cos_name, sin_name, pairs, (node.name,), node.op_type,
                                   positions)  # fmt: skip
    if not parts:
        for name in tensors:
            twin = name.replace("cos", "sin")
            if "cos" in name and twin in tensors and len(tensors[name].dims) == 2:
                cos, dtype = _array(graph, name, numpy_helper)
                sin, _ = _array(graph, twin, numpy_helper)
                parts[(name, twin, "", -1)] = _Cache(cos, sin, dtype, None, ())
    if not parts:
        for each in _computed_tables(model, graph):
            parts[(each.cos, each.sin, "", -1)] = each
    if not parts:
        raise FileError(
            f"{path} holds no RotaryEmbedding node, no cos/sin cache initializers and no Cos/Sin "
            "computed from a position input: no rotary part to audit"
        )
    return list(parts.values()), fused


def _replace_nodes(part: _Cache | _Computed, nodes: tuple[str, ...]) -> _Cache | _Computed:
    from dataclasses import replace

    return replace(part, nodes=nodes)


@dataclass
class OnnxSubject:
    """The tables of an ONNX model: one for every layer, or one per layer in graph order."""

    parts: list[_Cache | _Computed]
    description: str
    fused: int
    kind: str = "onnx"
    per_layer: bool = False
    fixed_positions: bool = True
    recipe: str = F32_RECIPE

    def __post_init__(self) -> None:
        self.per_layer = len(self.parts) > 1
        self.fixed_positions = any(isinstance(p, _Cache) for p in self.parts)

    def tables(self, index: int | None, layer: RopeLayer, positions: _F64) -> SubjectTables | None:
        if not layer.uses_positions and self.per_layer:
            return None
        part = self.parts[0]
        if self.per_layer:
            if index is None or index >= len(self.parts):
                raise ValueError(
                    f"{self.description} has {len(self.parts)} distinct caches: they cannot be "
                    "matched to the config's layers one to one"
                )
            part = self.parts[index]
        return part.tables(layer, positions)


def onnx_subject(path: Path, max_bytes: int) -> OnnxSubject:
    parts, fused = read_onnx(path, max_bytes)
    return OnnxSubject(parts, str(path), fused)
