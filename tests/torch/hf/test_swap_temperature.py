"""``swap_positions`` gives attention layers posenc's temperature (Llama 4's on its layers
without RoPE, Ministral 3's and Mistral 4's ``llama_4_scaling_beta`` on every layer).

The tiny models take their temperature's first step at position 3 or 4 (``floor_scale`` 4,
``original_max_position_embeddings`` 4, scales 0.5), so every comparison runs where the scale
is above 1: the left-padded batch (9 tokens) and the cached greedy generation (17 positions).
The swapped copy must give the original's logits and generation within
:data:`tests.torch.tiny_models.MODEL_ULPS`; with posenc's temperature made 1 % too large after
the swap, its logits must differ (the scale the layers use is posenc's), and made so before
it, the swap must leave the layers and name the position where the scales differ.
"""

from __future__ import annotations

import copy
import io
import re
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers.models.auto.modeling_auto import (  # noqa: E402
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as CAUSAL_LM,
)

from posenc.torch.hf import _swap_temperature, swap_positions  # noqa: E402
from tests.torch import tiny_models  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

BETA = {"llama_4_scaling_beta": 0.5, "original_max_position_embeddings": 4}
_BUILT: dict[str, tuple[Any, Any, Any]] = {}


def _config(model_type: str) -> Any:
    if model_type in ("ergo", "inkling2_loop_text") and model_type not in CAUSAL_LM:
        pytest.skip(f"transformers {transformers.__version__} has no {model_type}")
    if model_type == "ergo":
        config = tiny_models.tiny_config(model_type)
        config.global_attention_scale = 2.0
        return config
    if model_type == "inkling2_loop_text":
        config = tiny_models.tiny_config(model_type)
        config.log_scaling_n_floor, config.log_scaling_alpha = 4, 0.5
        return config
    if model_type == "llama4_text":
        config = tiny_models.tiny_config(model_type)
        config.floor_scale, config.attn_scale = 4, 0.5
        config.no_rope_layers = [1, 0]  # layer 1 has no RoPE: the temperature's layer
        return config
    if model_type == "mistral4":  # not a causal LM of the pinned auto mapping
        cls = transformers.Mistral4Config
        config = cls(**tiny_models._shrunk(cls().to_dict()))
        config.pad_token_id = tiny_models.PAD
    else:
        config = tiny_models.tiny_config(model_type)
    config.rope_parameters.update(BETA)
    return config


def _model_class(model_type: str) -> Any:
    if model_type == "mistral4":
        return transformers.Mistral4ForCausalLM
    return tiny_models.model_class(model_type)


def build(model_type: str) -> tuple[Any, Any, Any]:
    """(original, swapped, report), built once per session."""
    if model_type not in _BUILT:
        config = _config(model_type)
        torch.manual_seed(0)
        original = _model_class(model_type)(config).eval()
        swapped = copy.deepcopy(original)
        _BUILT[model_type] = original, swapped, swap_positions(swapped)
    return _BUILT[model_type]


#: model type -> (temperature kind, the layers that have it)
MODELS = {
    "llama4_text": ("llama4", ["model.layers.1.self_attn"]),
    "ministral3": ("llama4_beta", ["model.layers.0.self_attn", "model.layers.1.self_attn"]),
    "mistral4": ("llama4_beta", ["model.layers.0.self_attn", "model.layers.1.self_attn"]),
    # transformers 5.25 on: Ergo's constant on its full-attention layer, Inkling2-loop's log
    # scaling on the queries and relative states of its full-attention layer
    "ergo": ("constant", ["model.layers.1.self_attn"]),
    "inkling2_loop_text": (
        "log",
        [
            "model.layers.1.self_attn.q_proj.norm.log_scale",
            "model.layers.1.self_attn.relative_position_bias.norm.log_scale",
        ],
    ),
}
#: the temperatures that depend on the position (a wrong one must change the logits)
BY_POSITION = ["llama4_text", "ministral3", "mistral4", "inkling2_loop_text"]


@pytest.mark.parametrize("model_type", list(MODELS))
def test_swapped_layers_keep_their_temperature_from_posenc(model_type: str) -> None:
    original, swapped, report = build(model_type)
    kind, layers = MODELS[model_type]
    records = [r for r in report.replaced if r.kind == "temperature"]
    assert [r.name for r in records] == layers, str(report)
    assert {r.layout for r in records} == {kind}
    assert not report.left, str(report)
    tiny_models.compare(original, swapped)


@pytest.mark.parametrize(
    ("model_type", "dtype"),
    [("llama4_text", "float16"), ("ministral3", "bfloat16"), ("mistral4", "float16")],
)
def test_16_bit_models_keep_their_temperature_from_posenc(model_type: str, dtype: str) -> None:
    """Built in 16 bits (as ``from_pretrained(dtype=)`` builds), swapped in it: verified in
    that dtype, and within the 16-bit swap criterion of the sweep."""
    torch_dtype = getattr(torch, dtype)
    config = _config(model_type)
    torch.manual_seed(0)
    with tiny_models.default_dtype(torch_dtype):
        original = _model_class(model_type)(config).eval()
    swapped = copy.deepcopy(original)
    report = swap_positions(swapped)
    assert [r.name for r in report.replaced if r.kind == "temperature"] == MODELS[model_type][1]
    assert tiny_models.compare_16_bits(original, swapped, torch_dtype) == []


