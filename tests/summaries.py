"""What the sweeps found, carried from pytest-xdist workers to the process that prints it.

The RoPE coverage test and the swap sweeps write what they find into dictionaries of their
own modules (``SHARED`` names them); the terminal summaries in ``tests/torch/conftest.py`` read
those dictionaries. Under pytest-xdist the tests run in worker processes and the summary in
the controller, which runs no test: each worker therefore sends, with every test's teardown
report, the entries that changed since its last report (pickled, in the report's
``user_properties``), and the controller merges them into the same dictionaries of its own
copy of the module. In a single process nothing is sent: the dictionaries are the ones the
tests wrote.
"""

from __future__ import annotations

import base64
import importlib
import os
import pickle
import sys
from typing import Any

#: module -> its dictionaries the summaries read
SHARED: dict[str, tuple[str, ...]] = {
    "tests.torch.hf.rope_coverage": ("OUTCOMES",),
    "tests.torch.hf.test_swap_sweep": ("OUTCOMES", "OUTCOMES_16", "NEAR_TIES"),
    "tests.torch.hf.test_swap_bias_sweep": ("OUTCOMES",),
}
#: module -> its integer counts the summaries read (sent when they change)
COUNTS: dict[str, tuple[str, ...]] = {"tests.torch.hf.rope_coverage": ("TOTAL",)}

PROPERTY = "posenc-summary"
#: this process is a pytest-xdist worker (xdist names it in the variable)
IN_WORKER = "PYTEST_XDIST_WORKER" in os.environ

_sent: dict[tuple[str, str], Any] = {}


def changes() -> str | None:
    """The entries written since the last call in this process, pickled as text (None: none)."""
    found: dict[tuple[str, str], Any] = {}
    for name in SHARED.keys() | COUNTS.keys():
        module = sys.modules.get(name)
        if module is None:
            continue
        for attribute in SHARED.get(name, ()):
            table = getattr(module, attribute)
            sent = _sent.setdefault((name, attribute), {})
            new = {k: v for k, v in table.items() if k not in sent or sent[k] != v}
            if new:
                found[name, attribute] = new
                sent.update(pickle.loads(pickle.dumps(new)))  # a copy: lists may grow later
        for attribute in COUNTS.get(name, ()):
            value = getattr(module, attribute)
            if _sent.get((name, attribute), 0) != value:  # the counts start at 0
                found[name, attribute] = _sent[name, attribute] = value
    return base64.b64encode(pickle.dumps(found)).decode("ascii") if found else None


def merge(text: str) -> None:
    """Write what :func:`changes` sent into this process's copies of the modules."""
    for (name, attribute), value in pickle.loads(base64.b64decode(text)).items():
        module = importlib.import_module(name)
        if attribute in SHARED.get(name, ()):
            getattr(module, attribute).update(value)
        else:
            setattr(module, attribute, value)
