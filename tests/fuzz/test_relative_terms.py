"""Fuzz the content-dependent relative terms (see ``contract.py``): the NumPy core's index
maps (DeBERTa's relative positions and clamped rows, the relative shift), each checked against
its formula on the arguments (the buckets by integer comparisons), DeBERTa's relative
positions in ``posenc.torch`` too; and the terms of ``posenc.torch``: the c2p/p2c scores and
the ``(q + v)·R`` term against float64 sums over the core's index maps, the relative shift
against its row formula."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import posenc

from .contract import DOUBTFUL, HOSTILE, Args, choose, expect_array, run
from .frontends import MODULE_MARKS, TORCH, Frontend, each_frontend, expect_tensor, torch_only
from .profile import fuzz
from .test_bias import BUCKET_CONVENTIONS, deberta_reference
from .values import (
    INF,
    NAN,
    NUMPY_RELATIVE,
    bias_meaning,
    count,
    distance_setting,
    flag,
    name,
    plain,
)

if TORCH is not None:
    import torch

    import posenc.torch as pt

pytestmark = MODULE_MARKS


def draw_bucketing(a: Args) -> tuple[int | None, int | None]:
    """``bucket_size`` and ``max_position`` (each may be left out); a valid value that the
    other setting makes refusable (one without the other, an empty log region) is doubtful."""
    size = a.draw("bucket_size", count(2, 64, none=True), optional=True)
    top = a.draw("max_position", distance_setting(2, 256, none=True), optional=True)
    given_size, given_top = size is not None, top is not None
    both_valid = all(a.kinds.get(k) == "valid" for k in ("bucket_size", "max_position"))
    empty_log = both_valid and int(top) - 1 <= int(size) // 2  # type: ignore[arg-type]
    if given_size != given_top or empty_log:
        for key in ("bucket_size", "max_position"):
            if a.kinds.get(key) == "valid":
                a.kinds[key] = DOUBTFUL
    a.draw("convention", name(BUCKET_CONVENTIONS), optional=True)
    return size, top


def deberta_map(query: Any, key: Any, size: Any, top: Any) -> np.ndarray:
    """The exact query − key map (bucketed when both settings are given)."""
    rel = bias_meaning(query)[:, None] - bias_meaning(key)[None, :]
    if size is None:
        return rel
    flat = [deberta_reference(int(r), int(size), int(top)) for r in rel.flat]
    return np.array(flat, dtype=np.int64).reshape(rel.shape)


@each_frontend
@fuzz()
@given(st.data())
def test_deberta_relative_positions(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    query = a.draw("query_positions", frontend.bias_positions())
    key = a.draw("key_positions", frontend.bias_positions())
    size, top = draw_bucketing(a)
    frontend.draw_device(a)

    def check(out: Any) -> None:
        want = deberta_map(query, key, size, top)
        got = frontend.expect(out, want.shape, frontend.dtype("int64"))
        # transformers' float32 log may move a bucket edge by one
        if a.kwargs.get("convention") == "transformers" and size is not None:
            assert np.all(np.abs(got - want) <= 1), (got, want)
        else:
            np.testing.assert_array_equal(got, want)

    fn = frontend.api.deberta_relative_positions
    run(a.call(frontend.label("deberta_relative_positions"), fn, check))


@fuzz()
@given(st.data())
def test_disentangled_index(data: st.DataObject) -> None:
    a = Args(data)
    rel = a.draw("relative_positions", NUMPY_RELATIVE)
    span = a.draw("att_span", count(1, 64))

    def check(out: np.ndarray) -> None:
        values = np.asarray(plain(rel)).astype(np.int64)
        want = np.clip(values + int(span), 0, 2 * int(span) - 1)
        np.testing.assert_array_equal(expect_array(out, values.shape, np.int64), want)

    run(a.call("posenc.disentangled_index", posenc.disentangled_index, check))


@fuzz()
@given(st.data())
def test_relative_shift_index(data: st.DataObject) -> None:
    a = Args(data)
    q = a.draw("query_length", count(1, 12))
    k = a.draw("key_length", count(1, 12, none=True), optional=True)
    rows = a.draw("rows", count(1, 30, none=True), optional=True)
    few = a.clean and rows is not None and int(rows) < int(q) + int(q if k is None else k) - 1
    if few:
        a.kinds["rows"] = DOUBTFUL  # too few rows for the shift: refused by name

    def check(out: np.ndarray) -> None:
        keys = int(q if k is None else k)
        i, j = np.ogrid[: int(q), :keys]
        want = np.broadcast_to(int(q) - 1 - i + j, (int(q), keys))
        np.testing.assert_array_equal(expect_array(out, want.shape, np.int64), want)

    run(a.call("posenc.relative_shift_index", posenc.relative_shift_index, check))


def draw_relative_key(a: Args) -> tuple[Any, Any, Any, Any, Any]:
    """``left``, ``right``, ``sign``, ``folded`` and ``offset`` of a relative-key index; an
    offset below ``left`` or beside ``folded=True`` is refused, so it is doubtful."""
    left = a.draw("left", distance_setting(0, 16))
    right = a.draw("right", distance_setting(0, 16))
    sign = a.draw("sign", name(("key - query", "query - key")), optional=True)
    folded = a.draw("folded", flag(), optional=True)
    offset = a.draw("offset", distance_setting(0, 40, none=True), optional=True)
    if offset is not None and a.kinds.get("offset") == "valid":
        folds = a.kinds.get("folded") == "valid" and bool(folded)
        below = a.kinds.get("left") == "valid" and int(offset) < int(left)
        if folds or below:
            a.kinds["offset"] = DOUBTFUL
    return left, right, sign, folded, offset


def relative_key_map(query: Any, key: Any, settings: tuple[Any, ...]) -> np.ndarray:
    """The rows by the definition, on the exact positions (Python integers)."""
    left, right, sign, folded, offset = settings
    rel = bias_meaning(key)[None, :] - bias_meaning(query)[:, None]
    if sign == "query - key":
        rel = -rel
    clipped = np.clip(rel, -int(left), int(right))
    if folded is not None and bool(folded):
        return np.abs(clipped)
    return clipped + (int(left) if offset is None else int(offset))


@each_frontend
@fuzz()
@given(st.data())
def test_relative_key_index(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    query = a.draw("query_positions", frontend.bias_positions())
    key = a.draw("key_positions", frontend.bias_positions())
    settings = draw_relative_key(a)
    frontend.draw_device(a)

    def check(out: Any) -> None:
        want = relative_key_map(query, key, settings)
        got = frontend.expect(out, want.shape, frontend.dtype("int64"))
        np.testing.assert_array_equal(got, want)

    fn = frontend.api.relative_key_index
    run(a.call(frontend.label("relative_key_index"), fn, check))


# -- PyTorch only ------------------------------------------------------------------------------


def _random(generator: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Any:
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def _bound(dtype: torch.dtype, terms: int, magnitude: np.ndarray) -> np.ndarray:
    """Rounding of sums of ``terms`` products in ``dtype``, scaled by the sums of their
    magnitudes (a generous forward error bound)."""
    return (terms + 4) * float(torch.finfo(dtype).eps) * magnitude + 1e-300


def _layer_or_hostile(a: Args, name: str, valid: torch.Tensor) -> torch.Tensor | None:
    """``valid``, or (sometimes) a hostile stand-in: odd rows, another dtype, not a tensor."""
    bad = a.data.draw(st.sampled_from([None, None, None, None, "rows", "dtype", "list"]))
    if bad is None:
        return a.set(name, valid)
    value: Any = {
        "rows": valid[..., :-1, :],
        "dtype": valid.to(torch.float16),
        "list": valid.tolist(),
    }[bad]
    return a.set(name, value, HOSTILE)


@torch_only
@fuzz(scale=0.5)
@given(st.data())
def test_disentangled_scores(data: st.DataObject) -> None:
    a = Args(data)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    dtype = data.draw(st.sampled_from([torch.float32, torch.float64]), label="dtype")
    lead = data.draw(st.sampled_from([(), (1,), (3,), (2, 2)]), label="lead")
    q, k = data.draw(st.integers(1, 6), label="q"), data.draw(st.integers(1, 6), label="k")
    d, span = data.draw(st.integers(1, 5), label="d"), data.draw(st.integers(1, 4), label="span")
    query = a.set("query_layer", _random(gen, (*lead, q, d), dtype))
    key = a.set("key_layer", _random(gen, (*lead, k, d), dtype))
    which = data.draw(st.sampled_from(["c2p", "p2c", "both", "neither"]), label="terms")
    pos_key = pos_query = None
    if which in ("c2p", "both"):
        pos_key = _layer_or_hostile(a, "pos_key_layer", _random(gen, (2 * span, d), dtype))
    if which in ("p2c", "both"):
        pos_query = _layer_or_hostile(a, "pos_query_layer", _random(gen, (2 * span, d), dtype))
    if which == "neither":
        a.set("pos_key_layer", None, HOSTILE)
    rel = a.draw(
        "relative_positions",
        choose(
            st.integers(-8, 8).map(lambda o: posenc.deberta_relative_positions(q, k) + o),
            st.sampled_from(
                [np.zeros((q + 1, k), np.int64), np.zeros((q, k)), torch.zeros(q, k), "x"]
            ),
        ),
        optional=True,
    )
    factor = a.draw(
        "scale_factor",
        choose(st.integers(1, 4), st.sampled_from([0, -1, 2.5, NAN, "3", True])),
        optional=True,
    )

    def check(out: torch.Tensor) -> None:
        index = posenc.disentangled_index(
            posenc.deberta_relative_positions(q, k) if rel is None else rel, span
        )
        terms = (pos_key is not None) + (pos_query is not None)
        scale = float(np.sqrt(np.float32(d) * np.float32(terms + 1 if factor is None else factor)))
        qn, kn = query.double().numpy(), key.double().numpy()
        want, size = np.zeros((*lead, q, k)), np.zeros((*lead, q, k))
        if pos_key is not None:  # c2p: query i with the row of (i, j)
            rows = pos_key.double().numpy()[index]  # (q, k, d)
            want += np.einsum("...id,ijd->...ij", qn, rows) / scale
            size += np.einsum("...id,ijd->...ij", np.abs(qn), np.abs(rows)) / scale
        if pos_query is not None:  # p2c: key j with the row of (i, j)
            rows = pos_query.double().numpy()[index]
            want += np.einsum("...jd,ijd->...ij", kn, rows) / scale
            size += np.einsum("...jd,ijd->...ij", np.abs(kn), np.abs(rows)) / scale
        got = expect_tensor(out, want.shape, dtype)
        assert np.all(np.abs(got - want) <= _bound(dtype, d, size)), (got, want)

    run(a.call("posenc.torch.disentangled_scores", pt.disentangled_scores, check))


@torch_only
@fuzz(scale=0.5)
@given(st.data())
def test_relative_shift(data: st.DataObject) -> None:
    a = Args(data)
    lead = data.draw(st.sampled_from([(), (2,), (2, 3)]), label="lead")
    q, rows = data.draw(st.integers(1, 6), label="q"), data.draw(st.integers(1, 14), label="rows")
    a.draw(
        "scores",
        choose(
            st.just(torch.arange(float(rows)).expand(*lead, q, rows).contiguous()),
            st.sampled_from([torch.zeros(4), torch.zeros(q, rows, dtype=torch.int64), [[1.0]]]),
        ),
    )
    k = a.draw("key_length", count(1, 8, none=True), optional=True)
    if a.clean and rows < q + int(q if k is None else k) - 1:
        a.kinds["key_length" if k is not None else "scores"] = DOUBTFUL  # too few columns

    def check(out: torch.Tensor) -> None:
        keys = int(q if k is None else k)
        want = posenc.relative_shift_index(q, keys, rows=rows).astype(np.float64)
        got = expect_tensor(out, (*lead, q, keys), torch.float32)
        np.testing.assert_array_equal(got, np.broadcast_to(want, got.shape))

    run(a.call("posenc.torch.relative_shift", pt.relative_shift, check))


@torch_only
@fuzz(scale=0.5)
@given(st.data())
def test_relative_position_scores(data: st.DataObject) -> None:
    a = Args(data)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    dtype = data.draw(st.sampled_from([torch.float32, torch.float64]), label="dtype")
    batch, heads = data.draw(st.integers(1, 2), label="batch"), data.draw(st.integers(1, 3))
    q, d = data.draw(st.integers(1, 6), label="q"), data.draw(st.integers(1, 5), label="d")
    k = a.draw("key_length", count(1, 6, none=True), optional=True)
    keys = int(q if k is None else k) if a.clean else 1
    rows = keys + q - 1 + data.draw(st.integers(0, 2), label="extra rows")
    query = a.set("query", _random(gen, (batch, heads, q, d), dtype))
    table = _random(gen, (1, heads, rows, d), dtype)
    position_keys = _layer_or_hostile(a, "position_keys", table)
    fewer_rows = isinstance(position_keys, torch.Tensor) and position_keys.dtype == dtype
    if a.kinds["position_keys"] == HOSTILE and fewer_rows:  # one row fewer may still do
        a.kinds["position_keys"] = DOUBTFUL
    bias = a.draw(
        "pos_bias_v",
        choose(
            st.just(_random(gen, (heads, d), dtype)),
            st.sampled_from([torch.zeros(heads + 1, d, dtype=dtype), torch.zeros(d), "x"]),
        ),
        optional=True,
    )
    scaling = a.draw(
        "scaling",
        choose(
            st.floats(0.01, 2.0) | st.sampled_from([0.0, -0.3, 1, np.float32(0.5)]),
            st.sampled_from([NAN, INF, "x", [1.0]]),
        ),
        optional=True,
    )

    def check(out: torch.Tensor) -> None:
        n = int(q if k is None else k)
        index = posenc.relative_shift_index(q, n, rows=position_keys.shape[-2])  # type: ignore[union-attr]
        qn = query.double().numpy()
        if bias is not None:
            qn = qn + bias.double().numpy()[:, None, :]
        rows_read = position_keys.double().numpy()[:, :, index]  # type: ignore[union-attr]
        factor = d**-0.5 if scaling is None else float(scaling)
        want = np.einsum("bhid,xhijd->bhij", qn, rows_read) * factor
        size = np.einsum("bhid,xhijd->bhij", np.abs(qn), np.abs(rows_read)) * abs(factor)
        got = expect_tensor(out, want.shape, dtype)
        assert np.all(np.abs(got - want) <= _bound(dtype, d + 1, size)), (got, want)

    run(a.call("posenc.torch.relative_position_scores", pt.relative_position_scores, check))


@torch_only
@fuzz(scale=0.5)
@given(st.data())
def test_relative_key_scores(data: st.DataObject) -> None:
    a = Args(data)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    dtype = data.draw(st.sampled_from([torch.float32, torch.float64]), label="dtype")
    lead = data.draw(st.sampled_from([(), (1,), (3,), (2, 2)]), label="lead")
    q, k = data.draw(st.integers(0, 6), label="q"), data.draw(st.integers(1, 6), label="k")
    d, rows = data.draw(st.integers(1, 5), label="d"), data.draw(st.integers(1, 7), label="rows")
    query = a.set("query", _random(gen, (*lead, q, d), dtype))
    table = _layer_or_hostile(a, "table", _random(gen, (rows, d), dtype))
    if a.kinds["table"] == HOSTILE and isinstance(table, torch.Tensor) and table.dtype == dtype:
        a.kinds["table"] = DOUBTFUL  # one row fewer may still hold every row read
    valid_index = torch.randint(0, rows, (q, k), generator=gen)
    index = a.draw(
        "index",
        choose(
            st.just(valid_index),
            st.sampled_from(
                [valid_index + rows, valid_index - rows - 1, valid_index.double(),
                 torch.zeros(q + 1, k, dtype=torch.long), valid_index.tolist(), "x"]
            ),
        ),
    )  # fmt: skip
    key = a.draw(
        "key",
        choose(
            st.just(_random(gen, (*lead, k, d), dtype)),
            st.sampled_from(
                [torch.zeros(*lead, k + 1, d, dtype=dtype), torch.zeros(k, d, dtype=torch.float16),
                 [[1.0]]]
            ),
        ),
        optional=True,
    )  # fmt: skip
    if q == 0 and a.kinds["index"] == HOSTILE and isinstance(index, torch.Tensor):
        a.kinds["index"] = DOUBTFUL  # an empty index reads no row

    def check(out: torch.Tensor) -> None:
        rows_read = table.double().numpy()[index.numpy()]  # type: ignore[union-attr]
        qn = query.double().numpy()
        want = np.einsum("...id,ijd->...ij", qn, rows_read)
        size = np.einsum("...id,ijd->...ij", np.abs(qn), np.abs(rows_read))
        if key is not None:
            kn = key.double().numpy()
            want = want + np.einsum("...jd,ijd->...ij", kn, rows_read)
            size = size + np.einsum("...jd,ijd->...ij", np.abs(kn), np.abs(rows_read))
        got = expect_tensor(out, want.shape, dtype)
        assert np.all(np.abs(got - want) <= _bound(dtype, 2 * d, size)), (got, want)

    run(a.call("posenc.torch.relative_key_scores", pt.relative_key_scores, check))


def _logits_reference(curves: np.ndarray, query: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The definition, by loops: row ``d = q_i − k_j`` of each query's curve, 0 outside."""
    extent = curves.shape[-1]
    out = np.zeros((*curves.shape[:-1], key.size))
    for i, j in np.ndindex(query.size, key.size):
        d = int(query[i]) - int(key[j])
        if 0 <= d < extent:
            out[..., i, j] = curves[..., i, d]
    return out


