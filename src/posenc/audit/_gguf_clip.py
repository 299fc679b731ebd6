"""A GGUF vision projector (an ``mmproj`` file) as an audit subject: the RoPE of the vision
tower llama.cpp's ``mtmd`` library (``tools/mtmd/clip.cpp``) runs from it.

An mmproj file has ``general.architecture`` ``clip``; its keys are ``clip.projector_type`` (or
``clip.vision.projector_type`` in a file with several modalities), ``clip.has_vision_encoder``
and ``clip.vision.embedding_length``, ``.attention.head_count``, ``.attention.head_dim`` (when
the head is not ``embedding_length / head_count``) and ``.block_count``. No key carries the
tower's RoPE: llama.cpp chooses the graph by projector type and writes the base into the
source (``clip.cpp``'s ``load_hparams`` and ``tools/mtmd/models/*.cpp``), whatever the model's
``vision_config`` says. The graphs modelled here, with ``d`` the head size:

- Qwen-VL's vision mode (``ggml_rope_multi`` with ``GGML_ROPE_TYPE_VISION``, sections
  ``d/4`` each, positions ``[y, x, y, x]``): pairs ``(i, i + d/2)``; the first ``d/4`` pairs
  turn with the row at ``base^(-4k/d)``, the next ``d/4`` with the column on the same
  schedule (the schedule restarts per section). Base 10000: ``qwen2vl_merger``,
  ``qwen2.5vl_merger``, ``qwen2.5o``, ``qwen3vl_merger``, ``ling3vl``, ``glm4v``, ``glm5v``,
  ``exaone4_5``, ``paddleocr``, ``dots_ocr``, ``dots3note_v``.
- Pixtral's (``build_rope_2d`` with ``interleave_freq``): neighbouring channels of the first
  half turn with the row at ``base^(-4j/d)``, of the second half with the column at
  ``base^(-(4j+2)/d)``, on Q and K rows the converter permuted (``LlamaModel.permute``), which
  together is the model's halves with one schedule dealt to rows and columns. Base 10000:
  ``pixtral``, ``lightonocr``.
- MuseGlimmer's (``build_rope_2d`` without ``interleave_freq``, the column first): the first
  half turns with the column, the second with the row, each at ``base^(-4j/d)``, on rows the
  converter permuted back from transformers' layout: the model's halves. Base 10000:
  ``muse-glimmer``.
- One position per patch (``ggml_rope_ext``, NeoX pairs over the head): ``deepseekocr2``'s
  Qwen2 encoder, base 1000000, the patch's index in the sequence (compared as the first
  coordinate).

Other projector types are refused with a line that says so: their towers add learned position
embeddings or rotate in a way not modelled here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._io.files import FileError
from .._rope.plan import RopeLayer
from ._forms import Form
from ._subjects import FormSubject

__all__ = ["KNOWN", "PROJECTORS", "ClipRope", "clip_rope", "clip_subject"]


def _names(text: str) -> list[str]:
    return text.split()


@dataclass(frozen=True)
class _Graph:
    """How llama.cpp rotates one kind of tower: ``per_axis`` (Qwen-VL's vision mode),
    ``dealt`` (Pixtral's ``build_rope_2d``) or ``one_d``; the base written in its source."""

    kind: str
    base: float
    source: str
    axes: tuple[str, ...] = ("height", "width")  # the coordinates of the halves, in order


_QWEN = _Graph("per_axis", 10000.0, "ggml_rope_multi in vision mode")
_PIXTRAL = _Graph("dealt", 10000.0, "build_rope_2d with interleave_freq")

#: projector type -> the graph llama.cpp builds for its vision tower.
PROJECTORS: Mapping[str, _Graph] = {
    **dict.fromkeys(
        _names(
            "qwen2vl_merger qwen2.5vl_merger qwen2.5o qwen3vl_merger ling3vl glm4v glm5v exaone4_5 "
            "paddleocr dots_ocr dots3note_v"
        ),
        _QWEN,
    ),
    "pixtral": _PIXTRAL,
    "lightonocr": _PIXTRAL,
    "muse-glimmer": _Graph(
        "per_axis", 10000.0, "build_rope_2d, the column first", ("width", "height")
    ),
    "deepseekocr2": _Graph("one_d", 1000000.0, "ggml_rope_ext over the head (NeoX pairs)"),
}

#: Projector types llama.cpp knows whose towers are not modelled here (``PROJECTOR_TYPE_NAMES``
#: of ``clip-impl.h``): most add learned position embeddings, some rotate in a way of their own.
KNOWN = frozenset(
    _names(
        "mlp mlp_norm ldp ldpv2 resampler adapter step3vl gemma3 gemma3nv gemma3na gemma4v gemma4a "
        "gemma4uv gemma4ua phi4 idefics3 ultravox internvl llama4 qwen2a qwen3a glma voxtral "
        "meralion musicflamingo lfm2 kimivl cogvlm janus_pro dots3note_a deepseekocr deepseek4v "
        "lfm2a youtuvl yasa2 kimik25 nemotron_v2_vl hunyuanvl minicpmv4_6 granite_speech mimovl "
        "minimax_m3 granite4_vision mimo_audio parakeet qwen3tts_spkenc qwen3tts_gen "
        "pockettts_spkenc pockettts_gen"
    )
)


@dataclass(frozen=True)
class ClipRope:
    """The RoPE llama.cpp runs for the vision tower of an mmproj file."""

    projector: str
    graph: _Graph
    head_dim: int
    layers: int
    notes: tuple[str, ...]

    def form(self, axes: tuple[str, ...]) -> Form:
        """The form of every layer, its rows in the order of a plan layer's ``axes`` (each
        half of the head in the row of the coordinate llama.cpp turns it with; one row for a
        one-axis plan, every coordinate being the same position)."""
        d, base = self.head_dim, self.graph.base
        quarter = d // 4
        if self.graph.kind == "one_d":
            k = np.arange(d // 2, dtype=np.float64)
            return Form(np.power(base, -2.0 * k / d)[None, :], np.ones(d // 2), "half")
        j = np.arange(quarter, dtype=np.float64)
        shift = 2.0 if self.graph.kind == "dealt" else 0.0
        halves = [np.power(base, -4.0 * j / d), np.power(base, -(4.0 * j + shift) / d)]
        matrix = np.zeros((max(len(axes), 1), d // 2))
        for half, (name, omega) in enumerate(zip(self.graph.axes, halves, strict=True)):
            row = 0 if len(axes) <= 1 else axes.index(name) if name in axes else half
            matrix[row, half * quarter : (half + 1) * quarter] = omega
        return Form(matrix, np.ones(d // 2), "half")


def _count(meta: Mapping[str, Any], key: str, path: Any, required: bool = True) -> int:
    value = meta.get(key)
    if value is None and not required:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1 << 20:
        raise FileError(f"{path}: {key} must be a positive count, got {value!r}")
    return value


def clip_rope(meta: Mapping[str, Any], path: Any) -> ClipRope:
    """llama.cpp's reading of an mmproj file's vision tower (``clip_model_loader``)."""
    if not meta.get("clip.has_vision_encoder"):
        raise FileError(
            f"{path} is a clip (mmproj) file without a vision encoder (clip.has_vision_encoder "
            "is not true): there is no vision tower to audit"
        )
    projector = meta.get("clip.projector_type") or meta.get("clip.vision.projector_type")
    if not isinstance(projector, str) or not projector:
        raise FileError(f"{path}: clip.projector_type is missing: llama.cpp refuses the file")
    graph = PROJECTORS.get(projector)
    if graph is None:
        if projector in KNOWN:
            raise FileError(
                f"{path}: projector type {projector!r} is not audited: its vision tower adds "
                "learned position embeddings or rotates in a way the audit does not model (it "
                "models qwen2vl_merger, qwen2.5vl_merger, qwen3vl_merger, pixtral and the others "
                "docs/auditing.md lists)"
            )
        raise FileError(
            f"{path}: unknown projector type {projector!r}: llama.cpp's clip.cpp refuses it too"
        )
    embd = _count(meta, "clip.vision.embedding_length", path)
    heads = _count(meta, "clip.vision.attention.head_count", path)
    head_dim = _count(meta, "clip.vision.attention.head_dim", path, required=False)
    head_dim = head_dim or embd // heads
    layers = _count(meta, "clip.vision.block_count", path)
    if head_dim < 4 or head_dim % 4 or head_dim > 65536:
        raise FileError(
            f"{path}: the vision head size {head_dim} (embedding_length {embd} / head_count "
            f"{heads}) is not a multiple of 4: llama.cpp's 2-D RoPE needs one"
        )
    notes = [
        f"llama.cpp's clip.cpp rotates the {projector} tower with {graph.source} and base "
        f"{graph.base:g} written in its source: no key of the file sets them"
    ]
    if graph.kind == "dealt" or graph.axes[0] == "width":
        notes.append(
            "its halves turn in the normal mode (neighbouring channels) on Q and K rows the "
            "converter permuted: the model's halves"
        )
    if graph.kind == "one_d":
        notes.append(
            "one position per patch (its index in the sequence), compared as the first coordinate"
        )
    written = meta.get("clip.rope.freq_base")
    if isinstance(written, int | float) and float(written) != graph.base:
        notes.append(
            f"the file's clip.rope.freq_base {written:g} is not read by llama.cpp (it uses "
            f"{graph.base:g})"
        )
    return ClipRope(projector, graph, head_dim, layers, tuple(notes))


def clip_subject(meta: Mapping[str, Any], path: Any) -> FormSubject:
    """The subject of an mmproj file: the vision tower's RoPE per layer, in float64."""
    rope = clip_rope(meta, path)

    def forms(index: int | None, layer: RopeLayer, seq_len: int | None = None) -> Form:
        return rope.form(layer.axes)

    return FormSubject(
        forms,
        "float32",
        f"{path} ({rope.projector} vision projector)",
        "gguf",
        True,
        "float32 angles (llama.cpp's ggml rope)",
        rope.notes,
        pairs_known=True,
        axis_aware=True,
        exact_possible=False,
        layer_count=rope.layers,
        vision=True,
    )
