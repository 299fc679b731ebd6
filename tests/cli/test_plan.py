"""``posenc plan CONFIG.json``: the table and the JSON of a rope plan, and its error contract."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posenc
from posenc.cli import build_parser, main
from tests.cli.test_help import SUBCOMMANDS
from tests.configs import GEMMA3, LLAMA3

QWEN2_VL = {
    "model_type": "qwen2_vl",
    "hidden_size": 512,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
}
SMOLLM3 = {
    "model_type": "smollm3",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 8,
    "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0],
    "rope_theta": 5000000.0,
}


def write(tmp_path: Path, config: Any, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def plan_output(tmp_path: Path, config: Any, capsys: Any, *options: str) -> str:
    assert main(["plan", str(write(tmp_path, config)), *options]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return str(captured.out)


def rows(text: str) -> dict[str, list[str]]:
    """The table's rows by their first cell (the layers)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("layers "))
    table = lines[start + 1 : lines.index("", start) if "" in lines[start:] else None]
    return {line.split()[0]: line.split() for line in table}


def test_llama3_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = plan_output(tmp_path, LLAMA3, capsys)
    assert "model_type llama, 4 layers" in text
    assert rows(text) == {
        "0-3": ["0-3", "full_attention", "llama3", "500000", "64/64", "half", "1", "-", "yes"]
    }
    assert "pairs half: from transformers' rotate_half convention" in text
    assert "scaling of full_attention (llama3): factor=8.0, low_freq_factor=1.0" in text


def test_gemma3_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = rows(plan_output(tmp_path, GEMMA3, capsys))
    assert table["0-4"][1:4] == ["sliding_attention", "default", "10000"]
    assert table["5"][1:4] == ["full_attention", "linear", "1e+06"]


def test_layer_type_keeps_one_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = plan_output(tmp_path, GEMMA3, capsys, "--layer-type", "full_attention")
    assert list(rows(text)) == ["5"]
    data = json.loads(
        plan_output(tmp_path, GEMMA3, capsys, "--json", "--layer-type", "full_attention")
    )
    assert [k["layer_type"] for k in data["kinds"]] == ["full_attention"]


def test_qwen2_vl_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = plan_output(tmp_path, QWEN2_VL, capsys)
    row = rows(text)["0-1"]
    assert row[4] == "128/128"
    assert "temporal,height,width" in row
    assert "(16/24/24)" in row
    assert "note: axes: mrope_section" in text


def test_smollm3_no_rope_layers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = plan_output(tmp_path, SMOLLM3, capsys)
    table = rows(text)
    assert table["0-2,4-6"][-1] == "yes"
    assert table["3,7"] == ["3,7", "full_attention", *["-"] * 6, "no"]
    assert "note: no_rope_layers[7] is 0: no RoPE in this layer" in text


def check_json_is_the_plan(data: dict[str, Any], config: dict[str, Any]) -> None:
    plan = posenc.rope_plan(config)
    assert (data["model_type"], data["source"]) == (plan.model_type, plan.source)
    assert data["num_layers"] == len(plan)
    assert data["notes"] == list(plan.notes)
    seen = sorted(i for kind in data["kinds"] for i in kind["layers"])
    assert seen == list(range(len(plan)))
    for kind in data["kinds"]:
        for i in kind["layers"]:
            layer = plan[i]
            assert kind["layer_type"] == layer.layer_type
            assert kind["uses_positions"] == layer.uses_positions
            assert kind["rope_type"] == layer.rope_type
            assert kind["base"] == layer.base
            assert (kind["head_dim"], kind["rotary_dim"]) == (layer.head_dim, layer.rotary_dim)
            assert (kind["pairs"], kind["pairs_source"]) == (layer.pairs, layer.pairs_source)
            assert kind["attention_factor"] == layer.attention_factor
            assert tuple(kind["axes"]) == layer.axes
            assert tuple(kind["sections"]) == layer.sections
            assert (kind["order"], kind["pairs_per_axis"]) == (layer.order, layer.pairs_per_axis)
            assert kind["inert"] == dict(layer.inert)
            assert set(layer.notes) <= set(kind["notes"])
            scaling = None if layer.scaling is None else dict(layer.scaling.params)
            assert kind["scaling"] == scaling
            frequencies = np.array(kind["frequencies"], dtype=np.float64)
            assert frequencies.shape == layer.frequencies.shape
            assert np.array_equal(frequencies, layer.frequencies)  # bit for bit


