"""Install hints name commands that work for someone holding this repository.

torch, matplotlib and flask are made unimportable in a subprocess (an import hook refuses them);
every hint posenc prints must then be one of the commands below, and none may name
``posenc[...]`` (posenc is not on a package index).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WORKING = {
    "pip install torch",
    "pip install matplotlib",
    "pip install '.[torch]'",
    "pip install '.[plot]'",
    "pip install flask",
    "pip install '.[explore]'",
    "pip install jax",
    "pip install '.[jax]'",
}

BLOCK = textwrap.dedent(
    """
    import importlib.abc, sys

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {BLOCKED}:
                raise ImportError(f"No module named {{name!r}}")
            return None

    sys.meta_path.insert(0, Refuse())
    """
)

CASES = {
    "import posenc.torch": ("torch", "import posenc.torch"),
    "import posenc.plot": ("matplotlib", "import posenc.plot"),
    "import posenc.jax": ("jax", "import posenc.jax"),
    "posenc demo without torch": (
        "torch",
        "from posenc.cli import main; main(['demo', '--no-figures'])",
    ),
    "posenc demo without matplotlib": (
        "matplotlib",
        "import tempfile; from posenc.cli import main; main(['demo', '--out', tempfile.mkdtemp()])",
    ),
    "posenc explore without flask": (
        "flask",
        "from posenc.cli import main; raise SystemExit(main(['explore', '--no-browser']))",
    ),
    "make_server without flask": (
        "flask",
        "from posenc.explore import make_server; make_server()",
    ),
    "posenc plot without matplotlib": (
        "matplotlib",
        "import tempfile; from posenc.cli import main;"
        "main(['plot', 'heatmap', '--out', tempfile.mkdtemp() + '/h.png'])",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_hint_is_a_working_command(name: str) -> None:
    blocked, code = CASES[name]
    program = BLOCK.format(BLOCKED=repr({blocked})) + code
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    output = result.stdout + result.stderr
    assert "posenc[" not in output
    hints = re.findall(r"pip install (?:'[^']+'|[\w.-]+)", output)
    assert hints, output[-2000:]
    assert set(hints) <= WORKING, hints


def test_no_message_in_the_package_names_a_posenc_extra() -> None:
    """The runtime cases above cannot reach every message (a transformers outside the supported
    range, for one): no string in the package may point at ``posenc[...]``."""
    root = Path(__file__).resolve().parents[2] / "src" / "posenc"
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in sorted(root.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "posenc[" in line
    ]
    assert not found, found
