"""``swap_positions`` and attention biases, on tiny models of every model type that has one.

Each model is built tiny (random weights, ``torch.manual_seed``), copied and swapped; the copy
must give the original's outputs (encoders) or logits and greedy tokens (decoders, generated
with the cache so that T5's ``past_seen_tokens`` path runs). Biases built by a function (ALiBi
of BLOOM, MPT and Falcon; DeBERTa's relative positions) must be reported as left, with the
posenc call that the report names equal to the function, and ``strict=True`` must raise.

The terminal summary ("bias swap sweep") prints, per model type, what was swapped or left and
how far the outputs moved, then the model directories of the installed transformers that define
a bias of a family posenc has (:mod:`tests.torch.hf.bias_coverage`) and that the sweep does not
cover, by name. Under the pinned release that list is exact (:data:`NOT_COVERED`, with the
reasons); under another (``make test-compat`` installs the newest), what it adds is listed, and
every model type above must still pass.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.references import require

torch = pytest.importorskip("torch")
transformers = require("transformers")

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from posenc.torch.hf import RelativeSinusoidPositions, swap_positions  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402
from tests.torch.hf import bias_coverage, pinned  # noqa: E402

pytestmark = pytest.mark.slow

#: model type -> what the sweep found (read by the terminal summary in tests/summaries.py).
OUTCOMES: dict[str, str] = {}

#: Model directories of the pinned release whose bias (a family posenc has, found by
#: :func:`tests.torch.hf.bias_coverage.directories`) the sweep does not cover -> why.
NOT_COVERED: dict[str, str] = {
    "gemma4": "audio relative position table: not built by the sweep",
    "nemotron_asr_streaming": "relative position table: not built by the sweep",
    "seamless_m4t": "conformer relative position table: not built by the sweep",
    "speecht5": "a learned table of clipped distances, not a sinusoid",
    "udop": "its 2-D layout biases bucket by bounding boxes; only compute_bias is swapped",
    "wavlm": "a gated T5 bias whose gates come from the hidden states",
}

_T5_SIZES = {"d_model": 16, "d_kv": 8, "d_ff": 32, "num_heads": 2, "vocab_size": 64}
_T5_BUCKETS = {"relative_attention_num_buckets": 8, "relative_attention_max_distance": 16}
_T5_COMMON = {**_T5_SIZES, **_T5_BUCKETS, "decoder_start_token_id": 0, "pad_token_id": 0}


def _t5_family(config_class: str, model_class: str, **extra: Any) -> Any:
    config = getattr(transformers, config_class)(
        num_layers=2, num_decoder_layers=2, eos_token_id=1, **_T5_COMMON, **extra
    )
    return getattr(transformers, model_class)(config)


def _tokens(rows: int = 2, length: int = 20) -> Any:
    return torch.randint(2, 64, (rows, length), generator=torch.Generator().manual_seed(1))


def _seq2seq(model: Any) -> tuple[Any, Any]:
    ids = _tokens()
    decoder = _tokens(2, 6)
    logits = model(input_ids=ids, decoder_input_ids=decoder).logits
    tokens = model.generate(ids, max_new_tokens=24, min_new_tokens=24, do_sample=False)
    return logits, tokens


def _greedy(step: Callable[[Any], Any], start: Any, steps: int = 12) -> Any:
    ids = start
    for _ in range(steps):
        ids = torch.cat([ids, step(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids


def _pix2struct(model: Any) -> tuple[Any, Any]:
    ids = _tokens()
    return model(input_ids=ids).logits, _greedy(lambda x: model(input_ids=x).logits, ids[:, :3])


def _pop2piano(model: Any) -> tuple[Any, Any]:
    features = torch.randn(2, 20, 16, generator=torch.Generator().manual_seed(2))
    start = torch.zeros(2, 1, dtype=torch.long)

    def step(x: Any) -> Any:
        return model(input_features=features, decoder_input_ids=x).logits

    return step(_tokens(2, 6)), _greedy(step, start)


def _causal(model: Any) -> tuple[Any, Any]:
    ids = _tokens()
    generated = model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False)
    return model(input_ids=ids).logits, generated


def _encoder(model: Any, **inputs: Any) -> tuple[Any, None]:
    return model(**inputs).last_hidden_state, None


def _longt5(attention: str) -> Any:
    extra = {"encoder_attention_type": attention, "local_radius": 3, "global_block_size": 4}
    return _t5_family("LongT5Config", "LongT5ForConditionalGeneration", **extra)


def _switch() -> Any:
    extra = {"num_experts": 2, "expert_capacity": 64, "num_sparse_encoder_layers": 1,
             "num_sparse_decoder_layers": 1}  # fmt: skip
    return _t5_family(
        "SwitchTransformersConfig", "SwitchTransformersForConditionalGeneration", **extra
    )


def _pix2struct_model() -> Any:
    config = transformers.Pix2StructTextConfig(
        hidden_size=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2, vocab_size=64,
        **_T5_BUCKETS, pad_token_id=0, decoder_start_token_id=0, initializer_range=0.02,
    )  # fmt: skip
    return transformers.Pix2StructTextModel(config)


def _pop2piano_model() -> Any:
    config = transformers.Pop2PianoConfig(
        vocab_size=64, composer_vocab_size=2, d_model=16, d_kv=8, d_ff=32, num_layers=1,
        num_decoder_layers=1, num_heads=2, **_T5_BUCKETS,
    )  # fmt: skip
    return transformers.Pop2PianoForConditionalGeneration(config)


def _wav2vec2_conformer() -> Any:
    config = transformers.Wav2Vec2ConformerConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        conv_dim=(16, 16), conv_stride=(4, 4), conv_kernel=(8, 4), num_conv_pos_embeddings=8,
        num_conv_pos_embedding_groups=2, conv_depthwise_kernel_size=3,
        position_embeddings_type="relative",
    )  # fmt: skip
    return transformers.Wav2Vec2ConformerModel(config)


def _wav2vec2_bert() -> Any:
    config = transformers.Wav2Vec2BertConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        feature_projection_input_dim=16, conv_depthwise_kernel_size=3,
        position_embeddings_type="relative",
    )  # fmt: skip
    return transformers.Wav2Vec2BertModel(config)


def _fastspeech2_conformer() -> Any:
    config = transformers.FastSpeech2ConformerConfig(
        hidden_size=16, vocab_size=32, num_mel_bins=8, encoder_layers=1, decoder_layers=1,
        encoder_linear_units=32, decoder_linear_units=32, speech_decoder_postnet_layers=1,
        speech_decoder_postnet_units=16, duration_predictor_channels=16,
        energy_predictor_channels=16, pitch_predictor_channels=16, pitch_predictor_layers=1,
        duration_predictor_layers=1, energy_predictor_layers=1, decoder_kernel_size=3,
        encoder_kernel_size=3,
    )  # fmt: skip
    return transformers.FastSpeech2ConformerModel(config)


def _parakeet() -> Any:
    config = transformers.ParakeetEncoderConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        subsampling_conv_channels=8, num_mel_bins=16, conv_kernel_size=3,
    )  # fmt: skip
    return transformers.ParakeetEncoder(config)


def _speech(model: Any) -> tuple[Any, None]:
    return _encoder(
        model, input_values=torch.randn(2, 800, generator=torch.Generator().manual_seed(3))
    )


def _fastspeech(model: Any) -> tuple[Any, None]:
    # the encoder's output: the spectrogram's length is decided by rounded durations
    return model(input_ids=_tokens(2, 12) % 32, return_dict=True).encoder_last_hidden_state, None


def _mel(model: Any) -> tuple[Any, None]:
    features = torch.randn(2, 64, 16, generator=torch.Generator().manual_seed(4))
    return _encoder(model, input_features=features)


#: model type -> (build, run, kind of what must be swapped: "compute_bias" or a class name)
SWAPPED: dict[str, tuple[Callable[[], Any], Callable[[Any], tuple[Any, Any]], str]] = {
    "t5": (lambda: _t5_family("T5Config", "T5ForConditionalGeneration"), _seq2seq, "compute_bias"),
    "mt5": (
        lambda: _t5_family("MT5Config", "MT5ForConditionalGeneration"),
        _seq2seq,
        "compute_bias",
    ),
    "umt5": (
        lambda: _t5_family("UMT5Config", "UMT5ForConditionalGeneration"),
        _seq2seq,
        "compute_bias",
    ),
    "longt5 (local)": (lambda: _longt5("local"), _seq2seq, "compute_bias"),
    "longt5 (transient-global)": (lambda: _longt5("transient-global"), _seq2seq, "compute_bias"),
    "switch_transformers": (_switch, _seq2seq, "compute_bias"),
    "pix2struct": (_pix2struct_model, _pix2struct, "compute_bias"),
    "pop2piano": (_pop2piano_model, _pop2piano, "compute_bias"),
    "wav2vec2-conformer": (_wav2vec2_conformer, _speech, "RelativeSinusoidPositions"),
    "fastspeech2-conformer": (_fastspeech2_conformer, _fastspeech, "RelativeSinusoidPositions"),
    "parakeet": (_parakeet, _mel, "RelativeSinusoidPositions"),
    "wav2vec2-bert": (_wav2vec2_bert, _mel, "RelativeSinusoidPositions"),
}


def covered() -> list[str]:
    """The model directories the sweep covers (swapped, or left with a posenc call)."""
    left = [*_alibi_models(), *_deberta_models(), "deberta"]
    return sorted({bias_coverage.directory(t) for t in [*SWAPPED, *left]})


def not_covered() -> list[str]:
    """The installed release's model directories with a bias that the sweep does not cover."""
    return sorted(set(bias_coverage.directories()) - set(covered()))


