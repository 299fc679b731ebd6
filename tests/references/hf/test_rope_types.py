"""The rope types that one model family defines, against the real transformers functions.

- ``proportional`` (Gemma 4): ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS
  ["proportional"]`` on a ``Gemma4TextConfig``;
- ``ntk_alpha`` (HunYuan's ``{"rope_type": "dynamic", "alpha": ...}``): the HunYuan rotary
  module's ``compute_ntk_alpha_rope_parameters``, and the module itself;
- ``llama_4_scaling_beta`` (Ministral 3), accepted as inert: ``Ministral3RotaryEmbedding``.

Tolerance: transformers computes inverse frequencies in float32 (relative error ~1e-7);
tables are compared with ``1e-6 + 2e-7 * max_position`` times the attention factor, as in
``test_rotary_references.py``. Each comparison has a negative control that must fail it.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import posenc  # noqa: E402
from tests.tolerance import assert_close_float32_recipe, ulps_apart  # noqa: E402
from tests.torch.hf import rope_coverage  # noqa: E402

POSITIONS = torch.arange(300)[None]


def _close(ours: np.ndarray, theirs: torch.Tensor) -> bool:
    """Frequencies computed in float32: within 4 ulps of each one's own magnitude."""
    theirs_np = theirs.detach().double().numpy()
    if ours.shape != theirs_np.shape:
        return False
    return ulps_apart(ours, theirs_np, np.float32, scale=theirs_np) <= 4


def _gemma4_config(partial: float, factor: float | None, head_dim: int) -> object:
    full = {"rope_type": "proportional", "partial_rotary_factor": partial, "rope_theta": 1e6}
    if factor is not None:
        full["factor"] = factor
    return transformers.Gemma4TextConfig(
        num_hidden_layers=6,
        hidden_size=128,
        num_attention_heads=4,
        head_dim=head_dim // 2,
        global_head_dim=head_dim,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": full,
        },
    )


