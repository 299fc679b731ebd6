"""The named sinusoidal conventions and the framework functions they reproduce.

A convention is not a class of its own: it is a small record of three orthogonal choices,

- ``schedule``: which frequencies ω_k are used (see :func:`posenc.frequencies`);
- ``layout``: how sin(p·ω_k) and cos(p·ω_k) fill the ``d_model`` channels;
- ``odd``: what an odd ``d_model`` does with its last channel.

Channel diagrams (``s_k = sin(p·ω_k)``, ``c_k = cos(p·ω_k)``, ``h = d_model // 2``)::

    paper          d = 6:  [s0, c0, s1, c1, s2, c2]        ω_k = base^(-2k/d)
                   d = 5:  [s0, c0, s1, c1, s2]            (one more sin than cos)
    tensor2tensor  d = 6:  [s0, s1, s2 | c0, c1, c2]       ω_k = base^(-k/(h-1))
                   d = 5:  [s0, s1 | c0, c1 | 0]           (zero column appended)
    marian         d = 6:  [s0, s1, s2 | c0, c1, c2]       ω_k = base^(-2k/d)
                   d = 5:  [s0, s1, s2 | c0, c1]           (sin half has ceil(d/2) columns)
    musicgen       d = 6:  [c0, c1, c2 | s0, s1, s2]       ω_k = base^(-k/(h-1))
                   d = 5:  [c0, c1 | s0, s1 | 0]           (zero column appended)

>>> sorted(CONVENTIONS)
['marian', 'musicgen', 'paper', 'tensor2tensor']
>>> get_convention("paper").layout
'interleaved'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

__all__ = ["CONVENTIONS", "Convention", "ConventionName", "get_convention"]

#: The names of the 1-D conventions (for type annotations).
ConventionName = Literal["paper", "tensor2tensor", "marian", "musicgen"]

Schedule = Literal["paper", "timescale"]
Layout = Literal["interleaved", "sin_cos", "cos_sin"]
OddRule = Literal["extra_sin", "zero_pad"]


@dataclass(frozen=True)
class Convention:
    """One sinusoidal convention: a frequency schedule, a channel layout and an odd-``d`` rule.

    Attributes:
        name: the key in :data:`CONVENTIONS`.
        schedule: ``"paper"`` (ω_k = base^(-2k/d), k < ceil(d/2)) or ``"timescale"``
            (ω_k = base^(-k/max(h-1, 1)), k < h = d // 2, the tensor2tensor form).
        layout: ``"interleaved"`` ([s0, c0, s1, c1, ...]), ``"sin_cos"`` ([s... | c...]) or
            ``"cos_sin"`` ([c... | s...]).
        odd: ``"extra_sin"`` (odd d keeps one more sin than cos column) or ``"zero_pad"``
            (odd d appends one zero column).
        description: one line saying what the convention is.
        reproduces: the framework functions whose output this convention equals.
    """

    name: ConventionName
    schedule: Schedule
    layout: Layout
    odd: OddRule
    description: str
    reproduces: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.name}: {self.description} Reproduces: {'; '.join(self.reproduces)}."


_ALL = (
    Convention(
        name="paper",
        schedule="paper",
        layout="interleaved",
        odd="extra_sin",
        description=(
            "Attention Is All You Need, section 3.5: PE[p, 2k] = sin(p*w_k), "
            "PE[p, 2k+1] = cos(p*w_k), w_k = base^(-2k/d)."
        ),
        reproduces=(
            "the PyTorch word_language_model/tutorial PositionalEncoding",
            "transformers DistilBERT create_sinusoidal_embeddings",
            "keras-hub SinePositionEncoding",
            "positional-encodings PositionalEncoding1D (even d)",
        ),
    ),
    Convention(
        name="tensor2tensor",
        schedule="timescale",
        layout="sin_cos",
        odd="zero_pad",
        description=(
            "tensor2tensor timing signal: [sin | cos] halves, w_k = base^(-k/(h-1)) with "
            "h = d//2, a zero column appended for odd d."
        ),
        reproduces=(
            "tensor2tensor common_attention.get_timing_signal_1d",
            "fairseq SinusoidalPositionalEmbedding.get_embedding",
            "OpenAI Whisper sinusoids and transformers Whisper sinusoids",
            "transformers M2M100/NLLB/Speech2Text SinusoidalPositionalEmbedding.get_embedding",
        ),
    ),
    Convention(
        name="marian",
        schedule="paper",
        layout="sin_cos",
        odd="extra_sin",
        description=(
            "Marian: [sin | cos] halves with the paper's frequencies; the sin half has "
            "ceil(d/2) columns."
        ),
        reproduces=("transformers MarianSinusoidalPositionalEmbedding",),
    ),
    Convention(
        name="musicgen",
        schedule="timescale",
        layout="cos_sin",
        odd="zero_pad",
        description=(
            "MusicGen: the tensor2tensor table with the halves swapped, [cos | sin], "
            "w_k = base^(-k/(h-1)) with h = d//2, a zero column appended for odd d."
        ),
        reproduces=(
            "transformers MusicgenSinusoidalPositionalEmbedding.get_embedding",
            "transformers MusicgenMelodySinusoidalPositionalEmbedding.get_embedding",
        ),
    ),
)

_BY_NAME: dict[str, Convention] = {c.name: c for c in _ALL}

#: Read-only mapping from convention name to its description and the functions it reproduces.
CONVENTIONS: Mapping[str, str] = MappingProxyType({c.name: str(c) for c in _ALL})


def get_convention(convention: Any) -> Convention:
    """Return the :class:`Convention` called ``convention`` (a :class:`Convention` passes through).

    >>> get_convention("tensor2tensor").schedule
    'timescale'
    >>> get_convention("bert")
    Traceback (most recent call last):
    ...
    ValueError: convention must be one of 'marian', 'musicgen', 'paper', 'tensor2tensor', got 'bert'
    """
    if isinstance(convention, Convention):
        return convention
    if not isinstance(convention, str):
        raise TypeError(
            f"convention must be a string naming a convention, got {type(convention).__name__}"
        )
    try:
        return _BY_NAME[convention]
    except KeyError:
        names = ", ".join(repr(n) for n in sorted(_BY_NAME))
        raise ValueError(f"convention must be one of {names}, got {convention!r}") from None
