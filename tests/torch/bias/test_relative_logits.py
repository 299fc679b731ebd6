"""``posenc.torch.relative_logits`` (the gather on the device) against the NumPy float64
reference ``posenc.relative_logits`` over random shapes, positions and dtypes: every value is
one of the curves or 0, so each dtype's result is the float64 one rounded once (exact for
float16 and bfloat16 too). The models' own modules: tests/references/hf/test_relative_logits.py
and tests/references/test_relative_logits.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


@given(
    lead=st.sampled_from([(), (1,), (2, 3)]), q=st.integers(1, 9), k=st.integers(0, 11),
    extent=st.integers(1, 12), q_start=st.integers(0, 20), k_start=st.integers(0, 20),
    dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16), shuffled=st.booleans(),
)  # fmt: skip
def test_the_tensor_gather_is_the_float64_reference_rounded_once(
    lead: tuple[int, ...],
    q: int,
    k: int,
    extent: int,
    q_start: int,
    k_start: int,
    dtype: torch.dtype,
    seed: int,
    shuffled: bool,
) -> None:
    gen = torch.Generator().manual_seed(seed)
    curves64 = torch.randn(*lead, q, extent, generator=gen, dtype=torch.float64) * 100
    query = torch.arange(q_start, q_start + q)
    key = torch.arange(k_start, k_start + k)
    if shuffled:  # positions in any order (packed or gathered rows)
        query = query[torch.randperm(q, generator=gen)]
        key = key[torch.randperm(k, generator=gen)]
    want = posenc.relative_logits(curves64.numpy(), query.numpy(), key.numpy())
    got = pt.relative_logits(curves64.to(dtype), query, key)
    assert got.dtype == dtype
    assert got.shape == want.shape
    rounded = torch.from_numpy(want).to(dtype)  # the float64 value rounded once
    assert torch.equal(got, rounded)
