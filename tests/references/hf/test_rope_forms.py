"""Rotary forms outside the plain layouts, against the transformers modules themselves.

- ERNIE 4.5 VL's M-RoPE (``Ernie4_5_VLMoeTextRotaryEmbedding``: height and width in turns,
  then time) and Gemma 4's vision tower (``Gemma4VisionRotaryEmbedding``, ``[x, x, y, y]``
  rotated by ``apply_multidimensional_rope``): the plan's tables equal the module's, and the
  model's rotation with them gives the scores of ``posenc.apply_rotary`` block by block.
- HunYuan-VL's XD-RoPE (``HunYuanVLRotaryEmbedding``): the plan's tables (HunYuan-VL's own
  layout, each pair one axis) equal the module's on text ids; on image ids the module's are
  the doubled table split by ``2·sections`` (two axes per pair), exactly as the plan's note
  names them.
- ``swap_positions`` replaces ERNIE's module (verified); it leaves Gemma 4's vision rotary
  module and transformers' HunYuan-VL module in place, saying why by name (the latter naming
  the axes its pairs mix), and ``strict=True`` raises for them; a HunYuan-VL module with the
  model's own split is replaced. NanoChat's module is replaced: its tables are the standard
  ones (only its attention, which the swap leaves alone, rotates by -θ).

The transformers modules compute their frequencies and angles in float32 and posenc in
float64: the tables agree within :data:`TABLE_ULPS` float32 ulps of max(|angle|, 1) per
element. Not one: ERNIE's float32 ``inv_freq`` is itself up to 1.03 ulps off the exact
frequency (torch's float32 ``pow``; head_dim 128, base 500), and its tables then differ from
posenc's by up to 1.04 ulps (measured by this file's comparisons).
"""

from __future__ import annotations

import copy
import types

import numpy as np
import pytest

from tests.references import require

torch = require("torch")
transformers = require("transformers")

import posenc  # noqa: E402
from posenc._rope.xdrope import DOUBLED_SPLIT, doubled_split_axes  # noqa: E402
from posenc.torch.hf import MultiAxisRotary, swap_positions  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402

ernie = require("transformers.models.ernie4_5_vl_moe.modeling_ernie4_5_vl_moe")
gemma4 = require("transformers.models.gemma4.modeling_gemma4")
hunyuan_vl = require("transformers.models.hunyuan_vl.modeling_hunyuan_vl")
nanochat = require("transformers.models.nanochat.modeling_nanochat")
deepseek_v4 = require("transformers.models.deepseek_v4.modeling_deepseek_v4")


#: float32 ulps of max(|angle|, 1) between the modules' tables and the plan's (see above).
TABLE_ULPS = 2
#: float32 ulps of max|x| between the models' float32 rotation and posenc's float64 one with
#: the same tables (two products and a sum, each rounded).
ROTATION_ULPS = 2


@pytest.fixture(scope="module", autouse=True)
def _quiet() -> None:
    transformers.logging.set_verbosity_error()


def _ernie_config(sections: list[int]) -> object:
    return transformers.Ernie4_5_VLMoeTextConfig(
        hidden_size=64,
        num_attention_heads=2,
        head_dim=2 * sum(sections),
        rope_parameters={"rope_type": "default", "rope_theta": 500.0, "mrope_section": sections},
    )


def _reach(layer: posenc.RopeLayer, positions: np.ndarray) -> np.ndarray:
    """max(|angle|, 1) of every channel of the plan's table (the magnitude it is rounded at)."""
    matrix = layer.axis_frequencies().frequencies  # (n_axes, n_pairs)
    per_pair = np.maximum(np.abs(positions.astype(np.float64) @ matrix), 1.0)
    if layer.pairs == "interleaved":
        return np.repeat(per_pair, 2, axis=-1)
    if layer.pairs_per_axis:
        blocks, start = [], 0
        for axis in layer.slot_order:
            stop = start + layer.sections[axis]
            blocks += [per_pair[..., start:stop]] * 2
            start = stop
        return np.concatenate(blocks, axis=-1)
    return np.concatenate([per_pair, per_pair], axis=-1)


