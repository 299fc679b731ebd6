"""Relative keys (clipped relative-distance tables) against the speech models of
transformers 5: the index each model builds, and the ``relative_key`` score term of
Wav2Vec2-BERT and SeamlessM4T-v2 (``position_bias``), captured from their attention."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.references import require

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

HIDDEN, HEADS = 16, 2


@contextlib.contextmanager
def _captured_position_bias(modeling: Any) -> Iterator[list[torch.Tensor]]:
    """Record the ``position_bias`` each eager attention call of ``modeling`` receives."""
    seen: list[torch.Tensor] = []
    original = modeling.eager_attention_forward

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["position_bias"])
        return original(*args, **kwargs)

    modeling.eager_attention_forward = recording
    try:
        yield seen
    finally:
        modeling.eager_attention_forward = original


def _speech_attention(family: str, left: int, right: int) -> tuple[Any, Any]:
    """A relative_key self-attention of Wav2Vec2-BERT or SeamlessM4T-v2, and its module."""
    transformers = require("transformers")
    if family == "wav2vec2_bert":
        modeling = require("transformers.models.wav2vec2_bert.modeling_wav2vec2_bert")
        config = transformers.Wav2Vec2BertConfig(
            hidden_size=HIDDEN, num_attention_heads=HEADS, position_embeddings_type="relative_key",
            left_max_position_embeddings=left, right_max_position_embeddings=right,
        )  # fmt: skip
        attention = modeling.Wav2Vec2BertSelfAttention(config)
    else:
        modeling = require("transformers.models.seamless_m4t_v2.modeling_seamless_m4t_v2")
        config = transformers.SeamlessM4Tv2Config(
            hidden_size=HIDDEN, speech_encoder_attention_heads=HEADS,
            position_embeddings_type="relative_key", left_max_position_embeddings=left,
            right_max_position_embeddings=right,
        )  # fmt: skip
        attention = modeling.SeamlessM4Tv2ConformerSelfAttention(config)
    attention.config._attn_implementation = "eager"
    return modeling, attention.eval()


def _query(attention: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The attention's query heads ``(b, heads, L, head_dim)``."""
    b, length, _ = hidden.shape
    return attention.linear_q(hidden).view(b, length, HEADS, -1).transpose(1, 2)


@pytest.mark.parametrize("family", ["wav2vec2_bert", "seamless_m4t_v2"])
@pytest.mark.parametrize(("length", "left", "right"), [(1, 2, 2), (7, 2, 3), (12, 8, 4)])
def test_relative_key_scores_are_the_speech_encoders_position_bias(
    family: str, length: int, left: int, right: int
) -> None:
    """Equal to their ``position_bias`` in float64 (to rounding) and in float32 within the
    error of a 8-term dot product."""
    torch.manual_seed(0)
    modeling, attention = _speech_attention(family, left, right)
    index = pt.relative_key_index(length, length, left=left, right=right)
    for dtype, tolerance in ((torch.float64, 1e-13), (torch.float32, 1e-5)):
        attention = attention.to(dtype)
        torch.nn.init.normal_(attention.distance_embedding.weight)
        hidden = torch.randn(2, length, HIDDEN, dtype=dtype)
        with torch.no_grad(), _captured_position_bias(modeling) as seen:
            attention(hidden)
            ours = (
                pt.relative_key_scores(
                    _query(attention, hidden), attention.distance_embedding.weight, index
                )
                * attention.head_size**-0.5
            )
        assert len(seen) == 1
        assert ours.shape == seen[0].shape == (2, HEADS, length, length)
        assert (ours - seen[0]).abs().max() <= tolerance


