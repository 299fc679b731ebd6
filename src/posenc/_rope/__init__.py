"""Rotary position embeddings (RoPE), one file per stage.

- ``scaling``: one record per ``rope_type`` (its keys, checks and frequency transform),
  :class:`RopeScaling` and :func:`rope_frequencies`; ``scaling_families``: the types one
  model family defines (``proportional``, ``ntk_alpha``).
- ``rotary``: 1-D tables (:func:`rotary_cos_sin`), the rotated dimension and the NumPy
  :func:`apply_rotary`.
- ``multi_axis``: tokens with several coordinates: the frequency matrix and its tables.
- ``config``: reading a Hugging Face config in all its spellings.
- ``plan``: the per-layer plan (:func:`rope_plan`); ``models``: what model code decides and
  configs do not say (pair layouts, notes); ``axes``: the axes of multi-axis layers.
"""
