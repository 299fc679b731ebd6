"""tests/jax: four CPU devices for the sharding tests, set before JAX starts its backend.

JAX reads ``XLA_FLAGS`` when its CPU backend first starts (the first array or device query),
not at import: collecting this folder comes before any test runs, so the flag holds for the
whole session (``make test``'s workers included). Other tests see four CPU devices too, which
changes nothing for them: arrays stay on the first.
"""

from __future__ import annotations

import os

_FLAG = "--xla_force_host_platform_device_count=4"
if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}".strip()