@pytest.mark.parametrize("length", [1, 5, 9])
def test_speecht5_reads_the_rows_of_the_query_minus_key_index(length: int) -> None:
    modeling = require("transformers.models.speecht5.modeling_speecht5")
    m = 3
    encoding = modeling.SpeechT5RelativePositionalEncoding(4, max_length=m)
    torch.nn.init.normal_(encoding.pe_k.weight)
    with torch.no_grad():
        theirs = encoding(torch.zeros(1, length, 4))
    index = pt.relative_key_index(length, length, left=m, right=m - 1, sign="query - key")
    assert torch.equal(theirs, encoding.pe_k.weight[index])


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("length", [1, 4, 9])
def test_phi4_audio_bias_reads_the_rows_of_the_key_minus_query_index(
    length: int, symmetric: bool
) -> None:
    transformers = require("transformers")
    modeling = require("transformers.models.phi4_multimodal.modeling_phi4_multimodal")
    m = 4
    config = transformers.Phi4MultimodalAudioConfig(
        num_attention_heads=HEADS, bias_max_distance=m, bias_symmetric=symmetric
    )
    bias = modeling.Phi4MultimodalAudioRelativeAttentionBias(config)
    torch.nn.init.normal_(bias.bias_values.weight)
    index = pt.relative_key_index(length, length, left=m, right=m - 1, folded=symmetric)
    if symmetric and length > m:  # a key m before its query reads row m of an m-row table
        assert int(index.max()) == m == bias.bias_values.weight.shape[0]
        with pytest.raises(IndexError):
            bias(torch.zeros(1, length, 4))
        return
    with torch.no_grad():
        theirs = bias(torch.zeros(1, length, 4))
    assert torch.equal(theirs, bias.bias_values.weight[index].permute(2, 0, 1)[None])


def test_granite_speech_attention_distances_are_the_offset_query_minus_key_index() -> None:
    transformers = require("transformers")
    modeling = require("transformers.models.granite_speech.modeling_granite_speech")
    config = transformers.GraniteSpeechEncoderConfig(
        context_size=5, max_pos_emb=8, num_layers=1, hidden_dim=16, num_heads=2, dim_head=8
    )
    encoder = modeling.GraniteSpeechCTCEncoder(config)
    index = pt.relative_key_index(5, 5, left=5, right=5, sign="query - key", offset=8)
    assert torch.equal(encoder.attention_dists, index)


def _conformer_attention(family: str) -> tuple[Any, Any, Any]:
    """A Transformer-XL attention of Parakeet or Nemotron ASR streaming, its module and its
    relative positional encoding."""
    transformers = require("transformers")
    if family == "parakeet":
        modeling = require("transformers.models.parakeet.modeling_parakeet")
        config = transformers.ParakeetEncoderConfig(
            hidden_size=HIDDEN, num_attention_heads=HEADS, num_hidden_layers=1
        )
        prefix = "ParakeetEncoder"
    else:
        modeling = require(
            "transformers.models.nemotron_asr_streaming.modeling_nemotron_asr_streaming"
        )
        config = transformers.NemotronAsrStreamingEncoderConfig(
            hidden_size=HIDDEN, num_attention_heads=HEADS, num_hidden_layers=1
        )
        prefix = "NemotronAsrStreamingEncoder"
    config._attn_implementation = "eager"
    attention = getattr(modeling, f"{prefix}Attention")(config, layer_idx=0).eval()
    encoding = getattr(modeling, f"{prefix}RelPositionalEncoding")(config)
    return modeling, attention, encoding


@contextlib.contextmanager
def _captured_mask(modeling: Any) -> Iterator[list[torch.Tensor]]:
    """Record the ``attention_mask`` (their relative term, ``matrix_bd``) of each eager call."""
    seen: list[torch.Tensor] = []
    original = modeling.eager_attention_forward

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["attention_mask"])
        return original(*args, **kwargs)

    modeling.eager_attention_forward = recording
    try:
        yield seen
    finally:
        modeling.eager_attention_forward = original