def test_every_directory_with_a_bias_is_counted() -> None:
    found = bias_coverage.directories()
    assert set(covered()) <= set(found), sorted(set(covered()) - set(found))
    if pinned.is_pinned(transformers.__version__):
        assert set(found) == pinned.BIAS_DIRECTORIES, "update pinned_transformers.json"
        assert not_covered() == sorted(NOT_COVERED), "update NOT_COVERED"
    else:  # what the pinned release has must still be covered; what a newer one adds is listed
        assert set(not_covered()) & pinned.BIAS_DIRECTORIES <= set(NOT_COVERED)


@pytest.fixture(scope="module", autouse=True)
def _quiet(one_thread: None) -> None:
    transformers.logging.set_verbosity_error()


def _built(build: Callable[[], Any]) -> Any:
    torch.manual_seed(0)
    return build().eval()


def _difference(before: Any, after: Any) -> float:
    return float((before.double() - after.double()).abs().max())


@pytest.mark.parametrize("model_type", sorted(SWAPPED))
def test_the_swapped_bias_keeps_the_outputs(model_type: str) -> None:
    build, run, kind = SWAPPED[model_type]
    OUTCOMES[model_type] = "failed"
    original = _built(build)
    swapped = copy.deepcopy(original)
    report = swap_positions(swapped)
    biases = [r for r in report.replaced if r.kind == "bias"]
    assert biases, f"no bias swapped in {model_type}:\n{report}"
    assert all(kind in r.replacement for r in biases), str(report)
    if model_type == "umt5":  # one bias per self-attention layer: 2 encoder, 2 decoder layers
        assert len(biases) == 4, str(report)
    assert not [x for x in report.left if "bias" in x.reason], str(report)
    with torch.no_grad():
        before, tokens_before = run(original)
        after, tokens_after = run(swapped)
    if tokens_before is not None:
        assert torch.equal(tokens_before, tokens_after)
    worst = _difference(before, after)
    tolerance = 0.0 if kind == "compute_bias" else 1e-4  # T5 buckets are integer-exact
    assert worst <= tolerance, f"{model_type}: outputs moved by {worst:.3g}"
    what = "swapped " + ", ".join(sorted({r.replacement for r in biases}))
    OUTCOMES[model_type] = f"{what}: " + (
        "bit-equal" if worst == 0 else f"max difference {worst:.2g}"
    )


