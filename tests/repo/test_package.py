"""Packaging promises: the public API imports, and `import posenc` imports neither torch nor
JAX."""

from __future__ import annotations

import subprocess
import sys

import posenc


def test_every_public_name_imports() -> None:
    for name in posenc.__all__:
        assert getattr(posenc, name) is not None
    assert posenc.__version__


def test_import_posenc_imports_numpy_only() -> None:
    code = (
        "import sys, posenc, posenc.analysis, posenc.cli;"
        "heavy = {'torch', 'matplotlib', 'transformers', 'mpmath', 'jax', 'flax'};"
        "heavy &= set(sys.modules);"
        "print(sorted(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
