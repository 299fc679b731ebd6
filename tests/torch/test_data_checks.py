"""The rule for checks that read tensor data, and the one fast-path switch.

- Python numbers and CPU tensors: ``posenc.torch`` raises exactly the NumPy core's errors.
- Data not read (accelerator tensors; here, code traced by ``torch.compile``): a position that
  cannot be encoded exactly gives a NaN row, never a finite, plausible one.
- ``posenc.set_fast_paths(False)`` runs the plain formulas: the same tables and additions bit
  for bit, rotations within one unit in the last place, dropout drawn like ``nn.Dropout``.
- On CUDA, the hot paths run under ``torch.cuda.set_sync_debug_mode("error")``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from posenc.torch import hf  # noqa: E402

BAD_POSITIONS = [
    ([2**60], ValueError, r"must lie within \+-2\*\*53"),
    ([2**53 + 1], ValueError, r"must lie within \+-2\*\*53"),
    ([float("nan")], ValueError, "must be finite"),
    ([float("inf")], ValueError, "must be finite"),
]


def _core_error(positions: list[float]) -> str:
    with pytest.raises(ValueError, match="positions must") as info:
        posenc.sinusoidal(np.asarray(positions), 8)
    return str(info.value)


@pytest.mark.parametrize(("positions", "kind", "pattern"), BAD_POSITIONS)
def test_cpu_positions_raise_the_core_errors(positions, kind, pattern) -> None:
    message = _core_error(positions)
    assert re.search(pattern, message)
    tensor = torch.tensor(positions)
    calls = [
        lambda: pt.sinusoidal(tensor, 8),
        lambda: pt.SinusoidalPositionalEncoding(8)(torch.zeros(1, 8), positions=tensor),
        lambda: pt.SinusoidalPositionalEncoding(8).encoding(tensor),
        lambda: pt.rotary_cos_sin(tensor, 8),
        lambda: pt.RotaryEmbedding(8).rotate(torch.zeros(1, 1, 8), positions=tensor),
        lambda: hf.LlamaRotary(8)(torch.zeros(1), tensor[None]),
    ]
    expected = re.escape(message.split(", got")[0].removeprefix("positions"))  # names vary
    for call in calls:
        with pytest.raises(kind, match=expected):
            call()


@pytest.mark.parametrize("offset", [-1, 2**53, 2**60])
def test_python_number_offsets_are_always_checked(offset: int) -> None:
    module = pt.SinusoidalPositionalEncoding(8)
    with pytest.raises(ValueError, match="offset must"):
        module(torch.zeros(2, 3, 8), offset=offset)
    with pytest.raises(ValueError, match="offset must"):
        module.encoding(3, offset=offset)
    with pytest.raises(ValueError, match="offset must"):
        pt.RotaryEmbedding(8).rotate(torch.zeros(1, 3, 8), offset=offset)


def test_the_largest_offset_that_fits_is_accepted() -> None:
    out = pt.SinusoidalPositionalEncoding(8).encoding(2, offset=2**53 - 1)
    assert bool(torch.isfinite(out).all())


def _nan_rows(table: torch.Tensor) -> list[bool]:
    return table.isnan().all(dim=-1).reshape(-1).tolist()


@pytest.mark.slow
def test_unread_positions_that_cannot_be_encoded_give_nan_rows() -> None:
    """Traced code reads no data: bad positions come out as NaN rows, good ones unchanged."""
    torch._dynamo.reset()
    positions = torch.tensor([3, 2**60, -(2**60), 7])
    module = pt.SinusoidalPositionalEncoding(8).eval()
    x = torch.zeros(4, 8)
    compiled = torch.compile(module, fullgraph=True, backend="eager")
    out = compiled(x, positions=positions)
    assert _nan_rows(out) == [False, True, True, False]
    assert torch.equal(out[[0, 3]], module(x[:2], positions=torch.tensor([3, 7])))
    rope = pt.RotaryEmbedding(8)
    rotated = torch.compile(rope.rotate, fullgraph=True, backend="eager")(
        torch.ones(1, 4, 8), positions=positions
    )
    assert _nan_rows(rotated[0]) == [False, True, True, False]
    real = torch.tensor([0.5, float("nan"), float("inf"), 2.0**60])
    table = torch.compile(pt.sinusoidal, fullgraph=True, backend="eager")(real, 8)
    assert _nan_rows(table) == [False, True, True, True]


def test_set_data_checks_is_a_switch_and_a_context() -> None:
    with pt.set_data_checks(True) as switch:
        assert "True" in repr(switch)
    assert "False" in repr(pt.set_data_checks(False))
    with pytest.raises(TypeError, match="enabled must be True or False"):
        pt.set_data_checks("yes")  # type: ignore[arg-type]


# -- the fast-path switch ------------------------------------------------------------------------


def _both(call):
    """``call()`` with the fast paths on, then off."""
    fast = call()
    with posenc.set_fast_paths(False):
        plain = call()
    return fast, plain


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_tables_and_additions_are_the_same_bits_either_way(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 2048, 256).to(dtype)  # 8 MiB in float32: the fused path
    module = pt.SinusoidalPositionalEncoding(256).eval()
    index = torch.randint(0, 3000, (4, 2048))
    scattered = torch.randint(-(10**6), 10**6, (3000,))
    calls = [
        lambda: module(x),
        lambda: module(x, positions=index),
        lambda: module(x, offset=70_000),
        lambda: pt.sinusoidal(torch.arange(-300, 5000), 64, dtype=dtype),
        lambda: pt.sinusoidal(scattered, 48, dtype=dtype),
    ]
    for call in calls:
        fast, plain = _both(call)
        assert torch.equal(
            fast.view(torch.int16) if dtype != torch.float32 else fast,
            plain.view(torch.int16) if dtype != torch.float32 else plain,
        )


def test_numpy_tables_are_the_same_bits_either_way() -> None:
    for positions in (
        np.arange(-100, 9000),
        np.random.default_rng(0).integers(-(10**7), 10**7, 5000),
    ):
        for dtype in (np.float32, np.float16):
            fast, plain = _both(lambda p=positions, t=dtype: posenc.sinusoidal(p, 40, dtype=t))
            np.testing.assert_array_equal(fast, plain)


def test_embedding_sum_is_the_same_bits_either_way() -> None:
    torch.manual_seed(1)
    emb = pt.TransformerEmbedding(1000, 64, num_segments=2).eval()
    tokens = torch.randint(0, 1000, (8, 700))
    with torch.no_grad():
        fast, plain = _both(lambda: emb(tokens, segments=tokens % 2, offset=5))
    assert torch.equal(fast, plain)


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
def test_rotations_agree_within_one_ulp(pairs: str) -> None:
    torch.manual_seed(2)
    q = torch.randn(2, 8, 512, 64)
    rope = pt.RotaryEmbedding(64, pairs=pairs)
    fast, plain = _both(lambda: rope(q, q, offset=9)[0])
    ulp = torch.finfo(torch.float32).eps * torch.maximum(fast.abs(), plain.abs()).clamp(min=1)
    assert bool(((fast - plain).abs() <= ulp).all())


def test_the_switch_changes_the_path() -> None:
    """Training dropout: the fused exact-probability mask, or ``nn.Dropout``'s."""
    module = pt.SinusoidalPositionalEncoding(64, dropout=0.5).train()
    x = torch.ones(4, 1000, 64)
    torch.manual_seed(3)
    fast = module(x)
    torch.manual_seed(3)
    with posenc.set_fast_paths(False):
        plain = module(x)
    torch.manual_seed(3)
    reference = torch.nn.functional.dropout(x + module.encoding(1000), 0.5)
    assert torch.equal(plain, reference)
    assert not torch.equal(fast, plain)
    with pytest.raises(TypeError, match="enabled must be True or False"):
        posenc.set_fast_paths(0)  # type: ignore[arg-type]


