"""Drop-in replacements for the positional modules of Hugging Face ``transformers`` models.

Each class here takes the call signature of one ``transformers`` module, so it can be assigned
in place of that module on a built (or loaded) model, and returns the same values computed
by posenc: in float64, rounded once to the model's dtype, at any position (no table ceiling).

================================  ==============================================  ===============
posenc module                     replaces (``transformers``)                     convention
================================  ==============================================  ===============
:class:`MarianPositions`          ``MarianSinusoidalPositionalEmbedding``,        ``marian``
                                  ``PegasusSinusoidalPositionalEmbedding``
:class:`M2M100Positions`          ``M2M100SinusoidalPositionalEmbedding``         ``tensor2tensor``
                                  (M2M100, NLLB): fairseq numbering, zero
                                  vector at padding
:class:`WhisperEncoderPositions`  the Whisper encoder's fixed ``embed_positions``  ``tensor2tensor``
                                  (an ``nn.Embedding`` holding ``sinusoids``)
:class:`LlamaRotary`              ``LlamaRotaryEmbedding`` (cos/sin of RoPE, with  RoPE, ``half``
                                  the config's ``rope_parameters`` scaling)       pairs
:class:`MultiAxisRotary`          ``Qwen2VLRotaryEmbedding`` and the M-RoPE       M-RoPE, ``half``
                                  modules of Qwen2.5-VL, Qwen3-VL, Qwen3.5, ...:  pairs
                                  ``position_ids`` ``(3, b, s)`` or ``(b, s)``
:class:`TimestampRotary`          ``MusicFlamingoRotaryEmbedding``: angles from   RoPE,
                                  audio timestamps in seconds                     ``interleaved``
================================  ==============================================  ===============

Attention biases: :class:`RelativeSinusoidPositions` replaces the relative sinusoid modules of
Conformer speech encoders (``Wav2Vec2ConformerRelPositionalEmbedding``,
``FastSpeech2ConformerRelPositionalEncoding``, ``ParakeetEncoderRelPositionalEncoding``);
``swap_positions`` also computes T5's ``compute_bias`` with posenc's buckets, and reports the
biases that functions build (ALiBi, DeBERTa's relative positions) with the posenc call equal
to each.

The two-line swap finds these modules, and the rotary modules of other models (interleaved
pairs, one column per pair, complex phasors, per-layer-type parameters, multi-axis
``position_ids``), by what they compute,
verifies each against posenc's tables and returns a :class:`SwapReport`::

    from posenc.torch.hf import swap_positions
    print(swap_positions(model))   # what was replaced, and why anything positional was left

or, one module at a time (``like`` copies size, dtype and device from the module it replaces
and checks that the module's table really is that convention)::

    from posenc.torch.hf import MarianPositions
    model.model.encoder.embed_positions = MarianPositions.like(model.model.encoder.embed_positions)

This package never imports ``transformers``: the classes only mimic the call signatures. Data
checks follow the rule of ``posenc.torch`` (docs/architecture.md): CPU positions are checked
like the NumPy core's, accelerator tensors are not read in ``forward``.

Shape legend: ``b`` batch, ``s`` sequence, ``d`` = ``embedding_dim``.
"""

from ._absolute import M2M100Positions, MarianPositions, WhisperEncoderPositions, fairseq_positions
from ._bias_layers import RelativeSinusoidPositions
from ._multi_axis import MultiAxisRotary
from ._report import SwapReport
from ._rotary import LlamaRotary
from ._swap import swap_positions
from ._timestamps import TimestampRotary

__all__ = [
    "LlamaRotary",
    "M2M100Positions",
    "MarianPositions",
    "MultiAxisRotary",
    "RelativeSinusoidPositions",
    "SwapReport",
    "TimestampRotary",
    "WhisperEncoderPositions",
    "fairseq_positions",
    "swap_positions",
]
