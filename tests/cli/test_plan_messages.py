"""``posenc plan``: valid JSON with a schema version, and messages that say what happened."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posenc
from posenc.cli import main


def write(tmp_path: Path, config: Any, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


LLAMA = {
    "model_type": "llama",
    "head_dim": 8,
    "num_hidden_layers": 2,
    "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4},
}


def test_json_has_a_schema_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--json", str(write(tmp_path, LLAMA))]) == 0
    report = _strict(capsys.readouterr().out)
    assert report["schema_version"] == 1
    assert type(report["schema_version"]) is int


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "where",
    ["llama_4_scaling_beta", "factor", "rope_theta", "top:rope_theta", "top:head_dim"],
)
def test_json_is_valid_or_the_config_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, bad: float
) -> None:
    config = json.loads(json.dumps(LLAMA))
    if where.startswith("top:"):
        config[where[4:]] = bad
    else:
        config["rope_parameters"][where] = bad
    code = main(["plan", "--json", str(write(tmp_path, config))])
    out, err = capsys.readouterr()
    if code == 0:
        _strict(out)
    else:
        assert code == 2
        assert where.removeprefix("top:") in err
        assert err.count("\n") == 1


def test_infinity_in_a_section_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        '{"model_type": "qwen2_vl_text", "head_dim": 8, "num_hidden_layers": 2, '
        '"rope_parameters": {"rope_theta": 10000.0, "mrope_section": [Infinity, 1, 1]}}'
    )
    assert main(["plan", str(path)]) == 2
    assert "mrope_section[0] must be an integer" in capsys.readouterr().err


def test_a_config_without_rope_parameters_names_what_was_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mistral = {"model_type": "mistral", "head_dim": 8, "num_hidden_layers": 2, "rope_theta": 1e6}
    assert main(["plan", str(write(tmp_path, mistral))]) == 0
    out = capsys.readouterr().out
    assert "rope_scaling" not in out
    assert "rope parameters from config (rope_theta)" in out
    assert posenc.rope_plan(mistral).source == "config (rope_theta)"


def test_phi3_factors_are_printed_in_their_float32_digits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    factors = [float(np.float32(1.0 + 0.05 * i)) for i in range(48)]
    assert factors[1] == 1.0499999523162842  # what a float32 tensor written to JSON holds
    phi3 = {
        "model_type": "phi3",
        "hidden_size": 3072,
        "num_attention_heads": 32,
        "num_hidden_layers": 2,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "longrope", "short_factor": factors, "long_factor": factors},
    }
    assert main(["plan", str(write(tmp_path, phi3))]) == 0
    out = capsys.readouterr().out
    assert "1.0499999523162842" not in out
    assert "short_factor=[1.0, 1.05, 1.1, 1.15," in out
    assert main(["plan", "--json", str(write(tmp_path, phi3))]) == 0  # JSON keeps the digits
    report = _strict(capsys.readouterr().out)
    assert report["kinds"][0]["scaling"]["short_factor"][1] == 1.0499999523162842


def test_no_rotating_layer_is_said_so() -> None:
    plan = posenc.rope_plan({**LLAMA, "position_embedding_type": None})
    with pytest.raises(ValueError, match=r"no layer of the config rotates") as info:
        plan.layer()
    assert "one of []" not in str(info.value)


def test_a_symlink_loop_is_not_reported_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(tmp_path / "loop.json")
    for command in (["plan", str(loop)], ["identify", str(loop.with_suffix(".npy"))]):
        if command[0] == "identify":
            command[1] = str(tmp_path / "loop.npy")
            (tmp_path / "loop.npy").symlink_to(tmp_path / "loop.npy")
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "no such file" not in err
        assert "symbolic links" in err


def test_a_dangling_symlink_names_its_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "config.json"
    link.symlink_to(tmp_path / "gone.json")
    assert main(["plan", str(link)]) == 2
    assert "symbolic link to" in capsys.readouterr().err


def test_oversized_sections_do_not_suggest_a_rotary_dim_beyond_the_head() -> None:
    with pytest.raises(ValueError, match=r"sections \[24, 24, 24\] give 72") as info:
        posenc.multi_axis_cos_sin(np.zeros((2, 3)), 128, sections=(24, 24, 24))
    assert "rotary_dim=144" not in str(info.value)
    assert "at most head_dim / 2 = 64" in str(info.value)
    with pytest.raises(ValueError, match=r"or pass rotary_dim=16"):  # a smaller one still helps
        posenc.multi_axis_cos_sin(np.zeros((2, 3)), 128, sections=(4, 2, 2))


def test_identify_does_not_call_a_rope_cos_table_scaled() -> None:
    cos, _ = posenc.rotary_cos_sin(64, 32)
    message = posenc.describe(posenc.analysis.identify(cos))
    assert "a scaled table?" not in message
    assert "RoPE cos or sin table" in message


# -- posenc identify reads the tables users have ----------------------------------------------


def test_identify_squeezes_the_pytorch_tutorial_buffer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = posenc.sinusoidal(50, 16)[:, None, :]  # the tutorial's pe buffer: (L, 1, d)
    path = tmp_path / "pe.npy"
    np.save(path, table)
    assert main(["identify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "50 x 16 float32 (stored as (50, 1, 16): the axes of size 1 are dropped)" in out
    assert "paper" in out
    assert main(["identify", "--json", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stored_shape"] == [50, 1, 16]
    assert report["shape"] == [50, 16]


def test_identify_still_refuses_a_3d_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.npy"
    np.save(path, np.zeros((4, 2, 8), dtype=np.float32))
    assert main(["identify", str(path)]) == 2
    assert "must be a 2-D table" in capsys.readouterr().err


def test_identify_skips_fairseq_padding_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    padding_idx = 1  # fairseq: get_embedding(num, dim, padding_idx) zeroes row padding_idx
    table = posenc.sinusoidal(40, 16, convention="tensor2tensor")
    table[padding_idx] = 0.0
    path = tmp_path / "fairseq.npy"
    np.save(path, table)
    assert main(["identify", str(path)]) == 0  # the zero row is found and skipped
    assert "row 1 is all zeros (padding)" in capsys.readouterr().out
    assert main(["identify", "--skip-rows", "0", str(path)]) == 1  # every row analysed
    hint = capsys.readouterr().out
    assert "--skip-rows 2" in hint
    assert main(["identify", "--skip-rows", "2", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rows 2.. analysed (--skip-rows 2)" in out
    assert "tensor2tensor" in out
    assert main(["identify", "--json", "--skip-rows", "2", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["skip_rows"] == 2
    assert report["offset"] == 2  # the position of row 2 of the file
    assert main(["identify", "--skip-rows", "40", str(path)]) == 2
    assert "--skip-rows must be less than the table's 40 rows" in capsys.readouterr().err