@pytest.mark.parametrize("head_dim", [64, 256, 512])
@pytest.mark.parametrize("partial", [0.25, 0.5, 1.0])
@pytest.mark.parametrize("factor", [None, 2.0])
def test_proportional_frequencies(head_dim: int, partial: float, factor: float | None) -> None:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = _gemma4_config(partial, factor, head_dim)
    function = ROPE_INIT_FUNCTIONS["proportional"]
    theirs, attention = function(config, None, layer_type="full_attention")
    scaling = {"rope_type": "proportional", "partial_rotary_factor": partial, "factor": factor}
    omega, ours_attention = posenc.rope_frequencies(head_dim, base=1e6, scaling=scaling)
    assert _close(omega, theirs)
    assert ours_attention == attention == 1.0
    # the rotated pairs turn; the others do not (a zero frequency: cos 1, sin 0)
    assert (omega[: int(partial * head_dim // 2)] > 0).all()
    assert (omega[int(partial * head_dim // 2) :] == 0).all()
    if partial < 1.0:  # negative control: a truncated partial rotation (partial_rotary_factor)
        truncated, _ = posenc.rope_frequencies(
            int(head_dim * partial),
            base=1e6,
            scaling={"rope_type": "linear", "factor": factor or 1},
        )
        padded = np.concatenate([truncated, np.zeros(omega.size - truncated.size)])
        assert not _close(padded, theirs)


def test_proportional_tables_keep_the_head_size() -> None:
    scaling = {"rope_type": "proportional", "partial_rotary_factor": 0.25}
    cos, sin = posenc.rotary_cos_sin(5, 16, base=1e6, scaling=scaling)
    assert cos.shape == sin.shape == (5, 16)
    assert (cos[:, [2, 3, 4, 5, 6, 7]] == 1).all()
    assert (sin[:, 2:8] == 0).all()
    with pytest.raises(ValueError, match=r"scaling\['partial_rotary_factor'\] must be"):
        posenc.rotary_cos_sin(5, 16, scaling={**scaling, "partial_rotary_factor": 1.5})


def _hunyuan(alpha: float, head_dim: int = 128) -> object:
    # the rope parameters of a HunYuan checkpoint (the coverage harness uses them too)
    parameters = rope_coverage.OVERRIDES["HunYuanDenseV1Config"]["rope_parameters"]
    return transformers.HunYuanDenseV1Config(
        head_dim=head_dim, rope_parameters={**parameters, "alpha": alpha}
    )


@pytest.mark.parametrize("alpha", [1.0, 50.0, 1000.0])
@pytest.mark.parametrize("head_dim", [4, 64, 128])
def test_ntk_alpha_frequencies(alpha: float, head_dim: int) -> None:
    from transformers.models.hunyuan_v1_dense import modeling_hunyuan_v1_dense as hunyuan

    config = _hunyuan(alpha, head_dim)
    rotary = hunyuan.HunYuanDenseV1RotaryEmbedding
    theirs, attention = rotary.compute_ntk_alpha_rope_parameters(config)
    spec = posenc.rope_scaling(dict(config.rope_parameters))
    assert spec is not None
    assert spec.rope_type == "ntk_alpha"
    assert spec.alpha == alpha
    omega, ours_attention = posenc.rope_frequencies(head_dim, base=10000.0, scaling=spec)
    assert _close(omega, theirs)
    assert ours_attention == attention == 1.0
    if alpha != 1.0:  # negative control: NTK by sequence length (dynamic) at the same factor
        dynamic = {"rope_type": "dynamic", "factor": alpha, "max_position_embeddings": 4096}
        length, _ = posenc.rope_frequencies(head_dim, base=10000.0, scaling=dynamic, seq_len=8192)
        assert not _close(length, theirs)


def test_ntk_alpha_tables_match_the_hunyuan_module() -> None:
    from transformers.models.hunyuan_v1_dense import modeling_hunyuan_v1_dense as hunyuan

    config = _hunyuan(1000.0)
    module = hunyuan.HunYuanDenseV1RotaryEmbedding(config)
    assert module.rope_type == "ntk_alpha"
    cos, sin = module(torch.zeros(1), POSITIONS)
    layer = posenc.rope_plan(config).layer()
    ours_cos, ours_sin = layer.cos_sin(POSITIONS.numpy(), dtype=np.float64)
    largest = int(POSITIONS.max())
    assert_close_float32_recipe(ours_cos, cos, max_angle=largest)
    assert_close_float32_recipe(ours_sin, sin, max_angle=largest)
    other = posenc.rope_plan(_hunyuan(10.0)).layer().cos_sin(POSITIONS.numpy())[1]
    with pytest.raises(AssertionError):  # negative control: another alpha
        assert_close_float32_recipe(other, sin, max_angle=largest)


def test_ntk_alpha_needs_alpha_and_checks_it() -> None:
    with pytest.raises(ValueError, match=r"scaling\['alpha'\] is required"):
        posenc.RopeScaling("ntk_alpha")
    with pytest.raises(ValueError, match=r"scaling\['alpha'\] must be a positive"):
        posenc.rope_scaling({"rope_type": "dynamic", "alpha": -2.0})
    with pytest.raises(ValueError, match=r"dim must be >= 4 for rope_type 'ntk_alpha'"):
        posenc.rope_frequencies(2, scaling={"rope_type": "dynamic", "alpha": 2.0})


def test_llama_4_scaling_beta_is_accepted_and_leaves_the_tables() -> None:
    from transformers.models.ministral3 import modeling_ministral3 as ministral3

    config = transformers.Ministral3Config(max_position_embeddings=4096)
    assert config.rope_parameters["llama_4_scaling_beta"] == 0.1
    module = ministral3.Ministral3RotaryEmbedding(config)
    cos, sin = module(torch.zeros(1), POSITIONS)
    layer = posenc.rope_plan(config).layer()
    assert layer.rope_type == "yarn"
    assert dict(layer.inert) == {"llama_4_scaling_beta": 0.1}
    assert any("llama_4_scaling_beta" in note for note in layer.notes)
    ours_cos, ours_sin = layer.cos_sin(POSITIONS.numpy(), dtype=np.float64)
    largest, factor = int(POSITIONS.max()), layer.attention_factor
    assert_close_float32_recipe(ours_cos, cos, max_angle=largest, magnitude=factor)
    assert_close_float32_recipe(ours_sin, sin, max_angle=largest, magnitude=factor)
    spec = posenc.rope_scaling(dict(config.rope_parameters))
    assert spec is not None
    assert spec.llama_4_scaling_beta == 0.1
    # negative control: a key posenc does not know is an error that names it
    with pytest.raises(ValueError, match=r"scaling\['llama_4_scaling_gamma'\] is not a param"):
        posenc.rope_scaling({**config.rope_parameters, "llama_4_scaling_gamma": 0.1})
