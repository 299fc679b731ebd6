"""The comparison against the plan, with array and callable subjects: each model's correct
artifact passes, and each bug class is named in words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from posenc import rope_plan, rotary_cos_sin
from posenc.analysis._rounding import _round_bfloat16
from posenc.audit import audit
from posenc.audit._audit import report_from_dict
from tests.audit.models import (
    GEMMA3,
    GPT_OSS,
    LLAMA3,
    PARTIAL,
    PHI3,
    QWEN2_VL,
    QWEN2_VL_HEAD128,
    QWEN25_YARN,
)
from tests.audit.stacks import (
    exact_tables,
    float32_tables,
    save_safetensors,
    spread,
    vllm_cache,
)

POSITIONS = np.arange(0, 4096)


def layer(config: dict[str, Any], layer_type: str | None = None) -> Any:
    return rope_plan(config).layer(layer_type)


def tables_of(config: dict[str, Any], layer_type: str | None = None, **changes: Any) -> Any:
    """A callable positions -> (cos, sin) with float32 angles, from the plan's frequencies
    (``changes`` replace the frequencies, attention factor or pair layout)."""
    kind = layer(config, layer_type)

    def tables(positions: Any) -> tuple[Any, Any]:
        seq_len = int(np.max(positions)) + 1
        omega, attention = kind.frequencies_at(seq_len)
        omega = changes.get("omega", omega)
        if callable(omega):
            omega = omega(seq_len)
        return float32_tables(
            positions,
            omega,
            changes.get("attention", attention),
            changes.get("pairs", kind.pairs),
        )

    return tables


def cause(report: Any) -> str:
    assert not report.passed, str(report)
    return " ".join(f.cause for f in report.findings)


# --------------------------------------------------------------------------- correct artifacts


@pytest.mark.parametrize(
    ("config", "layer_type"),
    [(LLAMA3, None), (QWEN25_YARN, None), (PHI3, None), (GPT_OSS, "full_attention"),
     (PARTIAL, None), (GEMMA3, "full_attention"), (GEMMA3, "sliding_attention")],
    ids=["llama3", "qwen2.5-yarn", "phi3-longrope", "gpt-oss", "partial", "gemma3-global",
         "gemma3-local"],
)  # fmt: skip
def test_float32_angles_pass_with_the_recipe_named(config: dict[str, Any], layer_type: Any) -> None:
    report = audit(config, tables_of(config, layer_type), layer_type=layer_type)
    assert report.passed, str(report)
    (finding,) = report.findings
    assert finding.status == "float32_angles"
    assert finding.recipe == "float32 angles"
    assert finding.max_error is not None
    assert finding.bound is not None
    assert finding.error_at_1m is not None
    assert finding.error_at_1m > 1e-4  # what float32 angles cost there
    assert "within float32 angles: expected <=" in str(report)


def test_exact_tables_are_exact() -> None:
    cos, sin = rotary_cos_sin(POSITIONS, 64, base=500000.0, scaling=LLAMA3["rope_scaling"])
    report = audit(LLAMA3, (cos, sin))
    assert [f.status for f in report.findings] == ["exact"]
    assert report.findings[0].layers == (0, 1, 2, 3)
    assert report.exit_code == 0


def test_float64_tables_rounded_to_float32_are_exact_but_float32_angles_are_not() -> None:
    kind = layer(QWEN25_YARN)
    omega, attention = kind.frequencies_at(None)
    cos, sin = exact_tables(POSITIONS, omega, attention)
    exact = audit(QWEN25_YARN, (cos.astype(np.float32), sin.astype(np.float32)))
    assert exact.findings[0].status == "exact"
    recipe = audit(QWEN25_YARN, float32_tables(POSITIONS, omega, attention))
    assert recipe.findings[0].status == "float32_angles"


# --------------------------------------------------------------------------- bug classes


def test_wrong_base_is_named_with_the_base_that_fits() -> None:
    wrong = tables_of(LLAMA3, omega=layer(LLAMA3).frequencies * 0 + _plain(64, 10000.0))
    assert "base 10000 where the config says 500000" in cause(audit(LLAMA3, wrong))


def _plain(dim: int, base: float) -> Any:
    return base ** (-np.arange(0, dim, 2) / dim)


def test_yarn_missing_is_named() -> None:
    text = cause(audit(QWEN25_YARN, tables_of(QWEN25_YARN, omega=_plain(64, 1e6), attention=1.0)))
    assert text == "no yarn where the config has yarn factor 4"


def test_yarn_applied_twice_is_named() -> None:
    from posenc import RopeScaling

    kind = layer(QWEN25_YARN)
    spec = RopeScaling("yarn", factor=4.0, original_max_position_embeddings=32768)
    from posenc._rope.records import RopeInput

    twice, _ = spec.record.transform(RopeInput(kind.frequencies, 64, 1e6, spec.params, None))
    assert "yarn applied twice" in cause(audit(QWEN25_YARN, tables_of(QWEN25_YARN, omega=twice)))


def test_yarn_truncate_lost_is_named() -> None:
    config = {**GPT_OSS, "rope_scaling": {**GPT_OSS["rope_scaling"], "truncate": True}}
    rounded = layer(config, "full_attention").frequencies
    text = cause(audit(GPT_OSS, tables_of(GPT_OSS, "full_attention", omega=rounded),
                       layer_type="full_attention"))  # fmt: skip
    assert "YaRN truncate lost: the config says truncate=False" in text


def test_gpt_oss_pairs_interleaved_is_named() -> None:
    wrong = tables_of(GPT_OSS, "full_attention", pairs="interleaved")
    text = cause(audit(GPT_OSS, wrong, layer_type="full_attention"))
    assert text.startswith("pairs interleaved where the model pairs halves")


def test_llama3_factors_missing_and_inverted_are_named() -> None:
    plain = _plain(64, 500000.0)
    scaled = layer(LLAMA3).frequencies
    assert "llama3 factors missing" in cause(audit(LLAMA3, tables_of(LLAMA3, omega=plain)))
    inverted = plain * plain / scaled
    assert "llama3 factors inverted" in cause(audit(LLAMA3, tables_of(LLAMA3, omega=inverted)))


def test_longrope_swapped_is_named() -> None:
    kind = layer(PHI3)

    def swapped(seq_len: int) -> Any:
        other = 4096 if seq_len > 4096 else 4097
        return kind.frequencies_at(other)[0]

    assert "longrope long and short factors swapped" in cause(
        audit(PHI3, tables_of(PHI3, omega=swapped))
    )


def test_gemma3_local_base_on_global_layers_is_named() -> None:
    local = layer(GEMMA3, "sliding_attention").frequencies
    report = audit(GEMMA3, tables_of(GEMMA3, "full_attention", omega=local),
                   layer_type="full_attention")  # fmt: skip
    assert "the RoPE of 'sliding_attention' layers (base 10000) on a 'full_attention'" in cause(
        report
    )


def test_partial_rotary_over_head_dim_is_named() -> None:
    over = _plain(64, 10000.0)[:16]  # the first 16 frequencies of a 64-channel schedule
    text = cause(audit(PARTIAL, tables_of(PARTIAL, omega=over)))
    assert text == "frequencies over head_dim 64 channels where the rotary width is 32"


def test_partial_rotary_full_width_tables_are_named() -> None:
    cos, sin = float32_tables(POSITIONS, _plain(64, 10000.0))
    text = cause(audit(PARTIAL, (cos, sin)))
    assert text.startswith("frequencies over head_dim 64 channels where the rotary width is 32")


def test_sin_read_from_cos_is_named() -> None:
    kind = layer(LLAMA3)
    cos, _ = float32_tables(POSITIONS, kind.frequencies)
    assert cause(audit(LLAMA3, (cos, cos))).startswith("sin read from cos")


def test_bfloat16_tables_fail_and_are_named(tmp_path: Path) -> None:
    kind = layer(QWEN25_YARN)
    omega, attention = kind.frequencies_at(None)
    cos, sin = exact_tables(POSITIONS, omega, attention)
    file = save_safetensors(
        tmp_path / "rope.safetensors", {"cos": (cos, "BF16"), "sin": (sin, "BF16")}
    )
    report = audit(QWEN25_YARN, file)
    assert report.exit_code == 1
    assert cause(report) == "the table rounded to bfloat16 (worse than float32 angles)"
    cos32, sin32 = float32_tables(POSITIONS, omega, attention)
    file = save_safetensors(
        tmp_path / "f32.safetensors", {"cos": (cos32, "F32"), "sin": (sin32, "F32")}
    )
    assert audit(QWEN25_YARN, file).passed


def test_bfloat16_positions_are_named() -> None:
    kind = layer(QWEN25_YARN)
    omega, attention = kind.frequencies_at(None)
    cos, sin = exact_tables(_round_bfloat16(POSITIONS), omega, attention)
    text = cause(audit(QWEN25_YARN, (cos, sin, POSITIONS)))
    assert text.startswith("positions rounded to bfloat16")


def test_attention_factor_missing_is_named() -> None:
    kind = layer(QWEN25_YARN)
    text = cause(audit(QWEN25_YARN, tables_of(QWEN25_YARN, omega=kind.frequencies, attention=1.0)))
    assert text.startswith("the attention factor 1.13863 of yarn missing")


# --------------------------------------------------------------------------- M-RoPE


def mrope_tables(sections_used: bool) -> Any:
    kind = layer(QWEN2_VL)
    matrix, _ = kind.axis_frequencies()

    def tables(positions: Any) -> tuple[Any, Any]:
        pos = np.asarray(positions, dtype=np.float64)
        if not sections_used:
            pos = np.repeat(pos[:, :1], 3, axis=1)
        theta = (pos @ matrix).astype(np.float32)
        return spread(np.cos(theta), "half"), spread(np.sin(theta), "half")

    return tables


def test_mrope_with_sections_passes_and_sections_ignored_are_named() -> None:
    assert audit(QWEN2_VL, mrope_tables(True)).passed
    text = cause(audit(QWEN2_VL, mrope_tables(False)))
    assert text == "sections [8, 12, 12] ignored: every pair turns with the temporal coordinate"


def qwen2_vl_stack(width_axis: int) -> Any:
    """Qwen2-VL's M-RoPE as its stack computes it: float32 inverse frequencies over the 128
    channels, pairs 0-15 turned by the temporal id, 16-39 by the height id, 40-63 by the id
    in row ``width_axis`` of ``position_ids`` (2: the width's, as the model does)."""
    inv_freq = (1.0 / np.float32(1e6) ** (np.arange(0, 128, 2, dtype=np.float32) / 128)).astype(
        np.float32
    )
    rows = np.array([0] * 16 + [1] * 24 + [width_axis] * 24)

    def tables(positions: Any) -> tuple[Any, Any]:
        ids = np.asarray(positions, dtype=np.float32)  # (P, 3): temporal, height, width
        theta = ids[:, rows] * inv_freq
        return spread(np.cos(theta), "half"), spread(np.sin(theta), "half")

    return tables


def test_mrope_per_axis_verdicts_name_the_one_wrong_axis() -> None:
    assert audit(QWEN2_VL_HEAD128, qwen2_vl_stack(2)).passed
    report = audit(QWEN2_VL_HEAD128, qwen2_vl_stack(1))  # the width pairs read the height ids
    (finding,) = report.findings
    assert finding.cause == (
        "the width pairs turn with the height coordinate (one axis's position ids read for "
        "another's)"
    )
    verdicts = [(a.axis, a.pairs, a.status) for a in finding.axes]
    assert verdicts == [
        ("temporal", 16, "float32_angles"),
        ("height", 24, "float32_angles"),
        ("width", 24, "wrong"),
    ]
    width = finding.axes[2].first_difference
    assert width is not None
    assert width.channel % 64 >= 40  # pairs 40-63: the width pairs
    assert width.coordinates[1] != width.coordinates[2]  # an image row: height and width differ
    assert finding.first_difference == width
    text = str(report)
    assert "  axis height (24 pairs): within float32 angles, max error" in text
    assert f"  axis width (24 pairs): WRONG, max error {finding.axes[2].max_error:.2g}; " in text
    assert f"first differs at position {width.position:,} (temporal " in text
    data = report.as_dict()
    assert data["schema_version"] == 1
    assert [a["status"] for a in data["findings"][0]["axes"]] == [
        "float32_angles",
        "float32_angles",
        "wrong",
    ]
    assert data["findings"][0]["axes"][2]["first_difference"]["coordinates"] == list(
        width.coordinates
    )
    assert report_from_dict(data) == report


def test_one_dimensional_layers_have_no_per_axis_verdicts() -> None:
    (finding,) = audit(QWEN25_YARN, tables_of(QWEN25_YARN)).findings
    assert finding.axes == ()
    assert finding.as_dict()["axes"] == []


# --------------------------------------------------------------------------- caches, inv_freq


def test_vllm_cos_sin_cache_passes_and_a_wrong_one_fails() -> None:
    kind = layer(QWEN25_YARN)
    omega, attention = kind.frequencies_at(None)
    assert audit(QWEN25_YARN, {"cos_sin_cache": vllm_cache(omega, attention, 8192)}).passed
    plain = vllm_cache(_plain(64, 1e6), 1.0, 8192)
    assert cause(audit(QWEN25_YARN, {"cos_sin_cache": plain})).startswith("no yarn")


def test_inv_freq_in_float32_passes_and_cast_to_bfloat16_fails(tmp_path: Path) -> None:
    kind = layer(LLAMA3)
    report = audit(LLAMA3, kind.frequencies.astype(np.float32))
    assert report.findings[0].status == "float32_angles"
    assert report.findings[0].recipe == "float32 angles (the inv_freq buffer is float32)"
    name = "model.rotary_emb.inv_freq"
    file = save_safetensors(tmp_path / "state.safetensors", {name: (kind.frequencies, "BF16")})
    report = audit(LLAMA3, file)
    assert cause(report) == "frequencies rounded to bfloat16 (an inv_freq buffer cast to bfloat16)"


@pytest.mark.slow
def test_torch_tensors_bfloat16_included() -> None:
    torch = pytest.importorskip("torch")
    kind = layer(LLAMA3)
    bf16 = {"inv_freq": torch.tensor(kind.frequencies).bfloat16()}
    assert cause(audit(LLAMA3, bf16)).startswith("frequencies rounded to bfloat16")
    cos, sin = float32_tables(POSITIONS, kind.frequencies)
    assert audit(LLAMA3, (torch.tensor(cos), torch.tensor(sin))).passed


def test_objects_with_cos_sin_cache_or_inv_freq() -> None:
    kind = layer(QWEN25_YARN)
    omega, attention = kind.frequencies_at(None)

    class VllmRope:
        cos_sin_cache = vllm_cache(omega, attention, 4096)

    class HfRotary:
        inv_freq = omega.astype(np.float32)
        attention_scaling = attention

    assert audit(QWEN25_YARN, VllmRope()).passed
    assert audit(QWEN25_YARN, HfRotary()).passed
    HfRotary.attention_scaling = 1.0
    assert cause(audit(QWEN25_YARN, HfRotary())).startswith("the attention factor")


def test_a_single_table_needs_the_layer_type_when_kinds_differ() -> None:
    with pytest.raises(ValueError, match="pass layer_type"):
        audit(GEMMA3, tables_of(GEMMA3, "full_attention"))


def test_a_long_dump_is_sampled_at_the_probes_and_evenly() -> None:
    kind = layer(LLAMA3)
    positions = np.arange(0, 140000, 2)  # 70,000 rows
    cos, sin = float32_tables(positions, kind.frequencies)
    report = audit(LLAMA3, (cos, sin, positions))
    assert report.passed, str(report)
    (finding,) = report.findings
    assert finding.positions[0] <= 4096
    assert finding.positions[1] == 139998  # the last row is compared
    assert finding.error_at_context is None  # position 131071 is not in the dump


def test_float16_angles_are_named() -> None:
    kind = layer(QWEN25_YARN)
    omega, attention = kind.frequencies_at(None)
    theta = (POSITIONS[:, None] * omega).astype(np.float16).astype(np.float64)
    cos, sin = spread(np.cos(theta) * attention, "half"), spread(np.sin(theta) * attention, "half")
    assert cause(audit(QWEN25_YARN, (cos, sin))) == "angles in float16"


# --------------------------------------------------------------------------- Pixtral 2-D

PIXTRAL = {"model_type": "pixtral", "head_dim": 64,
           "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0}}  # fmt: skip


def test_pixtral_2d_passes_and_one_coordinate_for_every_pair_is_named() -> None:
    kind = layer(PIXTRAL)

    def two_d(positions: Any) -> tuple[Any, Any]:
        cos, sin = kind.cos_sin(np.asarray(positions, dtype=np.float64))
        return cos, sin

    report = audit(PIXTRAL, two_d)
    assert report.findings[0].status == "exact"

    def rows_only(positions: Any) -> tuple[Any, Any]:  # a 1-D op fed the row index
        flat = np.repeat(np.asarray(positions)[:, :1], 2, axis=1).astype(np.float64)
        return kind.cos_sin(flat)

    assert cause(audit(PIXTRAL, rows_only)) == (
        "sections [16, 16] ignored: every pair turns with the height coordinate"
    )


# --------------------------------------------------------------------------- hypotheses


def test_a_hypothesis_predicting_nan_does_not_fit() -> None:
    """float16 angles overflow past 65504 (cos and sin of inf are NaN): a prediction that is
    NaN anywhere explains nothing there, so it must not be taken as the cause."""
    from posenc.audit._errors import Group
    from posenc.audit._forms import one_axis_form
    from posenc.audit._hypotheses import fits
    from posenc.audit._subjects import SubjectTables

    positions = np.array([[0.0], [1.0], [70000.0]])
    form = one_axis_form(_plain(8, 10000.0), 1.0, "half")
    cos, sin = form.tables(positions)
    group = Group(positions, SubjectTables(positions, cos, sin, "float32", None, ()), None)
    assert fits(lambda g, f: ((cos, sin), f), [group], [form])  # the subject itself fits
    broken = cos.copy()
    broken[2] = np.nan  # where float16 angles overflow

    assert not fits(lambda g, f: ((broken, sin), f), [group], [form])
