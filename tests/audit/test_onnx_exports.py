"""ONNX models exported by the real tools: a tiny transformers Llama 3.1 exported with
``torch.onnx.export`` (its cos/sin computed in the graph from ``position_ids``) and with
transformers' own exporter with onnxruntime's CPU fusions (the rotation fused into
``GroupQueryAttention``, its caches computed in the graph, one row per token). Each export runs
once per module (seconds each); the broken artifacts are those exports with the exported
``inv_freq`` initializer changed as a stack changes it: rounded to bfloat16 (what a buffer cast
to bfloat16 before export carries) and written with another base (a config's ``rope_theta``
misread)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from posenc.analysis._rounding import _round_bfloat16
from posenc.audit import audit
from posenc.cli import main
from tests.configs import LLAMA3_ROPE_PARAMETERS

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.slow  # each export takes seconds

LLAMA = {"hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 2,
         "num_hidden_layers": 1, "intermediate_size": 16, "vocab_size": 64,
         "max_position_embeddings": 131072, "rope_parameters": LLAMA3_ROPE_PARAMETERS}  # fmt: skip


def llama() -> Any:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**LLAMA)
    return transformers.LlamaForCausalLM(config).eval()


class _Logits(torch.nn.Module):  # type: ignore[misc]
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any, position_ids: Any) -> Any:
        return self.model(input_ids=input_ids, position_ids=position_ids, use_cache=False).logits


def torch_export(model: Any, path: Path) -> Path:
    """A static export (8 tokens: a dynamic one takes twice as long), so the audit feeds the
    probe positions 8 at a time."""
    ids = torch.zeros(1, 8, dtype=torch.long)
    torch.onnx.export(
        _Logits(model).eval(), (ids, torch.arange(8)[None]), str(path), dynamo=True,
        verbose=False, input_names=["input_ids", "position_ids"], output_names=["logits"],
    )  # fmt: skip
    model.config.save_pretrained(path.parent)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-exports")


@pytest.fixture(scope="module")
def exported(folder: Path) -> Path:
    (folder / "torch").mkdir()
    return torch_export(llama(), folder / "torch" / "model.onnx")


def with_inv_freq(source: Path, target: Path, change: Any) -> Path:
    """A copy of an exported model (and its config) with the ``inv_freq`` initializer changed."""
    from onnx import numpy_helper

    model = onnx.load(str(source))
    (tensor,) = [t for t in model.graph.initializer if t.name.endswith("rotary_emb.inv_freq")]
    values = numpy_helper.to_array(tensor)
    tensor.CopyFrom(numpy_helper.from_array(change(values).astype(values.dtype), tensor.name))
    target.mkdir()
    onnx.save(model, str(target / "model.onnx"))
    (target / "config.json").write_text((source.parent / "config.json").read_text())
    return target / "model.onnx"


def plain_frequencies(values: Any) -> Any:
    """Llama's frequencies at base 10000, without the llama3 factors."""
    return 10000.0 ** (-np.arange(0, 2 * values.size, 2) / (2 * values.size))


@pytest.fixture(scope="module")
def bfloat16_inv_freq(exported: Path, folder: Path) -> Path:
    return with_inv_freq(exported, folder / "bf16", _round_bfloat16)


@pytest.fixture(scope="module")
def fused(folder: Path) -> Path:
    from transformers.exporters import OnnxConfig, OnnxExporter

    ids = torch.zeros(1, 8, dtype=torch.long)
    inputs = {"input_ids": ids, "position_ids": torch.arange(8)[None]}
    config = OnnxConfig(dynamic=False, ort_fusions="cpu")
    OnnxExporter().export(llama(), inputs, config=config).save_pretrained(folder / "fused")
    return folder / "fused" / "model.onnx"


def test_a_llama_exported_with_torch_passes(exported: Path) -> None:
    model = onnx.load(str(exported), load_external_data=False)
    assert {"Cos", "Sin"} <= {n.op_type for n in model.graph.node}
    assert "RotaryEmbedding" not in {n.op_type for n in model.graph.node}
    report = audit(exported.parent, exported)
    assert report.passed, str(report)
    (finding,) = report.findings
    assert finding.status == "float32_angles"
    assert finding.positions[1] == 2**20 - 1  # the graph is evaluated at every probe
    assert "cos/sin computed in the graph from the position input" in str(report)


def test_an_inv_freq_rounded_to_bfloat16_in_the_export_is_named(bfloat16_inv_freq: Path) -> None:
    report = audit(bfloat16_inv_freq.parent, bfloat16_inv_freq)
    assert not report.passed
    assert report.findings[0].cause == (
        "frequencies rounded to bfloat16 (an inv_freq buffer cast to bfloat16)"
    )


def test_transformers_exporter_fused_for_onnxruntime_passes(
    fused: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = onnx.load(str(fused), load_external_data=False)
    (gqa,) = [n for n in model.graph.node if n.op_type == "GroupQueryAttention"]
    assert gqa.domain == "com.microsoft"
    assert {a.name: a.i for a in gqa.attribute}["do_rotary"] == 1
    assert not set(gqa.input[7:9]) & {t.name for t in model.graph.initializer}  # computed
    code = main(["audit", str(fused.parent), str(fused), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    (finding,) = report["findings"]
    assert finding["status"] == "float32_angles"
    assert any("fused GroupQueryAttention nodes" in n and "computed in the graph" in n
               for n in report["notes"] + finding["notes"])  # fmt: skip


def test_the_fused_export_with_another_base_is_named(fused: Path, folder: Path) -> None:
    model = onnx.load(str(fused), load_external_data=False)
    if not any(t.name.endswith("rotary_emb.inv_freq") for t in model.graph.initializer):
        pytest.fail("transformers' fused export holds no rotary_emb.inv_freq initializer")
    wrong = with_inv_freq(fused, folder / "fused-base", plain_frequencies)
    report = audit(wrong.parent, wrong)
    assert not report.passed
    assert "base 10000 where the config says 500000" in report.findings[0].cause
