"""The angle-addition table build of the torch front-end (integer positions, rounded dtypes).

References: the direct float64 table of the NumPy core (``dtype=np.float64`` keeps the direct
build) and, for float16/bfloat16, the bit-pattern rounding helper of ``conftest.py`` (which
never uses ``cast_exact`` or ``Tensor.to``).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
from posenc._features import feature_slices  # noqa: E402
from posenc.torch import SinusoidalPositionalEncoding, sinusoidal  # noqa: E402
from posenc.torch._kernels._table import TorchAngleOps, sinusoidal_at  # noqa: E402
from tests.core.test_angle_addition import check_single_rounding  # noqa: E402
from tests.torch.conftest import round_once, same_bits  # noqa: E402

CONVENTIONS = sorted(posenc.CONVENTIONS)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def direct(positions: np.ndarray, d_model: int, **kwargs: object) -> torch.Tensor:
    return torch.from_numpy(posenc.sinusoidal(positions, d_model, dtype=np.float64, **kwargs))


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("d_model", [1, 3, 8, 65, 512])
@pytest.mark.parametrize(("start", "length"), [(0, 3000), (-77, 300), (70_001, 1000)])
def test_float32_tables_are_the_direct_build_rounded_once(
    convention: str, d_model: int, start: int, length: int
) -> None:
    positions = np.arange(start, start + length)
    fast = sinusoidal(torch.from_numpy(positions), d_model, convention=convention)
    assert fast.dtype == torch.float32
    exact = direct(positions, d_model, convention=convention)
    check_single_rounding(fast.numpy(), exact.numpy(), positions)
    # NumPy and torch share the algorithm: the same values but for a one-ulp difference of
    # their float64 sin/cos, which almost never shows after rounding
    numpy_table = torch.from_numpy(posenc.sinusoidal(positions, d_model, convention=convention))
    assert (fast != numpy_table).float().mean() <= 1e-4


def test_length_tables_and_the_module_cache_use_the_fast_build() -> None:
    fast = sinusoidal(8192, 1024)
    exact = direct(np.arange(8192), 1024)
    assert (fast.double() - exact).abs().max() <= 3e-8
    m = SinusoidalPositionalEncoding(1024, max_len=8192)
    assert torch.equal(m.pe, fast)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_half_tables_are_rounded_once(dtype: torch.dtype, convention: str) -> None:
    positions = np.arange(-50, 4096)
    fast = sinusoidal(torch.from_numpy(positions), 64, convention=convention, dtype=dtype)
    exact = direct(positions, 64, convention=convention)
    assert fast.dtype == dtype
    expected = round_once(exact, dtype)
    assert same_bits(fast, expected)
    if convention == "paper":  # two roundings (via float32) would be caught
        assert not same_bits(exact.float().to(dtype), expected)


@pytest.mark.parametrize("int_dtype", [torch.int32, torch.int16, torch.uint8, torch.int64])
def test_integer_position_dtypes_agree(int_dtype: torch.dtype) -> None:
    positions = torch.arange(200, dtype=torch.int64)
    expected = sinusoidal(positions, 24)
    assert torch.equal(sinusoidal(positions.to(int_dtype), 24), expected)


def test_arbitrary_and_batched_positions() -> None:
    gen = torch.Generator().manual_seed(0)
    table = sinusoidal(6000, 40)
    shuffled = torch.randperm(6000, generator=gen)
    assert torch.equal(sinusoidal(shuffled, 40), table[shuffled])
    batch = torch.arange(3000, 3100).repeat(16, 1)  # (b, s): repeated rows share their hi
    assert torch.equal(sinusoidal(batch, 40), table[3000:3100].expand(16, 100, 40))
    spread = torch.randint(-(10**6), 10**6, (700,), generator=gen)  # distinct hi
    check_single_rounding(
        sinusoidal(spread, 40).numpy(), direct(spread.numpy(), 40).numpy(), spread.numpy()
    )


def test_float_positions_and_float64_output_take_the_direct_build() -> None:
    positions = torch.arange(3000)
    omega = torch.from_numpy(posenc.frequencies(16))
    angles = positions.double().unsqueeze(-1) * omega
    table64 = sinusoidal(positions, 16, dtype=torch.float64)
    assert torch.equal(table64[:, 0::2], torch.sin(angles))
    real = sinusoidal(positions.double() + 0.25, 16)
    assert torch.equal(real[:, 1::2], torch.cos(angles + 0.25 * omega).float())


def test_meta_positions_give_a_meta_table() -> None:
    table = sinusoidal(torch.arange(500, device="meta"), 8)
    assert table.device.type == "meta"
    assert table.shape == (500, 8)


def test_torch_compile_path_matches_eager() -> None:
    """Inside torch.compile nothing depends on values (no dedup, no consecutive test) and
    phasors are real pairs; the values are those of eager mode."""
    torch._dynamo.reset()
    omega = torch.from_numpy(posenc.frequencies(32))
    layout = feature_slices(32)

    def build(positions: torch.Tensor) -> torch.Tensor:
        return sinusoidal_at(positions, omega, layout, 32, torch.bfloat16)

    positions = torch.arange(1000, 1300)
    compiled = torch.compile(build, fullgraph=True, backend="aot_eager")
    eager = build(positions)
    assert same_bits(compiled(positions), eager)
    assert same_bits(eager, round_once(direct(np.arange(1000, 1300), 32), torch.bfloat16))


def test_torch_ops_follow_the_protocol() -> None:
    ops = TorchAngleOps(torch.device("cpu"), torch.float32)
    assert ops.consecutive_start(torch.arange(5, 300)) == 5
    assert ops.consecutive_start(torch.tensor([5, 6, 8])) is None
    assert ops.consecutive_start(torch.tensor([5, 7, 6, 7])) is None  # right ends, wrong order
    z = ops.phasors(torch.tensor([0.5], dtype=torch.float64), conjugate=False)
    assert z.dtype == torch.complex128
    assert torch.allclose(ops.as_pairs(z), torch.tensor([[np.sin(0.5), np.cos(0.5)]]).double())


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_table_equals_the_cpu_table(dtype: torch.dtype) -> None:
    cpu = sinusoidal(4096, 128, dtype=dtype)
    gpu = sinusoidal(torch.arange(4096, device="cuda"), 128, dtype=dtype)
    assert gpu.device.type == "cuda"
    assert (gpu.cpu().double() - cpu.double()).abs().max() <= 2 * torch.finfo(dtype).eps
    exact = direct(np.arange(4096), 128).cuda()
    assert (gpu.double() - exact).abs().max() <= torch.finfo(dtype).eps
