"""transformers models as subjects: their rotary buffers as they are now, so a cast after
building (``model.to(torch.bfloat16)`` casts ``inv_freq``) is caught; per-layer-type buffers
(Gemma 3) are audited per layer."""

from __future__ import annotations

import pytest

from posenc.audit import audit
from tests.audit.models import GEMMA3, LLAMA3

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow  # importing transformers takes seconds


def test_a_llama_passes_and_its_bfloat16_cast_is_named() -> None:
    config = transformers.LlamaConfig(**{**LLAMA3, "vocab_size": 64, "intermediate_size": 64})
    model = transformers.LlamaForCausalLM(config)
    report = audit(model, model)
    assert report.passed, str(report)
    assert report.findings[0].recipe == "float32 angles (the inv_freq buffers are float32)"
    model.to(torch.bfloat16)
    report = audit(model, model)
    assert not report.passed
    assert report.findings[0].cause == (
        "frequencies rounded to bfloat16 (an inv_freq buffer cast to bfloat16)"
    )


def test_gemma3_buffers_per_layer_type() -> None:
    values = {**GEMMA3, "vocab_size": 64, "intermediate_size": 32, "hidden_size": 64,
              "num_attention_heads": 4, "num_key_value_heads": 1}  # fmt: skip
    model = transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**values))
    report = audit(model, model)
    assert report.passed, str(report)
    assert [f.layers for f in report.findings] == [(0, 1, 2, 3, 4), (5,)]
    local = model.model.rotary_emb.sliding_attention_inv_freq
    model.model.rotary_emb.full_attention_inv_freq.copy_(local)  # the local RoPE everywhere
    report = audit(model, model)
    (wrong,) = [f for f in report.findings if not f.passed]
    assert wrong.layers == (5,)
    assert wrong.cause.startswith("the RoPE of 'sliding_attention' layers (base 10000) on a 'full")
