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


# --------------------------------------------------------------------------- computed in the graph

PIXTRAL = {"model_type": "pixtral", "head_dim": 64,
           "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0}}  # fmt: skip


def frequencies(config: dict[str, Any]) -> tuple[Any, float]:
    """The plan's frequency matrix ``(n_axes, n_pairs)`` (float32) and attention factor."""
    kind = rope_plan(config).layer()
    if kind.multi_axis:
        matrix, attention = kind.axis_frequencies(None)
        return np.asarray(matrix, np.float32), float(np.asarray(attention).flat[0])
    omega, attention = kind.frequencies_at(None)
    return np.asarray(omega, np.float32)[None], float(attention)


def computed(
    path: Path,
    config: dict[str, Any],
    *,
    axes: bool = False,
    length: int | str = "length",
    external: bool = False,
) -> Path:
    """cos/sin as ``torch.onnx.export`` writes a transformers rotary module: ``position_ids``
    (``(n_axes, 1, length)`` times the frequency matrix when ``axes``, else ``(1, length)``
    times every pair's frequency), the angles twice along the channels, Cos and Sin, times the
    attention factor."""
    matrix, attention = frequencies(config)
    n_axes, n = matrix.shape
    shape = [n_axes, 1, length] if axes else [1, length]
    ids = helper.make_tensor_value_info("position_ids", TensorProto.INT64, shape)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, length, 2 * n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, length, 2 * n])
    inits = [numpy_helper.from_array(matrix if axes else matrix.sum(0, keepdims=True), "inv_freq"),
             numpy_helper.from_array(np.array(attention, np.float32), "scaling"),
             numpy_helper.from_array(np.array([-1], np.int64), "last")]  # fmt: skip
    spread = (helper.make_node("Transpose", ["p"], ["pt"], perm=[1, 2, 0]) if axes
              else helper.make_node("Unsqueeze", ["p", "last"], ["pt"]))  # fmt: skip
    nodes = [
        helper.make_node("Cast", ["position_ids"], ["p"], to=TensorProto.FLOAT),
        spread,
        helper.make_node("MatMul", ["pt", "inv_freq"], ["freqs"]),
        helper.make_node("Concat", ["freqs", "freqs"], ["emb"], axis=-1),
        helper.make_node("Cos", ["emb"], ["cos0"]),
        helper.make_node("Sin", ["emb"], ["sin0"]),
        helper.make_node("Mul", ["cos0", "scaling"], ["cos"]),
        helper.make_node("Mul", ["sin0", "scaling"], ["sin"]),
        helper.make_node("Mul", ["x", "cos"], ["xc"]),
        helper.make_node("Mul", ["x", "sin"], ["xs"]),
        helper.make_node("Add", ["xc", "xs"], ["y"]),
    ]
    model = helper.make_model(helper.make_graph(nodes, "g", [x, ids], [y], inits),
                              opset_imports=[helper.make_opsetid("", 18)])  # fmt: skip
    onnx.save(model, str(path), save_as_external_data=external, size_threshold=0,
              location=f"{path.name}.data")  # fmt: skip
    return path


@pytest.mark.parametrize("length", ["length", 8])
def test_cos_sin_computed_from_position_ids_are_evaluated(tmp_path: Path, length: Any) -> None:
    report = audit(QWEN25_YARN, computed(tmp_path / "yarn.onnx", QWEN25_YARN, length=length))
    assert report.passed, str(report)
    (finding,) = report.findings
    assert finding.status == "float32_angles"
    assert finding.positions[1] == 2**20 - 1  # every probe, 8 at a time for a fixed length
    assert "cos/sin computed in the graph from the position input" in " ".join(report.notes)
    plain = computed(tmp_path / "plain.onnx", {**QWEN25_YARN, "rope_scaling": None})
    assert cause(audit(QWEN25_YARN, plain)) == "no yarn where the config has yarn factor 4"


@pytest.mark.parametrize(
    ("config", "sections"),
    [(QWEN2_VL, "sections [8, 12, 12] ignored: every pair turns with the temporal coordinate"),
     (PIXTRAL, "sections [16, 16] ignored: every pair turns with the height coordinate")],
)  # fmt: skip
def test_a_multi_axis_layer_fed_one_position_per_token_is_named(
    tmp_path: Path, config: dict[str, Any], sections: str
) -> None:
    every = audit(config, computed(tmp_path / "axes.onnx", config, axes=True))
    assert every.passed, str(every)
    report = audit(config, computed(tmp_path / "one.onnx", config))
    assert cause(report) == sections
    assert "the input 'position_ids' (1, 'length') takes one position per token" in str(report)


