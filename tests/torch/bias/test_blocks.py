"""``posenc.torch.alibi_bias`` built a block of query rows at a time: bit for bit the whole
float64 bias rounded once to ``dtype`` (bfloat16 included), at every block size."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc._bias import positions as core_positions

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402

DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64]


@given(
    shape=st.tuples(st.integers(1, 6), st.integers(0, 11), st.integers(0, 11)),
    size=st.integers(1, 200),
    form=st.sampled_from(["distance", "relative", "key"]),
    max_bias=st.sampled_from([8.0, 16.0]),
    dtype=st.sampled_from(DTYPES),
)
def test_alibi_in_blocks_is_the_whole_float64_bias_rounded_once(
    shape: tuple[int, int, int], size: int, form: str, max_bias: float, dtype: torch.dtype
) -> None:
    heads, q, k = shape
    whole = posenc.alibi_bias(heads, np.arange(q) + 3, k, form=form, max_bias=max_bias,
                              dtype=np.float64)  # fmt: skip
    with mock.patch.object(core_positions, "BLOCK_VALUES", size):
        got = pt.alibi_bias(heads, np.arange(q) + 3, k, form=form, max_bias=max_bias, dtype=dtype)
    expected = pt.cast_exact(torch.from_numpy(whole), dtype)
    assert got.dtype == dtype
    assert got.shape == shape
    assert torch.equal(got.view(-1).view(torch.uint8), expected.reshape(-1).view(torch.uint8))


def test_mpt_in_blocks_keeps_its_float32_values() -> None:
    want = posenc.alibi_bias(12, [39], 40, form="relative", convention="mpt")
    with mock.patch.object(core_positions, "BLOCK_VALUES", 7):
        got = pt.alibi_bias(12, [39], 40, form="relative", convention="mpt")
    assert torch.equal(got, torch.from_numpy(want))
