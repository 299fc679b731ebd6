"""Which model directories of the installed transformers compute an attention bias of a family
posenc has (a text scan of ``transformers/models/*/modeling_*.py``: fast, imports nothing).

A directory counts when its modeling file defines

- ``_relative_position_bucket`` or ``compute_bias``: T5's learned bucket table;
- ``build_alibi_tensor`` or ``build_mpt_alibi_tensor``: ALiBi;
- ``build_relative_position``: DeBERTa's relative positions (log buckets in v2);
- a class named ``...RelPositionalEncoding``, ``...RelPositionalEmbedding`` or
  ``...RelativePositionalEncoding``: a relative position table of the speech encoders.

The learned 2-D window tables of the vision models (Swin, BEiT) are another family and are not
counted.
"""

from __future__ import annotations

import re
from pathlib import Path

#: what a modeling file defines -> the family it names
_FAMILIES = {
    re.compile(r"^\s*def (?:_relative_position_bucket|compute_bias)\b", re.M): "T5 buckets",
    re.compile(r"^def build_(?:mpt_)?alibi_tensor\b", re.M): "ALiBi",
    re.compile(r"^def build_relative_position\b", re.M): "DeBERTa relative positions",
    re.compile(
        r"^class \w*(?:RelPositional|RelativePositional)(?:Encoding|Embedding)\b", re.M
    ): "relative position table",
}


def models_root() -> Path:
    import transformers  # here, not at import: a bare pytest collects this module without it

    return Path(transformers.__file__).parent / "models"


def directories() -> dict[str, list[str]]:
    """directory -> the bias families its modeling files define, for every directory with one."""
    found: dict[str, list[str]] = {}
    for path in sorted(models_root().glob("*/modeling_*.py")):
        text = path.read_text(encoding="utf-8")
        for pattern, family in _FAMILIES.items():
            if pattern.search(text) and family not in found.get(path.parent.name, []):
                found.setdefault(path.parent.name, []).append(family)
    return found


def directory(model_type: str) -> str:
    """The model directory of a sweep key: ``"longt5 (local)"`` -> ``"longt5"``,
    ``"deberta-v2"`` -> ``"deberta_v2"``."""
    return model_type.split(" ")[0].replace("-", "_")
