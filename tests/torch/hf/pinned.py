"""What the pinned transformers release has, so that a run under another release can tell a
regression (something the pinned release has, covered before, no longer is) from a gap of the
new release (a model type or rotary class it adds that posenc does not cover yet).

``pinned_transformers.json`` lists the causal LM model types, the model directories with a
rotary class and those with an attention bias of the release ``requirements-dev.txt`` pins; a
test run under that release checks that the lists are still exact
(tests/torch/hf/test_rope_coverage.py, test_swap_sweep.py, test_swap_bias_sweep.py).
"""

from __future__ import annotations

import json
from pathlib import Path

_DATA = json.loads(Path(__file__).with_name("pinned_transformers.json").read_text("utf-8"))

#: The transformers release requirements-dev.txt pins (tests/docs/test_support.py reads the pin).
VERSION: str = _DATA["transformers"]
CAUSAL_LM_MODEL_TYPES: frozenset[str] = frozenset(_DATA["causal_lm_model_types"])
ROTARY_DIRECTORIES: frozenset[str] = frozenset(_DATA["rotary_directories"])
#: The model directories with an attention bias of a family posenc has (bias_coverage.py).
BIAS_DIRECTORIES: frozenset[str] = frozenset(_DATA["bias_directories"])


def is_pinned(version: str) -> bool:
    return version == VERSION
