"""``swap_positions`` finds positional modules by what they compute, in any model.

Tiny random models (2 layers, hidden size 64, vocabulary 128, seeded) are built from
``transformers`` configs; nothing is downloaded. For each causal LM the swapped copy must give
the original's logits on a left-padded batch and the same greedy generation with a KV cache
(tokens and step logits), within 1e-4; feeding the swapped modules doubled positions must
change the logits (the comparison can fail). This file covers one causal LM of each form
(half, interleaved, one column per pair, complex phasors, per layer type, partial rotation)
and the absolute tables (FSMT, M2M100, Marian, XGLM, MusicGen, MusicGen-Melody: generation with
a KV cache, and the same control; MusicGen's also built in bfloat16 and float16);
tests/torch/hf/test_swap_sweep.py runs every causal LM of transformers (``pytest -m sweep``).
"""

from __future__ import annotations

import copy

import pytest

import posenc

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from posenc.torch.hf import LlamaRotary, SwapReport, swap_positions  # noqa: E402
from tests.tolerance import assert_close_float32_recipe, assert_close_ulp  # noqa: E402
from tests.torch import tiny_models  # noqa: E402

MODEL_ULPS = tiny_models.MODEL_ULPS
# model type -> what its rotary module returns (one of each form; every other causal LM is in
# the sweep, tests/torch/hf/test_swap_sweep.py)
DEFAULT = {
    "llama": "half",
    "cohere": "interleaved",
    "gpt_oss": "columns",
    "deepseek_v2": "complex",
    "gemma3_text": "half, per layer type",
    "gpt_neox": "half, partial rotation",
}

_BUILT: dict[str, tuple] = {}


def build(model_type: str):
    """(original, swapped, report), built once per session."""
    if model_type not in _BUILT:
        _BUILT[model_type] = tiny_models.build_pair(model_type)
    return _BUILT[model_type]


logits = tiny_models.logits


@pytest.mark.parametrize("model_type", list(DEFAULT))
def test_causal_lm_swap_gives_the_same_logits_and_generation(model_type):
    original, swapped, report = build(model_type)
    assert report.replaced, str(report)
    assert all(r.kind == "rotary" for r in report.replaced)
    assert not [x for x in report.left if "rotary" in x.name], str(report)
    for name in report.names:
        assert type(swapped.get_submodule(name)).__module__.startswith("posenc.")
    tiny_models.compare(original, swapped)


@pytest.mark.parametrize("model_type", list(DEFAULT))
def test_doubled_positions_in_the_swapped_modules_change_the_logits(model_type):
    original, swapped, report = build(model_type)
    control = tiny_models.doubled(swapped, report.names)
    assert float((logits(control) - logits(original)).abs().max()) > 1e-3


def test_the_report_says_what_each_replaced_module_computes():
    forms = {t: build(t)[2].replaced[0] for t in DEFAULT}
    assert forms["llama"].layout == "half"
    assert forms["llama"].replacement == "LlamaRotary"
    assert forms["cohere"].layout == "interleaved"
    assert forms["gpt_oss"].layout == "columns"
    assert forms["deepseek_v2"].layout == "complex"
    assert "full_attention" in forms["gemma3_text"].detail
    assert "sliding_attention" in forms["gemma3_text"].detail
    assert forms["gpt_neox"].detail == "default, r=4"  # a quarter of head_dim 16
    swapped = build("llama")[1]
    assert swapped.model.rotary_emb.config is swapped.config  # models may read it
    text = str(build("cohere")[2])
    assert text.splitlines()[0] == "SwapReport: 1 replaced, 0 left"
    assert "model.rotary_emb" in text
    assert "interleaved" in text
    assert "RotaryTables" in text
    assert repr(build("cohere")[2]) == text


# -- found by what they compute, not by their names ------------------------------------------


class AngleTables(torch.nn.Module):
    """Llama's rotary module, copied under another name (no subclass)."""

    def __init__(self, config, interleave: bool = False):
        super().__init__()
        self.config, self.interleave = config, interleave
        base = config.rope_parameters["rope_theta"]
        dim = config.hidden_size // config.num_attention_heads
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq
        if self.interleave:
            emb = torch.repeat_interleave(freqs, 2, dim=-1)
        else:
            emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


@pytest.mark.parametrize(("model_type", "interleave"), [("llama", False), ("cohere", True)])
def test_renamed_copies_are_found_and_replaced(model_type, interleave):
    original, _, _ = build(model_type)
    original = copy.deepcopy(original)
    original.model.rotary_emb = AngleTables(original.config, interleave)
    swapped = copy.deepcopy(original)
    report = swap_positions(swapped)
    assert report.names == ["model.rotary_emb"]
    assert report.replaced[0].layout == ("interleaved" if interleave else "half")
    assert_close_ulp(logits(swapped), logits(original), ulps=MODEL_ULPS, what="logits")