@fuzz(scale=0.5)
@given(st.data())
def test_relative_logits_numpy(data: st.DataObject) -> None:
    a = Args(data)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    q, extent = data.draw(st.integers(1, 5), label="q"), data.draw(st.integers(1, 6), label="e")
    lead = data.draw(st.sampled_from([(), (2,), (2, 3)]), label="lead")
    curves = a.draw(
        "curves",
        choose(
            st.just(rng.standard_normal((*lead, q, extent)).astype(np.float32)),
            st.sampled_from(
                [np.zeros(3), [[1.0, NAN]], np.zeros((q, 0)), np.zeros((q, extent), dtype=bool),
                 "x", [[1.0], [1.0, 2.0]], np.full((q, extent), INF)]
            ),
        ),
    )  # fmt: skip
    start = data.draw(st.integers(0, 9), label="start")
    a.draw(
        "query_positions",
        choose(
            st.just(np.arange(start, start + q)),
            st.sampled_from([q + 1, np.zeros((q, 2), dtype=np.int64), "x", [0.5] * q, 10**30]),
        ),
    )
    a.draw(
        "key_positions",
        choose(st.integers(1, 12), st.sampled_from([0.5, "x", -1, [1.5], 10**12, 2**70])),
    )

    def check(out: np.ndarray) -> None:
        keys = a.kwargs["key_positions"]
        key = np.arange(keys) if isinstance(keys, int) else np.asarray(keys)
        want = _logits_reference(
            np.asarray(curves, dtype=np.float64), np.arange(start, start + q), key
        )
        got = expect_array(out, want.shape, np.float64)
        np.testing.assert_array_equal(got, want)

    run(a.call("posenc.relative_logits", posenc.relative_logits, check))


