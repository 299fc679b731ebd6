"""Gradients with respect to real-valued positions, in every output dtype.

The tables are computed in float64 and rounded once to the output dtype; the rounding is
passed straight through in the backward pass. What holds, and is tested here:

- ``torch.autograd.gradcheck`` in float64 (the float64 derivative is the right one);
- given the same incoming gradient values, the gradient reaching the positions is the same
  bits whatever the output dtype (float16, bfloat16, float32, float64): the float64
  derivative, rounded once to the positions' dtype;
- no graph where none is asked for: integer positions, positions that do not require grad,
  ``torch.no_grad()`` and ``torch.inference_mode()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import posenc.torch as pt  # noqa: E402
from posenc.torch.hf import LlamaRotary, MultiAxisRotary  # noqa: E402

# a tensor that requires grad read as a Python number warns: none of the calls may
pytestmark = pytest.mark.filterwarnings("error::UserWarning")

HALF = (torch.float16, torch.bfloat16)
OUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _flat(result: Any) -> Any:
    """The result (a tensor or a tuple of tensors) as one 1-D tensor."""
    parts = (result,) if isinstance(result, torch.Tensor) else result
    return torch.cat([r.flatten() for r in parts])


# name -> (positions shape, call(positions, dtype) -> tensor or tuple of tensors)
CALLS: dict[str, tuple[tuple[int, ...], Callable[[Any, Any], Any]]] = {
    "sinusoidal": ((5,), lambda p, dt: pt.sinusoidal(p, 6, dtype=dt)),
    "sinusoidal tensor2tensor": (
        (2, 3),
        lambda p, dt: pt.sinusoidal(p, 7, convention="tensor2tensor", dtype=dt),
    ),
    "rotary_cos_sin": ((2, 4), lambda p, dt: pt.rotary_cos_sin(p, 8, dtype=dt)),
    "rotary_cos_sin yarn": (
        (4,),
        lambda p, dt: pt.rotary_cos_sin(
            p,
            8,
            dtype=dt,
            scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
        ),
    ),
    "multi_axis_cos_sin": (
        (4, 3),
        lambda p, dt: pt.multi_axis_cos_sin(p, 16, sections=[2, 3, 3], dtype=dt),
    ),
    "timestep_embedding": ((3,), lambda p, dt: pt.timestep_embedding(p, 6, dtype=dt)),
    "TimestepEmbedding": ((3,), lambda p, dt: pt.TimestepEmbedding(5)(p, dtype=dt)),
    "SinusoidalPositionalEncoding.forward": (
        (2, 4),
        lambda p, dt: pt.SinusoidalPositionalEncoding(6)(
            torch.zeros(2, 4, 6, dtype=dt), positions=p
        ),
    ),
    "SinusoidalPositionalEncoding.encoding": (
        (4,),
        lambda p, dt: pt.SinusoidalPositionalEncoding(6).encoding(p, dtype=dt),
    ),
    "hf.LlamaRotary": ((1, 4), lambda p, dt: LlamaRotary(8)(torch.zeros(1, dtype=dt), p)),
    "hf.MultiAxisRotary": (
        (3, 1, 4),
        lambda p, dt: MultiAxisRotary(16, sections=[2, 3, 3])(torch.zeros(1, dtype=dt), p),
    ),
}


def _positions(shape: tuple[int, ...], dtype: Any = torch.float64) -> Any:
    values = torch.linspace(-3.7, 41.3, int(torch.tensor(shape).prod()), dtype=torch.float64)
    return values.reshape(shape).to(dtype).requires_grad_()


def _grad(name: str, out_dtype: Any, pos_dtype: Any = torch.float64) -> Any:
    """The gradient reaching the positions for incoming gradients k/4, k in -8..8 (exact in
    every output dtype)."""
    shape, call = CALLS[name]
    positions = _positions(shape, pos_dtype)
    result = _flat(call(positions, out_dtype))
    assert result.dtype == out_dtype
    assert result.requires_grad, f"{name} in {out_dtype} dropped the graph"
    incoming = (torch.arange(result.numel()) % 17 - 8).to(torch.float64) / 4
    result.backward(incoming.to(out_dtype))
    return positions.grad


@pytest.mark.parametrize("name", sorted(CALLS))
def test_gradcheck_float64(name):
    shape, call = CALLS[name]
    assert torch.autograd.gradcheck(lambda p: call(p, torch.float64), (_positions(shape),))


@pytest.mark.parametrize("out_dtype", HALF, ids=str)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_16_bit_output_gives_the_float64_gradient(name, out_dtype):
    assert torch.equal(_grad(name, out_dtype), _grad(name, torch.float64))
    assert torch.equal(_grad(name, out_dtype), _grad(name, torch.float32))


@pytest.mark.parametrize("pos_dtype", [torch.float32, *HALF], ids=str)
@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=str)
def test_gradient_is_rounded_once_to_the_positions_dtype(out_dtype, pos_dtype):
    name = "rotary_cos_sin"
    got = _grad(name, out_dtype, pos_dtype)
    assert got.dtype == pos_dtype
    # positions of pos_dtype, widened exactly: the float64 derivative at the same points
    shape, call = CALLS[name]
    wide = _positions(shape, pos_dtype).detach().double().requires_grad_()
    result = _flat(call(wide, out_dtype))
    result.backward((torch.arange(result.numel()) % 17 - 8).to(out_dtype) / 4)
    assert torch.equal(got, wide.grad.to(pos_dtype))


def test_rotary_module_16_bit_inputs_pass_gradients_to_positions():
    # RotaryEmbedding rotates 16-bit q/k by float32 tables: the same positions gradient as
    # float32 q/k with the same values
    grads = []
    for dtype in (torch.bfloat16, torch.float32):
        q = (torch.arange(2 * 4 * 8) % 5 - 2).reshape(1, 2, 4, 8).to(dtype)
        positions = _positions((4,), torch.float32)
        q_rot, k_rot = pt.RotaryEmbedding(8)(q, q[:, :1], positions=positions)
        assert q_rot.dtype == dtype
        assert q_rot.requires_grad
        (q_rot.float().sum() + k_rot.float().sum()).backward()
        grads.append(positions.grad)
    assert torch.equal(grads[0], grads[1])


@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=str)
def test_no_graph_unless_asked(out_dtype):
    shape, _ = CALLS["sinusoidal"]
    assert not pt.sinusoidal(torch.arange(5), 6, dtype=out_dtype).requires_grad
    assert not pt.sinusoidal(_positions(shape).detach(), 6, dtype=out_dtype).requires_grad
    with torch.no_grad():
        assert not pt.sinusoidal(_positions(shape), 6, dtype=out_dtype).requires_grad
    with torch.inference_mode():
        assert not pt.sinusoidal(_positions(shape), 6, dtype=out_dtype).requires_grad
    integer = pt.rotary_cos_sin(torch.arange(5), 8, dtype=out_dtype)[0]
    assert not integer.requires_grad


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_cast_exact_passes_the_gradient_straight_through(dtype):
    table = torch.tensor([1.0 + 2**-8 + 2**-30, -0.3, 2.5], dtype=torch.float64)
    rounded = pt.cast_exact(table.requires_grad_(), dtype)
    assert rounded.requires_grad
    assert torch.equal(rounded.detach(), pt.cast_exact(table.detach(), dtype))  # same bits
    rounded.backward(torch.tensor([0.5, -2.0, 3.0], dtype=dtype))
    assert torch.equal(table.grad, torch.tensor([0.5, -2.0, 3.0], dtype=torch.float64))
    # double backward: the straight-through gradient is itself differentiable
    table.grad = None
    (g,) = torch.autograd.grad(pt.cast_exact(table, dtype).sum() * 2, table, create_graph=True)
    assert torch.equal(g, torch.full((3,), 2.0, dtype=torch.float64))


def test_16_bit_gradient_under_torch_func_and_compile():
    def first_channel(p):
        return pt.sinusoidal(p, 4, dtype=torch.bfloat16)[..., 0].float().sum()

    positions = torch.tensor([0.5, 1.5, 2.0], dtype=torch.float64)
    expected = torch.cos(positions)  # d/dp sin(p) (channel 0: frequency 1)
    assert torch.allclose(torch.func.grad(first_channel)(positions), expected)
    compiled = torch.compile(first_channel, fullgraph=True, backend="eager")
    p = positions.clone().requires_grad_()
    compiled(p).backward()
    assert torch.allclose(p.grad, expected)