@pytest.mark.parametrize("family", ["parakeet", "nemotron_asr_streaming"])
@pytest.mark.parametrize("length", [1, 6])
def test_transformer_xl_relative_term_is_relative_key_scores_on_the_unclipped_index(
    family: str, length: int
) -> None:
    """Their ``_rel_shift`` reads, for query ``i`` and key ``j``, row ``L − 1 − (i − j)`` of
    the projected ``(2L − 1)``-row sinusoid table: ``relative_key_index(L, L, left=L − 1,
    right=L − 1)`` (key − query, never clipped), with the query plus ``bias_v``. Equal in
    float64 to rounding and in float32 within the error of a 8-term dot product."""
    torch.manual_seed(0)
    modeling, attention, encoding = _conformer_attention(family)
    torch.nn.init.normal_(attention.bias_v)
    index = pt.relative_key_index(length, length, left=length - 1, right=length - 1)
    for dtype, tolerance in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        attention = attention.to(dtype)
        hidden = torch.randn(2, length, HIDDEN, dtype=dtype)
        table = encoding(hidden).to(dtype)  # (b, 2L − 1, d)
        with torch.no_grad(), _captured_mask(modeling) as seen:
            attention(hidden, position_embeddings=table)
            b, heads = hidden.shape[0], attention.config.num_attention_heads
            query = attention.q_proj(hidden).view(b, length, heads, -1).transpose(1, 2)
            query = query + attention.bias_v.view(1, heads, 1, -1)
            rows = attention.relative_k_proj(table[0]).view(2 * length - 1, heads, -1)
            ours = torch.stack(
                [pt.relative_key_scores(query[:, h], rows[:, h], index) for h in range(heads)],
                dim=1,
            ) * attention.scaling  # fmt: skip
        assert len(seen) == 1
        assert ours.shape == seen[0].shape == (2, HEADS, length, length)
        assert (ours - seen[0]).abs().max() <= tolerance