def test_a_t5_bias_is_reported() -> None:
    model = _built(lambda: _t5_family("T5Config", "T5ForConditionalGeneration"))
    report = swap_positions(model)
    assert "encoder.block.0.layer.0.SelfAttention" in report.names
    assert "decoder.block.0.layer.0.SelfAttention" in report.names
    assert "bidirectional" in str(report)
    assert "causal" in str(report)
    # the layers' own tables are read: another table changes the bias
    attention = model.encoder.block[0].layer[0].SelfAttention
    bias = attention.compute_bias(5, 5)
    with torch.no_grad():
        attention.relative_attention_bias.weight.add_(1.0)
    assert torch.equal(attention.compute_bias(5, 5), bias + 1.0)
    again = swap_positions(model)
    assert not again.replaced
    assert not again.left
    assert attention_names(again.already) == attention_names(report.names)


def attention_names(names: Any) -> list[str]:
    return sorted(name for name in names if name.endswith("SelfAttention"))


# -- biases built by functions: reported, with a posenc call equal to the function ------------


def _alibi_models() -> dict[str, Callable[[], Any]]:
    return {
        "bloom": lambda: transformers.BloomForCausalLM(
            transformers.BloomConfig(vocab_size=64, hidden_size=32, n_layer=1, n_head=4)
        ),
        "mpt": lambda: transformers.MptForCausalLM(
            transformers.MptConfig(vocab_size=64, d_model=32, n_layers=1, n_heads=4, max_seq_len=64)
        ),
        "falcon": lambda: transformers.FalconForCausalLM(
            transformers.FalconConfig(
                vocab_size=64,
                hidden_size=32,
                num_hidden_layers=1,
                num_attention_heads=4,
                alibi=True,
                new_decoder_architecture=False,
                multi_query=False,
            )
        ),
    }


