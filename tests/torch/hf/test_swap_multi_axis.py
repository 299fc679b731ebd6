"""``swap_positions`` on multimodal models whose rotary module takes ``(t, h, w)`` ids (M-RoPE).

Tiny random Qwen2-VL, Qwen2.5-VL and Qwen3-VL models (vision tower and language model, seeded,
built once per module from ``transformers`` configs; nothing is downloaded). The swapped copy
must give the original's logits within 1e-4 on a left-padded text batch and on a sequence
holding an image (the model's own ``get_rope_index`` ids, and the same ids from
:func:`posenc.torch.multimodal_positions`; the vision tower's 2-D rotary module is swapped
too), and the same greedy generation; doubled positions
in the swapped module must change the logits. A wrong section split or axis order in the
config must leave the module in place, and so must an M-RoPE module under a 1-D config.
Pixtral's vision rotary module (``(h, w)`` ids, coordinates last) is swapped, and a copy that
reads the coordinates in the other order is left.
"""

from __future__ import annotations

import copy
import inspect

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from posenc.torch import multimodal_positions  # noqa: E402
from posenc.torch.hf import LlamaRotary, MultiAxisRotary, swap_positions  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402

#: Logits and hidden states in float32 ulps of their largest magnitude (tests/tolerance.py):
#: tables an ulp or two of the angle apart, through two layers of width 64 summed in the
#: order the CPU kernel picks (sqrt(k) to k ulps per layer, hence more than 8). Measured: <= 9
#: ulps under ATen's default, avx2 and avx512 kernels; a fixed 1e-4 was 150 to 300 ulps.
MODEL_ULPS = 32
PAD, IMAGE, START, END = 0, 120, 122, 123
TEXT = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 512,
    "initializer_range": 0.2,  # spread the logits so greedy choices are not near-ties
    "pad_token_id": PAD,
    "bos_token_id": 1,
    "eos_token_id": 1,
}
TOKENS = {
    "image_token_id": IMAGE,
    "video_token_id": 121,
    "vision_start_token_id": START,
    "vision_end_token_id": END,
}
VISION = {"depth": 1, "num_heads": 2, "patch_size": 2, "spatial_merge_size": 2}
# model -> (config class, model class, mrope_section, interleaved, vision config)
MODELS = {
    "qwen2_vl": (
        "Qwen2VLConfig",
        "Qwen2VLForConditionalGeneration",
        [2, 3, 3],
        False,
        {"embed_dim": 32, "hidden_size": 64},
    ),
    "qwen2_5_vl": (
        "Qwen2_5_VLConfig",
        "Qwen2_5_VLForConditionalGeneration",
        [2, 3, 3],
        False,
        {"hidden_size": 32, "out_hidden_size": 64, "intermediate_size": 64, "window_size": 8},
    ),
    "qwen3_vl": (
        "Qwen3VLConfig",
        "Qwen3VLForConditionalGeneration",
        [3, 3, 2],
        True,
        {
            "hidden_size": 32,
            "out_hidden_size": 64,
            "intermediate_size": 64,
            "deepstack_visual_indexes": [0],
            "num_position_embeddings": 64,
        },
    ),
}
ROTARY = "model.language_model.rotary_emb"
VISION_ROTARY = "model.visual.rotary_pos_emb"


def tiny(name: str):
    """The model, random and seeded: a 2-layer language model, a 1-block vision tower."""
    config_name, model_name, section, interleaved, vision = MODELS[name]
    rope = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": section}
    if interleaved:
        rope["mrope_interleaved"] = True
    config = getattr(transformers, config_name)(
        text_config={**TEXT, "rope_parameters": rope},
        vision_config={**VISION, **vision, "temporal_patch_size": 1, "in_channels": 3},
        **TOKENS,
    )
    torch.manual_seed(0)
    return getattr(transformers, model_name)(config).eval()


_BUILT: dict[str, tuple] = {}


def build(name: str):
    """(original, swapped, report), built once per module."""
    if name not in _BUILT:
        original = tiny(name)
        swapped = copy.deepcopy(original)
        _BUILT[name] = (original, swapped, swap_positions(swapped))
    return _BUILT[name]


def text_logits(model) -> torch.Tensor:
    """Logits of a left-padded text batch (three pads in the first row), padding dropped."""
    ids = torch.randint(2, 100, (2, 9), generator=torch.Generator().manual_seed(5))
    ids[0, :3] = PAD
    mask = ids.ne(PAD).long()
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits[mask.bool()]


def image_inputs() -> dict:
    """Text, an image of 4 x 4 patches (4 tokens after the 2 x 2 merge), text."""
    ids = torch.tensor([[5, 6, START, IMAGE, IMAGE, IMAGE, IMAGE, END, 7, 8, 9]])
    pixels = torch.randn(16, 3 * 2 * 2, generator=torch.Generator().manual_seed(0))
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "pixel_values": pixels,
        "image_grid_thw": torch.tensor([[1, 4, 4]]),
        "mm_token_type_ids": ids.eq(IMAGE).long(),
    }


def image_logits(model, **extra) -> torch.Tensor:
    with torch.no_grad():
        return model(**image_inputs(), **extra).logits


