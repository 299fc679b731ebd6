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


# --------------------------------------------------------------------------- ggml's vision RoPE


def _ggml_pairs(x: _F, theta: _F, first: Any, second: Any) -> _F:
    """Rotate channels ``first`` with ``second`` by float32 angles ``theta`` ``(P, n)``, as
    ggml's ``rotate_pairs`` does (cos and sin in float32)."""
    cos = np.cos(theta.astype(np.float32))[:, None, :]
    sin = np.sin(theta.astype(np.float32))[:, None, :]
    out = x.copy()
    a, b = x[..., first], x[..., second]
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out


def _running(start: _F, scale: np.float32, count: int) -> _F:
    """ggml's angles: ``theta = p`` then ``theta *= theta_scale`` pair after pair, in float32."""
    theta = np.empty((start.shape[0], count), dtype=np.float32)
    value = start.astype(np.float32)
    for k in range(count):
        theta[:, k] = value
        value = (value * scale).astype(np.float32)
    return theta


def ggml_vision_mode(head_dim: int, base: float) -> Any:
    """``ggml_rope_multi`` in ``GGML_ROPE_TYPE_VISION`` mode as clip.cpp calls it for Qwen-VL
    (``n_dims = d/2``, sections ``d/4`` each, positions ``[y, x, y, x]``): a rotation
    ``(positions (P, 2) as (row, column), q, k) -> (q, k)`` on the model's own channels."""
    quarter, half = head_dim // 4, head_dim // 2
    scale = np.float32(base) ** np.float32(-2.0 / half)

    def apply(positions: _F, q: _F, k: _F) -> tuple[_F, _F]:
        rows, cols = positions[:, 0], positions[:, 1]
        theta = np.concatenate(
            [_running(rows, scale, quarter), _running(cols, scale, quarter)], axis=1
        )  # each section restarts its running product (indep_sects)
        turn = slice(0, half), slice(half, head_dim)  # rotate_pairs(ne0, n_dims): (i, i + d/2)
        return _ggml_pairs(q, theta, *turn), _ggml_pairs(k, theta, *turn)

    return apply


def ggml_rope_2d(head_dim: int, base: float, interleave_freq: bool, first: int) -> Any:
    """clip.cpp's ``build_rope_2d``: two normal-mode ropes of ``d/2`` channels (neighbours),
    the first half with coordinate ``first`` of ``positions`` ``(P, 2)`` (in the order of the
    plan's axes: Pixtral's (row, column), MuseGlimmer's (column, row)), the second with the
    other, its frequencies times ``base^(-2/d)`` when ``interleave_freq``; run on Q and K rows
    permuted as the converter permutes them (``LlamaModel.permute``: row ``2i`` <- ``i``,
    ``2i + 1`` <- ``i + d/2``) and permuted back, so the rotation acts on the model's own
    channels."""
    half, quarter = head_dim // 2, head_dim // 4
    scale = np.float32(base) ** np.float32(-2.0 / half)
    odd = np.float32(base) ** np.float32(-2.0 / head_dim) if interleave_freq else np.float32(1)
    order = np.stack([np.arange(half), np.arange(half) + half], axis=1).reshape(-1)

    def apply(positions: _F, q: _F, k: _F) -> tuple[_F, _F]:
        a, b = positions[:, first], positions[:, 1 - first]
        theta_a = _running(a, scale, quarter)
        theta_b = (odd * _running(b, scale, quarter)).astype(np.float32)  # freq_scale

        def turn(x: _F) -> _F:
            y = x[..., order]  # the converter's rows
            y = _ggml_pairs(y, theta_a, slice(0, half, 2), slice(1, half, 2))
            y = _ggml_pairs(y, theta_b, slice(half, head_dim, 2), slice(half + 1, head_dim, 2))
            out = np.empty_like(x)
            out[..., order] = y
            return out

        return turn(q), turn(k)

    return apply
