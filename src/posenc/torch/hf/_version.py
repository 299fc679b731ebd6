"""The transformers releases the swap follows: the range of the ``hf`` extra.

The drop-ins mimic the calls of transformers' modules, which change between major releases
(4.x called and configured them otherwise), so a model built by a release outside the range is
refused before anything is examined. transformers is never imported here: its version is read
from the module already loaded by whoever built the model.
"""

from __future__ import annotations

import re
import sys

from torch import nn

__all__ = ["SUPPORTED", "check_transformers"]

#: The ``hf`` extra's requirement on transformers (pyproject.toml; a test keeps them equal).
SUPPORTED = ">=5.23,<6"
_LOWEST, _BEYOND = (5, 23), (6, 0)


def _from_transformers(model: nn.Module) -> bool:
    return any(type(m).__module__.startswith("transformers.") for m in model.modules())


def check_transformers(model: nn.Module) -> None:
    """Raise RuntimeError when ``model`` holds modules of an installed transformers outside
    :data:`SUPPORTED` (a model without transformers modules is not checked)."""
    if not _from_transformers(model):
        return
    version = str(getattr(sys.modules.get("transformers"), "__version__", "unknown"))
    found = re.match(r"(\d+)\.(\d+)", version)
    release = (int(found[1]), int(found[2])) if found else None
    if release is None or not _LOWEST <= release < _BEYOND:
        raise RuntimeError(
            f"transformers {version} is installed; posenc.torch.hf supports transformers "
            f"{SUPPORTED} (pip install 'transformers{SUPPORTED}', or, from a clone of posenc, "
            "pip install '.[hf]'); transformers 4.x is not supported"
        )