@pytest.mark.parametrize("name", list(MODELS))
def test_vl_swap_gives_the_same_logits(name):
    original, swapped, report = build(name)
    assert ROTARY in report.names, str(report)
    record = report.replaced[report.names.index(ROTARY)]
    assert (record.kind, record.layout, record.replacement) == ("rotary", "half", "MultiAxisRotary")
    order = "interleaved" if MODELS[name][3] else "sectioned"
    assert f"sections={MODELS[name][2]}, order={order!r}" in record.detail
    assert isinstance(swapped.get_submodule(ROTARY), MultiAxisRotary)
    vision = report.replaced[report.names.index(VISION_ROTARY)]
    assert "schedule='per_axis', axes_dim=-1" in vision.detail  # (h, w) ids, each axis its own
    assert [x.name for x in report.left] == (["model.visual.pos_embed"] if "3" in name else [])
    assert_close_ulp(text_logits(swapped), text_logits(original), ulps=MODEL_ULPS)
    assert_close_ulp(image_logits(swapped), image_logits(original), ulps=MODEL_ULPS)


@pytest.mark.parametrize("name", list(MODELS))
def test_posenc_multimodal_ids_are_the_models_and_give_the_same_logits(name):
    original, swapped, _ = build(name)
    inputs = image_inputs()
    theirs, _ = original.model.get_rope_index(
        inputs["input_ids"], inputs["mm_token_type_ids"], image_grid_thw=inputs["image_grid_thw"]
    )
    ours, _ = multimodal_positions(
        inputs["mm_token_type_ids"], image_grids=inputs["image_grid_thw"], spatial_merge=2
    )
    ours = ours.permute(2, 0, 1)  # (3, b, s), Hugging Face's layout
    assert torch.equal(ours, theirs)
    assert not torch.equal(ours[0], ours[1])  # the image makes the axes differ
    explicit = image_logits(swapped, position_ids=ours)
    assert_close_ulp(explicit, image_logits(original), ulps=MODEL_ULPS)


def test_vl_generation_with_an_image_is_the_same():
    original, swapped, _ = build("qwen2_vl")
    kw = {"max_new_tokens": 6, "min_new_tokens": 6, "do_sample": False, "use_cache": True}
    kw.update(output_logits=True, return_dict_in_generate=True, pad_token_id=PAD)
    ours, theirs = (m.generate(**image_inputs(), **kw) for m in (swapped, original))
    assert torch.equal(ours.sequences, theirs.sequences)
    for a, b in zip(ours.logits, theirs.logits, strict=True):
        assert_close_ulp(a, b, ulps=MODEL_ULPS)


class _Doubled(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, position_ids):
        return self.inner(x, position_ids * 2)


@pytest.mark.parametrize("name", ["qwen2_vl", "qwen3_vl"])
def test_doubled_positions_in_the_swapped_module_change_the_logits(name):
    original, swapped, _ = build(name)
    control = copy.deepcopy(swapped)
    parent = control.get_submodule(ROTARY.rpartition(".")[0])
    parent.rotary_emb = _Doubled(parent.rotary_emb)
    assert float((image_logits(control) - image_logits(original)).abs().max()) > 1e-3


# -- negative controls: the plan's prediction must be what the module computes -----------------


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("qwen2_vl", {"mrope_section": [3, 3, 2]}),  # a wrong section split
        ("qwen3_vl", {"mrope_interleaved": False}),  # sectioned, not T, H, W, T, ...
    ],
)
def test_a_config_that_mispredicts_the_axes_leaves_the_module(name, change):
    model = copy.deepcopy(build(name)[0])
    rotary = model.get_submodule(ROTARY)
    rotary.config.rope_parameters.update(change)  # the module keeps what it was built with
    report = swap_positions(model)
    assert ROTARY not in report.names
    reason = {x.name: x.reason for x in report.left}[ROTARY]
    assert "differs from posenc's" in reason
    assert "position ids (" in reason  # found by the ids that differ between the axes
    assert model.get_submodule(ROTARY) is rotary


