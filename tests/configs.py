"""Hugging Face ``config.json`` contents that several test files read, as plain dicts.

A config that only one test file uses stays in that file.
"""

from __future__ import annotations

# Llama 3.1's rope_scaling: rope_type "llama3", factor 8 over an original 8192-token context.
LLAMA3_ROPE_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}

# The same in the transformers v5 spelling of rope_parameters: the base inside the dict.
LLAMA3_ROPE_PARAMETERS = {**LLAMA3_ROPE_SCALING, "rope_theta": 500000.0}

# Llama 3.1 (four layers), in the transformers v4 spelling: rope_theta beside rope_scaling.
LLAMA3 = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_hidden_layers": 4,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": LLAMA3_ROPE_SCALING,
}

# Gemma 3 text (five sliding layers, then one full), in the transformers v5 spelling:
# rope_parameters by layer type.
GEMMA3 = {
    "model_type": "gemma3_text",
    "head_dim": 16,
    "num_hidden_layers": 6,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
}

#: RoPE scaling dicts as configs write them
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
LONGROPE = {
    "rope_type": "longrope",
    "short_factor": [1.0, 1.5, 2.0, 3.0],
    "long_factor": [2.0, 4.0, 8.0, 16.0],
    "original_max_position_embeddings": 512,
    "factor": 8.0,
}
DYNAMIC = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 512}
