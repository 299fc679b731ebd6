"""Tiny Hugging Face configs of the models the audit tests cover (the shapes of the real ones,
few layers and small heads so that every table is small)."""

from __future__ import annotations

from typing import Any

from tests.configs import GEMMA3, LLAMA3

__all__ = [
    "GEMMA3",
    "GPT_OSS",
    "LLAMA3",
    "PARTIAL",
    "PHI3",
    "QWEN2_VL",
    "QWEN2_VL_HEAD128",
    "QWEN3_5",
    "QWEN25_YARN",
    "SMOLLM3",
]

# Qwen2.5 with YaRN (the model card's rope_scaling): factor 4 over 32768 positions.
QWEN25_YARN: dict[str, Any] = {
    "model_type": "qwen2",
    "hidden_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
}

# Phi-3 mini 128k: LongRoPE with per-pair short and long factors (head_dim 16: 8 pairs).
PHI3: dict[str, Any] = {
    "model_type": "phi3",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {
        "type": "longrope",
        "short_factor": [1.0, 1.02, 1.05, 1.1, 1.2, 1.5, 2.0, 3.0],
        "long_factor": [1.0, 1.5, 2.5, 4.0, 8.0, 16.0, 32.0, 48.0],
    },
}

# Qwen2-VL: M-RoPE, sections of temporal, height and width pairs (head_dim 64: 32 pairs).
QWEN2_VL: dict[str, Any] = {
    "model_type": "qwen2_vl",
    "hidden_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
}

# Qwen2-VL with its own head: head_dim 128, sections [16, 24, 24] (64 pairs).
QWEN2_VL_HEAD128: dict[str, Any] = {
    **QWEN2_VL,
    "hidden_size": 256,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
}

# Qwen3.5 (config.json's nesting): three linear-attention layers, then one full-attention layer
# with interleaved M-RoPE [11, 11, 10] over the first quarter of its 256-channel head.
QWEN3_5: dict[str, Any] = {
    "model_type": "qwen3_5",
    "text_config": {
        "model_type": "qwen3_5_text",
        "hidden_size": 64,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "full_attention_interval": 4,
        "max_position_embeddings": 262144,
        "intermediate_size": 32,
        "vocab_size": 16,
        "linear_num_value_heads": 2,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000000.0,
            "mrope_section": [11, 11, 10],
            "mrope_interleaved": True,
            "partial_rotary_factor": 0.25,
        },
    },
}

# GPT-OSS: YaRN factor 32 without truncation, sliding and full layers alike.
GPT_OSS: dict[str, Any] = {
    "model_type": "gpt_oss",
    "hidden_size": 128,
    "head_dim": 64,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "full_attention"],
    "max_position_embeddings": 131072,
    "rope_theta": 150000.0,
    "rope_scaling": {
        "rope_type": "yarn",
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": False,
    },
}

# A partial rotary model (Phi-2's form): half of each 64-channel head rotates.
PARTIAL: dict[str, Any] = {
    "model_type": "phi",
    "hidden_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "max_position_embeddings": 2048,
    "partial_rotary_factor": 0.5,
    "rope_theta": 10000.0,
}

# SmolLM3: every fourth layer without RoPE (no_rope_layers).
SMOLLM3: dict[str, Any] = {
    "model_type": "smollm3",
    "hidden_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 4,
    "no_rope_layers": [1, 1, 1, 0],
    "max_position_embeddings": 65536,
    "rope_theta": 5000000.0,
}
