"""Artifacts built the way other stacks build them: tables in float32 angles (the common
recipe), vLLM's ``cos_sin_cache``, rotations ``(positions, q, k) -> (q, k)``, and GGUF files
written with the ``gguf`` package's writer as llama.cpp's converter writes them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc import rope_plan

_F = npt.NDArray[Any]


def plan_layer(config: dict[str, Any], layer_type: str | None = None) -> Any:
    return rope_plan(config).layer(layer_type)


def spread(values: _F, pairs: str) -> _F:
    """Per-pair values ``(P, n)`` in channels ``(P, 2n)`` for ``pairs``."""
    if pairs == "half":
        return np.concatenate([values, values], axis=-1)
    return np.repeat(values, 2, axis=-1)


def float32_tables(
    positions: Any, omega: Any, attention: float = 1.0, pairs: str = "half", dtype: Any = np.float32
) -> tuple[_F, _F]:
    """The common recipe: float32 frequencies times float32 positions, cos and sin in float32
    (then cast to ``dtype``): Hugging Face's rotary modules, and most stacks."""
    inv_freq = np.asarray(omega, dtype=np.float32)
    theta = np.asarray(positions, dtype=np.float32)[:, None] * inv_freq[None, :]
    att = np.float32(attention)
    cos = spread(np.cos(theta) * att, pairs).astype(dtype)
    sin = spread(np.sin(theta) * att, pairs).astype(dtype)
    return cos, sin


def exact_tables(
    positions: Any, omega: Any, attention: float = 1.0, pairs: str = "half"
) -> tuple[_F, _F]:
    theta = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(omega)[None, :]
    return spread(np.cos(theta) * attention, pairs), spread(np.sin(theta) * attention, pairs)


def vllm_cache(omega: Any, attention: float, max_positions: int) -> _F:
    """vLLM's ``cos_sin_cache``: row p = [cos of each pair | sin of each pair], float32."""
    inv_freq = np.asarray(omega, dtype=np.float32)
    theta = np.arange(max_positions, dtype=np.float32)[:, None] * inv_freq[None, :]
    att = np.float32(attention)
    return np.concatenate([np.cos(theta) * att, np.sin(theta) * att], axis=1)


def rotation(omega: Any, attention: float = 1.0, pairs: str = "half", sign: float = 1.0) -> Any:
    """A ``(positions, q, k) -> (q, k)`` rotation with float32 angles; q, k ``(P, H, D)``;
    channels past the rotated ones pass through."""
    omega = np.asarray(omega, dtype=np.float32)
    n = omega.size

    def rotate(x: _F, cos: _F, sin: _F) -> _F:
        out = x.copy()
        if pairs == "half":
            a, b = x[..., :n], x[..., n : 2 * n]
            out[..., :n] = a * cos - b * sin
            out[..., n : 2 * n] = b * cos + a * sin
        else:
            a, b = x[..., 0 : 2 * n : 2], x[..., 1 : 2 * n : 2]
            out[..., 0 : 2 * n : 2] = a * cos - b * sin
            out[..., 1 : 2 * n : 2] = b * cos + a * sin
        return out

    def apply(positions: _F, q: _F, k: _F) -> tuple[_F, _F]:
        theta = np.asarray(positions, dtype=np.float32)[:, None] * omega[None, :]
        cos = (np.cos(theta) * np.float32(attention))[:, None, :]
        sin = (sign * np.sin(theta) * np.float32(attention))[:, None, :]
        return rotate(q, cos, sin), rotate(k, cos, sin)

    return apply


# --------------------------------------------------------------------------- GGUF


def write_gguf(
    path: Path,
    arch: str,
    *,
    layers: int,
    heads: int,
    embd: int,
    context: int,
    rope: dict[str, Any],
    tensors: dict[str, Any] | None = None,
    extra: Any = None,
) -> Path:
    """A GGUF file as llama.cpp's converter writes one (metadata and the rope tensors; a small
    token embedding stands for the weights)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(layers)
    writer.add_context_length(context)
    writer.add_embedding_length(embd)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    for name, value in rope.items():
        getattr(writer, f"add_{name}")(value)
    if extra is not None:
        extra(writer)
    writer.add_tensor("token_embd.weight", np.zeros((4, embd), dtype=np.float32))
    for name, value in (tensors or {}).items():
        writer.add_tensor(name, np.asarray(value, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def llama3_rope_freqs(config: dict[str, Any]) -> _F:
    """``rope_freqs`` as llama.cpp's converter computes it from a Llama 3 config (float32)."""
    scaling = config["rope_scaling"]
    base = config["rope_theta"]
    dim = config["hidden_size"] // config["num_attention_heads"]
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


def save_safetensors(path: Path, arrays: dict[str, tuple[Any, str]]) -> Path:
    """A ``.safetensors`` file of ``{name: (array, "F32" | "BF16")}``, written by hand (bfloat16
    as the top 16 bits of each float32, rounded to nearest even), as torch saves it."""
    import json
    import struct

    header: dict[str, Any] = {}
    blobs = []
    offset = 0
    for name, (array, code) in arrays.items():
        values = np.ascontiguousarray(array, dtype=np.float32)
        if code == "BF16":
            bits = values.view(np.uint32).astype(np.uint64)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            blob = rounded.astype("<u2").tobytes()
        else:
            blob = values.astype("<f4").tobytes()
        header[name] = {"dtype": code, "shape": list(values.shape),
                        "data_offsets": [offset, offset + len(blob)]}  # fmt: skip
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return path


def write_mmproj(
    path: Path,
    projector: str,
    *,
    embd: int,
    heads: int,
    layers: int,
    vision: bool = True,
    extra: Any = None,
) -> Path:
    """A vision projector (mmproj) file as llama.cpp's converter writes one (``MmprojModel``:
    architecture ``clip``, the tower's sizes under ``clip.vision.*``; a small patch embedding
    stands for the weights)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_type(gguf.GGUFType.MMPROJ)
    writer.add_clip_has_vision_encoder(vision)
    writer.add_clip_projector_type(projector)
    writer.add_vision_projection_dim(2 * embd)
    writer.add_vision_image_size(560)
    writer.add_vision_patch_size(14)
    writer.add_vision_embedding_length(embd)
    writer.add_vision_feed_forward_length(4 * embd)
    writer.add_vision_block_count(layers)
    writer.add_vision_head_count(heads)
    writer.add_vision_image_mean([0.5, 0.5, 0.5])
    writer.add_vision_image_std([0.5, 0.5, 0.5])
    if extra is not None:
        extra(writer)
    writer.add_tensor("v.patch_embd.weight", np.zeros((4, embd), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
