"""What a call runs: a 1-D rope touches no multi-axis module, and a swap does its work once.

Followed with ``tools/walk.py``. How long the walks are (files opened, changes of file: calls
from one posenc file into another) is a report, not a test:

    PYTHONPATH=src python tools/walk.py
    PYTHONPATH=src python tools/sizes.py    # the walks beside the sizes of the source
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def _walk_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("posenc_walk", ROOT / "tools" / "walk.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


walk = _walk_tool()


def test_one_dimensional_rope_touches_no_multi_axis_module() -> None:
    files = walk.summary(walk.trace(walk.WALKS["rope-call"]())).files
    assert [f for f in files if "multi_axis" in f] == []


def _tiny_llama() -> Any:
    transformers = pytest.importorskip("transformers")
    import torch

    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def _calls(call: Callable[[], Any], names: set[str]) -> Counter[str]:
    """How many times posenc functions named ``names`` run during ``call()``."""
    counts: Counter[str] = Counter()
    package = str(walk.PACKAGE)

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_name in names and code.co_filename.startswith(package):
            counts[code.co_name] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return counts


def test_a_swap_reads_the_plan_once_and_computes_the_frequencies_once() -> None:
    from posenc.torch.hf import swap_positions

    model = _tiny_llama()
    # the swap reads the plan of the tables (table_plan), never rope_plan besides
    wanted = {"rope_plan", "table_plan", "rope_frequencies"}
    counts = _calls(lambda: swap_positions(model), wanted)
    assert counts == {"table_plan": 1, "rope_frequencies": 1}


def test_the_call_counter_can_fail() -> None:
    import posenc

    counts = _calls(lambda: posenc.rotary_cos_sin(4, 8), {"rope_frequencies"})
    assert counts == {"rope_frequencies": 1}
