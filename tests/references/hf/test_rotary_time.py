"""MusicFlamingo's rotary time embedding against transformers' ``MusicFlamingoRotaryEmbedding``.

Its angles come from the audio frames' timestamps in seconds (``posenc.timestamp_positions``):
posenc's tables (``posenc.torch.hf.TimestampRotary``, and the NumPy core through
``posenc.multi_axis_cos_sin``) equal the module's within :data:`TABLE_ULPS` float32 ulps of
max(|θ|, 1) per element (the module's angle is four float32 roundings, ``2π·t/M``, ``·ω_k``,
``−2π·τ`` and their product, each up to half an ulp: measured 2.0 ulps with windows of 750
frames, 1.4 with 13), its
``apply_rotary_time_emb`` pairs neighbouring channels as ``posenc.apply_rotary(pairs=
"interleaved")`` does, and ``swap_positions`` replaces the module, verified.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.references import require

torch = require("torch")
transformers = require("transformers")

import posenc  # noqa: E402
from posenc.torch.hf import TimestampRotary, swap_positions  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402

music = require("transformers.models.musicflamingo.modeling_musicflamingo")

#: float32 ulps of max(|θ|, 1) between the module's tables and posenc's (see above).
TABLE_ULPS = 3


@pytest.fixture(scope="module")
def config() -> object:
    transformers.logging.set_verbosity_error()
    audio = {
        "model_type": "audioflamingo3_encoder", "hidden_size": 40, "num_attention_heads": 2,
        "intermediate_size": 16, "num_hidden_layers": 1,
    }  # fmt: skip
    text = {
        "model_type": "qwen2", "hidden_size": 16, "num_attention_heads": 2,
        "num_key_value_heads": 1, "intermediate_size": 16, "num_hidden_layers": 1,
        "vocab_size": 32,
    }  # fmt: skip
    return transformers.MusicFlamingoConfig(audio_config=audio, text_config=text)


def _timestamps(config: object, frames: int, windows: list[int]) -> torch.Tensor:
    """float32 timestamps as ``_build_audio_timestamps`` makes them."""
    step = config.audio_frame_step * 4
    return torch.tensor(windows)[:, None] * frames * step + torch.arange(frames) * step


def _angles(rope: TimestampRotary, tau: torch.Tensor, frames: int) -> np.ndarray:
    return rope.angles(tau, frames).repeat_interleave(2, dim=-1).numpy()


@pytest.mark.parametrize(("frames", "windows"), [(750, [0, 1, 2, 0, 5]), (13, [0, 40, 7])])
def test_tables_are_the_module_s(config: object, frames: int, windows: list[int]) -> None:
    module = music.MusicFlamingoRotaryEmbedding(config)
    tau = _timestamps(config, frames, windows)
    cos, sin = module(tau, seq_len=frames)
    rope = TimestampRotary.from_config(config)
    ours = rope(tau, frames)
    scale = np.maximum(np.abs(_angles(rope, tau, frames)), 1.0)
    for theirs, mine in zip((cos, sin), ours, strict=True):
        assert mine.dtype == theirs.dtype == torch.float32
        assert_close_ulp(mine, theirs, ulps=TABLE_ULPS, dtype=np.float32, scale=scale)
    # the NumPy core: coordinates, then the per-axis multi-axis table
    n = rope.rotary_dim // 2
    coords = posenc.timestamp_positions(
        tau.numpy(), frame_seconds=rope.frame_seconds, max_positions=rope.max_positions
    )
    tables = posenc.multi_axis_cos_sin(
        coords, 4 * n, sections=(n, n), schedule="per_axis", base=rope.base, pairs="interleaved"
    )
    for theirs, mine in zip((cos, sin), tables, strict=True):
        assert_close_ulp(mine, theirs.numpy(), ulps=TABLE_ULPS, dtype=np.float32, scale=scale)


def test_a_wrong_window_length_is_caught(config: object) -> None:
    """Negative control: timestamps of windows twice as long change the window index."""
    module = music.MusicFlamingoRotaryEmbedding(config)
    tau = _timestamps(config, 13, [0, 40, 7])
    cos, _ = module(tau, seq_len=13)
    wrong = TimestampRotary.from_config(config)
    wrong.frame_seconds *= 2
    assert float((wrong(tau, 13)[0] - cos).abs().max()) > 0.1


def test_its_rotation_pairs_neighbouring_channels(config: object) -> None:
    rope = TimestampRotary.from_config(config)
    tau = _timestamps(config, 9, [0, 3])
    cos, sin = (t.double() for t in rope(tau, 9))
    hidden = torch.randn(2, 9, config.head_dim, dtype=torch.float64, generator=torch.Generator())
    theirs = music.apply_rotary_time_emb(hidden, cos, sin)
    r = cos.shape[-1]
    ours = posenc.apply_rotary(
        hidden[..., :r].numpy(), cos.numpy(), sin.numpy(), pairs="interleaved"
    )
    assert torch.equal(theirs[..., r:], hidden[..., r:])
    assert_close_ulp(theirs[..., :r].numpy(), ours, ulps=2, dtype=np.float64)


def test_swap_replaces_the_module_verified(config: object) -> None:
    holder = torch.nn.Module()
    holder.config = config
    holder.pos_emb = original = music.MusicFlamingoRotaryEmbedding(config)
    report = swap_positions(holder, strict=True)
    assert [(x.name, x.layout, x.replacement) for x in report.replaced] == [
        ("pos_emb", "interleaved", "TimestampRotary")
    ]
    tau = _timestamps(config, 30, [0, 2, 11])
    scale = np.maximum(np.abs(_angles(holder.pos_emb, tau, 30)), 1.0)
    for mine, theirs in zip(holder.pos_emb(tau, 30), original(tau, seq_len=30), strict=True):
        assert_close_ulp(mine, theirs, ulps=TABLE_ULPS, dtype=np.float32, scale=scale)


def test_swap_leaves_a_module_computing_in_bfloat16(config: object) -> None:
    holder = torch.nn.Module()
    holder.pos_emb = music.MusicFlamingoRotaryEmbedding(config).to(torch.bfloat16)
    report = swap_positions(holder)
    assert not report.replaced
    assert "differs from posenc's rotary time embedding" in report.left[0].reason
    assert "bfloat16" in report.left[0].reason


def test_a_swapped_model_gives_the_same_audio_features() -> None:
    """The whole path: MusicFlamingo builds its timestamps (one sample of two windows), rotates
    the encoder's output with the tables, and projects it; after the swap, the features agree
    within the float32 rounding of the tables (their error times the features' size)."""
    transformers.logging.set_verbosity_error()
    config = transformers.MusicFlamingoConfig(
        audio_config={
            "model_type": "audioflamingo3_encoder", "hidden_size": 40, "num_attention_heads": 2,
            "intermediate_size": 16, "num_hidden_layers": 1, "num_mel_bins": 8,
            "max_source_positions": 100,
        },
        text_config={
            "model_type": "qwen2", "hidden_size": 16, "num_attention_heads": 2,
            "num_key_value_heads": 1, "intermediate_size": 16, "num_hidden_layers": 1,
            "vocab_size": 32,
        },
        audio_token_id=5,
    )  # fmt: skip
    torch.manual_seed(0)
    model = music.MusicFlamingoForConditionalGeneration(config).eval()
    features, mask = torch.randn(2, 8, 200), torch.ones(2, 200, dtype=torch.long)
    ids = torch.full((1, 104), 1)
    ids[0, 2:102] = 5  # 100 audio tokens: 50 encoder frames per window
    with torch.no_grad():
        before = model.model.get_audio_features(features, mask, ids).pooler_output
    report = swap_positions(model)
    assert "model.pos_emb" in report.names, str(report)
    with torch.no_grad():
        after = model.model.get_audio_features(features, mask, ids).pooler_output
    assert float((after - before).abs().max()) <= 1e-6 * float(before.abs().max())