# -- what is left, and why -------------------------------------------------------------------


def test_a_module_whose_frequencies_differ_is_left_with_the_channel():
    original, _, _ = build("llama")
    model = copy.deepcopy(original)
    with torch.no_grad():
        model.model.rotary_emb.inv_freq[5] *= 1.001
    report = swap_positions(model)
    assert report.names == []
    (left,) = report.left
    assert left.name == "model.rotary_emb"
    assert "differs from posenc's" in left.reason
    assert "channel 5," in left.reason or "channel 13," in left.reason  # 5 + 8 pairs
    assert type(model.model.rotary_emb).__name__ == "LlamaRotaryEmbedding"
    with pytest.raises(ValueError, match=r"(?s)strict=True.*model\.rotary_emb"):
        swap_positions(model, strict=True)


class RotaryBySeqLen(torch.nn.Module):
    def forward(self, x, seq_len):
        return x


def test_positional_looking_modules_that_are_not_understood_are_reported():
    model = torch.nn.Sequential()
    model.add_module("rotary", RotaryBySeqLen())
    model.add_module("embed_positions", torch.nn.Embedding(10, 4))
    report = swap_positions(model)
    assert report.names == []
    reasons = {x.name: x.reason for x in report.left}
    assert reasons["rotary"] == "call signature not understood: forward(x, seq_len)"
    assert reasons["embed_positions"].startswith("learned table (trainable parameter 'weight'")
    assert "2 left" in str(report)
    with pytest.raises(ValueError, match="learned table"):
        swap_positions(model, strict=True)


class FactoredPositions(torch.nn.Module):
    """Learned positions kept as factors in a ParameterList (Reformer's axial embeddings)."""

    def __init__(self) -> None:
        super().__init__()
        self.weights = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.randn(4, 1, 2)), torch.nn.Parameter(torch.randn(1, 8, 2))]
        )

    def forward(self, position_ids):
        rows = torch.cat([w.expand(4, 8, -1) for w in self.weights], dim=-1).reshape(32, -1)
        return rows[position_ids]


def test_learned_positions_without_a_single_table_are_reported():
    model = torch.nn.Sequential()
    model.add_module("position_embeddings", FactoredPositions())
    report = swap_positions(model)
    (left,) = report.left
    assert left.name == "position_embeddings"
    assert left.reason.startswith("learned table (trainable parameters 'weights.0', 'weights.1'")
    with pytest.raises(ValueError, match="learned table"):
        swap_positions(model, strict=True)
    reformer = tiny_models.model_class("reformer")(tiny_models.tiny_config("reformer"))
    (left,) = swap_positions(reformer).left
    assert left.name == "reformer.embeddings.position_embeddings"
    assert left.reason.startswith("learned table")


def test_no_positional_module_is_said_clearly():
    report = swap_positions(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()))
    assert isinstance(report, SwapReport)
    assert report.replaced == ()
    assert report.left == ()
    assert str(report) == repr(report) == "SwapReport: no positional module found"
    assert swap_positions(torch.nn.Linear(2, 2), strict=True).names == []


def test_strict_leaves_the_model_unchanged_and_a_second_swap_reports_posenc_modules():
    original, _, _ = build("llama")
    model = copy.deepcopy(original)
    model.model.extra_rotary = RotaryBySeqLen()
    with pytest.raises(ValueError, match="extra_rotary"):
        swap_positions(model, strict=True)
    assert type(model.model.rotary_emb).__name__ == "LlamaRotaryEmbedding"
    del model.model.extra_rotary
    assert swap_positions(model).names == ["model.rotary_emb"]
    again = swap_positions(model)
    assert again.replaced == ()
    assert again.already == ("model.rotary_emb",)
    assert "already posenc's (model.rotary_emb)" in str(again)
    assert isinstance(model.model.rotary_emb, LlamaRotary)


def test_check_is_no_longer_an_argument():
    with pytest.raises(TypeError, match="check"):
        swap_positions(torch.nn.Linear(2, 2), check=False)


# -- absolute tables: another attribute, another call, [cos | sin] ----------------------------


_SEQ2SEQ = {
    "d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
    "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
    "max_position_embeddings": 64, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
    "decoder_start_token_id": 2, "forced_eos_token_id": None, "init_std": 0.3,
}  # fmt: skip
_LEFT_PADDED = torch.tensor([[5, 6, 7, 8, 9], [1, 1, 7, 8, 9]])  # padding id 1


def _seq2seq(config_class, model_class, **extra):
    config = config_class(**_SEQ2SEQ, **extra)
    torch.manual_seed(0)
    inputs = {"input_ids": _LEFT_PADDED, "attention_mask": _LEFT_PADDED.ne(1).long()}
    return model_class(config).eval(), inputs


