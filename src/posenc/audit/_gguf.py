"""A GGUF file as an audit subject: the RoPE llama.cpp builds from its metadata.

A GGUF file stores no tables: llama.cpp computes them from metadata keys (names from the
``gguf`` package's ``Keys``) and, for two scalings, small tensors:

- ``{arch}.rope.freq_base`` (10000 when absent), ``.rope.dimension_count`` (the rotated
  channels; default the key length), ``.rope.scaling.type`` (``none``, ``linear``, ``yarn``,
  ``longrope``), ``.rope.scaling.factor``, ``.rope.scaling.original_context_length``,
  ``.rope.scaling.attn_factor``, ``.rope.scaling.yarn_beta_fast`` / ``_slow``,
  ``.rope.scaling.yarn_log_multiplier``, ``.rope.dimension_sections`` (M-RoPE), and for
  sliding-window layers ``.rope.freq_base_swa`` and ``.attention.sliding_window_pattern``;
- ``rope_freqs`` (Llama 3's per-pair factors, which llama.cpp divides the frequencies by) and
  ``rope_factors_long`` / ``rope_factors_short`` (LongRoPE's).

Frequencies follow ggml's rope: pair ``k`` turns by ``p·base^(-2k/n_rot) / f_k``; with YaRN the
interpolated ``freq_scale·ω`` and the original ``ω`` are mixed by a ramp over the pairs between
the floor and the ceiling of the correction dimensions (llama.cpp always rounds them to whole
pairs, which is how a config's ``truncate: false`` is lost), and cos and sin are multiplied by
``(1 + 0.1·ln factor)·attn_factor``.

The pair layout is not stored either: llama.cpp derives a rope mode from
``general.architecture`` (``llama_model_rope_type``): "normal" mode pairs neighbouring channels,
"neox" mode pairs halves. For the Llama family, the converter permutes the rows of Q and K so
that the normal mode on the permuted rows is the model's own halves; that permutation is part
of the convention, and such a file pairs halves.

The file is read without the ``gguf`` package's reader (which parses every key, the tokenizer's
hundreds of thousands of strings included, and trusts the counts it reads): every count and
length is checked against the bytes left before it is used, the file is memory-mapped, and only
the metadata and the rope tensors (a few hundred float32 numbers) are read.
"""

from __future__ import annotations

import math
import mmap
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._features import PairLayout
from .._io.files import FileError, check_regular_file
from .._rope.plan import RopeLayer
from ._forms import Form
from ._subjects import FormSubject

_F64 = npt.NDArray[np.float64]

_MAGIC = b"GGUF"
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
            11: "<q", 12: "<d"}  # fmt: skip
_STRING, _ARRAY = 8, 9
_MAX_KEEP = 4096  # longest array value kept (sections, per-layer patterns)
#: The most strings one array may hold (tokenizers hold a few hundred thousand): each is
#: walked in Python, so a file declaring more is refused rather than read for minutes.
MAX_STRINGS = 2**22
_ROPE_TENSORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")
_MAX_ROPE_ELEMENTS = 65536


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: llama.cpp's "normal" rope mode (neighbouring channels), by ``general.architecture``.
NORMAL_MODE = _names(
    "llama llada llama4 deci baichuan starcoder internlm2 minicpm xverse command-r cohere2 "
    "cohere2moe olmo arctic deepseek deepseek2 deepseek32 plm chatglm granite granitemoe "
    "granitehybrid chameleon bailingmoe smollm3 arcee ernie4_5 ernie4_5-moe mistral3 nanbeige "
    "llama-embed"
)
#: Of those, the architectures whose converter permutes Q and K (``undo_permute``), so that the
#: normal mode reproduces the model's halves.
PERMUTED = _names(
    "llama deci baichuan internlm2 minicpm xverse olmo arctic deepseek granite granitemoe "
    "chameleon bailingmoe smollm3 arcee nanbeige"
)
#: M-RoPE architectures: sectioned (``qwen2vl``) or interleaved sections (``qwen3vl``).
MROPE = {"qwen2vl": "sectioned", "qwen3vl": "interleaved", "qwen3vlmoe": "interleaved"}
#: Architectures without RoPE.
NO_ROPE = _names("gpt2 gptj mpt refact bloom mamba mamba2 t5 t5encoder jais rwkv6 rwkv7")
#: The default sliding-window pattern llama.cpp gives an architecture (layer il is a sliding
#: layer when il % n < n - 1), and whether its sliding layers keep the scaling.
SWA_PATTERN = {"gemma3": (6, False), "gpt-oss": (2, True)}