def _bloom_reference(heads: int, length: int, dtype: Any, module: Any) -> tuple[Any, Any]:
    mask = torch.ones(1, length, dtype=torch.long)
    theirs = module.build_alibi_tensor(mask, heads, dtype).reshape(heads, 1, length)
    convention = "falcon" if "falcon" in module.__name__ else "bloom"
    ours = pt.alibi_bias(
        heads, [length - 1], length, form="key", convention=convention, dtype=dtype
    )
    return theirs, ours


def _function_left(model_type: str, build: Callable[[], Any], function: str) -> Any:
    model = _built(build)
    report = swap_positions(model)
    left = [x for x in report.left if function in x.reason]
    assert left, f"{model_type}: the bias built by {function} is not reported:\n{report}"
    assert not [r for r in report.replaced if r.kind == "bias"]
    with pytest.raises(ValueError, match=function):
        swap_positions(model, strict=True)
    return left[0]


@pytest.mark.parametrize("model_type", ["bloom", "mpt", "falcon"])
def test_alibi_is_reported_with_the_posenc_call_equal_to_it(model_type: str) -> None:
    OUTCOMES[model_type] = "failed"
    function = "build_mpt_alibi_tensor" if model_type == "mpt" else "build_alibi_tensor"
    left = _function_left(model_type, _alibi_models()[model_type], function)
    assert f"convention='{model_type}'" in left.reason
    module = __import__(f"transformers.models.{model_type}.modeling_{model_type}", fromlist=["_"])
    for heads in (4, 12):
        if model_type == "mpt":
            theirs = module.build_mpt_alibi_tensor(heads, 64)
            ours = pt.alibi_bias(heads, [63], 64, form="relative", convention="mpt")
            assert torch.equal(theirs, ours)
            continue
        for dtype in (torch.float32, torch.bfloat16):
            theirs, ours = _bloom_reference(heads, 37, dtype, module)
            assert torch.equal(theirs, ours)
    OUTCOMES[model_type] = f"left ({function}): its posenc call is bit-equal"


