"""RoPE coverage: posenc.rope_plan against every rotary class of the pinned transformers.

One test per model directory that defines a ``*RotaryEmbedding*`` class (see
``tests/torch/hf/rope_coverage.py`` for what "reproduced" means). A directory posenc reproduces
must stay reproduced; the others are listed in :data:`KNOWN_MISSING` with the reason, and a
test fails when one of them starts passing (so that the table is updated). The counts and the
list are printed in pytest's terminal summary ("RoPE coverage: N/193").

Under another transformers release (``make test-compat``), a directory that the pinned release
has must still be reproduced; one that the pinned release has no rotary class in (a new model,
or a model whose positions became a rotary class) and that posenc does not reproduce is a gap
of that release: it skips with the reason and is listed in the summary, by name.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from tests.torch.hf import pinned, rope_coverage, rope_coverage_axes  # noqa: E402

#: The transformers release the table below describes (requirements-dev.txt pins it).
PINNED = pinned.VERSION

#: directory -> the reason it is not reproduced (a part of the harness's reason).
KNOWN_MISSING: dict[str, str] = {
    # transformers departs from the model's own code; the plan follows the model and names it
    "hunyuan_vl": "splits the doubled table [θ, θ] by [2 * s for s in mrope_section]",
    # rotary forms that rope_plan refuses, by name (posenc.rope_plan's REFUSED)
    "nanochat": "'nanochat' (at config.rope_parameters) rotates by -θ",
    # angles from other inputs than position ids (the harness says which)
    "esmfold2": "3-D atom coordinates and a per-atom id",
    "musicflamingo": "audio timestamps (seconds), which no rope plan reads",
}


#: directory -> how a release after the pinned one changed its rotary form without a config
#: setting that says so: under such a release the directory skips with this reason (listed by
#: name in the summary) instead of failing; the pinned release must still be reproduced.
CHANGED_SINCE_PIN: dict[str, str] = {
    "hy_v4": (
        "transformers 5.25 rotates interleaved pairs (apply_rotary_pos_emb_interleave) where "
        "the pinned release rotates half pairs, as posenc's plan says"
    ),
}


def _directories() -> dict[str, list[tuple[str, str]]]:
    try:
        return rope_coverage.directories()
    except Exception:
        return {}


DIRECTORIES = _directories()


@pytest.fixture(scope="module", autouse=True)
def _setup(one_thread: None) -> None:
    transformers.logging.set_verbosity_error()
    rope_coverage.TOTAL = len(DIRECTORIES)


def test_every_directory_with_a_rotary_class_is_counted() -> None:
    if pinned.is_pinned(transformers.__version__):
        assert set(DIRECTORIES) == pinned.ROTARY_DIRECTORIES, "update pinned_transformers.json"
    assert set(KNOWN_MISSING) <= set(DIRECTORIES)
    assert set(CHANGED_SINCE_PIN) <= pinned.ROTARY_DIRECTORIES - set(KNOWN_MISSING)


@pytest.mark.parametrize("directory", sorted(DIRECTORIES))
def test_rotary_classes_are_reproduced(directory: str) -> None:
    outcome = rope_coverage.check_directory(directory, DIRECTORIES[directory])
    rope_coverage.OUTCOMES[directory] = outcome
    if directory in KNOWN_MISSING:
        assert not outcome.reproduced, (
            f"{directory} is reproduced now: remove it from KNOWN_MISSING in {Path(__file__).name}"
        )
        assert KNOWN_MISSING[directory] in outcome.reason, outcome.reason
    elif directory not in pinned.ROTARY_DIRECTORIES and not outcome.reproduced:
        pytest.skip(f"not covered in transformers {transformers.__version__}: {outcome.reason}")
    elif directory in CHANGED_SINCE_PIN and not pinned.is_pinned(transformers.__version__):
        if not outcome.reproduced:
            pytest.skip(f"{CHANGED_SINCE_PIN[directory]}: {outcome.reason}")
    else:
        assert outcome.reproduced, outcome.reason


# -- the harness can fail ---------------------------------------------------------------------


def llama() -> tuple[object, object]:
    from transformers.models.llama import modeling_llama

    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4)
    return modeling_llama, config


def test_a_wrong_base_fails_the_table_comparison() -> None:
    import posenc

    module, config = llama()
    cos, sin = module.LlamaRotaryEmbedding(config)(torch.zeros(1), rope_coverage.POSITIONS)
    layer = posenc.rope_plan(config).layer()
    assert rope_coverage.compare_tables(layer, cos, sin, "half") is None
    wrong = posenc.rope_plan({"head_dim": 16, "rope_theta": 10001.0}).layer()
    assert "differs by" in (rope_coverage.compare_tables(wrong, cos, sin, "half") or "")
    assert "differs by" in (rope_coverage.compare_tables(layer, cos, sin, "interleaved") or "")


def test_a_wrong_pair_layout_fails_the_rotation_comparison() -> None:
    import dataclasses

    import posenc

    module, config = llama()
    cos, sin = module.LlamaRotaryEmbedding(config)(torch.zeros(1), rope_coverage.POSITIONS)
    layer = posenc.rope_plan(config).layer()
    apply = module.apply_rotary_pos_emb
    assert rope_coverage.compare_rotation(layer, apply, cos, sin) is None
    interleaved = dataclasses.replace(layer, pairs="interleaved")
    assert "q·k differs" in (rope_coverage.compare_rotation(interleaved, apply, cos, sin) or "")


def test_overrides_name_existing_config_classes() -> None:
    names = set(rope_coverage.OVERRIDES) | {
        name for names in rope_coverage.CONFIG_FOR.values() for name in names
    }
    for name in names:
        assert hasattr(transformers, name) or _defined_in_models(name), name


def _defined_in_models(name: str) -> bool:
    spec = importlib.util.find_spec("transformers")
    assert spec is not None
    assert spec.origin is not None
    root = Path(spec.origin).parent / "models"
    return any(f"class {name}(" in p.read_text() for p in root.glob("*/configuration_*.py"))


# -- the multi-axis checks can fail ------------------------------------------------------------


def qwen2_vl_vision() -> tuple[object, object, object, object]:
    from transformers.models.qwen2_vl import modeling_qwen2_vl

    config = transformers.Qwen2VLVisionConfig()
    ids = rope_coverage_axes.vision_positions("qwen2_vl", modeling_qwen2_vl, config, 2)
    cos, sin = modeling_qwen2_vl.Qwen2VLVisionRotaryEmbedding(config)(torch.zeros(1), ids)
    return modeling_qwen2_vl, config, ids.numpy(), (cos, sin)


def test_a_wrong_axis_order_fails_the_multi_axis_table_comparison() -> None:
    import dataclasses

    import posenc

    _, config, positions, (cos, sin) = qwen2_vl_vision()
    layer = posenc.rope_plan(config).layer()
    assert rope_coverage_axes.compare_tables(layer, positions, cos, sin, "half") is None
    width_first = dataclasses.replace(layer, slot_order=(1, 0))
    problem = rope_coverage_axes.compare_tables(width_first, positions, cos, sin, "half")
    assert "differs by" in (problem or "")
    dealt = dataclasses.replace(layer, schedule="dealt")
    assert "differs by" in (
        rope_coverage_axes.compare_tables(dealt, positions, cos, sin, "half") or ""
    )


def test_a_wrong_pair_layout_fails_the_multi_axis_rotation_comparison() -> None:
    import dataclasses

    import posenc

    module, config, positions, (cos, sin) = qwen2_vl_vision()
    layer = posenc.rope_plan(config).layer()
    apply = module.apply_rotary_pos_emb_vision
    assert rope_coverage_axes.compare_rotation(layer, apply, cos, sin, positions) is None
    interleaved = dataclasses.replace(layer, pairs="interleaved")
    problem = rope_coverage_axes.compare_rotation(interleaved, apply, cos, sin, positions)
    assert "q·k differs" in (problem or "")


def test_mrope_ids_come_from_the_model_and_differ_per_axis() -> None:
    from transformers.models.qwen3_vl import modeling_qwen3_vl

    ids = rope_coverage_axes.text_positions(modeling_qwen3_vl, 3)
    made_by_model = rope_coverage_axes._from_rope_index(modeling_qwen3_vl, 3)
    assert made_by_model is not None
    assert torch.equal(ids, made_by_model)
    assert ids.shape[:2] == (3, 2)
    t, h, w = ids[:, 0]
    assert (t != h).any()
    assert (h != w).any()
    assert int(ids.max()) > rope_coverage_axes.LATER
    # sectioned instead of interleaved: the Qwen3-VL class's tables differ
    import dataclasses

    import posenc

    config = transformers.Qwen3VLTextConfig()
    cos, sin = modeling_qwen3_vl.Qwen3VLTextRotaryEmbedding(config)(torch.zeros(1), ids)
    layer = posenc.rope_plan(config).layer()
    positions = np.moveaxis(ids.numpy(), 0, -1)
    assert rope_coverage_axes.compare_tables(layer, positions, cos, sin, "half") is None
    sectioned = dataclasses.replace(layer, interleaved_sections=False, order="sectioned")
    assert "differs by" in (
        rope_coverage_axes.compare_tables(sectioned, positions, cos, sin, "half") or ""
    )
