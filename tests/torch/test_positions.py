"""Position ids built on the device from Python integers: ``posenc.torch.compressed_positions``
equals the NumPy core's over random settings, and traces with ``torch.compile`` as the
counts change (nothing is read from a tensor)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402


@given(tokens=st.integers(0, 5000), ratio=st.integers(1, 200), data=st.data())
def test_compressed_positions_are_the_numpy_core_s(
    tokens: int, ratio: int, data: st.DataObject
) -> None:
    emitted = data.draw(st.integers(0, tokens // ratio), label="emitted")
    got = pt.compressed_positions(tokens, ratio, emitted=emitted)
    want = posenc.compressed_positions(tokens, ratio, emitted=emitted)
    assert got.dtype == torch.int64
    assert got.tolist() == want.tolist()


@pytest.mark.slow
def test_compressed_positions_trace_over_changing_counts() -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()

    def entries(tokens: int, emitted: int) -> torch.Tensor:
        return pt.compressed_positions(tokens, 4, emitted=emitted) + 0

    compiled = torch.compile(entries, fullgraph=True, dynamic=True, backend="eager")
    for tokens, emitted in ((9, 0), (17, 2), (40, 3), (41, 10)):
        assert torch.equal(compiled(tokens, emitted), entries(tokens, emitted))
    assert counters["stats"]["unique_graphs"] <= 2, dict(counters["stats"])
