"""GGUF files written with the ``gguf`` package's writer, as llama.cpp's converter writes
them: the correct file of each model passes, each broken one is named; hostile files are one
line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from posenc.audit import audit
from tests.audit.models import GEMMA3, GPT_OSS, LLAMA3, PHI3, QWEN2_VL, QWEN25_YARN
from tests.audit.stacks import llama3_rope_freqs, write_gguf

pytest.importorskip("gguf")


def llama(tmp_path: Path, name: str = "llama.gguf", **changes: Any) -> Path:
    rope = {"rope_dimension_count": 64, "rope_freq_base": 500000.0, **changes.pop("rope", {})}
    tensors = changes.pop("tensors", {"rope_freqs.weight": llama3_rope_freqs(LLAMA3)})
    arch = changes.pop("arch", "llama")
    return write_gguf(tmp_path / name, arch, layers=4, heads=4, embd=256, context=131072,
                      rope=rope, tensors=tensors, **changes)  # fmt: skip


def cause(report: Any) -> str:
    assert not report.passed, str(report)
    return " ".join(f.cause for f in report.findings)


# --------------------------------------------------------------------------- Llama 3.1


def test_llama31_with_rope_freqs_passes_with_llama_cpp_recipe(tmp_path: Path) -> None:
    report = audit(LLAMA3, llama(tmp_path))
    assert report.passed, str(report)
    (finding,) = report.findings
    assert finding.status == "float32_angles"
    assert finding.recipe == "float32 angles (llama.cpp's ggml rope)"
    assert finding.layers == (0, 1, 2, 3)
    assert "on Q and K rows the converter permuted: the model's halves" in str(report)


def test_llama31_rope_freqs_missing_or_inverted(tmp_path: Path) -> None:
    missing = llama(tmp_path, "missing.gguf", tensors={})
    assert cause(audit(LLAMA3, missing)).startswith("llama3 factors missing (no rope_freqs)")
    inverted = llama(tmp_path, "inverted.gguf",
                     tensors={"rope_freqs.weight": 1 / llama3_rope_freqs(LLAMA3)})  # fmt: skip
    assert cause(audit(LLAMA3, inverted)).startswith("llama3 factors inverted")


def test_llama31_wrong_base(tmp_path: Path) -> None:
    wrong = llama(tmp_path, "base.gguf", rope={"rope_freq_base": 10000.0})
    assert cause(audit(LLAMA3, wrong)) == "base 10000 where the config says 500000"


def test_an_architecture_llama_cpp_runs_in_normal_mode_unpermuted_pairs_neighbours(
    tmp_path: Path,
) -> None:
    # command-r is rotated in normal mode without the converter's permutation: its GGUF pairs
    # neighbouring channels, which a Llama config (halves) does not
    file = llama(tmp_path, "cmdr.gguf", arch="command-r")
    assert cause(audit(LLAMA3, file)).startswith("pairs interleaved where the model pairs halves")


# --------------------------------------------------------------------------- YaRN


def qwen(tmp_path: Path, name: str, rope: dict[str, Any]) -> Path:
    return write_gguf(tmp_path / name, "qwen2", layers=2, heads=2, embd=128, context=131072,
                      rope={"rope_freq_base": 1e6, **rope})  # fmt: skip


def yarn_keys(factor: float = 4.0, original: int = 32768) -> dict[str, Any]:
    import gguf

    return {"rope_scaling_type": gguf.RopeScalingType.YARN, "rope_scaling_factor": factor,
            "rope_scaling_orig_ctx_len": original}  # fmt: skip


def test_qwen25_yarn_passes_and_yarn_missing_or_twice_is_named(tmp_path: Path) -> None:
    assert audit(QWEN25_YARN, qwen(tmp_path, "q.gguf", yarn_keys())).passed
    assert cause(audit(QWEN25_YARN, qwen(tmp_path, "plain.gguf", {}))).startswith("no yarn where")


def test_gpt_oss_truncate_lost_in_llama_cpp(tmp_path: Path) -> None:
    # llama.cpp always rounds YaRN's ramp to whole pairs: GPT-OSS's truncate: false is lost
    file = write_gguf(tmp_path / "oss.gguf", "gpt-oss", layers=2, heads=2, embd=128,
                      context=131072, rope={"rope_freq_base": 150000.0,
                                            "key_length": 64, **yarn_keys(32.0, 4096)})  # fmt: skip
    report = audit(GPT_OSS, file)
    assert "YaRN truncate lost: the config says truncate=False" in cause(report)
    config = {**GPT_OSS, "rope_scaling": {**GPT_OSS["rope_scaling"], "truncate": True}}
    assert audit(config, file).passed


# --------------------------------------------------------------------------- LongRoPE


def phi3(tmp_path: Path, name: str, swap: bool = False) -> Path:
    import gguf

    short, long = PHI3["rope_scaling"]["short_factor"], PHI3["rope_scaling"]["long_factor"]
    if swap:
        short, long = long, short
    attention = float(np.sqrt(1 + np.log(131072 / 4096) / np.log(4096)))
    return write_gguf(tmp_path / name, "phi3", layers=2, heads=4, embd=64, context=131072,
                      rope={"rope_freq_base": 10000.0, "rope_dimension_count": 16,
                            "rope_scaling_type": gguf.RopeScalingType.LONGROPE,
                            "rope_scaling_orig_ctx_len": 4096,
                            "rope_scaling_attn_factors": attention},
                      tensors={"rope_factors_long.weight": long,
                               "rope_factors_short.weight": short})  # fmt: skip


def test_phi3_longrope_passes_and_swapped_factors_are_named(tmp_path: Path) -> None:
    assert audit(PHI3, phi3(tmp_path, "phi3.gguf")).passed
    text = cause(audit(PHI3, phi3(tmp_path, "swapped.gguf", swap=True)))
    assert text == "longrope long and short factors swapped"


# --------------------------------------------------------------------------- M-RoPE, Gemma 3


def qwen2vl(tmp_path: Path, name: str, sections: list[int] | None) -> Path:
    rope: dict[str, Any] = {"rope_freq_base": 1e6}
    if sections is not None:
        rope["rope_dimension_sections"] = sections
    return write_gguf(tmp_path / name, "qwen2vl", layers=2, heads=2, embd=128, context=32768,
                      rope=rope)  # fmt: skip


def test_qwen2_vl_sections_pass_and_missing_sections_are_named(tmp_path: Path) -> None:
    assert audit(QWEN2_VL, qwen2vl(tmp_path, "vl.gguf", [8, 12, 12, 0])).passed
    text = cause(audit(QWEN2_VL, qwen2vl(tmp_path, "flat.gguf", None)))
    assert text == "sections [8, 12, 12] ignored: every pair turns with the temporal coordinate"


def gemma3(tmp_path: Path, name: str, swa_base: float | None, base: float = 1e6) -> Path:
    import gguf

    rope: dict[str, Any] = {"rope_freq_base": base, "key_length": 16, "sliding_window": 512,
                            "rope_scaling_type": gguf.RopeScalingType.LINEAR,
                            "rope_scaling_factor": 8.0}  # fmt: skip
    if swa_base is not None:
        rope["rope_freq_base_swa"] = swa_base
    return write_gguf(tmp_path / name, "gemma3", layers=6, heads=4, embd=64, context=32768,
                      rope=rope)  # fmt: skip


def test_gemma3_per_layer_bases_pass_and_local_base_on_global_layers_is_named(
    tmp_path: Path,
) -> None:
    report = audit(GEMMA3, gemma3(tmp_path, "g.gguf", 10000.0))
    assert report.passed, str(report)
    assert [f.layers for f in report.findings] == [(0, 1, 2, 3, 4), (5,)]
    wrong = gemma3(tmp_path, "wrong.gguf", 10000.0, base=10000.0)  # the local base everywhere
    report = audit(GEMMA3, wrong)
    assert [f.layers for f in report.findings if not f.passed] == [(5,)]
    assert cause(report).strip() == (
        "base 10000 where the config says 1000000: the base of 'sliding_attention' layers on "
        "'full_attention' layers"
    )


# --------------------------------------------------------------------------- hostile files


def test_truncated_gguf_is_one_line(tmp_path: Path) -> None:
    file = llama(tmp_path)
    data = file.read_bytes()
    for size in (10, 200, len(data) - 8):
        cut = tmp_path / f"cut{size}.gguf"
        cut.write_bytes(data[:size])
        with pytest.raises(ValueError, match=r"too short|truncated") as info:
            audit(LLAMA3, cut)
        assert "\n" not in str(info.value)


def test_gguf_declaring_huge_sizes_is_refused_before_allocation(tmp_path: Path) -> None:
    file = llama(tmp_path)
    data = bytearray(file.read_bytes())
    data[16:24] = (2**62).to_bytes(8, "little")  # the key count
    huge = tmp_path / "huge.gguf"
    huge.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="truncated or corrupt"):
        audit(LLAMA3, huge)


def test_not_a_gguf_and_bad_rope_tensor(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + bytes(64))
    with pytest.raises(ValueError, match="not a GGUF file"):
        audit(LLAMA3, bad)
    shaped = llama(tmp_path, "shaped.gguf", tensors={"rope_freqs.weight": np.ones((2, 32))})
    with pytest.raises(ValueError, match="one row of per-pair factors"):
        audit(LLAMA3, shaped)
    short = llama(tmp_path, "short.gguf", tensors={"rope_freqs.weight": np.ones(8)})
    with pytest.raises(ValueError, match="hold 8 values"):
        audit(LLAMA3, short)


def test_a_layer_count_that_differs_is_noted(tmp_path: Path) -> None:
    file = write_gguf(tmp_path / "six.gguf", "llama", layers=6, heads=4, embd=256,
                      context=131072, rope={"rope_dimension_count": 64,
                                            "rope_freq_base": 500000.0},
                      tensors={"rope_freqs.weight": llama3_rope_freqs(LLAMA3)})  # fmt: skip
    report = audit(LLAMA3, file)
    assert "the subject has 6 layers where the config has 4" in str(report)


def test_smollm3_layers_without_rope(tmp_path: Path) -> None:
    from tests.audit.models import SMOLLM3

    rope = {"rope_freq_base": 5000000.0}
    file = write_gguf(tmp_path / "smol.gguf", "smollm3", layers=4, heads=2, embd=128,
                      context=65536, rope=rope)  # fmt: skip
    report = audit(SMOLLM3, file)
    assert report.passed, str(report)
    assert [f.status for f in report.findings] == ["float32_angles", "no_positions"]
    everywhere = write_gguf(tmp_path / "llama.gguf", "llama", layers=4, heads=2, embd=128,
                            context=65536, rope=rope)  # fmt: skip
    (wrong,) = [f for f in audit(SMOLLM3, everywhere).findings if not f.passed]
    assert wrong.layers == (3,)
    assert wrong.cause.startswith("the subject rotates this layer, but the config gives it no")


QWEN3_VL = {
    "model_type": "qwen3_vl",
    "text_config": {
        "model_type": "qwen3_vl_text",
        "hidden_size": 128,
        "head_dim": 64,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "max_position_embeddings": 262144,
        "rope_theta": 5000000.0,
        "rope_scaling": {"rope_type": "default", "mrope_section": [12, 10, 10],
                         "mrope_interleaved": True},
    },
}  # fmt: skip


def test_qwen3_vl_interleaved_sections_pass_and_blocks_are_named(tmp_path: Path) -> None:
    rope = {"rope_freq_base": 5e6, "key_length": 64, "rope_dimension_sections": [12, 10, 10, 0]}
    vl3 = write_gguf(tmp_path / "q3.gguf", "qwen3vl", layers=2, heads=2, embd=128,
                     context=262144, rope=rope)  # fmt: skip
    assert audit(QWEN3_VL, vl3).passed
    vl2 = write_gguf(tmp_path / "q2.gguf", "qwen2vl", layers=2, heads=2, embd=128,
                     context=262144, rope=rope)  # fmt: skip
    assert cause(audit(QWEN3_VL, vl2)) == (
        "sections [12, 10, 10] in one block per axis where the model lays them interleaved "
        "(mrope_interleaved)"
    )


def test_a_string_array_declaring_too_many_strings_is_refused(tmp_path: Path) -> None:
    import struct

    key = b"tokenizer.ggml.tokens"
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
    field = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, 2**23)
    path = tmp_path / "tokens.gguf"
    path.write_bytes(header + field + bytes(8 * 2**23))  # 64 MiB of empty strings
    with pytest.raises(ValueError, match="declares 8,388,608 strings"):
        audit(LLAMA3, path)