@torch_only
@fuzz(scale=0.5)
@given(st.data())
def test_relative_logits(data: st.DataObject) -> None:
    a = Args(data)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    q, extent = data.draw(st.integers(1, 5), label="q"), data.draw(st.integers(1, 6), label="e")
    lead = data.draw(st.sampled_from([(), (2,), (2, 3)]), label="lead")
    curves = a.draw(
        "curves",
        choose(
            st.just(_random(gen, (*lead, q, extent), torch.float32)),
            st.sampled_from([torch.zeros(3), [[1.0]], torch.zeros(q, extent, dtype=torch.int64)]),
        ),
    )
    start = data.draw(st.integers(0, 9), label="start")
    a.draw(
        "query_positions",
        choose(
            st.just(torch.arange(start, start + q)),
            st.sampled_from([q + 1, torch.zeros(q, 2, dtype=torch.int64), "x", [0.5] * q]),
        ),
    )
    a.draw("key_positions", choose(st.integers(1, 12), st.sampled_from([0.5, "x", -1, [1.5]])))

    def check(out: torch.Tensor) -> None:
        keys = a.kwargs["key_positions"]
        key = np.arange(keys) if isinstance(keys, int) else np.asarray(keys)
        want = _logits_reference(curves.double().numpy(), np.arange(start, start + q), key)
        got = expect_tensor(out, want.shape, torch.float32)
        np.testing.assert_array_equal(got, want)

    run(a.call("posenc.torch.relative_logits", pt.relative_logits, check))


