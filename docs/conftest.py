"""The docs' examples run as doctests; pages that need an optional package skip without it."""

from __future__ import annotations

import importlib.util

import pytest

# page → the optional packages its examples import
_NEEDS = {
    "tutorial.md": ("torch",),
    "attention-biases.md": ("torch", "matplotlib"),
    "precision.md": ("torch",),
    "integration.md": ("torch", "transformers"),
    "multi-axis.md": ("torch",),
    "deploying.md": ("torch", "onnx", "onnxscript", "onnxruntime"),
    "porting.md": ("torch", "transformers"),
    "auditing.md": ("gguf", "onnx", "torch", "transformers"),
    "jax.md": ("jax", "flax"),
    "coming-from.md": ("torch", "positional_encodings", "rotary_embedding_torch", "transformers"),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        missing = [
            name
            for name in _NEEDS.get(item.path.name, ())
            if importlib.util.find_spec(name) is None
        ]
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(missing)}"))