@pytest.mark.parametrize("config", [LLAMA3, GEMMA3, QWEN2_VL, SMOLLM3])
def test_json_is_the_plan(
    config: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(plan_output(tmp_path, config, capsys, "--json"))
    assert data["file"] == str(tmp_path / "config.json")
    check_json_is_the_plan(data, config)


def test_json_frequencies_are_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(plan_output(tmp_path, LLAMA3, capsys, "--json"))
    written = data["kinds"][0]["frequencies"]
    expected = posenc.rope_plan(LLAMA3).layer().frequencies
    assert written == [float(w) for w in expected]
    assert len({float(f"{w:.8g}") for w in written} ^ set(written)) > 0  # more than 8 digits


def test_the_json_check_can_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(plan_output(tmp_path, LLAMA3, capsys, "--json"))
    data["kinds"][0]["frequencies"][1] = np.nextafter(data["kinds"][0]["frequencies"][1], 1.0)
    with pytest.raises(AssertionError):
        check_json_is_the_plan(data, LLAMA3)


def one_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.endswith("\n"), captured.err
    assert "Traceback" not in captured.err
    assert captured.err.startswith("posenc plan: ")
    return str(captured.err)


HOSTILE = {
    "invalid.json": (b'{"rope_theta": 1e4,', "is not valid JSON"),
    "list.json": (b"[1, 2]", "must hold a JSON object"),
    "string.json": (b'"config"', "must hold a JSON object"),
    "latin1.json": ('{"model_type": "caf\xe9"}'.encode("latin-1"), "is not UTF-8"),
    "deep.json": (b"[" * 200_000 + b"]" * 200_000, "deeper than 64 levels"),
    "deep_object.json": (b'{"a":' * 100 + b"1" + b"}" * 100, "deeper than 64 levels"),
    "unknown_key.json": (
        json.dumps(
            {"head_dim": 8, "rope_parameters": {"rope_type": "linear", "factr": 2.0}}
        ).encode(),
        "['factr'] is not a parameter of rope_type 'linear'",
    ),
    "no_rope.json": (json.dumps({"model_type": "bert", "hidden_size": 8}).encode(), "config"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_file_is_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, message = HOSTILE[name]
    path = tmp_path / name
    path.write_bytes(data)
    err = one_error(["plan", str(path)], capsys)
    assert message in err
    assert str(path) in err


def test_missing_file_and_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "no such file" in one_error(["plan", str(tmp_path / "nope.json")], capsys)
    assert "is a directory" in one_error(["plan", str(tmp_path)], capsys)


def test_max_bytes_is_checked_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, LLAMA3)

    def no_reading(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the file was opened")

    monkeypatch.setattr(Path, "open", no_reading)
    err = one_error(["plan", str(path), "--max-bytes", "100"], capsys)
    assert "more than --max-bytes (100 bytes)" in err


def test_a_file_longer_than_it_says_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """A device is refused before it is opened (a FIFO would block the read until a writer
    comes); the bounded read itself still stops at --max-bytes on a source that never ends."""
    from posenc._io.config_file import _read_bounded
    from posenc._io.files import FileError

    err = one_error(["plan", "/dev/zero", "--max-bytes", "1k"], capsys)
    assert "/dev/zero is a character device, not a regular file" in err
    with pytest.raises(FileError, match=r"more than --max-bytes \(1,024 bytes\)"):
        _read_bounded(Path("/dev/zero"), 1024)


def test_a_named_pipe_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    err = one_error(["plan", str(fifo)], capsys)
    assert "is a FIFO (named pipe), not a regular file" in err


def test_unknown_layer_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = one_error(["plan", str(write(tmp_path, GEMMA3)), "--layer-type", "global"], capsys)
    assert "'full_attention', 'sliding_attention'" in err
    assert "'global'" in err


def test_every_subcommand_is_in_the_help_tests() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(sub.choices) == sorted(c for c in SUBCOMMANDS if c)


def test_a_config_claiming_billions_of_layers_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"model_type": "llama", "head_dim": 8, "num_hidden_layers": 10**9}
    config["rope_local_base_freq"] = 1
    assert main(["plan", str(write(tmp_path, config))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "num_hidden_layers must be an integer in [0, 65536]" in err


def test_vision_prints_the_plan_of_the_vision_tower(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {**QWEN2_VL, "vision_config": {"depth": 2, "embed_dim": 64, "num_heads": 4}}
    text = plan_output(tmp_path, config, capsys, "--vision")
    assert "model_type qwen2_vl_vision, 2 layers" in text
    assert rows(text)["0-1"][2:5] == ["axial", "10000", "16/16"]
    assert "height,width (4/4)" in text
    assert "note: config.vision_config gives no model_type: read as 'qwen2_vl_vision'" in text
    report = json.loads(plan_output(tmp_path, config, capsys, "--vision", "--json"))
    expected = posenc.rope_plan(config, vision=True).layer()
    assert report["kinds"][0]["frequencies"] == expected.frequencies.tolist()
    assert report["model_type"] == "qwen2_vl_vision"
    # without --vision: the language model's plan, whose notes name the tower
    assert "model_type qwen2_vl, 2 layers" in plan_output(tmp_path, config, capsys)


def test_vision_without_a_vision_config_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, QWEN2_VL)
    assert main(["plan", str(path), "--vision"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"{path}: config has no vision_config" in err


ERNIE_VL = {
    "model_type": "ernie4_5_vl_moe_text",
    "head_dim": 16,
    "num_hidden_layers": 2,
    "rope_parameters": {"rope_theta": 500.0, "mrope_section": [3, 3, 2]},
}
GEMMA4 = {"model_type": "gemma4", "vision_config": {"head_dim": 32, "num_hidden_layers": 2}}


def test_the_layouts_of_ernie_vl_and_gemma4_vision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = plan_output(tmp_path, ERNIE_VL, capsys)
    assert rows(text)["0-1"][7:10] == ["temporal,height,width", "(2/3/3)", "turns_then_last"]
    data = json.loads(plan_output(tmp_path, ERNIE_VL, capsys, "--json"))
    assert (data["kinds"][0]["order"], data["kinds"][0]["pairs_per_axis"]) == (
        "turns_then_last",
        False,
    )
    text = plan_output(tmp_path, GEMMA4, capsys, "--vision")
    assert rows(text)["0-1"][7:10] == ["width,height", "(8/8)", "pairs_per_axis"]
    data = json.loads(plan_output(tmp_path, GEMMA4, capsys, "--vision", "--json"))
    assert (data["kinds"][0]["order"], data["kinds"][0]["pairs_per_axis"]) == ("sectioned", True)


def test_a_refused_form_is_one_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, {"model_type": "nanochat", "head_dim": 16, "rope_theta": 1e4})
    assert "model_type 'nanochat'" in one_error(["plan", str(path)], capsys)
