"""ONNX models built with ``onnx.helper``: fused ``RotaryEmbedding`` nodes (onnxruntime's and
ONNX's own) and bare cache initializers; a correct graph passes, a broken one is named, a graph
without a rotary part is one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from posenc import rope_plan
from posenc.audit import audit
from tests.audit.models import QWEN2_VL, QWEN25_YARN

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def caches(config: dict[str, Any], rows: int = 4096) -> tuple[Any, Any]:
    kind = rope_plan(config).layer()
    omega, attention = kind.frequencies_at(None)
    theta = np.arange(rows, dtype=np.float32)[:, None] * omega.astype(np.float32)
    return np.cos(theta) * np.float32(attention), np.sin(theta) * np.float32(attention)


def graph(
    path: Path,
    cos: Any,
    sin: Any,
    *,
    domain: str = "com.microsoft",
    interleaved: int = 0,
    sin_name: str = "sin_cache",
    fused: bool = True,
) -> Path:
    inits = [numpy_helper.from_array(np.asarray(cos, np.float32), "cos_cache"),
             numpy_helper.from_array(np.asarray(sin, np.float32), "sin_cache")]  # fmt: skip
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 128])
    ids = helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 128])
    if not fused:
        nodes = [helper.make_node("Identity", ["x"], ["y"])]
    elif domain == "com.microsoft":
        nodes = [helper.make_node("RotaryEmbedding", ["x", "position_ids", "cos_cache", sin_name],
                                  ["y"], domain=domain, interleaved=interleaved,
                                  name="layers.0.attn.rotary")]  # fmt: skip
    else:
        nodes = [helper.make_node("RotaryEmbedding", ["x", "cos_cache", sin_name, "position_ids"],
                                  ["y"], interleaved=interleaved, num_heads=2,
                                  name="layers.0.attn.rotary")]  # fmt: skip
    opsets = [helper.make_opsetid("", 23), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(helper.make_graph(nodes, "g", [x, ids], [y], inits),
                              opset_imports=opsets)  # fmt: skip
    onnx.save(model, str(path))
    return path


def cause(report: Any) -> str:
    assert not report.passed, str(report)
    return " ".join(f.cause for f in report.findings)


@pytest.mark.parametrize("domain", ["com.microsoft", ""])
def test_a_fused_rotary_node_passes_and_its_layout_is_read(tmp_path: Path, domain: str) -> None:
    cos, sin = caches(QWEN25_YARN)
    report = audit(QWEN25_YARN, graph(tmp_path / "ok.onnx", cos, sin, domain=domain))
    assert report.passed, str(report)
    assert report.subject_kind == "onnx"
    assert "fused RotaryEmbedding nodes (layers.0.attn.rotary)" in str(report)
    wrong = graph(tmp_path / "il.onnx", cos, sin, domain=domain, interleaved=1)
    assert cause(audit(QWEN25_YARN, wrong)).startswith(
        "pairs interleaved where the model pairs halves"
    )


def test_sin_read_from_the_cos_cache_is_named(tmp_path: Path) -> None:
    cos, sin = caches(QWEN25_YARN)
    wrong = graph(tmp_path / "sin.onnx", cos, sin, sin_name="cos_cache")
    assert cause(audit(QWEN25_YARN, wrong)).startswith("sin read from cos")


def test_mrope_fused_into_the_one_axis_op_is_named(tmp_path: Path) -> None:
    cos, sin = caches(QWEN2_VL)
    text = cause(audit(QWEN2_VL, graph(tmp_path / "vl.onnx", cos, sin)))
    assert text == "sections [8, 12, 12] ignored: every pair turns with the temporal coordinate"


def test_bare_cache_initializers(tmp_path: Path) -> None:
    cos, sin = caches(QWEN25_YARN)
    assert audit(QWEN25_YARN, graph(tmp_path / "bare.onnx", cos, sin, fused=False)).passed


def test_a_graph_without_a_rotary_part_is_one_line(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    identity = helper.make_node("Identity", ["x"], ["y"])
    model = helper.make_model(helper.make_graph([identity], "g", [x], [y]))
    path = tmp_path / "none.onnx"
    onnx.save(model, str(path))
    with pytest.raises(
        ValueError,
        match="holds no RotaryEmbedding node, no cos/sin cache initializers and no Cos/Sin",
    ):
        audit(QWEN25_YARN, path)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not a protobuf at all\xff\xff")
    with pytest.raises(ValueError, match=r"not a readable ONNX model|no RotaryEmbedding"):
        audit(QWEN25_YARN, garbage)
