"""posenc against the REAL framework functions it claims to reproduce (posenc.CONVENTIONS).

Each third-party library is optional: a test whose library is missing is skipped with a
reason. Reference values always come from the library (or from an independent float64
computation), never from posenc.

Tolerances (tests/tolerance.py, in float32 ulps): a reference that computes in float64 and
rounds once to float32 (DistilBERT, Marian) agrees with posenc's float32 output to 1 ulp
(each side is within half an ulp of the float64 value). A reference that computes its
frequencies and angles in float32 (M2M100, Speech2Text, Whisper, positional-encodings,
keras-hub) rounds the angle: :func:`~tests.tolerance.assert_close_float32_recipe` allows 2
ulps of the largest angle + 1 (measured: at most 9e-8 * p, 0.75 ulp of p, for d <= 1024), far
below the O(1) differences a wrong frequency schedule or layout produces.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from tests.references import require  # noqa: E402
from tests.tolerance import assert_close_float32_recipe, assert_close_ulp  # noqa: E402

HF_REASON = "transformers is not installed (reference implementations for {})"


def assert_rounded_once(actual, expected) -> None:
    """Both sides are the float64 table rounded once to float32: 1 ulp apart at most."""
    assert_close_ulp(actual, expected, ulps=1, dtype=torch.float32, what="table")


# ---------------------------------------------------------------------------------------------
# transformers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [2, 7, 8, 11, 64, 512])
def test_distilbert_create_sinusoidal_embeddings(dim):
    mod = pytest.importorskip(
        "transformers.models.distilbert.modeling_distilbert", reason=HF_REASON.format("DistilBERT")
    )
    n_pos = 512
    out = torch.empty(n_pos, dim)
    reference = mod._create_sinusoidal_embeddings(n_pos=n_pos, dim=dim, out=out)
    ours = pt.sinusoidal(n_pos, dim, dtype=torch.float32)  # paper convention
    assert ours.dtype == reference.dtype == torch.float32
    # DistilBERT computes in float64 NumPy and rounds once, like posenc.
    assert_rounded_once(ours, reference)


@pytest.mark.parametrize("dim", [2, 7, 8, 11, 64, 512])
def test_marian_sinusoidal_positional_embedding(dim):
    mod = pytest.importorskip(
        "transformers.models.marian.modeling_marian", reason=HF_REASON.format("Marian")
    )
    n_pos = 512
    reference = mod.MarianSinusoidalPositionalEmbedding(n_pos, dim).create_weight()
    ours = pt.sinusoidal(n_pos, dim, convention="marian", dtype=torch.float32)
    assert_rounded_once(ours, reference)
    # Not interleaved: the paper layout would not match (sanity check of the comparison).
    if dim >= 4:
        paper = pt.sinusoidal(n_pos, dim, dtype=torch.float32)
        assert (paper - reference).abs().max() > 0.5


def _t2t_get_embedding_classes():
    m2m = pytest.importorskip(
        "transformers.models.m2m_100.modeling_m2m_100", reason=HF_REASON.format("M2M100")
    )
    s2t = pytest.importorskip(
        "transformers.models.speech_to_text.modeling_speech_to_text",
        reason=HF_REASON.format("Speech2Text"),
    )
    return {
        "m2m100": m2m.M2M100SinusoidalPositionalEmbedding,
        "speech2text": s2t.Speech2TextSinusoidalPositionalEmbedding,
    }


@pytest.mark.parametrize("model", ["m2m100", "speech2text"])
@pytest.mark.parametrize(
    ("num_embeddings", "dim", "padding_idx"),
    [(64, 4, 1), (130, 5, 0), (1026, 8, 1), (1026, 11, 3), (1026, 512, 1), (4098, 1024, 1)],
)
def test_fairseq_style_get_embedding(model, num_embeddings, dim, padding_idx):
    cls = _t2t_get_embedding_classes()[model]
    reference = cls.get_embedding(num_embeddings, dim, padding_idx)
    ours = pt.sinusoidal(num_embeddings, dim, convention="tensor2tensor", dtype=torch.float32)
    assert reference.shape == ours.shape == (num_embeddings, dim)
    # Their padding_idx row is zeroed (fairseq convention); posenc's row is the real encoding.
    assert torch.all(reference[padding_idx] == 0)
    assert ours[padding_idx].abs().max() > 0.5
    keep = torch.ones(num_embeddings, dtype=torch.bool)
    keep[padding_idx] = False
    # They compute in float32, so the tolerance grows with the largest position.
    assert_close_float32_recipe(ours[keep], reference[keep], max_angle=num_embeddings - 1)


@pytest.mark.parametrize("model", ["musicgen", "musicgen_melody"])
@pytest.mark.parametrize(
    ("num_embeddings", "dim"), [(64, 4), (130, 5), (1026, 8), (2048, 11), (4096, 64)]
)
def test_musicgen_get_embedding(model, num_embeddings, dim):
    # [cos | sin] halves of the tensor2tensor frequencies, a zero column for odd d, computed
    # in float32 (frequencies and angles) by MusicGen and MusicGen-Melody alike.
    name = "".join(part.capitalize() for part in model.split("_"))
    module = require(f"transformers.models.{model}.modeling_{model}", HF_REASON.format(name))
    cls = getattr(module, f"{name}SinusoidalPositionalEmbedding")
    reference = cls.get_embedding(num_embeddings, dim)
    ours = pt.sinusoidal(num_embeddings, dim, convention="musicgen", dtype=torch.float32)
    assert reference.shape == ours.shape == (num_embeddings, dim)
    assert_close_float32_recipe(ours, reference, max_angle=num_embeddings - 1)
    swapped = pt.sinusoidal(num_embeddings, dim, convention="tensor2tensor", dtype=torch.float32)
    assert float((swapped - reference).abs().max()) > 0.5  # the halves' order is what differs


@pytest.mark.parametrize(("padding_idx", "offset"), [(1, 0), (1, 5), (0, 3)])
def test_m2m100_forward_with_fairseq_positions(padding_idx, offset):
    # End to end: M2M100's module looks rows up at fairseq positions; posenc gets the same
    # values from sinusoidal(positions_from_tokens(...)) except at padding (zero in theirs).
    cls = _t2t_get_embedding_classes()["m2m100"]
    dim = 16
    module = cls(64, dim, padding_idx)
    gen = torch.Generator().manual_seed(1234)
    tokens = torch.randint(padding_idx + 1, 100, (3, 9), generator=gen)
    tokens[0, :3] = padding_idx  # left padding
    tokens[1, -4:] = padding_idx  # right padding
    reference = module(tokens, past_key_values_length=offset)
    positions = posenc.positions_from_tokens(tokens.numpy(), padding_idx, offset=offset)
    ours = pt.sinusoidal(torch.from_numpy(positions), dim, convention="tensor2tensor")
    real = tokens != padding_idx
    assert torch.all(reference[~real] == 0)
    assert_close_float32_recipe(ours[real], reference[real], max_angle=int(positions.max()))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("padding_idx", [0, 1, 3])
@pytest.mark.parametrize("offset", [0, 1, 7, 100])
def test_positions_from_tokens_matches_create_position_ids_from_input_ids(
    seed, padding_idx, offset
):
    cls = _t2t_get_embedding_classes()["m2m100"]
    gen = torch.Generator().manual_seed(seed)
    batch, length = 5, 12
    tokens = torch.randint(0, 50, (batch, length), generator=gen)
    tokens[tokens == padding_idx] = padding_idx + 1  # padding only where placed below
    lengths = torch.randint(0, length + 1, (batch,), generator=gen).tolist()
    for row, n_real in enumerate(lengths):
        if (row + seed) % 2:
            tokens[row, : length - n_real] = padding_idx  # left padding
        else:
            tokens[row, n_real:] = padding_idx  # right padding
    if seed >= 4:  # also stray padding tokens inside a sequence
        tokens[0, length // 2] = padding_idx
    reference = cls.create_position_ids_from_input_ids(
        tokens, padding_idx, past_key_values_length=offset
    )
    ours = posenc.positions_from_tokens(tokens.numpy(), padding_idx, offset=offset)
    assert ours.dtype == np.int64
    np.testing.assert_array_equal(ours, reference.numpy())


@pytest.mark.parametrize("max_timescale", [10000.0, 500.0])
@pytest.mark.parametrize(("length", "channels"), [(100, 4), (1500, 384), (1500, 1280), (448, 64)])
def test_whisper_sinusoids(length, channels, max_timescale):
    mod = pytest.importorskip(
        "transformers.models.whisper.modeling_whisper", reason=HF_REASON.format("Whisper")
    )
    reference = mod.sinusoids(length, channels, max_timescale=max_timescale)
    ours = pt.sinusoidal(
        length, channels, base=max_timescale, convention="tensor2tensor", dtype=torch.float32
    )
    assert_close_float32_recipe(ours, reference, max_angle=length - 1)


# ---------------------------------------------------------------------------------------------
# positional-encodings (PyPI "positional-encodings")
# ---------------------------------------------------------------------------------------------


def _positional_encoding_1d(batch: int, length: int, d: int) -> torch.Tensor:
    mod = pytest.importorskip(
        "positional_encodings.torch_encodings", reason="positional-encodings is not installed"
    )
    return mod.PositionalEncoding1D(d)(torch.zeros(batch, length, d))


@pytest.mark.parametrize("d", [2, 4, 10, 64, 512])
def test_positional_encodings_1d_even_d(d):
    batch, length = 2, 1000
    reference = _positional_encoding_1d(batch, length, d)
    ours = pt.sinusoidal(length, d, dtype=torch.float32)
    assert reference.shape == (batch, length, d)
    for b in range(batch):
        # It computes inv_freq and the angles in float32.
        assert_close_float32_recipe(ours, reference[b], max_angle=length - 1)


@pytest.mark.parametrize("d", [3, 5, 11, 63])
def test_positional_encodings_1d_odd_d_differs(d):
    # For odd d, PositionalEncoding1D rounds the channel count up to d + 1 and uses it in the
    # exponent, inv_freq = 10000**(-2k/(d+1)), then drops the last channel. The paper (and
    # posenc) use 10000**(-2k/d), so the tables differ for every k >= 1.
    length = 200
    reference = _positional_encoding_1d(1, length, d)[0]
    ours = pt.sinusoidal(length, d, dtype=torch.float32)
    assert (ours - reference).abs().max() > 0.1
    # ... and what it computes is the paper table for d + 1, truncated to d channels.
    truncated = pt.sinusoidal(length, d + 1, dtype=torch.float32)[:, :d]
    assert_close_float32_recipe(truncated, reference, max_angle=length - 1)


# ---------------------------------------------------------------------------------------------
# keras-hub
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [8, 11, 64])
def test_keras_hub_sine_position_encoding(d):
    os.environ["KERAS_BACKEND"] = "jax"  # before keras is imported (no TensorFlow here)
    pytest.importorskip("jax", reason="jax is not installed (keras-hub's backend here)")
    keras_hub = pytest.importorskip(
        "keras_hub", reason="keras-hub is not installed (optional SinePositionEncoding reference)"
    )
    keras = pytest.importorskip("keras", reason="keras is not installed")
    length = 256
    layer = keras_hub.layers.SinePositionEncoding()
    reference = keras.ops.convert_to_numpy(layer(keras.ops.zeros((1, length, d))))[0]
    ours = posenc.sinusoidal(length, d)  # paper convention
    assert_close_float32_recipe(ours, np.asarray(reference), max_angle=length - 1)


# ---------------------------------------------------------------------------------------------
# The accuracy gap: the PyTorch tutorial recipe (angles in float32) versus posenc, against
# the float64 truth.
# ---------------------------------------------------------------------------------------------


def tutorial_recipe_float32(seq_len: int, d_model: int) -> torch.Tensor:
    """The PyTorch tutorial recipe's table ``pe``, re-typed as written (float32)."""
    pe = torch.zeros(seq_len, d_model)
    position = torch.arange(0, seq_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def test_float32_recipe_error_versus_posenc_at_large_positions():
    d_model, start, stop = 512, 5000, 10001
    # float64 truth, computed independently of posenc (angles p * 10000^(-2k/d) in float64;
    # their own error is ~p * 1e-16, far below both thresholds).
    p = np.arange(start, stop, dtype=np.float64)[:, None]
    omega = np.array([math.pow(10000.0, -2.0 * k / d_model) for k in range(d_model // 2)])
    truth = np.empty((stop - start, d_model))
    truth[:, 0::2] = np.sin(p * omega)
    truth[:, 1::2] = np.cos(p * omega)
    truth_t = torch.from_numpy(truth)

    recipe = tutorial_recipe_float32(stop, d_model)[start:]
    recipe_error = (recipe.double() - truth_t).abs().max().item()
    assert recipe_error > 1e-4

    ours = pt.sinusoidal(torch.arange(start, stop), d_model, dtype=torch.float32)
    assert ours.dtype == torch.float32
    ours_error = (ours.double() - truth_t).abs().max().item()
    assert ours_error <= 1e-7
