"""Callable subjects: rotations probed with basis vectors (pairs and direction measured),
callables per layer, ``module:attr`` in a child process with a time limit, hostile returns,
and ``assert_rope_matches``."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from posenc import rope_plan, rotary_cos_sin
from posenc.audit import assert_rope_matches, audit
from tests.audit.models import GPT_OSS, LLAMA3, PARTIAL, QWEN25_YARN, SMOLLM3
from tests.audit.stacks import float32_tables, rotation


def frequencies(config: dict[str, Any], layer_type: str | None = None) -> tuple[Any, float]:
    kind = rope_plan(config).layer(layer_type)
    return kind.frequencies, kind.attention_factor


def cause(report: Any) -> str:
    assert not report.passed, str(report)
    return " ".join(f.cause for f in report.findings if f.cause)


# --------------------------------------------------------------------------- rotations


def test_a_rotation_in_halves_passes_and_its_layout_is_measured() -> None:
    omega, attention = frequencies(QWEN25_YARN)
    report = audit(QWEN25_YARN, rotation(omega, attention, "half"))
    assert report.passed, str(report)
    assert report.subject_kind == "rotation"


def test_a_rotation_pairing_neighbours_is_named_not_assumed() -> None:
    omega, attention = frequencies(GPT_OSS, "full_attention")
    report = audit(GPT_OSS, rotation(omega, attention, "interleaved"), layer_type="full_attention")
    (finding,) = report.findings
    assert finding.cause.startswith("pairs interleaved where the model pairs halves")
    assert finding.max_error is not None
    assert finding.max_error < 0.05  # the frequencies themselves are right


def test_a_rotation_the_other_way_is_named() -> None:
    omega, attention = frequencies(LLAMA3)
    text = cause(audit(LLAMA3, rotation(omega, attention, "half", sign=-1.0)))
    assert text.startswith("rotation by -θ")


def test_a_partial_rotation_leaves_the_other_channels_and_passes() -> None:
    omega, _ = frequencies(PARTIAL)
    assert audit(PARTIAL, rotation(omega)).passed


# --------------------------------------------------------------------------- per layer


def test_layers_without_positions_rotated_are_named() -> None:
    omega, _ = frequencies(SMOLLM3)
    plan = rope_plan(SMOLLM3)

    def honest(positions: Any, layer: int) -> Any:
        return float32_tables(positions, omega) if plan[layer].uses_positions else None

    def rotates_all(positions: Any, layer: int) -> Any:
        return float32_tables(positions, omega)

    report = audit(SMOLLM3, honest)
    assert report.passed, str(report)
    assert [f.status for f in report.findings] == ["float32_angles", "no_positions"]
    report = audit(SMOLLM3, rotates_all)
    (wrong,) = [f for f in report.findings if not f.passed]
    assert wrong.layers == (3,)
    assert wrong.cause.startswith("the subject rotates this layer, but the config gives it no")


# --------------------------------------------------------------------------- hostile returns


def test_nan_tables_are_one_line_errors() -> None:
    omega, _ = frequencies(LLAMA3)

    def nan(positions: Any) -> Any:
        cos, sin = float32_tables(positions, omega)
        cos[3, 5] = np.nan
        return cos, sin

    with pytest.raises(ValueError, match=r"the returned cos holds nan at position 3, channel 5"):
        audit(LLAMA3, nan)
    cos, sin = float32_tables(np.arange(10), omega)
    sin[2, 0] = np.inf
    with pytest.raises(ValueError, match="sin holds inf"):
        audit(LLAMA3, (cos, sin))


def test_wrong_shapes_are_named() -> None:
    with pytest.raises(ValueError, match="expected 53 rows"):
        audit(LLAMA3, lambda p: (np.ones((3, 64)), np.ones((3, 64))))
    with pytest.raises(TypeError, match="must return"):
        audit(LLAMA3, lambda p: np.ones((len(p), 64)))
    with pytest.raises(ValueError, match="cos_sin_cache must be"):
        audit(LLAMA3, {"cos_sin_cache": np.ones((8, 7))})
    with pytest.raises(ValueError, match="cos and sin must have the same shape"):
        audit(LLAMA3, (np.ones((4, 64)), np.ones((4, 32))))


def test_a_callable_that_raises_propagates_its_error() -> None:
    def broken(positions: Any) -> Any:
        raise RuntimeError("kernel not built")

    with pytest.raises(RuntimeError, match="kernel not built"):
        audit(LLAMA3, broken)


# --------------------------------------------------------------------------- module:attr


STACK = textwrap.dedent(
    """
    import time
    import numpy as np

    def rope(positions):
        inv = np.float32(500000.0) ** (-np.arange(0, 64, 2, dtype=np.float32) / 64)
        theta = positions.astype(np.float32)[:, None] * inv
        return np.concatenate([np.cos(theta)] * 2, 1), np.concatenate([np.sin(theta)] * 2, 1)

    def broken(positions):
        raise RuntimeError("no kernel for this GPU")

    def hangs(positions):
        time.sleep(60)
    """
)


@pytest.mark.slow
def test_module_attr_runs_in_a_child_with_a_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mystack.py").write_text(STACK)
    monkeypatch.chdir(tmp_path)
    config = {**LLAMA3, "rope_scaling": None}
    report = audit(config, "mystack:rope")
    assert report.passed, str(report)
    assert report.subject == "mystack:rope"
    with pytest.raises(ValueError, match="RuntimeError: no kernel for this GPU"):
        audit(config, "mystack:broken")
    with pytest.raises(TimeoutError, match="ran for more than 1 s"):
        audit(config, "mystack:hangs", timeout=1.0)
    with pytest.raises(ValueError, match="has no attribute nothing"):
        audit(config, "mystack:nothing")


# --------------------------------------------------------------------------- the assertion


def test_assert_rope_matches_passes_and_fails_with_the_cause() -> None:
    config = {**LLAMA3, "rope_scaling": None}
    cos, sin = rotary_cos_sin(np.arange(256), 64, base=500000.0)
    assert_rope_matches(cos, sin, config=config, head_dim=64)
    wrong = rotary_cos_sin(np.arange(256), 64, base=10000.0)
    with pytest.raises(AssertionError, match="base 10000 where the config says 500000"):
        assert_rope_matches(*wrong, config=config)
    with pytest.raises(AssertionError, match="head_dim 128 is not the config's"):
        assert_rope_matches(cos, sin, config=config, head_dim=128)


def test_assert_rope_matches_on_a_rotation_and_exactness_on_demand() -> None:
    omega, _ = frequencies({**LLAMA3, "rope_scaling": None})
    config = {**LLAMA3, "rope_scaling": None}
    assert_rope_matches(rotation=rotation(omega), config=config, positions=[0, 1, 7, 4096])
    with pytest.raises(AssertionError, match="within float32 angles"):
        assert_rope_matches(
            rotation=rotation(omega), config=config, positions=[0, 1, 4096],
            allow_float32_angles=False,
        )  # fmt: skip
