"""Content-conditioned relative logits against transformers' ``InklingRelativeLogits`` (the
same gather and mask on the model's own curves: equal bit for bit), and the NumPy float64
reference against the module run in float64."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from tests.references import require

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(("q_offset", "k_len", "extent"), [(0, 7, 3), (5, 12, 4), (0, 9, 32)])
def test_relative_logits_are_inkling_s(q_offset: int, k_len: int, extent: int) -> None:
    modeling = require("transformers.models.inkling.modeling_inkling")
    torch.manual_seed(0)
    module = modeling.InklingRelativeLogits(d_rel=6, rel_extent=extent)
    torch.nn.init.normal_(module.proj)
    q_len = k_len - q_offset
    states = torch.randn(2, q_len, 3, 6)  # (batch, q, heads, d_rel)
    q_pos, k_pos = torch.arange(q_len) + q_offset, torch.arange(k_len)
    with torch.no_grad():
        theirs = module(states, q_pos, k_pos)
        curves = (states @ module.proj).transpose(1, 2)  # the model's own profiles
    ours = pt.relative_logits(curves, q_pos, k_pos)
    assert torch.equal(ours, theirs)

    # the float64 reference: the module run in float64 on the same states
    with torch.no_grad():
        double = module.double()(states.double(), q_pos, k_pos)
        curves64 = (states.double() @ module.proj).transpose(1, 2)
    reference = posenc.relative_logits(curves64.numpy(), q_pos.numpy(), k_pos.numpy())
    np.testing.assert_array_equal(reference, double.numpy())