@torch_only
@fuzz(scale=0.5)
@given(st.data())
def test_relative_logits_score_mod(data: st.DataObject) -> None:
    a = Args(data)
    curves = torch.linspace(-2, 2, 2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    a.draw(
        "curves",
        choose(
            st.just(curves), st.sampled_from([None, "x", torch.zeros(3), np.zeros((1, 1, 1, 1))])
        ),
    )
    q0 = a.draw(
        "query_offset",
        choose(st.integers(0, 6), st.sampled_from([2.5, "1", 2**60, True])),
        optional=True,
    )
    k0 = a.draw(
        "key_offset",
        choose(st.integers(0, 6), st.sampled_from([2.5, "1", 2**60, True])),
        optional=True,
    )

    def check(score_mod: Any) -> None:
        score = torch.zeros(2, 3, 4, 7)
        b = torch.arange(2)[:, None, None, None]
        h = torch.arange(3)[None, :, None, None]
        qi, ki = torch.arange(4)[None, None, :, None], torch.arange(7)[None, None, None, :]
        got = score_mod(score, b, h, qi, ki).double().numpy()
        query = np.arange(4) + int(q0 or 0)
        want = _logits_reference(curves.double().numpy(), query, np.arange(7) + int(k0 or 0))
        np.testing.assert_array_equal(got, want)

    run(a.call("posenc.torch.relative_logits_score_mod", pt.relative_logits_score_mod, check))