@dataclass(frozen=True)
class GGUFInfo:
    """What was read: the metadata values kept, the rope tensors, the tensor count."""

    path: Path
    metadata: Mapping[str, Any]
    rope_tensors: Mapping[str, _F64]
    tensor_count: int


class _Reader:
    """Bounded reads from a memory map: every read checks the bytes left."""

    def __init__(self, data: Any, path: Path) -> None:
        self.data, self.path, self.offset, self.size = data, path, 0, len(data)

    def need(self, count: int, what: str) -> None:
        if count < 0 or self.offset + count > self.size:
            raise FileError(
                f"{self.path} is truncated or corrupt: {what} needs {count:,} bytes at offset "
                f"{self.offset:,}, the file holds {self.size:,}"
            )

    def unpack(self, fmt: str, what: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size, what)
        (value,) = struct.unpack_from(fmt, self.data, self.offset)
        self.offset += size
        return value

    def string(self, what: str) -> str:
        length = self.unpack("<Q", what)
        self.need(length, what)
        raw = bytes(self.data[self.offset : self.offset + length])
        self.offset += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FileError(f"{self.path}: {what} is not UTF-8") from None

    def skip_strings(self, count: int, what: str) -> None:
        self.need(8 * count, what)  # every string has at least its 8-byte length
        data, offset, size = self.data, self.offset, self.size
        for _ in range(count):
            if offset + 8 > size:
                self.offset = offset
                self.need(8, what)
            (length,) = struct.unpack_from("<Q", data, offset)
            offset += 8 + length
        self.offset = offset
        self.need(0, what)

    def value(self, kind: int, key: str) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind], f"the value of {key}")
        if kind == _STRING:
            return self.string(f"the value of {key}")
        if kind != _ARRAY:
            raise FileError(f"{self.path}: {key} has unknown value type {kind}")
        item = self.unpack("<I", f"the array type of {key}")
        count = self.unpack("<Q", f"the array length of {key}")
        if item == _STRING:
            if count > MAX_STRINGS:
                raise FileError(
                    f"{self.path}: {key} declares {count:,} strings, more than the "
                    f"{MAX_STRINGS:,} a GGUF reader here walks"
                )
            self.skip_strings(count, f"the strings of {key}")
            return None
        if item not in _SCALARS:
            raise FileError(f"{self.path}: {key} is an array of unknown type {item}")
        size = struct.calcsize(_SCALARS[item])
        self.need(size * count, f"the {count:,} values of {key}")
        values = None
        if count <= _MAX_KEEP:
            fmt = "<" + _SCALARS[item][1:] * count
            values = list(struct.unpack_from(fmt, self.data, self.offset))
        self.offset += size * count
        return values


