"""The pair layout of RoPE tables given to ``posenc.torch.apply_rotary``.

CPU tables are read: tables laid out for the other ``pairs`` raise the NumPy core's error, on
the fast path and the formula alike. Tables that are not read (accelerator, meta, traced by
``torch.compile``; here traced) give NaN rows where their columns do not have the stated
layout, and ``set_data_checks(True)`` makes eager accelerator calls raise. Tables with one
column per pair carry no layout and are never checked.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
import posenc.torch._kernels._rope as rotary  # noqa: E402
from posenc.torch import apply_rotary, rotary_cos_sin  # noqa: E402

PAIRS = ("half", "interleaved")
OTHER = {"half": "interleaved", "interleaved": "half"}


def randn(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


def core_message(built: str, stated: str) -> str:
    cos, sin = posenc.rotary_cos_sin(6, 16, pairs=built)
    with pytest.raises(ValueError, match="does not match cos/sin") as info:
        posenc.apply_rotary(np.zeros((6, 16)), cos, sin, pairs=stated)
    return str(info.value)


@pytest.mark.parametrize("built", PAIRS)
@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("shape", [(2, 3, 6, 16), (4, 8, 6, 16)])
def test_cpu_tables_of_the_other_layout_raise_the_core_error(built, fast, shape, monkeypatch):
    monkeypatch.setattr(rotary, "_SMALL_HALF", 0)  # every half rotation takes the fast path
    stated = OTHER[built]
    cos, sin = rotary_cos_sin(6, 16, pairs=built)
    with posenc.set_fast_paths(fast), pytest.raises(ValueError, match="laid out for") as info:
        apply_rotary(randn(*shape), cos, sin, pairs=stated)
    assert str(info.value) == core_message(built, stated)


def _nan_rows(out: torch.Tensor) -> list[bool]:
    return out.isnan().all(dim=-1).reshape(-1, out.shape[-2]).all(dim=0).tolist()


@pytest.mark.slow
@pytest.mark.parametrize("built", PAIRS)
def test_unread_tables_of_the_other_layout_give_nan_rows(built):
    """Traced code reads no data: rows whose columns lack the layout come out NaN."""
    torch._dynamo.reset()
    stated = OTHER[built]
    positions = torch.tensor([0, 3, 0, 7])  # position 0 fits both layouts
    cos, sin = rotary_cos_sin(positions, 8, pairs=built)
    x = randn(2, 4, 8, seed=1)
    compiled = torch.compile(apply_rotary, fullgraph=True, backend="eager")
    out = compiled(x, cos, sin, pairs=stated)
    assert _nan_rows(out) == [False, True, False, True]
    assert torch.equal(out[:, [0, 2]], x[:, [0, 2]])
    good = compiled(x, cos, sin, pairs=built)
    assert torch.equal(good, apply_rotary(x, cos, sin, pairs=built))


def test_meta_tables_are_not_read():
    cos, sin = rotary_cos_sin(4, 8, pairs="interleaved", device="meta")
    out = apply_rotary(torch.empty(2, 4, 8, device="meta"), cos, sin, pairs="half")
    assert out.device.type == "meta"
    assert out.shape == (2, 4, 8)


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("fast", [True, False])
def test_one_column_per_pair_rotates_like_the_laid_out_tables(pairs, fast, monkeypatch):
    monkeypatch.setattr(rotary, "_SMALL_HALF", 0)
    positions = torch.tensor([0, 1, 5, 300, 70000])
    cos, sin = rotary_cos_sin(positions, 16, rotary_dim=12, pairs=pairs)
    omega = torch.from_numpy(posenc.rope_frequencies(12)[0])
    angles = positions.double()[:, None] * omega
    per_cos, per_sin = angles.cos().float(), angles.sin().float()
    assert torch.equal(per_cos, cos[:, :6] if pairs == "half" else cos[:, 0::2])
    x = randn(3, 2, 5, 16, seed=2)
    with posenc.set_fast_paths(fast):
        out = apply_rotary(x, per_cos, per_sin, pairs=pairs, rotary_dim=12)
        assert torch.equal(out, apply_rotary(x, cos, sin, pairs=pairs))


def test_rotary_dim_errors_match_the_core():
    cos, sin = rotary_cos_sin(2, 8, rotary_dim=4)
    for rotary_dim in (6, 16, 0):
        with pytest.raises(ValueError, match=r"rotary_dim|channels") as core:
            posenc.apply_rotary(np.zeros((2, 8)), cos.numpy(), sin.numpy(), rotary_dim=rotary_dim)
        with pytest.raises(ValueError, match=re.escape(str(core.value))):
            apply_rotary(torch.zeros(2, 8), cos, sin, rotary_dim=rotary_dim)


def test_per_pair_tables_take_gradients_through_the_formula():
    # every entry of a per-pair table is free: finite differences keep it a valid table
    positions = torch.arange(4.0)
    angles = positions[:, None] * torch.from_numpy(posenc.rope_frequencies(6)[0])
    cos, sin = angles.cos().requires_grad_(), angles.sin().requires_grad_()
    x = randn(1, 2, 4, 8, dtype=torch.float64, seed=3).requires_grad_()
    for pairs in PAIRS:
        assert torch.autograd.gradcheck(
            lambda x, c, s, p=pairs: apply_rotary(x, c, s, pairs=p, rotary_dim=6), (x, cos, sin)
        )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tables_checked_on_request_and_never_synchronised():
    cos, sin = rotary_cos_sin(torch.arange(64, device="cuda"), 32, pairs="interleaved")
    q = torch.randn(2, 4, 64, 32, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = apply_rotary(q, cos, sin, pairs="half")
        apply_rotary(q, cos, sin, pairs="interleaved")
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert _nan_rows(out.cpu())[1:] == [True] * 63
    with posenc.torch.set_data_checks(True), pytest.raises(ValueError, match="laid out for"):
        apply_rotary(q, cos, sin, pairs="half")


def test_nan_tables_are_not_called_a_layout_mismatch():
    cos, sin = rotary_cos_sin(3, 8)
    cos[1] = float("nan")
    out = apply_rotary(randn(2, 3, 8, seed=4), cos, sin)
    assert _nan_rows(out) == [False, True, False]


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_the_inverse_rotation_is_the_rotation_by_negated_sines(pairs, fast, dtype, monkeypatch):
    """``inverse=True`` negates the sines (exact) and rotates: the core's inverse, rounded
    once, on the fast path and on the formula; it undoes the rotation within rounding."""
    if not fast:
        monkeypatch.setattr(rotary, "_use_fast_path", lambda *args: False)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 12, dtype=torch.float64)
    cos, sin = rotary_cos_sin(torch.arange(7) * 4099, 8, pairs=pairs)
    got = apply_rotary(x.to(dtype), cos, sin, pairs=pairs, inverse=True)
    assert torch.equal(got, apply_rotary(x.to(dtype), cos, -sin, pairs=pairs))
    want = posenc.apply_rotary(x.to(dtype).double().numpy(), cos.double().numpy(),
                               sin.double().numpy(), pairs=pairs, inverse=True)  # fmt: skip
    tolerance = 2 * torch.finfo(dtype).eps * float(x.abs().max())
    assert float((got.double() - torch.from_numpy(want)).abs().max()) <= tolerance
    cos64, sin64 = rotary_cos_sin(torch.arange(7) * 4099, 8, pairs=pairs, dtype=torch.float64)
    there = apply_rotary(x, cos64, sin64, pairs=pairs)
    back = apply_rotary(there, cos64, sin64, pairs=pairs, inverse=True)
    assert torch.allclose(back, x, atol=1e-14, rtol=0)


def test_inverse_is_refused_by_name_as_in_the_core():
    cos, sin = rotary_cos_sin(torch.arange(2), 4)
    with pytest.raises(TypeError, match="inverse must be True or False, got str"):
        apply_rotary(torch.ones(2, 4), cos, sin, inverse="yes")
