"""Bias modules: the dense bias in the parameters' dtype, equal to the NumPy core; like()
takes over another module's weights; gradients flow; state_dict round trip; bad input."""

from __future__ import annotations

import numpy as np
import pytest

import posenc

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402

F = torch.nn.functional

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


LONG = [0, 1, 7, 1000, 65_000, 70_000, 10**6]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_kerple_module_is_the_float64_core_rounded_once(dtype: torch.dtype) -> None:
    for kind, r2 in (("log", [1.0, 3.0]), ("power", [0.5, 0.25])):
        module = pt.KerpleBias(2, kind=kind, dtype=dtype)
        with torch.no_grad():
            module.r1.copy_(torch.tensor([1.0, 0.75]))
            module.r2.copy_(torch.tensor(r2))
        got = module([0, 3], LONG)
        r1_64, r2_64 = module.r1.double().detach().numpy(), module.r2.double().detach().numpy()
        exact = posenc.kerple_bias([0, 3], LONG, r1=r1_64, r2=r2_64, kind=kind, dtype=np.float64)
        assert torch.equal(got, pt.cast_exact(torch.from_numpy(exact), dtype)), kind
        if dtype == torch.float16:  # the core's own float16 bias
            half = posenc.kerple_bias([0, 3], LONG, r1=r1_64, r2=r2_64, kind=kind, dtype=np.float16)
            assert np.array_equal(got.detach().numpy(), half), kind


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_fire_module_is_its_float64_formula_rounded_once(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    module = pt.FireBias(2, hidden=4, activation=torch.nn.GELU()).to(dtype)
    got = module(LONG, [0, 5, 1000, 70_000])
    inputs = posenc.fire_distance(LONG, [0, 5, 1000, 70_000], c=float(module.c.detach()),
                                  threshold=float(module.threshold.detach()))  # fmt: skip
    first, last = module.mlp[0], module.mlp[2]
    hidden = F.gelu(F.linear(torch.from_numpy(inputs)[..., None], first.weight.double(),
                             first.bias.double()))  # fmt: skip
    want = F.linear(hidden, last.weight.double(), last.bias.double()).permute(2, 0, 1)
    assert torch.equal(got, pt.cast_exact(want.detach(), dtype))


def test_a_16_bit_bias_beyond_the_dtype_is_refused_by_name() -> None:
    module = pt.KerpleBias(1, kind="power", dtype=torch.float16)
    with torch.no_grad():
        module.r2.fill_(2.0)
    with pytest.raises(ValueError, match=r"dtype=float16 parameters cannot hold.*float32"):
        module([0], [1000])
    with pytest.raises(ValueError, match="query_positions must be >= 0"):
        pt.FireBias(2)([-5], 3)  # as posenc.fire_distance refuses it


def test_like_copies_the_activation_and_checks_as_the_constructor() -> None:
    source = pt.FireBias(3, hidden=5, activation=torch.nn.GELU(approximate="tanh"))
    copy = pt.FireBias.like(source)
    assert torch.equal(copy(6, 6), source(6, 6))
    source.mlp[1] = torch.nn.SiLU()  # swapped after construction, as a port might
    assert torch.equal(pt.FireBias.like(source)(6, 6), source(6, 6))
    source.mlp[1] = torch.nn.PReLU()
    with pytest.raises(TypeError, match="activation"):
        pt.FireBias.like(source)
    for name, value in (("c", 0.0), ("threshold", float("nan")), ("c", [1.0, 2.0])):
        other = pt.FireBias(3)
        setattr(other, name, torch.nn.Parameter(torch.tensor(value)))
        with pytest.raises(ValueError, match=name):
            pt.FireBias.like(other)
    other = pt.FireBias(3, hidden=4)
    other.mlp[2] = torch.nn.Linear(5, 3)
    with pytest.raises(ValueError, match="mlp"):
        pt.FireBias.like(other)


class _Attributes(torch.nn.Module):
    def __init__(self, **attributes) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        for name, value in attributes.items():
            setattr(self, name, value)


def test_like_refuses_mismatched_modules_by_name() -> None:
    ones = torch.nn.Parameter(torch.ones(3))
    cases = [
        (pt.KerpleBias, _Attributes(r1=ones, r2=torch.nn.Parameter(torch.ones(4))), "r1 and r2"),
        (pt.KerpleBias, _Attributes(r1=ones, r2=ones, kind="exp"), "kind"),
        (pt.KerpleBias, _Attributes(r1=torch.nn.Parameter(torch.full((3,), torch.nan)), r2=ones),
         "r1"),
        (pt.T5RelativeBias, _Attributes(relative_attention_bias=torch.nn.Embedding(32, 4),
                                        relative_attention_num_buckets=16,
                                        relative_attention_max_distance=128, is_decoder=False),
         "relative_attention_num_buckets"),
        (pt.T5RelativeBias, _Attributes(relative_attention_bias=torch.nn.Embedding(32, 4)),
         "relative_attention_num_buckets"),
    ]  # fmt: skip
    for cls, module, name in cases:
        with pytest.raises((ValueError, TypeError), match=name):
            cls.like(module)


@pytest.mark.parametrize(
    "make", [lambda: pt.T5RelativeBias(2), lambda: pt.KerpleBias(2), lambda: pt.FireBias(2)]
)
def test_sizes_are_refused_before_anything_is_allocated(make) -> None:  # type: ignore[no-untyped-def]
    module = make()
    with pytest.raises(MemoryError, match=r"query_positions.*key_positions"):
        module(10**9, 3 * 10**8)
    with pytest.raises(MemoryError, match=r"query_positions.*key_positions"):
        module(torch.arange(10**6), [0] * 10**6)


def test_dense_functions_refuse_sizes_devices_and_dtypes_by_name() -> None:
    big = torch.arange(10**6)
    for call in (
        lambda: pt.alibi_bias(2, big, big),
        lambda: pt.alibi_bias(2, big, big, convention="bloom"),
        lambda: pt.deberta_relative_positions(big, big),
    ):
        with pytest.raises(MemoryError, match=r"query_positions.*key_positions"):
            call()
    for call in (
        lambda: pt.alibi_bias(2, 3, 3, device="nope"),
        lambda: pt.alibi_bias(2, torch.arange(3), 3, device="nope"),
        lambda: pt.kerple_bias(3, 3, r1=1.0, r2=1.0, device="nope"),
        lambda: pt.sandwich_bias(2, 3, 3, device="nope"),
        lambda: pt.deberta_relative_positions(3, 3, device="nope"),
    ):
        with pytest.raises(ValueError, match="device"):
            call()
    for cls in (pt.T5RelativeBias, pt.KerpleBias, pt.FireBias):
        with pytest.raises(TypeError, match="dtype"):
            cls(2, dtype=torch.int64)


def test_positions_on_another_device_are_refused_by_name() -> None:
    cpu = torch.arange(3)
    for module in (
        pt.T5RelativeBias(2, device="meta"), pt.KerpleBias(2, device="meta"),
        pt.FireBias(2, device="meta"),
    ):  # fmt: skip
        with pytest.raises(ValueError, match=r"query_positions is on cpu.*meta"):
            module(cpu, cpu)
    with pytest.raises(ValueError, match="key_positions is on meta"):
        pt.alibi_bias(2, cpu, torch.arange(3, device="meta"))
    moved = pt.alibi_bias(2, cpu, cpu, device="meta")  # device= moves them
    assert moved.device.type == "meta"