def read_gguf(path: Path) -> GGUFInfo:
    """The metadata and rope tensors of a GGUF file, every size checked before it is used."""
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError:
        raise ImportError(
            "reading .gguf files needs the gguf package: pip install gguf (or, from a clone of "
            "posenc, pip install '.[audit]')"
        ) from None

    check_regular_file(path, expected="a .gguf file")
    size = path.stat().st_size
    if size < 24:
        raise FileError(f"{path} is too short for a GGUF file ({size} bytes)")
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        reader = _Reader(data, path)
        if bytes(data[:4]) != _MAGIC:
            raise FileError(f"{path} is not a GGUF file (it does not start with 'GGUF')")
        reader.offset = 4
        version = reader.unpack("<I", "the version")
        if version not in (2, 3):
            raise FileError(f"{path}: GGUF version {version}, expected 2 or 3")
        tensors = reader.unpack("<Q", "the tensor count")
        kv_count = reader.unpack("<Q", "the key count")
        reader.need(kv_count * 12 + tensors * 24, f"{kv_count:,} keys and {tensors:,} tensors")
        metadata: dict[str, Any] = {}
        for _ in range(kv_count):
            key = reader.string("a key")
            kind = reader.unpack("<I", f"the type of {key}")
            metadata[key] = reader.value(kind, key)
        infos = []
        for _ in range(tensors):
            name = reader.string("a tensor name")
            dims = reader.unpack("<I", f"the dimension count of {name}")
            if dims > 8:
                raise FileError(f"{path}: tensor {name} declares {dims} dimensions (at most 8)")
            shape = [reader.unpack("<Q", f"the shape of {name}") for _ in range(dims)]
            code = reader.unpack("<I", f"the type of {name}")
            offset = reader.unpack("<Q", f"the offset of {name}")
            infos.append((name, shape, code, offset))
        alignment = metadata.get("general.alignment", 32)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise FileError(f"{path}: general.alignment {alignment!r} is not a power of two")
        start = -(-reader.offset // alignment) * alignment
        rope: dict[str, _F64] = {}
        for name, shape, code, offset in infos:
            try:
                block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(code)]
            except (ValueError, KeyError):
                raise FileError(f"{path}: tensor {name} has unknown type {code}") from None
            elements = math.prod(shape)
            nbytes = elements // block * type_size
            if start + offset + nbytes > size:
                raise FileError(
                    f"{path} is truncated: tensor {name} ({' x '.join(map(str, shape))}) "
                    f"needs bytes up to {start + offset + nbytes:,}, the file holds {size:,}"
                )
            if name in _ROPE_TENSORS:
                rope[name.removesuffix(".weight")] = _rope_tensor(
                    data, path, name, shape, code, start + offset
                )
    return GGUFInfo(path, metadata, rope, tensors)


def _rope_tensor(data: Any, path: Path, name: str, shape: list[int], code: int, at: int) -> _F64:
    elements = math.prod(shape)
    if len(shape) != 1 or elements > _MAX_ROPE_ELEMENTS:
        raise FileError(f"{path}: {name} must be one row of per-pair factors, got shape {shape}")
    dtype = {0: "<f4", 1: "<f2"}.get(code)
    if dtype is None:
        raise FileError(f"{path}: {name} must be float32 or float16, got type {code}")
    values = np.frombuffer(data, dtype=dtype, count=elements, offset=at).astype(np.float64)
    if not np.isfinite(values).all() or (values <= 0).any():
        raise FileError(f"{path}: {name} holds non-positive or non-finite factors")
    return values


# --------------------------------------------------------------------------- llama.cpp's RoPE


def _get_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0


