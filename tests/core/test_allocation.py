"""A result too large for memory is refused before anything is allocated, naming the
arguments that decide its size and the bytes it needs (a ValueError that is also a
MemoryError)."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from posenc._checks import check_allocation, memory_limit

CASES = {
    "sinusoidal": (lambda: posenc.sinusoidal(10**7, 10**6), "positions and d_model"),
    "sinusoidal, a length alone": (lambda: posenc.sinusoidal(2**50, 4), "positions and d_model"),
    "rotary_cos_sin": (lambda: posenc.rotary_cos_sin(10**9, 10**5), "positions and head_dim"),
    "sinusoidal_grid": (lambda: posenc.sinusoidal_grid((10**5, 10**5), 64), "shape and d_model"),
    "timestep_embedding": (
        lambda: posenc.timestep_embedding(np.zeros(10**6), 10**7),
        "timesteps and dim",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_result_larger_than_memory_is_refused_by_name(case: str) -> None:
    call, names = CASES[case]
    with pytest.raises(ValueError, match=rf"^{names} ask for .* [0-9.]+ TiB, more than") as info:
        call()
    assert isinstance(info.value, MemoryError)


def test_the_limit_is_the_machine_memory_and_a_fitting_result_passes() -> None:
    limit = memory_limit()
    assert limit > 1 << 20
    check_allocation("positions", (limit // 8,), 8)  # exactly the limit: allowed
    with pytest.raises(ValueError, match="positions ask for"):
        check_allocation("positions", (limit // 8 + 1,), 8)
    with pytest.raises(ValueError, match="of shape \\(3, 2\\), 48 bytes"):
        check_allocation("positions and d_model", (3, 2), 4, 2, limit=47)


def test_torch_tables_are_refused_before_allocating() -> None:
    pytest.importorskip("torch")
    import posenc.torch as pt

    calls = [
        lambda: pt.sinusoidal(10**9, 4096),
        lambda: pt.rotary_cos_sin(10**9, 4096),
        lambda: pt.SinusoidalPositionalEncoding(4096).encoding(10**9),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"ask for a result of shape .*device's memory"):
            call()
