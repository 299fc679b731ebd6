"""ONNX export (the dynamo exporter, opsets 18 and 23) of every module, run by onnxruntime on
the CPU: the length stays dynamic (no retry with a narrowed range, no warning about one) and
the results are within one unit in the last place of eager.

The dynamo exporter takes seconds per graph, so the modules are exported in three bundles
(one graph each, several modules side by side), once per opset for the whole module.

Skipped without onnx, onnxscript or onnxruntime; under the environment variable CI a missing
one fails instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import warnings
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow  # about 20 s of export per opset

_MISSING = [n for n in ("onnx", "onnxscript", "onnxruntime") if not importlib.util.find_spec(n)]
if _MISSING:
    WHY = f"ONNX export tests need {', '.join(_MISSING)} (requirements-dev.txt)"
    if os.environ.get("CI"):
        pytest.fail(f"under CI: {WHY}", pytrace=False)
    pytest.skip(WHY, allow_module_level=True)

import onnx  # noqa: E402
import onnxruntime  # noqa: E402

from tests.torch.export_cases import (  # noqa: E402
    BATCH,
    CASES,
    LENGTH,
    MAX_LENGTH,
    assert_within_one_ulp,
    input_ranges,
    outputs,
)

#: the bundles: name -> cases exported together in one graph (they share their inputs' length)
BUNDLES = {
    "rope": ["rope_half", "rope_interleaved", "rope_rotary_dim", "rope_llama3", "rope_half_offset"],
    "rope_scaled_axes": [
        "rope_yarn",
        "rope_interleaved_offset",
        "rope_sections",
        "rope_sections_offset",
        "hf_multi_axis_rotary",
    ],
    "absolute": [
        "sinusoidal",
        "sinusoidal_positions",
        "transformer_embedding",
        "timestep",
        "hf_llama_rotary",
        "hf_marian",
        "hf_m2m100",
        "hf_whisper",
    ],
}
#: the grid's dynamic dimension is its batch (its length is the fixed grid): a bundle of its own
GRID = "grid"


class Bundle(torch.nn.Module):
    """Several cases side by side: the inputs of each, flattened; all their outputs."""

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names
        self.parts = torch.nn.ModuleList(CASES[n].build() for n in names)
        self.arity = [len(CASES[n].inputs(2, 0)) for n in names]

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out: list[torch.Tensor] = []
        for part, n in zip(self.parts, self.arity, strict=True):
            out += outputs(part(*args[:n]))
            args = args[n:]
        return tuple(out)

    def inputs(self, length: int, offset: int) -> tuple[torch.Tensor, ...]:
        return tuple(a for n in self.names for a in CASES[n].inputs(length, offset))

    def dynamic(self) -> tuple[Any, ...]:
        return tuple(d for n in self.names for d in CASES[n].dynamic)


class _Said(logging.Handler):
    """What the exporter logs, kept."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _export(names: list[str], opset: int) -> tuple[Bundle, Any, bytes]:
    module = Bundle(names).eval()
    printed, logged = io.StringIO(), _Said()
    logger = logging.getLogger("torch")
    logger.addHandler(logged)
    try:
        with (
            warnings.catch_warnings(record=True) as caught,
            contextlib.redirect_stdout(printed),
            contextlib.redirect_stderr(printed),
        ):
            warnings.simplefilter("always")
            program = torch.onnx.export(
                module,
                module.inputs(8, 3),
                dynamic_shapes={"args": module.dynamic()},
                dynamo=True,
                opset_version=opset,
                verbose=False,
            )
    finally:
        logger.removeHandler(logged)
    said = "\n".join([printed.getvalue(), *logged.lines, *(str(w.message) for w in caught)])
    # The exporter retries a failed strict export with a narrowed range (draft_export) and
    # says so; a silent narrowing shows in the program's range constraints.
    for sign in ("draft_export", "Constraints violated", "Suggested fixes", "narrow", "\u274c"):
        assert sign not in said, f"the ONNX exporter said {sign!r}:\n{said[-2000:]}"
    want = (BATCH.min, BATCH.max) if names == [GRID] else (LENGTH.min, LENGTH.max)
    assert input_ranges(program.exported_program) == {want}
    return module, program, program.model_proto.SerializeToString()


@pytest.fixture(scope="module", params=[18, 23], ids=["opset18", "opset23"])
def exported(request: pytest.FixtureRequest) -> dict[str, tuple[Bundle, Any, bytes]]:
    bundles = {**BUNDLES, GRID: [GRID]}
    return {name: _export(names, request.param) for name, names in bundles.items()}


def _session(model: bytes) -> Any:
    return onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])


def _run(session: Any, args: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    names = [i.name for i in session.get_inputs()]
    feeds = {n: a.numpy() for n, a in zip(names, args, strict=False)}
    result: list[np.ndarray] = session.run(None, feeds)
    return result


@pytest.mark.parametrize("bundle", [*BUNDLES, GRID])
def test_onnxruntime_is_eager_at_lengths_and_offsets(exported: Any, bundle: str) -> None:
    module, _, model = exported[bundle]
    session = _session(model)
    lengths = ((1, 5), (7, 0), (64, 11)) if bundle == GRID else ((1, 5), (7, 0), (1000, 2**20))
    for length, offset in lengths:
        args = module.inputs(length, offset)
        with torch.no_grad():
            assert_within_one_ulp(_run(session, args), module(*args))


def test_onnxruntime_at_the_longest_length(exported: Any) -> None:
    module, _, model = exported["rope"]
    args = module.inputs(MAX_LENGTH, 2**20 - MAX_LENGTH)
    with torch.no_grad():
        assert_within_one_ulp(_run(_session(model), args), module(*args))


def test_the_length_is_symbolic_in_the_onnx_graph(exported: Any) -> None:
    _, _, model = exported["rope"]
    first = onnx.load_from_string(model).graph.input[0].type.tensor_type.shape.dim
    assert first[2].dim_param
    assert not first[2].HasField("dim_value")


def test_angles_are_float64_in_the_onnx_graph(exported: Any) -> None:
    """Every Sin/Cos of the graph takes float64 angles (as the eager formula does)."""
    _, _, model = exported["absolute"]
    inferred = onnx.shape_inference.infer_shapes(onnx.load_from_string(model))
    types = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
    trig = [n for n in inferred.graph.node if n.op_type in ("Sin", "Cos")]
    assert trig
    assert {types.get(n.input[0]) for n in trig} == {onnx.TensorProto.DOUBLE}


def test_no_fused_rotary_operator(exported: Any) -> None:
    """What docs/deploying.md states: the exporter writes the rotation as elementary
    operators for every layout, at opset 23 too (no standard ``RotaryEmbedding`` node)."""
    for bundle in ("rope", "rope_scaled_axes"):
        ops = {n.op_type for n in onnx.load_from_string(exported[bundle][2]).graph.node}
        assert "RotaryEmbedding" not in ops