def test_caches_a_fused_node_reads_computed_in_the_graph(tmp_path: Path) -> None:
    omega, attention = frequencies(QWEN25_YARN)

    def model(interleaved: int, sin: str = "sin_cache") -> Path:
        inits = [numpy_helper.from_array(omega, "inv_freq"),
                 numpy_helper.from_array(np.array(attention, np.float32), "scaling")]  # fmt: skip
        nodes = [
            helper.make_node("Constant", [], ["rows"], value_float=4096.0),
            helper.make_node("Constant", [], ["zero"], value_float=0.0),
            helper.make_node("Constant", [], ["one"], value_float=1.0),
            helper.make_node("Range", ["zero", "rows", "one"], ["p"]),
            helper.make_node("Constant", [], ["axis"], value_ints=[1]),
            helper.make_node("Unsqueeze", ["p", "axis"], ["pt"]),
            helper.make_node("MatMul", ["pt", "inv_freq"], ["angles"]),
            helper.make_node("Cos", ["angles"], ["c"]),
            helper.make_node("Sin", ["angles"], ["s"]),
            helper.make_node("Mul", ["c", "scaling"], ["cos_cache"]),
            helper.make_node("Mul", ["s", "scaling"], ["sin_cache"]),
            helper.make_node(
                "RotaryEmbedding",
                ["x", "ids", "cos_cache", sin],  # positions by any name
                ["y"],
                domain="com.microsoft",
                interleaved=interleaved,
                name="rotary",
            ),
        ]
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 128])
        ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 128])
        opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
        graph = helper.make_graph(nodes, "g", [x, ids], [y], inits)
        path = tmp_path / f"fused{interleaved}{sin}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))
        return path

    report = audit(QWEN25_YARN, model(0))
    assert report.passed, str(report)
    assert report.findings[0].positions[1] == 4095  # the rows the cache holds
    assert "fused RotaryEmbedding nodes (rotary): caches computed in the graph" in str(report)
    assert cause(audit(QWEN25_YARN, model(1))).startswith("pairs interleaved")
    assert cause(audit(QWEN25_YARN, model(0, "cos_cache"))).startswith("sin read from cos")


def test_a_computed_part_is_bounded_before_it_is_evaluated(tmp_path: Path) -> None:
    path = computed(tmp_path / "ext.onnx", QWEN25_YARN, external=True)
    assert audit(QWEN25_YARN, path).passed  # its inv_freq read from ext.onnx.data
    with pytest.raises(ValueError, match="the initializers the rotary part reads exceed"):
        audit(QWEN25_YARN, path, max_bytes=path.stat().st_size + 64)
    (tmp_path / "ext.onnx.data").write_bytes(b"")
    with pytest.raises(ValueError, match="the tensor 'inv_freq' cannot be read"):
        audit(QWEN25_YARN, path)
    huge = computed(tmp_path / "huge.onnx", QWEN25_YARN)
    model = onnx.load(str(huge))
    model.graph.node[2].input[1] = "big"  # the angles now read an input of 2**40 floats
    big = helper.make_tensor_value_info("big", TensorProto.FLOAT, [2**20, 2**20])
    model.graph.input.append(big)
    onnx.save(model, str(huge))
    with pytest.raises(
        ValueError, match=r"the input 'big' .* has shape \(1048576, 1048576\), too large"
    ):
        audit(QWEN25_YARN, huge)


