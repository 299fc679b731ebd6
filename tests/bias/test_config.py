"""The attention bias of a model's config: ``posenc plan`` reads ALiBi (BLOOM, MPT, Falcon),
T5 buckets (T5, UMT5, LongT5) and DeBERTa-v2 buckets from real ``transformers`` configs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posenc
from posenc._bias.config import bias_plan
from posenc.cli import main

if os.environ.get("CI"):
    import transformers
else:
    transformers = pytest.importorskip("transformers")


def configs() -> dict[str, Any]:
    t = transformers
    return {
        "bloom": t.BloomConfig(n_head=8, n_layer=2),
        "mpt": t.MptConfig(n_heads=12, n_layers=3, attn_config={"alibi_bias_max": 16}),
        "falcon": t.FalconConfig(
            alibi=True, hidden_size=48, num_attention_heads=6, num_hidden_layers=2
        ),
        "t5": t.T5Config(num_layers=3, num_decoder_layers=2, num_heads=4),
        "umt5": t.UMT5Config(num_layers=2, num_heads=6, relative_attention_num_buckets=64),
        "longt5": t.LongT5Config(num_layers=2, num_heads=4, relative_attention_max_distance=64),
        "deberta": t.DebertaV2Config(
            relative_attention=True, position_buckets=256, num_hidden_layers=2
        ),
    }


#: model -> (kind, heads, slope rule, buckets, max distance, directions by stack, layers)
EXPECTED = {
    "bloom": ("alibi", 8, "bloom", None, None, {"decoder": "causal"}, 2),
    "mpt": ("alibi", 12, "mpt", None, None, {"decoder": "causal"}, 3),
    "falcon": ("alibi", 6, "falcon", None, None, {"decoder": "causal"}, 2),
    "t5": ("t5_buckets", 4, None, 32, 128, {"encoder": "bidirectional", "decoder": "causal"}, 5),
    "umt5": ("t5_buckets", 6, None, 64, 128, {"encoder": "bidirectional", "decoder": "causal"}, 4),
    "longt5": ("t5_buckets", 4, None, 32, 64, {"encoder": "bidirectional", "decoder": "causal"}, 4),
    "deberta": ("deberta_buckets", 24, None, 256, 512, {"encoder": "bidirectional"}, 2),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_objects_and_their_json(name: str) -> None:
    config = configs()[name]
    kind, heads, rule, buckets, distance, directions, count = EXPECTED[name]
    for given in (config, json.loads(config.to_json_string())):
        plan = bias_plan(given)
        assert plan is not None
        assert len(plan) == count
        for stack, _, layer in plan.layers:
            assert (layer.kind, layer.heads, layer.slope_rule) == (kind, heads, rule)
            assert (layer.num_buckets, layer.max_distance) == (buckets, distance)
            assert layer.direction == directions[stack]
        assert {stack for stack, _, _ in plan.layers} == set(directions)


def test_slopes_are_the_model_rule() -> None:
    mpt = bias_plan(configs()["mpt"])
    assert mpt is not None
    layer = mpt.layers[0][2]
    assert layer.max_bias == 16.0
    expected = posenc.alibi_slopes(12, max_bias=16.0, convention="mpt")
    assert np.array_equal(layer.slopes(), expected)
    t5 = bias_plan(configs()["t5"])
    assert t5 is not None
    with pytest.raises(ValueError, match="no slopes"):
        t5.layers[0][2].slopes()


def test_t5_shares_the_first_table_and_umt5_does_not() -> None:
    t5, umt5 = bias_plan(configs()["t5"]), bias_plan(configs()["umt5"])
    assert t5 is not None
    assert umt5 is not None
    assert [layer.shared_table for _, _, layer in t5.layers] == [False, True, True, False, True]
    assert not any(layer.shared_table for _, _, layer in umt5.layers)


def test_no_bias() -> None:
    assert bias_plan(transformers.DebertaV2Config()) is None  # relative_attention off
    assert bias_plan(transformers.FalconConfig()) is None  # rotary Falcon
    assert bias_plan(transformers.LlamaConfig()) is None


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"n_head": 8.5}, TypeError, "num_attention_heads must be an integer"),
        ({"n_head": 0}, ValueError, "num_attention_heads must be an integer in"),
        ({"alibi": "yes", "model_type": "falcon"}, TypeError, "alibi must be true or false"),
        ({"n_layer": None, "num_hidden_layers": None}, ValueError, "must give num_hidden_layers"),
    ],
)
def test_bloom_values_are_checked(change: dict[str, Any], error: type, match: str) -> None:
    config = {"model_type": "bloom", "n_head": 8, "n_layer": 2, **change}
    with pytest.raises(error, match=match):
        bias_plan(config)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"relative_attention_num_buckets": 1}, ValueError, "relative_attention_num_buckets"),
        ({"relative_attention_max_distance": "128"}, TypeError, "relative_attention_max_dis"),
        ({"num_heads": True}, TypeError, "num_heads must be an integer"),
        ({"num_decoder_layers": -1}, ValueError, "num_decoder_layers"),
    ],
)
def test_t5_values_are_checked(change: dict[str, Any], error: type, match: str) -> None:
    config = {"model_type": "t5", "relative_attention_num_buckets": 32, "num_heads": 4,
              "num_layers": 2, **change}  # fmt: skip
    with pytest.raises(error, match=match):
        bias_plan(config)


def test_mpt_and_deberta_values_are_checked() -> None:
    mpt = {"model_type": "mpt", "n_heads": 4, "n_layers": 2}
    with pytest.raises(ValueError, match="alibi_bias_max must be a positive"):
        bias_plan({**mpt, "attn_config": {"alibi_bias_max": -8}})
    with pytest.raises(TypeError, match="attn_config must be an object"):
        bias_plan({**mpt, "attn_config": [8]})
    deberta = {"model_type": "deberta-v2", "relative_attention": True,
               "num_attention_heads": 4, "num_hidden_layers": 2}  # fmt: skip
    with pytest.raises(ValueError, match=r"max_relative_positions .* must exceed"):
        bias_plan({**deberta, "position_buckets": 256, "max_relative_positions": 100})
    with pytest.raises(TypeError, match="position_buckets must be an integer"):
        bias_plan({**deberta, "position_buckets": 2.5})


def test_falcon_with_alibi_does_not_rotate() -> None:
    plan = posenc.rope_plan(configs()["falcon"])
    assert not any(layer.uses_positions for layer in plan)
    assert any("alibi" in note for layer in plan for note in layer.notes)
    rotary = posenc.rope_plan(transformers.FalconConfig(num_hidden_layers=2))
    assert all(layer.uses_positions for layer in rotary)


# --------------------------------------------------------------------------- posenc plan


def plan_cli(tmp_path: Path, config: Any, capsys: pytest.CaptureFixture[str], *options: str) -> str:
    path = tmp_path / "config.json"
    text = config.to_json_string() if hasattr(config, "to_json_string") else json.dumps(config)
    path.write_text(text)
    assert main(["plan", str(path), *options]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return str(captured.out)


def bias_rows(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stack "))
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return [line.split() for line in lines[start + 1 : end]]


def test_plan_table_of_t5(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = plan_cli(tmp_path, configs()["t5"], capsys)
    assert "model_type t5, 5 layers" in text
    assert bias_rows(text) == [
        ["encoder", "0", "t5_buckets", "4", "-", "32", "128", "bidirectional", "own"],
        ["encoder", "1-2", "t5_buckets", "4", "-", "32", "128", "bidirectional", "shared"],
        ["decoder", "0", "t5_buckets", "4", "-", "32", "128", "causal", "own"],
        ["decoder", "1", "t5_buckets", "4", "-", "32", "128", "causal", "shared"],
    ]
    assert "no RoPE settings" in text


def test_plan_table_of_mpt_and_deberta(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mpt = bias_rows(plan_cli(tmp_path, configs()["mpt"], capsys))
    assert mpt == [["decoder", "0-2", "alibi", "12", "mpt", "(max_bias", "16,", "form",
                    "relative)", "-", "-", "causal", "-"]]  # fmt: skip
    deberta = bias_rows(plan_cli(tmp_path, configs()["deberta"], capsys))
    assert deberta == [
        ["encoder", "0-1", "deberta_buckets", "24", "-", "256", "512", "bidirectional", "own"]
    ]


def test_plan_of_falcon_with_alibi(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = plan_cli(tmp_path, configs()["falcon"], capsys)
    assert "rope parameters from" in text  # the RoPE table: no layer rotates
    assert text.count("Falcon adds ALiBi") == 1
    assert bias_rows(text)[0][:4] == ["decoder", "0-1", "alibi", "6"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_plan_json_is_the_bias_plan(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = configs()[name]
    data = json.loads(plan_cli(tmp_path, config, capsys, "--json"))
    assert data["schema_version"] == 1
    plan = bias_plan(config)
    assert plan is not None
    seen = []
    for kind in data["bias"]["kinds"]:
        for i in kind["layers"]:
            seen.append((kind["stack"], i))
            layer = next(layer for s, j, layer in plan.layers if (s, j) == (kind["stack"], i))
            assert kind["kind"] == layer.kind
            assert kind["heads"] == layer.heads
            assert kind["direction"] == layer.direction
            assert kind["slope_rule"] == layer.slope_rule
            assert kind["num_buckets"] == layer.num_buckets
            assert kind["max_distance"] == layer.max_distance
            assert kind["shared_table"] == layer.shared_table
            if layer.kind == "alibi":
                assert np.array_equal(np.array(kind["slopes"]), layer.slopes())
            else:
                assert kind["slopes"] is None
    assert seen == [(s, j) for s, j, _ in plan.layers]


def test_plan_json_of_a_rope_model_has_no_bias(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
              "num_hidden_layers": 2, "rope_theta": 10000.0}  # fmt: skip
    data = json.loads(plan_cli(tmp_path, config, capsys, "--json"))
    assert data["bias"] is None
    assert "attention bias" not in plan_cli(tmp_path, config, capsys)


def test_plan_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(configs()["bloom"].to_json_string())
    assert main(["plan", str(path), "--layer-type", "full_attention"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--layer-type selects RoPE layers" in err
    path.write_text(json.dumps({"model_type": "bloom", "n_head": "8", "n_layer": 2}))
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "num_attention_heads must be an integer" in err
    assert str(path) in err
