"""MLX rope modules as mlx-lm builds them from a config's rope parameters, probed with basis
vectors at each probe position (``module(x, offset=p)``), and multi-axis rotary embeddings
called with M-RoPE's position ids (``module(x, position_ids) -> (cos, sin)``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from posenc.audit import audit
from tests.audit.models import LLAMA3, PHI3, QWEN2_VL_HEAD128, QWEN3_5, QWEN25_YARN

mx = pytest.importorskip("mlx.core")
nn = pytest.importorskip("mlx.nn")
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


# --------------------------------------------------------------------------- multi-axis


class MRoPE(nn.Module):
    """M-RoPE as an MLX vision-language stack computes it: ``module(x, position_ids)`` with
    ``position_ids`` ``(3, batch, P)`` (temporal, height, width ids) returns cos and sin
    ``(batch, P, dims)`` in halves, from float32 inverse frequencies. With ``interleaved``
    (Qwen3-VL, Qwen3.5) pair ``k`` turns with axis ``k % 3`` while that axis has pairs left,
    else with the temporal id; otherwise each axis takes a block of pairs in turn (Qwen2-VL).
    ``rows[a]``: the row of ``position_ids`` axis ``a`` reads."""

    def __init__(
        self,
        dims: int,
        base: float,
        sections: list[int],
        interleaved: bool,
        rows: tuple[int, int, int] = (0, 1, 2),
    ) -> None:
        super().__init__()
        self.dims = dims
        if interleaved:
            owner = [k % 3 if k % 3 and k < 3 * sections[k % 3] else 0 for k in range(dims // 2)]
        else:
            owner = [a for a, n in enumerate(sections) for _ in range(n)]
        self._rows = mx.array([rows[a] for a in owner])
        self._inv_freq = 1.0 / (base ** (mx.arange(0, dims, 2, dtype=mx.float32) / dims))

    def __call__(self, x: Any, position_ids: Any) -> tuple[Any, Any]:
        ids = mx.take(position_ids, self._rows, axis=0)  # (pairs, batch, P)
        angles = ids.transpose(1, 2, 0).astype(mx.float32) * self._inv_freq
        both = mx.concatenate([angles, angles], axis=-1)
        return mx.cos(both).astype(x.dtype), mx.sin(both).astype(x.dtype)


def test_qwen3_5_interleaved_mrope_passes_and_blocks_are_named() -> None:
    report = audit(QWEN3_5, MRoPE(64, 1e7, [11, 11, 10], interleaved=True))
    assert report.passed, str(report)
    (finding,) = report.findings
    assert finding.layers == (3,)
    assert [(a.axis, a.pairs) for a in finding.axes] == [
        ("temporal", 11),
        ("height", 11),
        ("width", 10),
    ]
    assert all(a.passed for a in finding.axes)
    blocks = audit(QWEN3_5, MRoPE(64, 1e7, [11, 11, 10], interleaved=False))
    assert blocks.findings[0].cause.startswith(
        "sections [11, 11, 10] in one block per axis where the model lays them interleaved"
    )


def test_mlx_lm_qwen3_5_rope_collapses_image_positions_to_one() -> None:
    # mlx-lm 0.32 reads Qwen3.5's rope_parameters (rope_type "default" with mrope_section)
    # through initialize_rope's "default" branch: an nn.RoPE called with offset=, one
    # position per token, so an image patch's (t, h, w) ids cannot reach it
    qwen3_5 = pytest.importorskip("mlx_lm.models.qwen3_5")
    model = qwen3_5.Model(qwen3_5.ModelArgs.from_dict(copy.deepcopy(QWEN3_5)))
    report = audit(QWEN3_5, model)  # every layer's rope module, as the model built them
    assert not report.passed
    linear, finding = report.findings
    assert (linear.layers, linear.status) == ((0, 1, 2), "no_positions")
    assert finding.layers == (3,)
    assert audit(QWEN3_5, model.layers[3].self_attn.rope).findings[0].cause == finding.cause
    assert finding.cause == (
        "sections [11, 11, 10] ignored: every pair turns with the temporal coordinate"
    )
    assert [(a.axis, a.status) for a in finding.axes] == [
        ("temporal", "float32_angles"),
        ("height", "wrong"),
        ("width", "wrong"),
    ]
    height = finding.axes[1].first_difference
    assert height is not None
    assert height.coordinates == (1, 7, 14)  # the first image row
    assert "one position per token" in " ".join(report.notes)


def test_mlx_lm_mrope_branch_ignores_qwen2_vl_sections() -> None:
    # initialize_rope's "mrope" branch checks that there are three sections, then builds a
    # plain nn.RoPE over the whole head
    scaling = QWEN2_VL_HEAD128["rope_scaling"]
    module = rope_utils.initialize_rope(128, 1e6, False, scaling, 32768)
    (finding,) = audit(QWEN2_VL_HEAD128, module).findings
    assert finding.cause == (
        "sections [16, 24, 24] ignored: every pair turns with the temporal coordinate"
    )
    correct = MRoPE(128, 1e6, [16, 24, 24], interleaved=False)
    assert audit(QWEN2_VL_HEAD128, correct).passed


def test_an_mlx_module_reading_the_height_ids_for_the_width_is_named_per_axis() -> None:
    wrong = MRoPE(128, 1e6, [16, 24, 24], interleaved=False, rows=(0, 1, 1))
    (finding,) = audit(QWEN2_VL_HEAD128, wrong).findings
    assert finding.cause.startswith("the width pairs turn with the height coordinate")
    assert [a.status for a in finding.axes] == ["float32_angles", "float32_angles", "wrong"]


def test_a_position_ids_module_must_return_cos_and_sin_tables() -> None:
    class Rotates(nn.Module):  # returns the rotated x, not (cos, sin)
        def __call__(self, x: Any, position_ids: Any) -> Any:
            return x

    with pytest.raises(TypeError, match=r"must return \(cos, sin\), got array"):
        audit(QWEN2_VL_HEAD128, Rotates())

    class PerAxis(nn.Module):  # one table per axis: (3, batch, P, dims)
        def __call__(self, x: Any, position_ids: Any) -> tuple[Any, Any]:
            table = mx.zeros((3, 1, position_ids.shape[-1], 128))
            return table, table

    with pytest.raises(ValueError, match=r"the returned cos must be a table"):
        audit(QWEN2_VL_HEAD128, PerAxis())


class AppliedMRoPE(MRoPE):
    """The same M-RoPE applied to q and k the way such stacks do, ``apply_rotary(q, k,
    position_ids)``: pairs in halves, or neighbours with ``neighbours``."""

    def __init__(self, *args: Any, neighbours: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.neighbours = neighbours

    def apply_rotary(self, q: Any, k: Any, position_ids: Any) -> tuple[Any, Any]:
        cos, sin = self(q, position_ids)  # (batch, P, dims): the pairs' angles twice
        cos, sin = cos[:, None], sin[:, None]
        half = self.dims // 2
        if self.neighbours:
            cos = mx.repeat(cos[..., :half], 2, axis=-1)
            sin = mx.repeat(sin[..., :half], 2, axis=-1)

        def turn(x: Any) -> Any:
            part, rest = x[..., : self.dims], x[..., self.dims :]
            if self.neighbours:
                a, b = part[..., 0::2], part[..., 1::2]
                other = mx.stack([-b, a], axis=-1).reshape(part.shape)
            else:
                other = mx.concatenate([-part[..., half:], part[..., :half]], axis=-1)
            return mx.concatenate([part * cos + other * sin, rest], axis=-1)

        return turn(q), turn(k)


def test_an_mlx_apply_rotary_is_probed_with_basis_vectors() -> None:
    halves = AppliedMRoPE(128, 1e6, [16, 24, 24], interleaved=False)
    report = audit(QWEN2_VL_HEAD128, halves)
    assert report.passed, str(report)
    neighbours = AppliedMRoPE(128, 1e6, [16, 24, 24], interleaved=False, neighbours=True)
    (finding,) = audit(QWEN2_VL_HEAD128, neighbours).findings
    assert finding.cause.startswith("pairs interleaved where the model pairs halves")
    assert [a.status for a in finding.axes] == ["wrong"] * 3