@pytest.mark.parametrize("model_type", BY_POSITION)
def test_a_wrong_temperature_in_posenc_changes_the_logits(model_type, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    original, swapped, _ = build(model_type)
    right = _swap_temperature.temperature_at
    monkeypatch.setattr(_swap_temperature, "temperature_at", lambda p, t: right(p, t) * 1.01)
    wrong = tiny_models.logits(swapped)
    assert float((wrong - tiny_models.logits(original)).abs().max()) > 1e-3


@pytest.mark.parametrize("model_type", ["llama4_text", "ministral3"])
def test_a_wrong_temperature_is_named_and_left(model_type, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    original = build(model_type)[0]
    right = _swap_temperature.temperature_at

    def wrong(positions: Any, temperature: Any) -> Any:
        scale = right(positions, temperature)
        return torch.where(positions >= 2**20, scale * 1.001, scale)

    monkeypatch.setattr(_swap_temperature, "temperature_at", wrong)
    model = copy.deepcopy(original)
    report = swap_positions(model)
    assert not [r for r in report.replaced if r.kind == "temperature"], str(report)
    kind, layers = MODELS[model_type]
    assert [x.name for x in report.left] == layers
    for left in report.left:
        assert f"temperature differs from posenc's {kind} (" in left.reason
        assert re.search(r"at position 10485(7[6-9]|8[0-3])$", left.reason)
    assert "forward" not in vars(model.get_submodule(layers[0]))


@pytest.mark.parametrize("model_type", ["llama4_text", "ministral3"])
def test_a_saved_and_loaded_model_keeps_posenc_s_temperature(model_type: str) -> None:
    """``torch.save`` of the whole swapped model, then ``torch.load``: the layers still take
    their temperature from posenc (Llama 4's switch stays off, so a layer that came back
    with the model's own ``forward`` would have none)."""
    original, swapped, _ = build(model_type)
    buffer = io.BytesIO()
    torch.save(swapped, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    layer = MODELS[model_type][1][0]
    assert _swap_temperature.temperature_swapped(loaded.get_submodule(layer))
    assert swap_positions(loaded).already
    tiny_models.compare(original, loaded)


def test_a_compiled_layer_keeps_posenc_s_temperature() -> None:
    """Under ``torch.compile`` a swapped layer runs eagerly (dynamo reads the globals of the
    model's code from its module, and would trace the model's own temperature: none for
    Llama 4, whose switch is off): compiled, it gives the original layer's output."""
    original, swapped, _ = build("llama4_text")
    name = MODELS["llama4_text"][1][0]
    theirs, ours = original.get_submodule(name), swapped.get_submodule(name)
    hidden = torch.randn(1, 12, 64, generator=torch.Generator().manual_seed(0))  # scale to 1.55
    compiled = torch.compile(ours, backend="eager")
    with torch.no_grad():
        expected, got = theirs(hidden, None, None)[0], compiled(hidden, None, None)[0]
    tiny_models.assert_close_ulp(got, expected, ulps=8, what="attention output")


def test_swapping_twice_finds_posenc_s_temperature() -> None:
    _, swapped, _ = build("llama4_text")
    again = swap_positions(copy.deepcopy(swapped))
    assert "model.layers.1.self_attn" in again.already
    assert not again.replaced


def test_the_original_model_is_untouched_and_the_switch_is_the_copy_s() -> None:
    original, swapped, _ = build("llama4_text")
    assert original.model.layers[1].self_attn.attn_temperature_tuning
    assert not swapped.model.layers[1].self_attn.attn_temperature_tuning
    assert "forward" not in vars(original.model.layers[1].self_attn)
    ours = dict(swapped.named_parameters())
    assert ours.keys() == dict(original.named_parameters()).keys()  # checkpoints load as before


def test_a_temperature_computed_inline_is_left_by_name() -> None:
    """Inkling's log scaling has no switch of its own: left to the model, by name."""
    config = tiny_models.tiny_config("inkling_text")
    config.log_scaling_n_floor, config.log_scaling_alpha = 4, 0.5
    torch.manual_seed(0)
    model = tiny_models.model_class("inkling_text")(config).eval()
    report = swap_positions(model)
    left = {x.name: x.reason for x in report.left}
    full = [i for i, t in enumerate(config.layer_types) if t != "hybrid_sliding"]
    assert full, config.layer_types
    reason = left[f"model.layers.{full[0]}.self_attn"]
    assert reason.startswith("temperature log (log_scaling_n_floor=4) on the queries")
    assert "computed inside the layer's forward, left to the model" in reason


def test_a_constant_that_differs_is_named_and_left() -> None:
    original = build("ergo")[0]
    model = copy.deepcopy(original)
    layer = model.model.layers[1].self_attn
    layer.qk_scale = layer.qk_scale * (1 + 2.0**-20)
    report = swap_positions(model)
    assert not [r for r in report.replaced if r.kind == "temperature"], str(report)
    (left,) = [x for x in report.left if x.name == "model.layers.1.self_attn"]
    assert left.reason.startswith("temperature differs from posenc's constant (scale=1.41421)")
    assert "the layer's qk_scale 1.41421485" in left.reason