@pytest.mark.parametrize("sections", [[22, 22, 20], [3, 3, 10], [1, 1, 1]])
def test_ernie_vl_tables_are_the_module_s(sections: list[int]) -> None:
    config = _ernie_config(sections)
    module = ernie.Ernie4_5_VLMoeTextRotaryEmbedding(config)
    layer = posenc.rope_plan(config).layer()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 4096, size=(3, 2, 40))  # (t, h, w) rows, distinct on every axis
    cos, sin = module(torch.zeros(1), torch.from_numpy(ids))
    positions = np.moveaxis(ids, 0, -1)
    ours_cos, ours_sin = layer.cos_sin(positions)
    scale = _reach(layer, positions)
    assert_close_ulp(
        ours_cos, cos.numpy(), ulps=TABLE_ULPS, dtype=np.float32, scale=scale, what="cos"
    )
    assert_close_ulp(
        ours_sin, sin.numpy(), ulps=TABLE_ULPS, dtype=np.float32, scale=scale, what="sin"
    )
    # the model's rotation with these tables is posenc's with the plan's pair layout (the
    # same float32 tables on both sides: only the rounding of the products differs)
    q, k = rng.standard_normal((2, 2, 1, 40, config.head_dim), dtype=np.float32)
    theirs = ernie.apply_rotary_pos_emb(torch.from_numpy(q), torch.from_numpy(k), cos, sin)
    tables = (cos[:, None].double().numpy(), sin[:, None].double().numpy())
    for t, mine in zip(theirs, (q, k), strict=True):
        expected = posenc.apply_rotary(mine.astype(np.float64), *tables, pairs=layer.pairs)
        assert_close_ulp(t.numpy(), expected, ulps=ROTATION_ULPS, dtype=np.float32)


def test_ernie_vl_is_swapped_and_verified() -> None:
    config = _ernie_config([3, 3, 10])
    holder = torch.nn.Module()
    holder.rotary_emb = ernie.Ernie4_5_VLMoeTextRotaryEmbedding(config)
    original = holder.rotary_emb
    report = swap_positions(holder, strict=True)
    assert [x.name for x in report.replaced] == ["rotary_emb"]
    ids = torch.from_numpy(np.random.default_rng(1).integers(0, 2000, size=(3, 1, 30)))
    theirs = original(torch.zeros(1), ids)
    ours = holder.rotary_emb(torch.zeros(1), ids)
    positions = np.moveaxis(ids.numpy(), 0, -1)
    scale = _reach(posenc.rope_plan(config).layer(), positions)
    for a, b in zip(ours, theirs, strict=True):
        assert_close_ulp(a, b, ulps=TABLE_ULPS, dtype=np.float32, scale=scale)
    module = MultiAxisRotary.from_config(config)
    assert "order='turns_then_last'" in module.describe()


def _gemma4_vision_config(head_dim: int) -> object:
    return transformers.Gemma4VisionConfig(
        hidden_size=2 * head_dim,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        head_dim=head_dim,
    )


def _patches(rows: int, columns: int) -> torch.Tensor:
    """(x, y) = (column, row) of each patch, as Gemma 4's image processor numbers them."""
    grid = torch.meshgrid(torch.arange(columns), torch.arange(rows), indexing="xy")
    return torch.stack(grid, dim=-1).reshape(-1, 2)