@dataclass(frozen=True)
class GGUFRope:
    """The RoPE llama.cpp runs for a GGUF file, per layer."""

    arch: str
    layers: int
    n_rot: int
    n_rot_swa: int
    base: float
    base_swa: float
    scaling: str
    factor: float
    original: int
    attn_factor: float
    beta_fast: float
    beta_slow: float
    log_mul: float
    sections: tuple[int, ...]
    swa: tuple[bool, ...]
    swa_scaled: bool
    no_rope_step: int
    pairs: PairLayout
    rope_freqs: _F64 | None
    long: _F64 | None
    short: _F64 | None
    notes: tuple[str, ...]

    def form(self, index: int | None, seq_len: int | None, n_axes: int) -> Form | None:
        """The form of layer ``index`` (the first layer when None); None without RoPE."""
        if self.arch in NO_ROPE:
            return None
        il = 0 if index is None else index
        if self.no_rope_step and (il + 1) % self.no_rope_step == 0:
            return None  # llama.cpp's use_rope is false on these layers
        swa = il < len(self.swa) and self.swa[il]
        base = self.base_swa if swa else self.base
        dims = self.n_rot_swa if swa else self.n_rot
        freq_scale = 1.0 / self.factor if self.factor > 0 else 1.0
        if self.scaling == "none" or (swa and not self.swa_scaled):
            freq_scale = 1.0
        k = np.arange(dims // 2, dtype=np.float64)
        omega = np.power(base, -2.0 * k / dims)
        factors = self.rope_freqs
        if factors is None and self.long is not None and self.short is not None:
            use_long = seq_len is not None and seq_len > self.original
            factors = self.long if use_long else self.short
        if factors is not None:
            if factors.size != omega.size:
                raise FileError(
                    f"the rope factors hold {factors.size} values, the layer rotates "
                    f"{omega.size} pairs (dimension_count {dims})"
                )
            omega = omega / factors
        attention = 1.0
        interp = freq_scale * omega
        if self.scaling == "yarn":
            low = max(0.0, math.floor(_corr_dim(dims, self.original, self.beta_fast, base)))
            high = min(dims - 1.0, math.ceil(_corr_dim(dims, self.original, self.beta_slow, base)))
            y = (k - low) / max(0.001, high - low)
            mix = 1.0 - np.clip(y, 0.0, 1.0)
            omega = interp * (1.0 - mix) + omega * mix
            big = self.factor if self.factor > 0 else 1.0
            if self.log_mul:
                yarn = _get_mscale(big, 1.0) / _get_mscale(big, self.log_mul)
            else:
                yarn = _get_mscale(big, 1.0)
            yarn /= 1.0 + 0.1 * math.log(big)
            attention = yarn * (1.0 + 0.1 * math.log(1.0 / freq_scale))
        else:
            omega = interp
        attention *= self.attn_factor
        n = omega.size
        if not any(self.sections) or n_axes == 1:
            return Form(omega[None, :], np.full(n, attention), self.pairs)
        return Form(self._matrix(omega, n_axes), np.full(n, attention), self.pairs)

    def _matrix(self, omega: _F64, n_axes: int) -> _F64:
        """Pair ``k``'s frequency on the axis llama.cpp's M-RoPE gives it (sections of pairs
        t, h, w, e; or in turns for the interleaved mode)."""
        matrix = np.zeros((n_axes, omega.size))
        sections = list(self.sections[:n_axes])
        if MROPE.get(self.arch) == "interleaved":
            for k in range(omega.size):
                axis = k % 3 if k % 3 < n_axes and k < 3 * sections[k % 3] else 0
                matrix[axis, k] = omega[k]
            return matrix
        k = 0
        for axis, count in enumerate(sections):
            matrix[axis, k : k + count] = omega[k : k + count]
            k += count
        matrix[0, k:] = omega[k:]
        return matrix


def _corr_dim(dims: int, original: int, rotations: float, base: float) -> float:
    return dims * math.log(original / (rotations * 2.0 * math.pi)) / (2.0 * math.log(base))


def _number(meta: Mapping[str, Any], key: str, default: float) -> float:
    value = meta.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FileError(f"{key} must be a number, got {value!r}")
    return float(value)


def gguf_rope(info: GGUFInfo) -> GGUFRope:
    """llama.cpp's reading of the rope metadata (``llama_model::load_hparams``)."""
    meta = info.metadata
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise FileError(f"{info.path} has no general.architecture: not a model file")
    a = f"{arch}."
    layers = int(_number(meta, a + "block_count", 0))
    heads = meta.get(a + "attention.head_count", 0)
    heads = heads[0] if isinstance(heads, list) and heads else heads
    embd = int(_number(meta, a + "embedding_length", 0))
    key_length = int(_number(meta, a + "attention.key_length", embd // heads if heads else 0))
    n_rot = int(_number(meta, a + "rope.dimension_count", key_length))
    n_rot_swa = int(_number(meta, a + "rope.dimension_count_swa", n_rot))
    if n_rot < 2 or n_rot % 2 or n_rot > 65536:
        raise FileError(
            f"{info.path}: rope.dimension_count {n_rot} is not an even count of channels"
        )
    base = _number(meta, a + "rope.freq_base", 10000.0)
    pattern, swa_scaled = SWA_PATTERN.get(arch, (0, False))
    base_swa = _number(meta, a + "rope.freq_base_swa", base if swa_scaled else 10000.0)
    scaling = meta.get(a + "rope.scaling.type", "linear")
    factor = _number(meta, a + "rope.scaling.factor", _number(meta, a + "rope.scale_linear", 0.0))
    context = int(_number(meta, a + "context_length", 0))
    original = int(_number(meta, a + "rope.scaling.original_context_length", context))
    sections_value = meta.get(a + "rope.dimension_sections") or []
    sections = tuple(int(s) for s in sections_value)
    swa = _swa_layers(meta, a, layers, pattern)
    notes = []
    if arch in NORMAL_MODE:
        if arch in PERMUTED:
            pairs: PairLayout = "half"
            notes.append(
                f"llama.cpp rotates {arch} in its normal mode (neighbouring channels) on Q and K "
                "rows the converter permuted: the model's halves"
            )
        else:
            pairs = "interleaved"
            notes.append(f"llama.cpp rotates {arch} in its normal mode: neighbouring channels")
    else:
        pairs = "half"
    if "rope_factors_long" in info.rope_tensors:
        notes.append(
            "llama.cpp chooses the long or short factors by the context size; compared here by "
            "the sequence length, as Hugging Face does"
        )
    return GGUFRope(
        arch=arch,
        layers=layers,
        n_rot=n_rot,
        n_rot_swa=n_rot_swa,
        base=base,
        base_swa=base_swa,
        scaling=str(scaling),
        factor=factor,
        original=original or context,
        attn_factor=_number(meta, a + "rope.scaling.attn_factor", 1.0),
        beta_fast=_number(meta, a + "rope.scaling.yarn_beta_fast", 32.0),
        beta_slow=_number(meta, a + "rope.scaling.yarn_beta_slow", 1.0),
        log_mul=_number(meta, a + "rope.scaling.yarn_log_multiplier", 0.0),
        sections=sections,
        swa=swa,
        swa_scaled=swa_scaled,
        no_rope_step=_no_rope_step(meta, arch, layers),
        pairs=pairs,
        rope_freqs=info.rope_tensors.get("rope_freqs"),
        long=info.rope_tensors.get("rope_factors_long"),
        short=info.rope_tensors.get("rope_factors_short"),
        notes=tuple(notes),
    )


def _no_rope_step(meta: Mapping[str, Any], arch: str, layers: int) -> int:
    """llama.cpp's ``n_no_rope_layer_step``: layer ``il`` has no RoPE when ``(il + 1) % step ==
    0`` (SmolLM3: every fourth layer; Llama 4: every fourth, unless its sliding window is 0);
    0 for the architectures that rotate every layer."""
    if arch == "smollm3":
        return 4
    if arch == "llama4":
        window = meta.get(f"{arch}.attention.sliding_window")
        return layers if window == 0 else 4
    return 0


def _swa_layers(meta: Mapping[str, Any], a: str, layers: int, pattern: int) -> tuple[bool, ...]:
    value = meta.get(a + "attention.sliding_window_pattern")
    if isinstance(value, list):
        return tuple(bool(v) for v in value[:layers])
    if isinstance(value, int) and not isinstance(value, bool):
        pattern = value
    if not pattern or layers > 1 << 20:
        return ()
    if a == "gemma3." and not meta.get(a + "attention.sliding_window"):
        return ()
    return tuple(pattern == 0 or il % pattern < pattern - 1 for il in range(layers))


def gguf_subject(path: Path) -> FormSubject:
    """The subject of a GGUF file: llama.cpp's RoPE of each layer, evaluated in float64 (of
    its vision tower for an mmproj file, ``general.architecture`` ``clip``)."""
    info = read_gguf(path)
    if info.metadata.get("general.architecture") == "clip":
        from ._gguf_clip import clip_subject

        return clip_subject(info.metadata, path)
    rope = gguf_rope(info)

    def forms(index: int | None, layer: RopeLayer, seq_len: int | None = None) -> Form | None:
        return rope.form(index, seq_len, max(len(layer.axes), 1))

    return FormSubject(
        forms,
        "float32",
        f"{path} ({rope.arch})",
        "gguf",
        True,
        "float32 angles (llama.cpp's ggml rope)",
        rope.notes,
        pairs_known=True,
        axis_aware=True,
        exact_possible=False,
        layer_count=rope.layers or None,
    )
