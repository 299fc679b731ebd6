"""Audit another stack's RoPE against the plan of the config it claims to implement.

:func:`audit` reads a Hugging Face config's plan (:func:`posenc.rope_plan`, per layer and
axis) and a subject: a GGUF file (the RoPE llama.cpp builds from its metadata and rope
tensors), an ONNX model (its ``RotaryEmbedding`` nodes' caches), arrays dumped from anywhere
(``cos``/``sin``/``position_ids``, an ``inv_freq``, a ``cos_sin_cache``), or a Python callable
or object (``positions -> (cos, sin)``, a rotation ``(positions, q, k) -> (q, k)`` probed with
basis vectors, vLLM's and SGLang's rotary objects, Hugging Face's rotary modules and whole
transformers models). It compares the subject's cos and sin with the exact float64 tables at
probe positions from 0 to 2**20, per layer: ``exact`` (within one unit in the last place of the
subject's dtype), within float32 angles' error (the bound named in the report), or wrong, and
for a wrong layer says what differs in words and where it first differs; a multi-axis layer
(M-RoPE, 2-D RoPE) gets that verdict per axis too.

:func:`assert_rope_matches` is the same as one assertion for another project's tests.

Optional packages are imported only when a subject needs them (``gguf`` for GGUF files,
``onnx`` for ONNX models: the ``audit`` extra).
"""

from ._assert import assert_rope_matches
from ._audit import MAX_POSITIONS, audit
from ._report import SCHEMA_VERSION, AuditReport, AxisFinding, Difference, LayerFinding

__all__ = [
    "MAX_POSITIONS",
    "SCHEMA_VERSION",
    "AuditReport",
    "AxisFinding",
    "Difference",
    "LayerFinding",
    "assert_rope_matches",
    "audit",
]