def _fsmt():
    extra = {"langs": ["en", "de"], "src_vocab_size": 100, "tgt_vocab_size": 100}
    return _seq2seq(transformers.FSMTConfig, transformers.FSMTForConditionalGeneration, **extra)


def _m2m100():
    model_class = transformers.M2M100ForConditionalGeneration
    return _seq2seq(transformers.M2M100Config, model_class, vocab_size=100)


def _marian():
    return _seq2seq(transformers.MarianConfig, transformers.MarianMTModel, vocab_size=100)


def _xglm():
    config = transformers.XGLMConfig(
        vocab_size=100, d_model=32, num_layers=1, attention_heads=2, ffn_dim=64,
        max_position_embeddings=64, pad_token_id=1, init_std=0.3,
    )  # fmt: skip
    torch.manual_seed(0)
    inputs = {"input_ids": _LEFT_PADDED, "attention_mask": _LEFT_PADDED.ne(1).long()}
    return transformers.XGLMForCausalLM(config).eval(), inputs


def _musicgen():
    config = transformers.MusicgenDecoderConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, ffn_dim=64,
        max_position_embeddings=64, num_codebooks=2, pad_token_id=63, bos_token_id=63,
    )  # fmt: skip
    torch.manual_seed(0)
    ids = torch.randint(0, 63, (2 * 2, 7), generator=torch.Generator().manual_seed(1))
    inputs = {
        "input_ids": ids,  # (batch · codebooks, s)
        "pad_token_id": 63,
        "decoder_start_token_id": 63,
        "num_return_sequences": 1,
    }
    return transformers.MusicgenForCausalLM(config).eval(), inputs


def _musicgen_melody():
    # MusicGen-Melody's module is called with inputs_embeds (b, s, d) and returns (s, d)
    config = transformers.MusicgenMelodyDecoderConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, ffn_dim=64,
        max_position_embeddings=64, num_codebooks=2, pad_token_id=63, bos_token_id=63,
    )  # fmt: skip
    torch.manual_seed(0)
    ids = torch.randint(0, 63, (2 * 2, 7), generator=torch.Generator().manual_seed(1))
    inputs = {
        "input_ids": ids,  # (batch · codebooks, s)
        "pad_token_id": 63,
        "decoder_start_token_id": 63,
        "num_return_sequences": 1,
    }
    return transformers.MusicgenMelodyForCausalLM(config).eval(), inputs


def _trocr():
    config = transformers.TrOCRConfig(
        vocab_size=100, d_model=32, decoder_layers=1, decoder_attention_heads=2,
        decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=1, init_std=0.3,
        use_learned_position_embeddings=False,  # the sinusoidal table, a plain tensor attribute
    )  # fmt: skip
    torch.manual_seed(0)
    inputs = {"input_ids": _LEFT_PADDED, "attention_mask": _LEFT_PADDED.ne(1).long()}
    return transformers.TrOCRForCausalLM(config).eval(), inputs


# model -> (builder, {replaced module: (layout, a part of the detail)})
ABSOLUTE = {
    "fsmt": (_fsmt, {
        "model.encoder.embed_positions": ("tensor2tensor", "fairseq numbering"),
        "model.decoder.embed_positions": ("tensor2tensor", "fairseq numbering"),
    }),
    "m2m100": (_m2m100, {
        "model.encoder.embed_positions": ("tensor2tensor", "fairseq numbering"),
        "model.decoder.embed_positions": ("tensor2tensor", "fairseq numbering"),
    }),
    "marian": (_marian, {
        "model.encoder.embed_positions": ("marian", "rows past .. past+s-1"),
        "model.decoder.embed_positions": ("marian", "rows past .. past+s-1"),
    }),
    "xglm": (_xglm, {"model.embed_positions": ("tensor2tensor", "rows position_ids + 2")}),
    "trocr": (_trocr, {
        "model.decoder.embed_positions": ("tensor2tensor", "fairseq numbering"),
    }),
    "musicgen": (_musicgen, {
        "model.decoder.embed_positions": ("musicgen", "of (b, k, s)"),
    }),
    "musicgen_melody": (_musicgen_melody, {
        "model.decoder.embed_positions": ("musicgen", "of inputs_embeds (b, s, d)"),
    }),
}  # fmt: skip