@pytest.mark.parametrize("head_dim", [16, 64])
def test_gemma4_vision_tables_and_rotation_are_the_model_s(head_dim: int) -> None:
    config = _gemma4_vision_config(head_dim)
    module = gemma4.Gemma4VisionRotaryEmbedding(config)
    layer = posenc.rope_plan(config).layer()
    ids = _patches(9, 13)
    cos, sin = module(torch.zeros(1), ids[None])  # (1, patches, head_dim)
    positions = ids.numpy()
    ours_cos, ours_sin = layer.cos_sin(positions)
    scale = _reach(layer, positions)
    assert_close_ulp(
        ours_cos, cos[0].numpy(), ulps=TABLE_ULPS, dtype=np.float32, scale=scale, what="cos"
    )
    assert_close_ulp(
        ours_sin, sin[0].numpy(), ulps=TABLE_ULPS, dtype=np.float32, scale=scale, what="sin"
    )
    # apply_multidimensional_rope with its tables: posenc's rotation, half of the head at a time
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, len(ids), 1, head_dim), dtype=np.float32)  # (b, s, heads, d)
    theirs = gemma4.apply_multidimensional_rope(torch.from_numpy(x), cos, sin, ids[None])
    c, s = cos[0].double().numpy(), sin[0].double().numpy()
    half, flat = head_dim // 2, x[0, :, 0].astype(np.float64)
    expected = np.concatenate(
        [
            posenc.apply_rotary(flat[:, :half], c[:, :half], s[:, :half], pairs=layer.pairs),
            posenc.apply_rotary(flat[:, half:], c[:, half:], s[:, half:], pairs=layer.pairs),
        ],
        axis=-1,
    )
    assert_close_ulp(theirs[0, :, 0].numpy(), expected, ulps=ROTATION_ULPS, dtype=np.float32)


def test_gemma4_vision_rotary_is_left_by_name() -> None:
    model = gemma4.Gemma4VisionModel(_gemma4_vision_config(32))
    report = swap_positions(model)
    assert not report.replaced
    (left,) = report.left
    assert "apply_multidimensional_rope" in left.reason
    assert "each axis rotates its own block" in left.reason
    with pytest.raises(ValueError, match="apply_multidimensional_rope"):
        swap_positions(model, strict=True)


def _nanochat() -> object:
    config = transformers.NanoChatConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    return transformers.NanoChatForCausalLM(config)


def _hunyuan_vl_config(sections: list[int]) -> object:
    """HunYuan-VL's text config as its checkpoints write it: XD-RoPE with NTK-alpha."""
    return transformers.HunYuanVLTextConfig(
        hidden_size=64,
        num_attention_heads=2,
        head_dim=2 * sum(sections),
        rope_parameters={
            "rope_type": "xdrope",
            "alpha": 1000.0,
            "factor": 1.0,
            "rope_theta": 1e4,
            "xdrope_section": sections,
        },
    )


def _hunyuan_vl_rotary() -> object:
    holder = torch.nn.Module()
    holder.rotary_emb = hunyuan_vl.HunYuanVLRotaryEmbedding(_hunyuan_vl_config([4] * 4))
    return holder


def _hunyuan_vl_ids(n_axes: int) -> torch.Tensor:
    """``(n_axes, 2, s)``: text, an image of 3 x 5 merged patches (with its row ends), text;
    the sequence position on the leading axes, then (width, height, image_index), as
    ``HunYuanVLModel.get_rope_index`` numbers them; the second row further on."""
    rows, cols = torch.meshgrid(torch.arange(3), torch.arange(6), indexing="ij")
    image = torch.stack([cols.flatten(), rows.flatten(), torch.full((18,), 2)])
    seq = torch.arange(4 + 18 + 9)
    ids = seq.expand(n_axes, -1).clone()
    ids[n_axes - 3 :, 4:22] = image
    return torch.stack([ids, ids + 3000], dim=1)


def test_hunyuan_vl_tables_are_the_plan_s_on_text_and_the_named_split_on_images() -> None:
    """Text ids: the module's tables are the plan's within float32 error. Image ids: they are
    the doubled table split by 2·sections (its note names the mixed axes), not the plan's
    (HunYuan-VL's own split, the list repeated)."""
    config = _hunyuan_vl_config([2, 4, 4, 6])
    module = hunyuan_vl.HunYuanVLRotaryEmbedding(config)
    layer = posenc.rope_plan(config).layer()
    assert (layer.rope_type, layer.axes, layer.sections, layer.pairs) == (
        "ntk_alpha", ("position", "width", "height", "image_index"), (2, 4, 4, 6), "half",
    )  # fmt: skip
    assert "pairs 0-3 turns with position and channel k + 16 with height" in layer.notes[-1]
    ids = _hunyuan_vl_ids(4)
    text = ids[:1].expand(4, -1, -1)  # every axis the sequence position
    for given in (text, ids):
        positions = np.moveaxis(given.numpy(), 0, -1)
        cos, sin = module(torch.zeros(1), given)
        ours = layer.cos_sin(positions, dtype=np.float64)
        scale = _reach(layer, np.maximum(positions, positions[..., :1]))
        if given is text:
            for theirs, mine in zip((cos, sin), ours, strict=True):
                assert_close_ulp(theirs, mine, ulps=TABLE_ULPS, dtype=np.float32, scale=scale)
            continue
        assert float((cos.double() - torch.from_numpy(ours[0])).abs().max()) > 0.5
        omega = layer.frequencies
        chosen = positions[..., doubled_split_axes(layer.sections)]
        theta = chosen * np.concatenate([omega, omega])
        for theirs, mine in zip((cos, sin), (np.cos(theta), np.sin(theta)), strict=True):
            assert_close_ulp(theirs, mine, ulps=TABLE_ULPS, dtype=np.float32, scale=scale)


