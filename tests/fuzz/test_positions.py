"""Fuzz the position-id helpers and the switches of the NumPy core (see ``contract.py``)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import posenc

from .contract import DOUBTFUL, Args, choose, expect_array, run
from .frontends import torch_only
from .profile import fuzz
from .values import HUGE, INT_DTYPES, WRONG_TYPES, count, flag, positive

SEQ_SHAPES = st.sampled_from([(0,), (1,), (4,), (2, 3), (3, 5), (2, 0), (1, 2, 3)])

NOT_ARRAYS = [
    None,
    "abc",
    {"a": 1},
    1j,
    np.array(1),
    3,
    np.array([1.5, 0.0]),
    [["a", "b"]],
    [[1, 2], [3]],
    np.array([1 + 1j]),
    np.array([None, 1], dtype=object),
]


def int_arrays(lo: int, hi: int, shapes=SEQ_SHAPES) -> st.SearchStrategy[np.ndarray]:
    def build(dtype, shape):
        info = np.iinfo(dtype)
        elements = st.integers(max(lo, int(info.min)), min(hi, int(info.max)))
        return hnp.arrays(dtype, shape, elements=elements)

    return st.tuples(st.sampled_from(INT_DTYPES), shapes).flatmap(lambda a: build(*a))


def masks() -> st.SearchStrategy[object]:
    bools = SEQ_SHAPES.flatmap(lambda s: hnp.arrays(np.bool_, s))
    lists = st.lists(st.lists(st.integers(0, 1), min_size=3, max_size=3), min_size=1, max_size=3)
    return int_arrays(0, 1) | bools | lists


def offsets(name_hi: int = 10**6):
    """An offset: small ones are valid, huge ones may be refused (or must then be exact)."""
    return count(0, name_hi, huge="doubtful")


def reference_counts(real: np.ndarray, offset: int) -> list:
    """Per row: position of each real token (Python ints, exact), None at padding."""
    out = []
    for row in real.reshape(-1, real.shape[-1]) if real.size else []:
        seen, line = 0, []
        for flag_ in row:
            line.append(offset + seen if flag_ else None)
            seen += bool(flag_)
        out.append(line)
    return out


@fuzz()
@given(st.data())
def test_positions_from_mask(data: st.DataObject) -> None:
    a = Args(data)
    mask = a.draw(
        "mask",
        choose(
            masks(),
            st.sampled_from(
                [*NOT_ARRAYS, np.array([[0, 2]]), np.array([[-1, 1]]), np.array([[True, 0.5]])]
            ),
        ),
    )
    offset = a.draw("offset", offsets(), optional=True)
    pad = a.draw("pad_position", offsets(), optional=True)

    def check(out):
        m = np.asarray(mask)
        expect_array(out, m.shape, np.int64)
        want = reference_counts(m.astype(bool), int(offset or 0))
        got = out.reshape(-1, m.shape[-1]).tolist() if m.size else []
        for row_got, row_want in zip(got, want, strict=True):
            for g, w in zip(row_got, row_want, strict=True):
                assert g == (int(pad or 0) if w is None else w), f"got {row_got}, want {row_want}"

    run(a.call("posenc.positions_from_mask", posenc.positions_from_mask, check))


@fuzz()
@given(st.data())
def test_positions_from_segments(data: st.DataObject) -> None:
    a = Args(data)
    seg = a.draw(
        "segment_ids",
        choose(
            int_arrays(-3, 3) | int_arrays(0, 2**64 - 1),
            st.sampled_from([*NOT_ARRAYS, np.array([[True, False]])]),
        ),
    )

    def check(out):
        s = np.asarray(seg)
        expect_array(out, s.shape, np.int64)
        for row, got in zip(
            s.reshape(-1, s.shape[-1]).tolist() if s.size else [],
            out.reshape(-1, s.shape[-1]).tolist() if s.size else [],
            strict=True,
        ):
            want = [0 if i == 0 or row[i] != row[i - 1] else None for i in range(len(row))]
            for i in range(len(row)):
                want[i] = 0 if want[i] == 0 else want[i - 1] + 1
            assert got == want, f"{row} -> {got}, want {want}"

    run(a.call("posenc.positions_from_segments", posenc.positions_from_segments, check))


def cu_seqlens():
    lengths = st.lists(st.integers(0, 6), max_size=5)
    as_list = lengths.map(lambda ls: [0, *np.cumsum(ls, dtype=np.int64).tolist()])
    return as_list | st.tuples(as_list, st.sampled_from(INT_DTYPES)).map(
        lambda p: np.array(p[0], dtype=p[1])
    )


@fuzz()
@given(st.data())
def test_positions_from_cu_seqlens(data: st.DataObject) -> None:
    a = Args(data)
    cu = a.draw(
        "cu_seqlens",
        choose(
            cu_seqlens(),
            st.sampled_from(
                [
                    *NOT_ARRAYS,
                    [],
                    [1, 3],
                    [0, 3, 2],
                    [[0, 1]],
                    [0, -1],
                    np.array([0, 2**64 - 1], dtype=np.uint64),
                    [0, 10**15],
                    [0, 2**62],
                    [0, 2**63 - 1],
                ]
            ),
        ),
    )

    def check(out):
        bounds = [int(v) for v in np.asarray(cu).tolist()]
        want = [i - lo for lo, hi in itertools.pairwise(bounds) for i in range(lo, hi)]
        expect_array(out, (len(want),), np.int64)
        assert out.tolist() == want

    run(a.call("posenc.positions_from_cu_seqlens", posenc.positions_from_cu_seqlens, check))


@fuzz()
@given(st.data())
def test_positions_from_tokens(data: st.DataObject) -> None:
    a = Args(data)
    tokens = a.draw("tokens", choose(int_arrays(0, 5), st.sampled_from(NOT_ARRAYS)))
    pad = a.draw("padding_idx", count(0, 5, huge="doubtful"))
    offset = a.draw("offset", offsets(), optional=True)

    def check(out):
        t = np.asarray(tokens)
        expect_array(out, t.shape, np.int64)
        real = t.astype(object) != int(pad)
        want = reference_counts(real, int(pad) + 1 + int(offset or 0))
        got = out.reshape(-1, t.shape[-1]).tolist() if t.size else []
        for row_got, row_want in zip(got, want, strict=True):
            assert row_got == [int(pad) if w is None else w for w in row_want], row_got

    run(a.call("posenc.positions_from_tokens", posenc.positions_from_tokens, check))


@fuzz()
@given(st.data())
def test_compressed_positions(data: st.DataObject) -> None:
    a = Args(data)
    tokens = a.draw("tokens", count(0, 600, huge="doubtful"))
    ratio = a.draw("ratio", count(1, 130, huge="doubtful"))
    emitted = a.draw("emitted", count(0, 40), optional=True)
    if a.clean and emitted is not None and int(emitted) > int(tokens) // int(ratio):
        a.kinds["emitted"] = DOUBTFUL  # more entries than windows closed: refused by name

    def check(out):
        first, closed = int(emitted or 0), int(tokens) // int(ratio)
        want = [n * int(ratio) for n in range(first, closed)]
        assert expect_array(out, (len(want),), np.int64).tolist() == want

    run(a.call("posenc.compressed_positions", posenc.compressed_positions, check))


@torch_only
@fuzz()
@given(st.data())
def test_compressed_positions_torch(data: st.DataObject) -> None:
    import torch

    import posenc.torch as pt

    a = Args(data)
    tokens = a.draw("tokens", count(0, 600, huge="doubtful"))
    ratio = a.draw("ratio", count(1, 130, huge="doubtful"))
    emitted = a.draw("emitted", count(0, 40), optional=True)
    if a.clean and emitted is not None and int(emitted) > int(tokens) // int(ratio):
        a.kinds["emitted"] = DOUBTFUL  # more entries than windows closed: refused by name
    a.draw("device", choose(st.sampled_from([None, "cpu"]), st.sampled_from(["gpu0", 1.5])),
           optional=True)  # fmt: skip

    def check(out):
        want = posenc.compressed_positions(tokens, ratio, emitted=emitted or 0)
        assert isinstance(out, torch.Tensor)
        assert out.dtype == torch.int64
        assert out.tolist() == want.tolist()

    run(a.call("posenc.torch.compressed_positions", pt.compressed_positions, check))


TIMESTAMP_SHAPES = st.sampled_from([(1,), (3,), (2, 4), (3, 1), (2, 0), (1, 2, 3)])


@fuzz(scale=0.5)
@given(st.data())
def test_timestamp_positions(data: st.DataObject) -> None:
    a = Args(data)
    valid = TIMESTAMP_SHAPES.flatmap(
        lambda shape: hnp.arrays(np.float64, shape, elements=st.floats(0, 1e4))
    ) | st.just([[0.0, 0.04, 0.08]])
    hostile = st.sampled_from(
        [1.0, None, "abc", [[np.nan]], [[np.inf, 0.0]], [[True]], np.array([1j]), [[1], [2, 3]]]
    )
    tau = a.draw("timestamps", choose(valid, hostile))
    step = a.draw("frame_seconds", positive(1e-3, 10.0, extra=(0.04,), extreme=(5e-324, 1e300)))
    scale = a.draw("max_positions", positive(1.0, 1e4, extra=(1200.0,), extreme=(1e-300,)))

    def check(out):
        t = np.asarray(tau, dtype=np.float64)
        expect_array(out, (*t.shape, 2), np.float64)
        if not t.size:
            return
        window = np.round(t[..., :1] / (float(step) * t.shape[-1])) / float(scale)
        time = 2 * np.pi * np.arange(t.shape[-1]) / float(scale)
        np.testing.assert_allclose(out[..., 0], -2 * np.pi * t * window, rtol=1e-12)
        np.testing.assert_allclose(out[..., 1], -2 * np.pi * t * time, rtol=1e-12)

    run(a.call("posenc.timestamp_positions", posenc.timestamp_positions, check))


@fuzz(scale=0.25)
@given(st.data())
def test_set_fast_paths(data: st.DataObject) -> None:
    a = Args(data)
    a.draw("enabled", flag())
    before = posenc.sinusoidal(3, 4)

    def switch(enabled):
        with posenc.set_fast_paths(enabled) as switch:
            inside = posenc.sinusoidal(3, 4)
        return switch, inside

    def check(result):
        _, inside = result
        assert np.array_equal(inside, before)
        assert np.array_equal(posenc.sinusoidal(3, 4), before)

    run(a.call("posenc.set_fast_paths", switch, check))


@fuzz(scale=0.25)
@given(st.data())
def test_describe(data: st.DataObject) -> None:
    a = Args(data)
    valid = st.sampled_from(
        [
            posenc.analysis.identify(posenc.sinusoidal(8, 4)),
            posenc.analysis.precision_report(100, 4),
        ]
    )
    a.draw(
        "result", choose(valid, st.sampled_from([*WRONG_TYPES, {"outcome": "match"}, *HUGE[:1]]))
    )

    def check(text):
        assert isinstance(text, str)
        assert text

    run(a.call("posenc.describe", posenc.describe, check))
