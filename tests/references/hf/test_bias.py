"""Attention biases against transformers: BLOOM, MPT and Falcon ALiBi, T5 and DeBERTa-v2
buckets, the speech encoders' relative tables. A convention named after a function equals it
bit for bit in its dtype; buckets are integer-equal at every distance up to 10^6.

``make test-compat`` runs this file under the newest transformers too (the other libraries'
references are in tests/references/test_bias.py)."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from tests.references import require

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402
from posenc.torch.hf import RelativeSinusoidPositions  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

HEADS = list(range(1, 129))


DISTANCES = np.arange(-(10**6), 10**6 + 1)


def _module(path: str):  # type: ignore[no-untyped-def]
    require("transformers")
    return require(path)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_bloom_alibi_equals_build_alibi_tensor_bit_for_bit(dtype: torch.dtype) -> None:
    bloom = _module("transformers.models.bloom.modeling_bloom")
    mask = torch.ones(1, 300, dtype=torch.long)
    for heads in HEADS:
        want = bloom.build_alibi_tensor(mask, heads, dtype).reshape(heads, 1, 300)
        got = pt.alibi_bias(heads, [0], 300, form="key", convention="bloom", dtype=dtype)
        assert torch.equal(got, want), heads


def test_bloom_slopes_are_up_to_9_ulps_from_exact_below_128_heads_and_11_at_128() -> None:
    bloom = _module("transformers.models.bloom.modeling_bloom")

    def ulps(heads: int) -> int:
        theirs = bloom._get_alibi_slopes(heads, torch.device("cpu")).numpy()
        exact = posenc.alibi_slopes(heads).astype(np.float32)
        return int(np.abs(theirs.view(np.int32) - exact.view(np.int32)).max())

    assert max(ulps(h) for h in range(1, 128)) == ulps(121) == 9
    assert ulps(128) == 11
    # the NumPy core differs from torch.pow by at most one ulp
    for heads in HEADS:
        core = posenc.alibi_slopes(heads, convention="bloom")
        theirs = bloom._get_alibi_slopes(heads, torch.device("cpu")).numpy()
        assert np.abs(core.view(np.int32) - theirs.view(np.int32)).max() <= 1


@pytest.mark.parametrize("max_bias", [8, 16])
def test_mpt_alibi_equals_build_mpt_alibi_tensor_bit_for_bit(max_bias: int) -> None:
    mpt = _module("transformers.models.mpt.modeling_mpt")
    for heads in HEADS:
        want = mpt.build_mpt_alibi_tensor(heads, 40, max_bias).numpy()
        core = posenc.alibi_bias(
            heads, [39], 40, form="relative", max_bias=max_bias, convention="mpt"
        )
        assert np.array_equal(core, want), heads
        torch_side = pt.alibi_bias(
            heads, [39], 40, form="relative", max_bias=max_bias, convention="mpt"
        )
        assert torch.equal(torch_side, torch.from_numpy(want))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_falcon_alibi_equals_build_alibi_tensor_bit_for_bit(dtype: torch.dtype) -> None:
    falcon = _module("transformers.models.falcon.modeling_falcon")
    mask = torch.ones(1, 1100, dtype=torch.long)
    for heads in (1, 3, 8, 12, 32, 71, 128):
        want = falcon.build_alibi_tensor(mask, heads, dtype).reshape(heads, 1, 1100)
        got = pt.alibi_bias(heads, [0], 1100, form="key", convention="falcon", dtype=dtype)
        assert torch.equal(got, want), heads
    # bfloat16: distances 1000 and 1001 share a value
    assert want[0, 0, 1000] == want[0, 0, 1001]


T5_SETTINGS = [(32, 128), (32, 256), (64, 512), (8, 16), (16, 1000), (128, 4096), (33, 100), (4, 7)]


@pytest.mark.parametrize(("num_buckets", "max_distance"), T5_SETTINGS)
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_equal_relative_position_bucket_up_to_10_6(
    num_buckets: int, max_distance: int, bidirectional: bool
) -> None:
    t5 = _module("transformers.models.t5.modeling_t5")
    rel = torch.from_numpy(DISTANCES)
    want = t5.T5Attention._relative_position_bucket(
        rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    settings = {
        "bidirectional": bidirectional,
        "num_buckets": num_buckets,
        "max_distance": max_distance,
    }
    assert torch.equal(pt.t5_buckets(rel, convention="transformers", **settings), want)
    np.testing.assert_array_equal(
        posenc.t5_buckets(DISTANCES, convention="transformers", **settings), want.numpy()
    )
    # the exact buckets agree with transformers' float32 steps for these settings too
    np.testing.assert_array_equal(posenc.t5_buckets(DISTANCES, **settings), want.numpy())


DEBERTA_SETTINGS = [(256, 512), (8, 64), (32, 128), (64, 1024), (256, 1000)]


@pytest.mark.parametrize(("bucket_size", "max_position"), DEBERTA_SETTINGS)
def test_deberta_buckets_equal_make_log_bucket_position_up_to_10_6(
    bucket_size: int, max_position: int
) -> None:
    deberta = _module("transformers.models.deberta_v2.modeling_deberta_v2")
    rel = torch.from_numpy(DISTANCES)
    want = deberta.make_log_bucket_position(rel, bucket_size, max_position).to(torch.long)
    got = pt.deberta_buckets(
        rel, bucket_size=bucket_size, max_position=max_position, convention="transformers"
    )
    assert torch.equal(got, want)
    core = posenc.deberta_buckets(
        DISTANCES, bucket_size=bucket_size, max_position=max_position, convention="transformers"
    )
    # NumPy's correctly rounded float32 log differs from torch.log on one known edge
    known = {(256, 512): {-403269, 403269}}.get((bucket_size, max_position), set())
    assert set(DISTANCES[core != want.numpy()].tolist()) == known


def test_deberta_build_relative_position_is_minus_relative_positions_bucketed() -> None:
    deberta = _module("transformers.models.deberta_v2.modeling_deberta_v2")
    q, k = torch.zeros(1, 7, 4), torch.zeros(1, 11, 4)
    want = deberta.build_relative_position(q, k, bucket_size=8, max_position=16)[0]
    rel = -posenc.relative_positions(7, 11)
    got = posenc.deberta_buckets(rel, bucket_size=8, max_position=16, convention="transformers")
    np.testing.assert_array_equal(got, want.numpy())


def test_t5_relative_bias_like_a_t5_attention_equals_compute_bias() -> None:
    t5 = _module("transformers.models.t5.modeling_t5")
    config = _module("transformers").T5Config(
        d_model=16, d_kv=4, num_heads=4, relative_attention_num_buckets=32
    )
    for is_decoder in (False, True):
        config.is_decoder = is_decoder
        attention = t5.T5Attention(config, has_relative_attention_bias=True)
        torch.nn.init.normal_(attention.relative_attention_bias.weight)
        bias = pt.T5RelativeBias.like(attention)
        assert torch.equal(
            bias(np.arange(3, 9), 20), attention.compute_bias(6, 20, past_seen_tokens=3)[0]
        )


@pytest.mark.parametrize("length", [1, 5, 300])
def test_speech_relative_tables_equal_the_exact_table_within_their_float32_error(
    length: int,
) -> None:
    w2v = _module("transformers.models.wav2vec2_conformer.modeling_wav2vec2_conformer")
    fs2 = _module("transformers.models.fastspeech2_conformer.modeling_fastspeech2_conformer")
    parakeet = _module("transformers.models.parakeet.modeling_parakeet")
    transformers = require("transformers")
    hidden, x = 32, torch.zeros(1, length, 32)
    exact = torch.from_numpy(posenc.relative_sinusoid_table(length, hidden, dtype=np.float64))
    tables = [
        w2v.Wav2Vec2ConformerRelPositionalEmbedding(
            transformers.Wav2Vec2ConformerConfig(hidden_size=hidden, max_source_positions=400)
        )(x)[0],
        fs2.FastSpeech2ConformerRelPositionalEncoding(
            transformers.FastSpeech2ConformerConfig(hidden_size=hidden),
            {"positional_dropout_rate": 0.0},
        )(x)[1][0],
        parakeet.ParakeetEncoderRelPositionalEncoding(
            transformers.ParakeetEncoderConfig(hidden_size=hidden)
        )(x)[0],
    ]
    bound = 4 * length * 2.0**-24 + 2.0**-24  # their float32 angle p·ω: half an ulp of p
    for table in tables:
        assert table.shape == exact.shape
        assert (table.double() - exact).abs().max() <= bound


@pytest.mark.parametrize(("length", "cached_frames"), [(1, 0), (5, 0), (5, 7), (300, 40)])
def test_seamless_and_nemotron_streaming_tables_are_the_table_of_their_key_length(
    length: int, cached_frames: int
) -> None:
    """``RelativeSinusoidPositions(d).table(L)``, L = the chunk plus its cached frames, is the
    table of SeamlessM4T's speech encoder and of Nemotron ASR streaming, within the error of
    their float32 angles (docs/attention-biases.md)."""
    seamless = _module("transformers.models.seamless_m4t.modeling_seamless_m4t")
    nemotron = _module("transformers.models.nemotron_asr_streaming.modeling_nemotron_asr_streaming")
    transformers = require("transformers")
    hidden, keys = 32, length + cached_frames
    ours = RelativeSinusoidPositions(hidden).table(keys, dtype=torch.float64)
    exact = torch.from_numpy(posenc.relative_sinusoid_table(keys, hidden, dtype=np.float64))
    assert (ours - exact).abs().max() <= 1e-15  # float64: posenc's table itself
    streaming = nemotron.NemotronAsrStreamingEncoderRelPositionalEncoding(
        transformers.NemotronAsrStreamingEncoderConfig(hidden_size=hidden)
    )(torch.zeros(2, length, hidden), cached_frames=cached_frames)
    assert streaming.shape == (2, 2 * keys - 1, hidden)
    tables = [streaming[1]]
    if not cached_frames:
        config = transformers.SeamlessM4TConfig(hidden_size=hidden, max_source_positions=400)
        tables.append(
            seamless.SeamlessM4TConformerRelPositionalEmbedding(config)(
                torch.zeros(1, length, hidden)
            )[0]
        )
    bound = 4 * keys * 2.0**-24 + 2.0**-24  # their float32 angle p·ω: half an ulp of p
    float32 = RelativeSinusoidPositions(hidden).table(keys)
    for table in tables:
        assert table.shape == exact.shape
        assert (table.double() - exact).abs().max() <= bound
        assert (float32.double() - exact).abs().max() <= 2.0**-24  # rounded once
