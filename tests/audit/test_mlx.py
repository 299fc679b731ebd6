"""MLX rope modules as mlx-lm builds them from a config's rope parameters, probed with basis
vectors at each probe position (``module(x, offset=p)``)."""

from __future__ import annotations

import pytest

from posenc.audit import audit
from tests.audit.models import LLAMA3, PHI3, QWEN25_YARN

pytest.importorskip("mlx.core")
rope_utils = pytest.importorskip("mlx_lm.models.rope_utils")

pytestmark = pytest.mark.slow  # importing MLX takes seconds


def test_mlx_lm_llama3_and_yarn_modules_pass() -> None:
    llama = rope_utils.initialize_rope(64, 500000.0, False, LLAMA3["rope_scaling"], 131072)
    report = audit(LLAMA3, llama)
    assert report.passed, str(report)
    assert report.subject_kind == "mlx"
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert audit(QWEN25_YARN, rope_utils.initialize_rope(64, 1e6, False, yarn, 131072)).passed


def test_a_traditional_mlx_rope_pairs_neighbours() -> None:
    plain = rope_utils.initialize_rope(64, 1e6, True, None, 32768)  # traditional: neighbours
    report = audit({**QWEN25_YARN, "rope_scaling": None}, plain)
    assert report.findings[0].cause.startswith("pairs interleaved where the model pairs halves")


def test_mlx_lm_longrope_uses_the_long_factors_at_every_length() -> None:
    # mlx-lm 0.32's SuScaledRoPE builds its frequencies from long_factor alone; transformers
    # uses short_factor up to original_max_position_embeddings
    scaling = {**PHI3["rope_scaling"], "original_max_position_embeddings": 4096}
    module = rope_utils.initialize_rope(16, 10000.0, False, scaling, 131072)
    report = audit(PHI3, module)
    assert not report.passed
    assert report.findings[0].cause.startswith("longrope's long factors at every length")