def _deberta_models() -> dict[str, Callable[[], Any]]:
    sizes = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
             "intermediate_size": 32, "relative_attention": True, "position_buckets": 8,
             "max_relative_positions": 64}  # fmt: skip
    sew = {"conv_dim": (16, 16), "conv_stride": (4, 4), "conv_kernel": (8, 4),
           "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 2,
           "squeeze_factor": 1}  # fmt: skip
    return {
        "deberta-v2": lambda: transformers.DebertaV2Model(
            transformers.DebertaV2Config(vocab_size=64, **sizes)
        ),
        "sew-d": lambda: transformers.SEWDModel(transformers.SEWDConfig(**sizes, **sew)),
    }


@pytest.mark.parametrize("model_type", ["deberta-v2", "sew-d"])
def test_deberta_positions_are_reported_with_the_posenc_call_equal_to_them(model_type: str) -> None:
    OUTCOMES[model_type] = "failed"
    left = _function_left(model_type, _deberta_models()[model_type], "build_relative_position")
    assert "bucket_size=8, max_position=64" in left.reason, left.reason
    name = model_type.replace("-", "_")
    module = __import__(f"transformers.models.{name}.modeling_{name}", fromlist=["_"])
    q, k = 7, 300
    if model_type == "deberta-v2":
        theirs = module.build_relative_position(torch.zeros(q, 1), torch.zeros(k, 1), 8, 64)
    else:
        theirs = module.build_relative_position(q, k, 8, 64)
    relative = -torch.from_numpy(posenc.relative_positions(q, k))
    ours = pt.deberta_buckets(relative, bucket_size=8, max_position=64, convention="transformers")
    assert torch.equal(theirs[0], ours)
    OUTCOMES[model_type] = "left (build_relative_position): its posenc call is bit-equal"


def test_deberta_v1_positions_are_reported_with_the_posenc_call_equal_to_them() -> None:
    OUTCOMES["deberta"] = "failed"
    config = transformers.DebertaConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, relative_attention=True,
    )  # fmt: skip
    left = _function_left("deberta", lambda: transformers.DebertaModel(config), "build_relative")
    assert "-posenc.relative_positions(q, k)" in left.reason, left.reason
    module = __import__("transformers.models.deberta.modeling_deberta", fromlist=["_"])
    theirs = module.build_relative_position(torch.zeros(7, 1), torch.zeros(300, 1))
    assert torch.equal(theirs[0], -torch.from_numpy(posenc.relative_positions(7, 300)))
    OUTCOMES["deberta"] = "left (build_relative_position): its posenc call is bit-equal"


# -- the drop-in -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_relative_positions_are_the_core_table_rounded_once(dtype: Any) -> None:
    module = RelativeSinusoidPositions(8)
    exact = torch.from_numpy(posenc.relative_sinusoid_table(40, 8, dtype=np.float64))
    expected = pt.cast_exact(exact, dtype)
    assert torch.equal(module(torch.zeros(1, 40, 8, dtype=dtype))[0], expected)


