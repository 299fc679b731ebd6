"""``swap_positions`` takes over the positional part of Inkling's relative logits: which
distance each query and key pair reads from the model's per-query profiles, and the cut-off past
the extent (``posenc.torch.relative_logits``), keeping the model's own parameters.

Inkling's and Inkling2's ``*RelativeLogits`` modules (called with states and positions) and,
under transformers 5.25, Inkling2-loop's ``Inkling2LoopRelativePositionBias`` (called with
hidden states, a distance map and position ids) are replaced; the swapped tiny model gives the
original's logits and cached generation, and fed doubled distances it does not. A module whose
distances differ from posenc's is left, with the place where it differs.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers.models.auto.modeling_auto import (  # noqa: E402
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
)

from posenc.torch.hf import swap_positions  # noqa: E402
from tests.torch import tiny_models  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

#: model type -> the replacement of its relative logits
MODELS = {
    "inkling_text": "RelativeLogitsPositions",
    "inkling2_loop_text": "RelativeBiasPositions",  # transformers 5.25 on
}
_BUILT: dict[str, tuple[Any, Any, Any]] = {}


def build(model_type: str) -> tuple[Any, Any, Any]:
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        pytest.skip(f"transformers {transformers.__version__} has no {model_type}")
    if model_type not in _BUILT:
        _BUILT[model_type] = tiny_models.build_pair(model_type)
    return _BUILT[model_type]


@pytest.mark.parametrize("model_type", list(MODELS))
def test_relative_logits_are_swapped_and_the_model_unchanged(model_type: str) -> None:
    original, swapped, report = build(model_type)
    records = [r for r in report.replaced if r.layout == "relative logits (query - key)"]
    assert len(records) == original.config.num_hidden_layers, str(report)
    assert {r.replacement for r in records} == {MODELS[model_type]}
    assert all("equal bit for bit" in r.detail for r in records)
    names = dict(swapped.named_parameters()).keys()
    assert names == dict(original.named_parameters()).keys()  # checkpoints load as before
    tiny_models.compare(original, swapped)
    control = tiny_models.logits(tiny_models.control(swapped, report))
    assert float((control - tiny_models.logits(original)).abs().max()) > 1e-3


def test_relative_logits_whose_distances_differ_are_left_with_the_place() -> None:
    original = build("inkling_text")[0]
    model = copy.deepcopy(original)
    module = model.model.layers[0].self_attn.rel_logits_proj
    forward = module.forward

    def one_further(states: Any, query_positions: Any, key_positions: Any) -> Any:
        return forward(states, query_positions + 1, key_positions)

    module.forward = one_further
    report = swap_positions(model)
    left = {x.name: x.reason for x in report.left}
    reason = left["model.layers.0.self_attn.rel_logits_proj"]
    assert reason.startswith("relative logits differ from posenc's relative_logits at (")
    assert "(query length 5, key length 5, offset 0)" in reason


class _Norm(torch.nn.Module):  # type: ignore[misc]
    def forward(self, states: torch.Tensor, position_ids: Any) -> torch.Tensor:
        return states


class _HiddenBias(torch.nn.Module):  # type: ignore[misc]
    """Inkling2-loop's form (hidden states, a (q, k) distance map, position ids) with its bank
    under another name than ``proj``."""

    def __init__(self) -> None:
        super().__init__()
        self.num_heads = 2
        self.linear = torch.nn.Linear(8, 2 * 3)
        self.norm = _Norm()
        self.bank = torch.nn.Parameter(torch.randn(3, 5))

    def forward(self, hidden: torch.Tensor, distance: torch.Tensor, position_ids: Any) -> Any:
        states = self.norm(self.linear(hidden).view(*hidden.shape[:-1], 2, -1), position_ids)
        curves = (states @ self.bank).transpose(1, 2)
        inside = (distance >= 0) & (distance < 5)
        index = distance.clamp(0, 4).expand(*curves.shape[:-2], *distance.shape)
        return curves.gather(-1, index).masked_fill(~inside, 0.0)


def test_a_bank_under_another_name_is_swapped_under_that_name() -> None:
    """The bank is the module's one 2-D parameter, whatever its name: the replacement holds
    it under that name (it read ``proj`` and raised AttributeError, failing the whole swap)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(_HiddenBias())
    swapped = copy.deepcopy(model)
    report = swap_positions(swapped)
    assert [r.replacement for r in report.replaced] == ["RelativeBiasPositions"], str(report)
    assert dict(swapped.named_parameters()).keys() == dict(model.named_parameters()).keys()