class AxisTables(torch.nn.Module):
    """Qwen2-VL's (sectioned) or Qwen3-VL's (interleaved) M-RoPE module, renamed, no subclass."""

    def __init__(self, config, section, interleave: bool = False, axes=(0, 1, 2)):
        super().__init__()
        self.config, self.section, self.interleave = config, section, interleave
        self.axes = list(axes)  # which row of position_ids each axis reads
        base = config.rope_parameters["rope_theta"]
        dim = config.head_dim
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        ids = position_ids.expand(3, -1, -1)[self.axes]
        freqs = ids[..., None].float() * self.inv_freq
        if self.interleave:
            mixed = freqs[0].clone()
            for axis in (1, 2):
                mixed[..., axis : 3 * self.section[axis] : 3] = freqs[axis][
                    ..., axis : 3 * self.section[axis] : 3
                ]
        else:
            parts = freqs.split(self.section, dim=-1)
            mixed = torch.cat([part[i % 3] for i, part in enumerate(parts)], dim=-1)
        emb = torch.cat((mixed, mixed), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


@pytest.mark.parametrize("name", ["qwen2_vl", "qwen3_vl"])
def test_renamed_multi_axis_copies_are_found_and_replaced(name):
    original = copy.deepcopy(build(name)[0])
    text_config = original.config.text_config
    renamed = AxisTables(text_config, MODELS[name][2], interleave=MODELS[name][3])
    original.model.language_model.rotary_emb = renamed
    swapped = copy.deepcopy(original)
    report = swap_positions(swapped)
    assert ROTARY in report.names, str(report)
    assert isinstance(swapped.get_submodule(ROTARY), MultiAxisRotary)
    assert_close_ulp(image_logits(swapped), image_logits(original), ulps=MODEL_ULPS)


def test_a_module_reading_the_axes_in_another_order_is_left():
    model = copy.deepcopy(build("qwen2_vl")[0])
    text_config = model.config.text_config  # h and w have 3 pairs each: only the ids tell
    model.model.language_model.rotary_emb = AxisTables(text_config, [2, 3, 3], axes=(0, 2, 1))
    report = swap_positions(model)
    assert ROTARY not in report.names
    assert "differs from posenc's" in {x.name: x.reason for x in report.left}[ROTARY]


def test_a_multi_axis_module_under_a_1d_config_is_left():
    config = transformers.LlamaConfig(**{**TEXT, "rope_parameters": {"rope_theta": 1e6}})
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    model.model.rotary_emb = AxisTables(config, [2, 3, 3])
    report = swap_positions(model)
    assert report.names == []
    (left,) = report.left
    assert left.name == "model.rotary_emb"
    assert "one table per token" in left.reason
    assert "config describes 1-D RoPE" in left.reason


# -- the drop-in itself ------------------------------------------------------------------------


def test_multi_axis_rotary_takes_both_calls_and_refuses_other_shapes():
    rope = MultiAxisRotary.from_config(build("qwen2_vl")[0].config.text_config)
    assert (rope.head_dim, rope.rotary_dim, rope.n_axes) == (16, 16, 3)
    ids = torch.arange(7)[None]
    flat = rope(torch.zeros(1), ids)
    for same in (ids.expand(3, 1, 7), ids[None]):
        for a, b in zip(rope(torch.zeros(1), same), flat, strict=True):
            assert torch.equal(a, b)
    one_d = LlamaRotary(16, base=1e6)(torch.zeros(1), ids)  # text tokens: 1-D RoPE
    for a, b in zip(flat, one_d, strict=True):
        assert torch.equal(a, b)
    assert rope(torch.zeros(1, dtype=torch.bfloat16), ids)[0].dtype == torch.bfloat16
    with pytest.raises(ValueError, match=r"position_ids must have shape \(3, b, s\).*\(2, 1, 7\)"):
        rope(torch.zeros(1), ids.expand(2, 1, 7))
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor"):
        rope(None, ids)
    with pytest.raises(ValueError, match=r"one position axis.*use LlamaRotary"):
        MultiAxisRotary.from_config(transformers.LlamaConfig(**TEXT))
    with pytest.raises(TypeError, match="sections must be"):
        MultiAxisRotary(16, sections=None)


# -- a vision tower alone: Pixtral ---------------------------------------------------------------


class _FlippedAxes(torch.nn.Module):
    """Pixtral's rotary module reading (w, h) instead of (h, w) (its code, not wrapped)."""

    def __init__(self, inner):
        super().__init__()
        self.config, self.attention_scaling = inner.config, inner.attention_scaling
        self.register_buffer("inv_freq", inner.inv_freq.clone(), persistent=False)
        self._inner = type(inner)

    def recomposition_frequencies(self, freq):
        return self._inner.recomposition_frequencies(self, freq)

    def forward(self, x, position_ids):
        # its code without decorators (5.23 wraps it, 5.24 does not)
        return inspect.unwrap(self._inner.forward)(self, x, position_ids.flip(-1))


def test_pixtral_vision_rotary_is_swapped_and_a_flipped_copy_is_left():
    config = transformers.PixtralVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        image_size=16, patch_size=2, head_dim=16,
    )  # fmt: skip
    torch.manual_seed(0)
    original = transformers.PixtralVisionModel(config).eval()
    swapped = copy.deepcopy(original)
    assert swap_positions(swapped, strict=True).names == ["patch_positional_embedding"]
    assert swapped.patch_positional_embedding.axes_dim == -1
    pixels = torch.randn(1, 3, 16, 12, generator=torch.Generator().manual_seed(0))
    sizes = torch.tensor([[16, 12]])
    with torch.no_grad():
        ours, theirs = (m(pixels, image_sizes=sizes).last_hidden_state for m in (swapped, original))
    assert_close_ulp(ours, theirs, ulps=MODEL_ULPS)
    flipped = copy.deepcopy(original)
    flipped.patch_positional_embedding = _FlippedAxes(flipped.patch_positional_embedding)
    report = swap_positions(flipped)
    assert report.names == []
    (left,) = report.left
    assert left.name == "patch_positional_embedding"
    assert "as (2 coordinates last): its cos differs from posenc's" in left.reason
