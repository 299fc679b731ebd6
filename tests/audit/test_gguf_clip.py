"""GGUF vision projectors (mmproj files) written with the ``gguf`` package's writer as
llama.cpp's converter writes them: the vision tower's 2-D RoPE that llama.cpp's clip.cpp runs,
against the config's ``vision_config``. Correct files pass; broken ones are named; hostile
ones are one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc.audit import audit
from tests.audit.stacks import ggml_rope_2d, ggml_vision_mode, write_mmproj

pytest.importorskip("gguf")

# Qwen2-VL: the tower's head is embed_dim / num_heads (16 here: 4 pairs per axis).
QWEN2_VL: dict[str, Any] = {
    "model_type": "qwen2_vl",
    "hidden_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
    "vision_config": {"depth": 2, "embed_dim": 64, "num_heads": 4, "hidden_size": 128},
}
# Qwen2.5-VL and Qwen3-VL: hidden_size is the tower's width.
QWEN25_VL: dict[str, Any] = {
    **QWEN2_VL,
    "model_type": "qwen2_5_vl",
    "vision_config": {"depth": 2, "hidden_size": 64, "num_heads": 4,
                      "fullatt_block_indexes": [1]},
}  # fmt: skip
QWEN3_VL: dict[str, Any] = {
    "model_type": "qwen3_vl",
    "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 128, "head_dim": 64,
                    "num_attention_heads": 2, "num_hidden_layers": 2,
                    "rope_scaling": {"rope_type": "default", "mrope_section": [12, 10, 10],
                                     "mrope_interleaved": True}},
    "vision_config": {"model_type": "qwen3_vl", "depth": 2, "hidden_size": 64,
                      "num_heads": 4},
}  # fmt: skip
# Pixtral (Hugging Face's form: llava with a pixtral vision_config).
PIXTRAL: dict[str, Any] = {
    "model_type": "llava",
    "text_config": {"model_type": "mistral", "hidden_size": 128, "num_attention_heads": 2,
                    "num_hidden_layers": 2},
    "vision_config": {"model_type": "pixtral", "hidden_size": 64, "num_attention_heads": 4,
                      "num_hidden_layers": 2, "rope_theta": 10000.0, "image_size": 1024,
                      "patch_size": 16},
}  # fmt: skip


def mmproj(tmp_path: Path, projector: str, name: str = "mmproj.gguf", **changes: Any) -> Path:
    sizes = {"embd": 64, "heads": 4, "layers": 2, **changes}
    return write_mmproj(tmp_path / name, projector, **sizes)


def cause(report: Any) -> str:
    assert not report.passed, str(report)
    return " ".join(f.cause for f in report.findings)


@pytest.mark.parametrize(
    ("config", "projector"),
    [(QWEN2_VL, "qwen2vl_merger"), (QWEN25_VL, "qwen2.5vl_merger"), (QWEN3_VL, "qwen3vl_merger"),
     (PIXTRAL, "pixtral")],
    ids=["qwen2-vl", "qwen2.5-vl", "qwen3-vl", "pixtral"],
)  # fmt: skip
def test_a_correct_mmproj_passes_against_the_vision_config(
    tmp_path: Path, config: dict[str, Any], projector: str
) -> None:
    report = audit(config, mmproj(tmp_path, projector))
    assert report.passed, str(report)
    (finding,) = report.findings
    assert finding.status == "float32_angles"
    assert finding.layers == (0, 1)
    assert finding.max_error == 0.0
    text = str(report)
    assert f"({projector} vision projector)" in text
    assert "base 10000 written in its source" in text
    assert report.context is None  # a vision tower has no text context


def test_the_tower_config_itself_is_a_reference(tmp_path: Path) -> None:
    report = audit(PIXTRAL["vision_config"], mmproj(tmp_path, "pixtral"))
    assert report.passed, str(report)
    assert report.model_type == "pixtral"


def test_a_base_the_config_gives_that_llama_cpp_hard_codes_is_named(tmp_path: Path) -> None:
    config = {**QWEN2_VL, "vision_config": {**QWEN2_VL["vision_config"], "rope_theta": 1e5}}
    report = audit(config, mmproj(tmp_path, "qwen2vl_merger"))
    assert cause(report) == "base 10000 where the config says 100000"
    assert report.exit_code == 1
    first = report.findings[0].first_difference
    assert first is not None
    assert first.position == 1


def test_a_tower_collapsed_to_one_position_is_named(tmp_path: Path) -> None:
    # deepseekocr2's tower (a Qwen2 encoder, base 1e6) turns every pair with one position
    config = {**QWEN2_VL, "vision_config": {**QWEN2_VL["vision_config"], "rope_theta": 1e6}}
    text = cause(audit(config, mmproj(tmp_path, "deepseekocr2")))
    assert text.startswith("2-D RoPE collapsed to 1-D: one schedule over the 16 rotated channels")


def test_pixtral_run_on_a_qwen_vl_graph_is_named(tmp_path: Path) -> None:
    text = cause(audit(PIXTRAL, mmproj(tmp_path, "qwen2vl_merger")))
    assert text.startswith("each axis its own schedule over half the head")
    assert text.endswith("where the model has one schedule over the head dealt to the axes in "
                         "turns (Pixtral's)")  # fmt: skip


def test_a_head_count_that_differs_is_named(tmp_path: Path) -> None:
    text = cause(audit(QWEN2_VL, mmproj(tmp_path, "qwen2vl_merger", heads=2)))
    assert text == "the subject's tables are 32 channels wide where the config rotates 16 " \
        "(head_dim 16)"  # fmt: skip


# --------------------------------------------------------------------------- hostile files


def test_unknown_or_unaudited_projector_types_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown projector type 'warp9'") as info:
        audit(QWEN2_VL, mmproj(tmp_path, "warp9", "unknown.gguf"))
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="projector type 'gemma3' is not audited"):
        audit(QWEN2_VL, mmproj(tmp_path, "gemma3", "gemma3.gguf"))
    audio = write_mmproj(tmp_path / "audio.gguf", "qwen2vl_merger", embd=64, heads=4, layers=2,
                         vision=False)  # fmt: skip
    with pytest.raises(ValueError, match="without a vision encoder"):
        audit(QWEN2_VL, audio)


def test_a_truncated_mmproj_is_one_line(tmp_path: Path) -> None:
    data = mmproj(tmp_path, "qwen2vl_merger").read_bytes()
    for size in (100, len(data) - 8):
        cut = tmp_path / f"cut{size}.gguf"
        cut.write_bytes(data[:size])
        with pytest.raises(ValueError, match="truncated") as info:
            audit(QWEN2_VL, cut)
        assert "\n" not in str(info.value)


def test_sizes_that_make_no_head_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a multiple of 4"):
        audit(QWEN2_VL, mmproj(tmp_path, "qwen2vl_merger", heads=32))
    with pytest.raises(ValueError, match="block_count must be a positive count, got 0"):
        audit(QWEN2_VL, mmproj(tmp_path, "qwen2vl_merger", layers=0))


MUSE: dict[str, Any] = {
    "model_type": "muse_glimmer",
    "vision_config": {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2},
}


def test_muse_glimmer_passes_and_its_axes_swapped_are_named(tmp_path: Path) -> None:
    # llama.cpp turns MuseGlimmer's first half with the column, Qwen-VL's with the row
    report = audit(MUSE, mmproj(tmp_path, "muse-glimmer"))
    assert report.passed, str(report)
    assert cause(audit(MUSE, mmproj(tmp_path, "qwen2vl_merger", "qwen.gguf"))) == (
        "the height pairs first where the model lays the width pairs first (the two axes swapped)"
    )


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.integers(0, 128),
    st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["qwen2vl_merger", "pixtral", "muse-glimmer",
                                           "deepseekocr2", "gemma3"]),
)  # fmt: skip
_KEYS = ("clip.has_vision_encoder", "clip.projector_type", "clip.vision.projector_type",
         "clip.vision.embedding_length", "clip.vision.attention.head_count",
         "clip.vision.attention.head_dim", "clip.vision.block_count",
         "clip.rope.freq_base")  # fmt: skip


_VALID = {"clip.has_vision_encoder": True, "clip.projector_type": "pixtral",
          "clip.vision.embedding_length": 64, "clip.vision.attention.head_count": 4,
          "clip.vision.block_count": 2}  # fmt: skip


@given(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=3))
def test_any_metadata_gives_a_tower_or_one_line(changes: dict[str, Any]) -> None:
    """A valid file's keys with up to three replaced by anything."""
    from posenc.audit._gguf_clip import clip_rope

    meta = {**_VALID, **changes}

    try:
        rope = clip_rope(meta, "mmproj.gguf")
    except ValueError as exc:
        message = str(exc)
    else:
        message = ""
    if message:
        assert "\n" not in message
        assert message.startswith("mmproj.gguf")
        return
    assert rope.head_dim % 4 == 0
    assert rope.layers > 0
    form = rope.form(("height", "width"))
    assert form.frequencies.shape == (2 if rope.graph.kind != "one_d" else 1, rope.head_dim // 2)
    assert (form.frequencies > 0).sum() == rope.head_dim // 2  # each pair turns with one axis


# --------------------------------------------------------------------------- ggml itself


@pytest.mark.parametrize(
    ("config", "rotation", "projector"),
    [({**QWEN2_VL["vision_config"], "model_type": "qwen2_vl_vision"},
      ggml_vision_mode(16, 10000.0), "qwen2vl_merger"),
     (PIXTRAL["vision_config"], ggml_rope_2d(16, 10000.0, True, 0), "pixtral"),
     ({**MUSE["vision_config"], "model_type": "muse_glimmer_vision"},
      ggml_rope_2d(16, 10000.0, False, 0), "muse-glimmer")],
    ids=["qwen-vl-vision-mode", "pixtral-rope-2d", "muse-glimmer-rope-2d"],
)  # fmt: skip
def test_ggml_s_own_computation_is_the_form_the_mmproj_is_read_as(
    tmp_path: Path, config: dict[str, Any], rotation: Any, projector: str
) -> None:
    """ggml's vision RoPE emulated step by step in float32 (running products, the converter's
    row permutation), probed with basis vectors: within float32 angles of the plan, as the
    form read from the mmproj is exactly."""
    emulated = audit(config, rotation)
    assert emulated.passed, str(emulated)
    assert emulated.findings[0].status == "float32_angles"
    (read,) = audit(config, mmproj(tmp_path, projector)).findings
    assert read.max_error == 0.0
    assert emulated.findings[0].max_error <= read.bound
