"""Argument values for the PyTorch front-end: CPU tensors of every dtype, torch dtypes, devices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import strategies as st  # noqa: E402

from .contract import VALID, Drawn, choose  # noqa: E402
from .values import (  # noqa: E402
    HUGE,
    INF,
    NAN,
    RELATIVE,
    WRONG_TYPES,
    hostile_positions,
    valid_position_arrays,
    valid_positions,
)

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
NAMES = {
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
}

DTYPES = choose(
    st.sampled_from(FLOAT_DTYPES),
    st.sampled_from(
        [torch.int32, torch.bool, torch.complex64, np.float32, "float32", 1.5, [torch.float32]]
    ),
    st.sampled_from([None]),
    weights=(6, 2, 2),
)

#: ``dtype=`` of a bias: float16 may overflow (refused by name, or finite).
BIAS_DTYPES = choose(
    st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
    st.sampled_from([torch.int32, torch.bool, np.float32, "float32", 1.5]),
    st.sampled_from([torch.float16]),
)
#: ``dtype=`` of a bias that float16 holds (small sizes): float16 is valid.
BOUNDED_BIAS_DTYPES = choose(
    st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16]),
    st.sampled_from([torch.int32, torch.bool, np.float32, "float32", 1.5]),
)

DEVICES = choose(
    st.sampled_from([None, "cpu", torch.device("cpu")]),
    st.sampled_from(["nope", 1.5, ["cpu"], {"a": 1}, "cpu:x"]),
)


def as_tensor(array: np.ndarray, target: str) -> torch.Tensor:
    """``array`` as a CPU tensor: as it is, or as bfloat16 (rounded) for float arrays."""
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if target == "bfloat16" and tensor.is_floating_point():
        return tensor.to(torch.float32).to(torch.bfloat16)
    return tensor


def tensors() -> st.SearchStrategy[torch.Tensor]:
    """CPU tensors of every integer and float dtype (uint16/32/64 included)."""
    return st.tuples(valid_position_arrays(), st.sampled_from(["same", "bfloat16"])).map(
        lambda p: as_tensor(*p)
    )


def hostile_tensors() -> st.SearchStrategy[Any]:
    fixed = st.sampled_from(
        [
            torch.tensor([True, False]),
            torch.tensor([1 + 1j]),
            torch.tensor([NAN, 1.0]),
            torch.tensor([1.0, INF], dtype=torch.float16),
            torch.tensor([-INF], dtype=torch.bfloat16),
            torch.tensor([2.0**60]),
            torch.tensor([0, 2**53 + 1]),
            torch.tensor([-(2**53) - 1, 0]),
            torch.tensor([2**63 - 1]),
            torch.tensor([-(2**63)]),
        ]
    )
    return fixed | hostile_positions().filter(lambda v: v is not None)  # None: the default


def positions() -> st.SearchStrategy[Drawn]:
    """Positions for the torch front-end: tensors, arrays, lists, an int length."""
    return choose(
        tensors() | valid_positions(whole_floats=False),
        hostile_tensors() | st.sampled_from([*HUGE, -1]),
    )


def timesteps() -> st.SearchStrategy[Drawn]:
    """Timesteps: the positions above, where an int is one timestep (valid within 2**53)."""
    return positions().map(_one_timestep)


def _one_timestep(drawn: Drawn) -> Drawn:
    value = drawn.value
    single = isinstance(value, int) and not isinstance(value, bool)
    if single and drawn.kind != VALID and value not in HUGE[2:]:
        return Drawn(value, VALID)
    return drawn


def relative_positions() -> st.SearchStrategy[Drawn]:
    """Relative positions: ``RELATIVE``, numeric arrays also as tensors."""
    return RELATIVE.flatmap(_maybe_tensor)


def _maybe_tensor(drawn: Drawn) -> st.SearchStrategy[Drawn]:
    value = drawn.value
    if not (isinstance(value, np.ndarray) and value.dtype.kind in "biuf"):
        return st.just(drawn)  # torch.from_numpy refuses strings and objects
    return st.sampled_from([drawn, Drawn(torch.from_numpy(value), drawn.kind)])


def meaning(value: Any) -> tuple[tuple[int, ...], list[Any]]:
    """Shape and exact flat values of valid positions (an int is a length)."""
    if isinstance(value, torch.Tensor):
        shape = tuple(value.shape)
        if value.is_floating_point():
            return shape, [float(v) for v in value.to(torch.float64).reshape(-1).tolist()]
        return shape, [int(v) for v in value.reshape(-1).numpy().tolist()]
    from .values import meaning as numpy_meaning

    return numpy_meaning(value)


def float_tensors(shape: tuple[int, ...], dtype: torch.dtype) -> st.SearchStrategy[torch.Tensor]:
    n = int(np.prod(shape))
    values = st.lists(st.floats(-4, 4, width=16), min_size=n, max_size=n)
    return values.map(lambda v: torch.tensor(v, dtype=torch.float64).reshape(shape).to(dtype))


NOT_TENSORS = [None, "x", [1.0, 2.0], np.zeros((2, 4), dtype=np.float32), 3.0, {"a": 1}]
__all__ = ["DEVICES", "DTYPES", "NOT_TENSORS", "WRONG_TYPES"]
