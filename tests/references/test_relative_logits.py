"""Content-conditioned relative logits against x-transformers' ``RelativeProjPositionalBias``
(the same gather and mask on the same curves: equal bit for bit), and the FlexAttention
``score_mod`` against the dense bias. transformers' ``InklingRelativeLogits``:
tests/references/hf/test_relative_logits.py."""

from __future__ import annotations

import warnings

import pytest

from tests.references import require

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def test_relative_logits_are_x_transformers_relative_proj_positional_bias() -> None:
    x_transformers = require("x_transformers.x_transformers")
    torch.manual_seed(1)
    module = x_transformers.RelativeProjPositionalBias(dim=8, heads=2, max_dist=5)
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        theirs = module(x, seq_len_k=9)  # queries at 3 .. 8 over keys 0 .. 8
        weights = module.to_distance_weights(x)
        curves = torch.einsum("bhnd,dr->bhnr", weights, module.distance_bank)
    ours = pt.relative_logits(curves, torch.arange(3, 9), 9)
    assert torch.equal(ours, theirs)


def test_the_score_mod_adds_the_dense_logits() -> None:
    from torch.nn.attention.flex_attention import flex_attention

    torch.manual_seed(2)
    q, k, v = torch.randn(3, 2, 3, 16, 8).unbind(0)
    curves = torch.randn(2, 3, 16, 5)
    dense = pt.relative_logits(curves, torch.arange(4, 20), torch.arange(20)[4:])
    mod = pt.relative_logits_score_mod(curves, query_offset=4, key_offset=4)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "flex_attention called without torch.compile")
        out = flex_attention(q, k, v, score_mod=mod)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense)
    assert (out - want).abs().max() <= 2e-6


def test_bad_input_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="query_positions must give one position per row"):
        pt.relative_logits(torch.zeros(1, 1, 3, 4), 2, 5)
    with pytest.raises(TypeError, match=r"curves must be a torch\.Tensor"):
        pt.relative_logits([[0.0]], 1, 1)
    with pytest.raises(TypeError, match=r"curves must be a \(batch, heads, q, extent\) tensor"):
        pt.relative_logits_score_mod(torch.zeros(2, 3))
    mod = pt.relative_logits_score_mod(torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match="covers 3 queries"):
        mod(torch.zeros(()), 0, 0, 3, 0)
    with pytest.raises(ValueError, match="curves must be finite"):
        pt.relative_logits_score_mod(torch.full((1, 1, 1, 1), float("nan")))