class _HunYuanVLOwnSplit(hunyuan_vl.HunYuanVLRotaryEmbedding):
    """HunYuan-VL's module with the model's own split of the doubled table: the section list
    repeated (Tencent's HunYuan-VL code, vLLM's XDRotaryEmbedding, MLX)."""

    def recomposition_frequencies(self, freq: torch.Tensor) -> torch.Tensor:
        doubled = torch.cat((freq, freq), dim=-1)
        n = len(self.mrope_section)
        blocks = doubled.split(list(self.mrope_section) * 2, dim=-1)
        return torch.cat([block[i % n] for i, block in enumerate(blocks)], dim=-1)


def _own_split(module: torch.nn.Module) -> None:
    """Give one HunYuan-VL rotary module the model's own split (HunYuan-VL's code)."""
    module.recomposition_frequencies = types.MethodType(
        _HunYuanVLOwnSplit.recomposition_frequencies, module
    )


def test_a_hunyuan_vl_model_with_an_image() -> None:
    """A tiny HunYuan-VL (vision tower and language model): the two splits give the same logits
    on text and different ones where an image is (0.06 here); the swap leaves transformers'
    module, and replaces the model's own split with posenc's tables, logits equal within 32
    float32 ulps of their largest magnitude (the model tests' bound, test_swap_multi_axis.py)."""
    text = {
        "model_type": "hunyuan_vl_text", "vocab_size": 128, "hidden_size": 64,
        "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16,
        "rope_parameters": {"rope_type": "xdrope", "alpha": 1000.0, "factor": 1.0,
                            "rope_theta": 1e4, "xdrope_section": [2, 2, 2, 2]},
    }  # fmt: skip
    vision = {
        "hidden_size": 32, "intermediate_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "patch_size": 4, "spatial_merge_size": 2,
        "max_image_size": 64, "out_hidden_size": 64, "text_hidden_size": 64,
    }  # fmt: skip
    config = transformers.HunYuanVLConfig(
        text_config=text, vision_config=vision, image_token_id=120, im_start_id=121,
        im_end_id=122, im_newline_id=123,
    )  # fmt: skip
    torch.manual_seed(0)
    theirs = hunyuan_vl.HunYuanVLForConditionalGeneration(config).eval()
    own = copy.deepcopy(theirs)
    _own_split(own.model.language_model.rotary_emb)
    # an image of 4 x 8 patches: 2 x 4 merged, a row end each, begin and end: 12 tokens
    ids = torch.tensor([[1, 2, 3] + [120] * 12 + [4, 5, 6]])
    image = {
        "pixel_values": torch.randn(32, 48), "image_grid_thw": torch.tensor([[1, 4, 8]]),
        "mm_token_type_ids": (ids == 120).int(),
    }  # fmt: skip
    with torch.no_grad():
        logits = {n: m(input_ids=ids, **image).logits for n, m in (("t", theirs), ("o", own))}
        words = [m(input_ids=ids[:, :3]).logits for m in (theirs, own)]
    assert torch.equal(*words)
    assert float((logits["t"] - logits["o"]).abs().max()) > 1e-2
    assert DOUBLED_SPLIT in str(swap_positions(theirs))
    report = swap_positions(own)
    assert "model.language_model.rotary_emb" in report.names, str(report)
    with torch.no_grad():
        after = own(input_ids=ids, **image).logits
    assert_close_ulp(after, logits["o"], ulps=32, dtype=np.float32, what="logits")