def sections_chosen_after_cos(path: Path, axes: list[int]) -> Path:
    """Qwen2-VL as transformers computes it: each axis's full table ``(3, 1, length, 64)``,
    then block ``i`` of the channels (sections [8, 12, 12], twice) taken from axis ``axes[i]``."""
    matrix, _ = frequencies(QWEN2_VL)
    inits = [numpy_helper.from_array(matrix.sum(0), "inv_freq"),
             numpy_helper.from_array(np.array([-1], np.int64), "last"),
             numpy_helper.from_array(np.array([8, 12, 12] * 2, np.int64), "sizes")]  # fmt: skip
    parts = [f"part{i}" for i in range(6)]
    nodes = [
        helper.make_node("Cast", ["position_ids"], ["p"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["p", "last"], ["p1"]),
        helper.make_node("Mul", ["p1", "inv_freq"], ["freqs"]),
        helper.make_node("Concat", ["freqs", "freqs"], ["emb"], axis=-1),
        helper.make_node("Cos", ["emb"], ["cos"]),
        helper.make_node("Sin", ["emb"], ["sin"]),
    ]
    for table in ("cos", "sin"):
        nodes.append(helper.make_node("Split", [table, "sizes"], [f"{table}_{p}" for p in parts],
                                      axis=-1))  # fmt: skip
        for i, axis in enumerate(axes):
            index = numpy_helper.from_array(np.array(axis, np.int64), f"{table}_axis{i}")
            inits.append(index)
            nodes.append(helper.make_node("Gather", [f"{table}_part{i}", index.name],
                                          [f"{table}_chosen{i}"], axis=0))  # fmt: skip
        chosen = [f"{table}_chosen{i}" for i in range(6)]
        nodes += [helper.make_node("Concat", chosen, [f"{table}_t"], axis=-1),
                  helper.make_node("Mul", ["x", f"{table}_t"], [f"x_{table}"])]  # fmt: skip
    nodes.append(helper.make_node("Add", ["x_cos", "x_sin"], ["y"]))
    ids = helper.make_tensor_value_info("position_ids", TensorProto.INT64, [3, 1, "length"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "length", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "length", 64])
    graph = helper.make_graph(nodes, "g", [x, ids], [y], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def test_mrope_sections_chosen_after_cos_are_followed(tmp_path: Path) -> None:
    report = audit(QWEN2_VL, sections_chosen_after_cos(tmp_path / "vl.onnx", [0, 1, 2] * 2))
    assert report.passed, str(report)
    assert "(cos_t, sin_t)" in str(report)  # the tables the rotation multiplies by
    temporal = sections_chosen_after_cos(tmp_path / "t.onnx", [0] * 6)
    assert cause(audit(QWEN2_VL, temporal)) == (
        "sections [8, 12, 12] ignored: every pair turns with the temporal coordinate"
    )


def test_an_evaluation_that_runs_too_long_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from posenc.audit import _onnx

    monkeypatch.setattr(_onnx, "MAX_SECONDS", 0.3)
    path = computed(tmp_path / "loop.onnx", QWEN25_YARN)
    model = onnx.load(str(path))
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Identity", ["v"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None)],
    )  # fmt: skip
    model.graph.initializer.append(numpy_helper.from_array(np.array(2**62), "trips"))
    loop = helper.make_node("Loop", ["trips", "", "p"], ["p_looped"], body=body)
    model.graph.node.insert(1, loop)  # the positions go round 2**62 times first
    model.graph.node[2].input[0] = "p_looped"
    onnx.save(model, str(path))
    with pytest.raises(ValueError, match=r"evaluating the rotary part took more than 0.3 s"):
        audit(QWEN25_YARN, path)


def test_stored_caches_in_external_data_are_read_from_the_model_s_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache stored beside the model (external data) is read from the model's folder, never
    from the working directory (it was: from elsewhere it could not be read, and a decoy file
    of that name in the working directory would have been read instead)."""
    cos, sin = caches(QWEN25_YARN)
    folder = tmp_path / "model"
    folder.mkdir()
    path = graph(folder / "m.onnx", cos, sin)
    model = onnx.load(str(path))
    onnx.save(model, str(path), save_as_external_data=True, location="data.bin",
              size_threshold=0)  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert audit(QWEN25_YARN, path).passed
    (elsewhere / "data.bin").write_bytes(np.zeros(4096 * 32 * 2, np.float32).tobytes())  # a decoy
    assert audit(QWEN25_YARN, path).passed


def test_a_named_pipe_or_a_folder_is_refused_before_it_is_read(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo.onnx"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        audit(QWEN25_YARN, fifo)
    folder = tmp_path / "folder.onnx"
    folder.mkdir()
    with pytest.raises((ValueError, OSError), match=r"is a directory, expected an \.onnx file"):
        audit(QWEN25_YARN, folder)