def test_relative_positions_forms() -> None:
    x = torch.randn(3, 5, 4)
    table = RelativeSinusoidPositions(4)(x)
    assert table.shape == (1, 9, 4)
    assert RelativeSinusoidPositions(4, output="batched")(x).shape == (3, 9, 4)
    scaled, same = RelativeSinusoidPositions(4, output="scaled").eval()(x)
    assert torch.equal(scaled, x * 2.0)
    assert torch.equal(same, table)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"embedding_dim": 3}, ValueError, "embedding_dim must be even"),
        ({"embedding_dim": 4, "output": "flat"}, ValueError, "output must be one of"),
        ({"embedding_dim": 4, "dropout": 2.0}, ValueError, "dropout must be in"),
        ({"embedding_dim": 4, "dropout": "0.1"}, TypeError, "dropout must be a number"),
    ],
)
def test_relative_positions_refuse_bad_arguments(kwargs: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        RelativeSinusoidPositions(**kwargs)


def test_a_relative_table_that_differs_is_left_with_the_reason() -> None:
    class Shifted(torch.nn.Module):
        """Another base: the form of Parakeet's module (frequencies in a buffer)."""

        d_model = 8

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("inv_freq", 5000.0 ** -(torch.arange(0, 8, 2) / 8))

        def forward(self, hidden_states: Any) -> Any:
            length = hidden_states.shape[1]
            table = posenc.relative_sinusoid_table(length, 8, base=5000.0)
            return torch.from_numpy(table)[None]

    holder = torch.nn.Module()
    holder.embed_positions = Shifted()
    report = swap_positions(holder)
    assert not report.replaced
    assert "relative sinusoid table differs from posenc's" in report.left[0].reason


class _ClampedBias(torch.nn.Module):
    """T5's attributes, but a bias that clamps the relative positions instead of bucketing."""

    relative_attention_num_buckets = 8
    relative_attention_max_distance = 16
    is_decoder = False

    def __init__(self) -> None:
        super().__init__()
        self.relative_attention_bias = torch.nn.Embedding(8, 2)

    def compute_bias(
        self, query_length: int, key_length: int, device: Any = None, past_seen_tokens: int = 0
    ) -> Any:
        query = torch.arange(query_length)[:, None] + past_seen_tokens
        rel = (torch.arange(key_length)[None, :] - query).clamp(0, 7)
        return self.relative_attention_bias(rel).permute(2, 0, 1)[None]


def test_a_t5_style_bias_that_differs_is_left_with_the_reason() -> None:
    holder = torch.nn.Module()
    holder.attention = _ClampedBias()
    report = swap_positions(holder)
    assert not report.replaced
    assert report.left[0].name == "attention"
    assert "differs from posenc's t5_buckets" in report.left[0].reason
    with pytest.raises(ValueError, match="differs from posenc's t5_buckets"):
        swap_positions(holder, strict=True)


def test_a_swapped_t5_copies_with_its_own_weights() -> None:
    model = _built(lambda: _t5_family("T5Config", "T5ForConditionalGeneration"))
    swap_positions(model)
    twin = copy.deepcopy(model)
    attention = model.encoder.block[0].layer[0].SelfAttention
    other = twin.encoder.block[0].layer[0].SelfAttention
    bias = attention.compute_bias(4, 4)
    with torch.no_grad():
        other.relative_attention_bias.weight.add_(1.0)
    assert torch.equal(attention.compute_bias(4, 4), bias)
    assert torch.equal(other.compute_bias(4, 4), bias + 1.0)


class _OtherBuckets(_ClampedBias):
    """T5's bias from ``compute_bias``, but a ``_relative_position_bucket`` (read by other
    methods, as LongT5's side bias) that clamps."""

    def compute_bias(
        self, query_length: int, key_length: int, device: Any = None, past_seen_tokens: int = 0
    ) -> Any:
        query = torch.arange(query_length)[:, None] + past_seen_tokens
        rel = torch.arange(key_length)[None, :] - query
        buckets = pt.t5_buckets(rel, num_buckets=8, max_distance=16, convention="transformers")
        return self.relative_attention_bias(buckets).permute(2, 0, 1)[None]

    def _relative_position_bucket(self, relative_position: Any) -> Any:
        return relative_position.clamp(0, 7)


def test_buckets_read_by_other_methods_are_verified_too() -> None:
    holder = torch.nn.Module()
    holder.attention = _OtherBuckets()
    report = swap_positions(holder)
    assert not report.replaced
    assert "differs from posenc's t5_buckets" in report.left[0].reason


def test_a_swapped_t5_still_compiles_into_one_graph() -> None:
    model = _built(lambda: _t5_family("T5Config", "T5EncoderModel"))
    expected = model(input_ids=_tokens()).last_hidden_state
    swap_positions(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():  # fullgraph=True: a graph break raises
        got = compiled(input_ids=_tokens()).last_hidden_state
    # the swapped bias is bit-equal (above); two tiny layers add it and sum their products
    # (widths 8 to 32) in another order: a few ulps of the largest output (measured <= 2.1
    # under ATen's default, avx2 and avx512 kernels)
    assert_close_ulp(got, expected, ulps=8, what="compiled T5 encoder output")