# -- CUDA: no host synchronisation on the hot paths ---------------------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@needs_cuda
def test_cuda_hot_paths_never_synchronise() -> None:
    device = torch.device("cuda")
    modules = [
        (pt.SinusoidalPositionalEncoding(64).to(device).eval(), "add"),
        (pt.RotaryEmbedding(64).to(device), "rope"),
        (pt.RotaryEmbedding(64, pairs="interleaved").to(device), "rope"),
    ]
    x = torch.randn(2, 128, 64, device=device)
    q = torch.randn(2, 4, 128, 64, device=device)
    positions = torch.arange(128, device=device) * 3
    for module, kind in modules:
        module(x) if kind == "add" else module(q, q)  # grow the caches first
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for module, kind in modules:
            if kind == "add":
                module(x)
                module(x, positions=positions)
                module(x, offset=5)
            else:
                module(q, q)
                module(q, q, positions=positions)
        pt.sinusoidal(positions, 32)
        pt.rotary_cos_sin(positions, 32)
        hf.LlamaRotary(32)(x, positions[None])
        pt.TimestepEmbedding(32)(positions.double())
    finally:
        torch.cuda.set_sync_debug_mode("default")


@needs_cuda
def test_cuda_positions_checked_on_request() -> None:
    bad = torch.tensor([1, 2**60], device="cuda")
    assert _nan_rows(pt.sinusoidal(bad, 8).cpu()) == [False, True]
    with pt.set_data_checks(True), pytest.raises(ValueError, match="within"):
        pt.sinusoidal(bad, 8)