def test_hunyuan_vl_module_is_left_naming_the_axes_its_pairs_mix() -> None:
    holder = _hunyuan_vl_rotary()
    report = swap_positions(holder)
    assert not report.replaced
    (left,) = report.left
    assert DOUBLED_SPLIT in left.reason, str(report)
    assert "pairs 0-7 turns with position and channel k + 16 with height" in left.reason
    assert "pairs 8-15: width and image_index" in left.reason
    with pytest.raises(ValueError, match="splits the doubled table"):
        swap_positions(holder, strict=True)


def test_hunyuan_vl_module_with_the_model_s_own_split_is_swapped() -> None:
    config = _hunyuan_vl_config([2, 4, 4, 6])
    holder = torch.nn.Module()
    holder.rotary_emb = original = _HunYuanVLOwnSplit(config)
    report = swap_positions(holder, strict=True)
    assert [x.name for x in report.replaced] == ["rotary_emb"]
    assert isinstance(holder.rotary_emb, MultiAxisRotary)
    ids = _hunyuan_vl_ids(4)
    positions = np.moveaxis(ids.numpy(), 0, -1)
    scale = _reach(posenc.rope_plan(config).layer(), positions)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.zeros(1, dtype=dtype)
        for a, b in zip(holder.rotary_emb(x, ids), original(x, ids), strict=True):
            assert a.dtype == b.dtype == dtype
            assert_close_ulp(a, b, ulps=TABLE_ULPS + 1, dtype=dtype, scale=scale)


def test_nanochat_rotary_module_is_swapped_and_its_rotation_by_minus_theta_kept() -> None:
    """NanoChat's tables are the standard ones; only its attention rotates by -θ, and the swap
    replaces the module returning the tables (verified), never the attention: the model's
    outputs stay. rope_plan, which describes the rotation too, still refuses it."""
    torch.manual_seed(0)
    model = _nanochat().eval()
    ids = torch.randint(0, 64, (1, 24))
    with torch.no_grad():
        before = model(ids).logits
    report = swap_positions(model, strict=True)
    assert [x.name for x in report.replaced] == ["model.rotary_emb"], str(report)
    with torch.no_grad():
        after = model(ids).logits
    assert float((after - before).abs().max()) < 1e-5
    with pytest.raises(ValueError, match=r"'nanochat'.*rotates by -θ"):
        posenc.rope_plan(model.config)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_deepseek_v4_output_rotation_is_the_inverse_rotation_of_the_rope_slice(
    dtype: torch.dtype,
) -> None:
    """DeepSeek-V4 turns the trailing rotary slice of its attention output back by the query's
    angle (``apply_rotary_pos_emb(out, cos, -sin)``, interleaved pairs, one column per pair):
    ``apply_rotary(..., inverse=True)`` on that slice, within the rounding of their float32
    formula."""
    torch.manual_seed(0)
    rope, positions = 16, torch.arange(0, 6 * 1031, 1031)
    out = torch.randn(2, 3, 6, 40).to(dtype)  # (batch, heads, seq, nope 24 | rope 16)
    cos, sin = posenc.torch.rotary_cos_sin(positions, rope, pairs="interleaved")
    cos, sin = cos[..., 0::2], sin[..., 0::2]  # one column per pair: (seq, rope / 2)
    theirs = deepseek_v4.apply_rotary_pos_emb(out, cos[None], -sin[None])
    turned = posenc.torch.apply_rotary(
        out[..., -rope:], cos, sin, pairs="interleaved", rotary_dim=rope, inverse=True
    )
    ours = torch.cat([out[..., :-rope], turned], dim=-1)
    assert torch.equal(ours[..., :-rope], theirs[..., :-rope])
    assert_close_ulp(ours, theirs, ulps=ROTATION_ULPS, scale=out.abs().max(), what="rotation")
    forward = posenc.torch.apply_rotary(
        turned.double(), cos.double(), sin.double(), pairs="interleaved", rotary_dim=rope
    )
    assert torch.allclose(forward, out[..., -rope:].double(), atol=4 * torch.finfo(dtype).eps * 4)