class _Cached:
    """A cache holding ``cached`` frames of keys and values before the chunk (its ``update``
    takes the layer index, and under transformers 5.25 keyword arguments too)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        self.keys, self.values = keys, values

    def update(self, keys: torch.Tensor, values: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return torch.cat([self.keys, keys], 2), torch.cat([self.values, values], 2)


@pytest.mark.parametrize(("length", "cached"), [(1, 3), (3, 4)])
def test_nemotron_streaming_chunks_read_the_index_of_their_positions_after_the_cache(
    length: int, cached: int
) -> None:
    """A chunk of ``L`` frames after ``c`` cached ones: the table spans ``K = L + c`` keys and
    query ``i`` sits at ``c + i``, so the rows are ``relative_key_index(range(c, c + L), K,
    left=K − 1, right=K − 1)``; equal to their ``matrix_bd`` in float64 to rounding."""
    torch.manual_seed(0)
    modeling, attention, encoding = _conformer_attention("nemotron_asr_streaming")
    attention = attention.double()
    torch.nn.init.normal_(attention.bias_v)
    keys = length + cached
    cache = _Cached(*torch.randn(2, 2, HEADS, cached, HIDDEN // HEADS, dtype=torch.float64))
    hidden = torch.randn(2, length, HIDDEN, dtype=torch.float64)
    table = encoding(hidden, cached_frames=cached).double()  # (b, 2K − 1, d)
    index = pt.relative_key_index(torch.arange(cached, keys), keys, left=keys - 1, right=keys - 1)
    with torch.no_grad(), _captured_mask(modeling) as seen:
        attention(hidden, position_embeddings=table, past_key_values=cache)
        query = attention.q_proj(hidden).view(2, length, HEADS, -1).transpose(1, 2)
        query = query + attention.bias_v.view(1, HEADS, 1, -1)
        rows = attention.relative_k_proj(table[0]).view(2 * keys - 1, HEADS, -1)
        ours = torch.stack(
            [pt.relative_key_scores(query[:, h], rows[:, h], index) for h in range(HEADS)], dim=1
        ) * attention.scaling  # fmt: skip
    assert ours.shape == seen[0].shape == (2, HEADS, length, keys)
    assert (ours - seen[0]).abs().max() <= 1e-12


def _gemma4_audio(chunk: int, left: int, right: int) -> tuple[Any, Any, Any]:
    transformers = require("transformers")
    modeling = require("transformers.models.gemma4.modeling_gemma4")
    config = transformers.Gemma4AudioConfig(
        hidden_size=HIDDEN, num_attention_heads=HEADS, attention_chunk_size=chunk,
        attention_context_left=left, attention_context_right=right, num_hidden_layers=1,
    )  # fmt: skip
    attention = modeling.Gemma4AudioAttention(config, 0).eval()
    return attention, modeling.Gemma4AudioRelPositionalEncoding(config), config


def _gemma4_audio_terms(chunk: int, left: int, right: int) -> tuple[Any, Any, float]:
    """Gemma 4 audio's relative term (captured from its ``_rel_shift``, ``(b, heads, blocks,
    chunk, context)``), posenc's (``relative_logits`` of the per-query curves over the
    ``tensor2tensor`` sinusoid of the distances), and the float32 error bound."""
    torch.manual_seed(0)
    attention, encoding, _ = _gemma4_audio(chunk, left, right)
    torch.nn.init.normal_(attention.per_dim_scale)
    past, context = left - 1, attention.context_size
    rows = context // 2 + 1  # the table: distances rows − 1 .. 0
    length, blocks = 2 * chunk, 2
    hidden = torch.randn(2, length, HIDDEN)
    table = encoding(hidden).reshape(rows, HIDDEN)
    exact = pt.sinusoidal(torch.arange(rows - 1, -1, -1), HIDDEN, convention="tensor2tensor",
                          dtype=torch.float64)  # fmt: skip
    assert (table.double() - exact).abs().max() <= 4 * rows * 2.0**-24 + 2.0**-24
    seen: list[torch.Tensor] = []
    shift = attention._rel_shift
    attention._rel_shift = lambda x: seen.append(shift(x)) or seen[-1]
    with torch.no_grad():
        attention(hidden, table)
        scale = attention.q_scale * torch.nn.functional.softplus(attention.per_dim_scale.double())
        query = attention.q_proj(hidden).double().view(2, length, HEADS, -1) * scale
        keys = attention.relative_k_proj.double()(exact).view(rows, HEADS, -1).flip(0)
        curves = torch.einsum("bihd,rhd->bhir", query, keys)  # distance r = 0 .. rows − 1
        offset = rows - 1 - past  # the row a distance reads is offset by this many
        dense = pt.relative_logits(
            curves, torch.arange(length) + past + offset, torch.arange(blocks * chunk + context)
        )
        magnitude = torch.einsum("bihd,rhd->", query.abs(), keys.abs()).item()
    ours = torch.stack(
        [dense[:, :, n * chunk : (n + 1) * chunk, n * chunk : n * chunk + context]
         for n in range(blocks)], dim=2,
    )  # fmt: skip
    return seen[0], ours, magnitude * 64 * 2.0**-24


@pytest.mark.parametrize(("chunk", "left", "right"), [(4, 5, 0), (4, 5, 2), (4, 3, 1), (12, 13, 0)])
def test_gemma4_audio_relative_term_is_relative_logits_of_the_distance_table(
    chunk: int, left: int, right: int
) -> None:
    """Gemma 4's audio encoder (chunked local attention) adds, for query ``i`` and key ``j``
    of its context window, the query's product with the projected ``[sin | cos]`` sinusoid
    (``tensor2tensor`` convention) of distance ``i − j + s`` when that is in ``[0, rows)``,
    else 0: posenc's ``relative_logits`` with the queries' positions shifted by ``s = rows − 1
    − (attention_context_left − 1)`` (0 for the checkpoints' 12/13/0). Its float32 term is
    within a 64-ulp dot-product error of posenc's float64 one."""
    theirs, ours, bound = _gemma4_audio_terms(chunk, left, right)
    assert theirs.shape == ours.shape
    assert (theirs.double() - ours).abs().max() <= bound


def test_gemma4_audio_chunks_longer_than_their_context_wrap_into_another_query() -> None:
    """When ``chunk − 1 > context + 1 − rows``, their ``_rel_shift`` wraps a row into the
    previous query's products: a term of another query's content, which no relative index
    expresses (docs/attention-biases.md). Here 8, 1, 0: the terms differ."""
    theirs, ours, bound = _gemma4_audio_terms(8, 1, 0)
    assert (theirs.double() - ours).abs().max() > 100 * bound
