"""Bias modules: the dense bias in the parameters' dtype, equal to the NumPy core; like()
takes over another module's weights; gradients flow; state_dict round trip; bad input."""

from __future__ import annotations

import numpy as np
import pytest

import posenc

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def test_t5_relative_bias_equals_the_core_t5_bias() -> None:
    module = pt.T5RelativeBias(6, max_distance=64, bidirectional=False)
    want = posenc.t5_bias(
        module.table.weight.detach().numpy(), [7, 8], 30, max_distance=64, bidirectional=False
    )
    assert np.array_equal(module([7, 8], 30).detach().numpy(), want)


def test_kerple_bias_module_equals_the_core_within_float32() -> None:
    module = pt.KerpleBias(3, kind="power")
    with torch.no_grad():
        module.r1.copy_(torch.tensor([0.5, 1.0, 2.0]))
        module.r2.copy_(torch.tensor([1.5, 0.5, 1.0]))
    want = posenc.kerple_bias(
        5, 9, r1=[0.5, 1.0, 2.0], r2=[1.5, 0.5, 1.0], kind="power", dtype=np.float64
    )
    # float32 parameters and arithmetic (power, product): 2 ulps of each value's magnitude
    assert_close_ulp(module(5, 9), want, ulps=2, scale=want, what="kerple bias")
    copy = pt.KerpleBias.like(module)
    assert torch.equal(copy(5, 9), module(5, 9))
    assert copy.kind == "power"


def test_fire_bias_uses_the_core_normalised_distance_and_copies_with_like() -> None:
    module = pt.FireBias(4, hidden=8)
    inputs = torch.from_numpy(posenc.fire_distance(6, 6)).float()[..., None]
    torch.testing.assert_close(module(6, 6), module.mlp(inputs).permute(2, 0, 1))
    copy = pt.FireBias.like(module)
    assert torch.equal(copy(6, 6), module(6, 6))


@pytest.mark.parametrize(
    "make", [lambda: pt.T5RelativeBias(2), lambda: pt.KerpleBias(2), lambda: pt.FireBias(2)]
)
def test_gradients_flow_and_state_dicts_round_trip(make) -> None:  # type: ignore[no-untyped-def]
    module = make()
    module(4, 4).sum().backward()
    assert all(p.grad is not None for p in module.parameters())
    other = make()
    other.load_state_dict(module.state_dict())
    assert torch.equal(other(4, 4), module(4, 4))
    assert "heads=2" in repr(module)


def test_modules_refuse_bad_settings_by_name() -> None:
    with pytest.raises(ValueError, match="heads"):
        pt.T5RelativeBias(0)
    with pytest.raises(ValueError, match="max_distance"):
        pt.T5RelativeBias(2, num_buckets=32, max_distance=8)
    with pytest.raises(ValueError, match="kind"):
        pt.KerpleBias(2, kind="exp")
    with pytest.raises(ValueError, match="c"):
        pt.FireBias(2, c=float("nan"))
    with pytest.raises(TypeError, match="relative_attention_bias"):
        pt.T5RelativeBias.like(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="query_positions"):
        pt.T5RelativeBias(2)([2**53 + 1], 3)


def test_torch_buckets_refuse_floats_by_name() -> None:
    with pytest.raises(TypeError, match="relative_positions"):
        pt.t5_buckets(torch.tensor([1.5]))


def test_alibi_bias_rounds_once_to_bfloat16() -> None:
    exact = posenc.alibi_bias(8, 50, 50, dtype=np.float64)
    got = pt.alibi_bias(8, 50, 50, dtype=torch.bfloat16)
    assert torch.equal(got, pt.cast_exact(torch.from_numpy(exact), torch.bfloat16))


def test_torch_buckets_refuse_relative_positions_beyond_the_limit_on_cpu() -> None:
    with pytest.raises(ValueError, match="relative_positions"):
        pt.t5_buckets(torch.tensor([2**60]), convention="transformers")
    with pytest.raises(ValueError, match="max_distance"):
        pt.t5_buckets(torch.tensor([1]), max_distance=8, convention="transformers")
    with pytest.raises(ValueError, match="max_position"):
        pt.deberta_buckets(torch.tensor([1]), max_position=100, convention="transformers")