@pytest.mark.parametrize("model", list(ABSOLUTE))
def test_absolute_tables_are_swapped_and_generation_is_unchanged(model):
    make, expected = ABSOLUTE[model]
    original, inputs = make()
    swapped = copy.deepcopy(original)
    report = swap_positions(swapped)
    assert report.names == list(expected)
    for record in report.replaced:
        layout, detail = expected[record.name]
        assert record.kind == "absolute"
        assert record.layout == layout
        assert detail in record.detail
    theirs = tiny_models.generate(original, **inputs)
    tiny_models.assert_same_generation(tiny_models.generate(swapped, **inputs), theirs)
    control = tiny_models.generate(tiny_models.control(swapped, report), **inputs)
    steps = zip(control.logits, theirs.logits, strict=True)
    assert max(float((a - b).abs().max()) for a, b in steps) > 1e-3


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("model_type", ["musicgen", "musicgen_melody"])
def test_musicgen_tables_are_swapped_in_16_bits(model_type, dtype):
    # built as from_pretrained(dtype=) builds: MusicGen's float32 table is cast to 16 bits
    original, swapped, report = tiny_models.build_pair(model_type, dtype)
    assert report.names == ["model.decoder.embed_positions"], str(report)
    assert report.replaced[0].layout == "musicgen"
    module = swapped.model.decoder.embed_positions
    assert module(torch.zeros(1, 5, module.sinusoidal.d_model, dtype=dtype)).dtype == dtype
    tiny_models.compare_16_bits(original, swapped, dtype)
    control = tiny_models.control(swapped, report)
    if dtype == torch.float16:  # the bfloat16 bound is eight times wider (test_swap_sweep.py)
        with pytest.raises(AssertionError):
            tiny_models.compare_16_bits(original, control, dtype)


def test_attributes_the_model_reads_from_its_rotary_module_are_kept():
    # Lfm3Model iterates over ``self.rotary_emb.layer_types`` in its forward
    original, swapped, report = tiny_models.build_pair("lfm3")
    assert report.names == ["model.rotary_emb"]
    assert swapped.model.rotary_emb.layer_types == original.model.rotary_emb.layer_types
    tiny_models.compare(original, swapped)


def test_esm_rotary_positions_are_swapped():
    # forward(x, position_ids, layer_type=None): the layer type is optional and its config
    # names none, so the module is verified and replaced as called without one
    config = transformers.EsmConfig(
        vocab_size=33, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
        intermediate_size=64, position_embedding_type="rotary", pad_token_id=1,
        mask_token_id=2, initializer_range=0.2,
    )  # fmt: skip
    torch.manual_seed(0)
    original = transformers.EsmForMaskedLM(config).eval()
    swapped = copy.deepcopy(original)
    report = swap_positions(swapped)
    assert report.names == ["esm.rotary_embeddings"], str(report)
    assert isinstance(swapped.esm.rotary_embeddings, LlamaRotary)
    ids = torch.randint(3, 33, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = original(input_ids=ids).logits
        ours = swapped(input_ids=ids).logits
        control = tiny_models.control(swapped, report)(input_ids=ids).logits
    assert_close_ulp(ours, theirs, ulps=MODEL_ULPS, what="ESM logits after the swap")
    assert float((control - theirs).abs().max()) > 1e-3


def _pegasus_x():
    config = transformers.PegasusXConfig(
        vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=64, num_global_tokens=4, block_size=8,
        pad_token_id=1, decoder_start_token_id=1, init_std=0.3,
    )  # fmt: skip
    torch.manual_seed(0)
    inputs = {"input_ids": _LEFT_PADDED, "attention_mask": _LEFT_PADDED.ne(1).long()}
    return transformers.PegasusXForConditionalGeneration(config).eval(), inputs


def test_pegasus_x_table_computed_on_the_fly_is_swapped():
    original, inputs = _pegasus_x()
    module = original.model.encoder.embed_positions
    theirs = module(torch.zeros(1, 300, 32))[0].double()  # computed in float32
    ours = torch.from_numpy(posenc.sinusoidal(300, 32, convention="tensor2tensor", dtype="f8"))
    # the same table: Pegasus-X rounds p·ω in float32 (positions < 300)
    assert_close_float32_recipe(theirs, ours, max_angle=299)
    swapped = copy.deepcopy(original)
    report = swap_positions(swapped)
    expected = ["model.encoder.embed_positions", "model.decoder.embed_positions"]
    assert report.names == expected, str(report)
    assert all("computed on the fly" in r.detail for r in report.replaced)
    half = swapped.model.encoder.embed_positions(torch.zeros(2, 7, 32, dtype=torch.float16))
    assert half.dtype == torch.float16  # the embeddings' dtype, as Pegasus-X returns
    assert half.shape == (2, 7, 32)
    # posenc's float64 table rounded once to float16: half an ulp of each value (<= 1)
    assert_close_ulp(half[1], ours[:7], ulps=1, dtype=torch.float16)
    theirs_run = tiny_models.generate(original, **inputs)
    tiny_models.assert_same_generation(tiny_models.generate(swapped, **inputs), theirs_run)
    control = tiny_models.generate(tiny_models.control(swapped, report), **inputs)
    steps = zip(control.logits, theirs_run.logits, strict=True)
    assert max(float((a - b).abs().max()) for a, b in steps) > 1e-3
