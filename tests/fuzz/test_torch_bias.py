"""Fuzz the attention biases of ``posenc.torch``: dense biases, masks, ``score_mod``s and the
learnable modules (see ``contract.py``). Results are checked against the NumPy core in
float64 (itself fuzzed against independent references in ``test_bias.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402

from .contract import DOUBTFUL, Args, choose, run  # noqa: E402
from .frontends import expect_tensor  # noqa: E402
from .profile import fuzz  # noqa: E402
from .test_bias import (  # noqa: E402
    ALIBI_CONVENTIONS,
    BUCKET_CONVENTIONS,
    RELATIVE,
    bias_positions,
    deberta_reference,
    t5_reference,
)
from .values import INF, NAN, WRONG_TYPES, count, flag, name, positive  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

DTYPES = choose(
    st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
    st.sampled_from([torch.int32, torch.bool, np.float32, "float32", 1.5]),
    st.sampled_from([torch.float16]),  # may overflow: refused by name (dtype) or finite
)
OFFSETS = choose(
    st.integers(-50, 10**6),
    st.sampled_from([*WRONG_TYPES, 2.5, NAN, 2**53 + 1, -(2**60), 10**30]),
)
LENGTHS = count(1, 9)


def _tolerance(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).eps)


def _close(got: np.ndarray, want: np.ndarray, dtype: torch.dtype, slack: float = 1.0) -> None:
    np.testing.assert_allclose(got, want, rtol=slack * _tolerance(dtype), atol=1e-30)


@fuzz()
@given(st.data())
def test_alibi_bias(data: st.DataObject) -> None:
    a = Args(data)
    heads = a.draw("heads", count(1, 40))
    query = a.draw("query_positions", bias_positions())
    key = a.draw("key_positions", bias_positions())
    form = a.draw("form", name(("distance", "relative", "key")), optional=True)
    convention = a.draw("convention", name(ALIBI_CONVENTIONS), optional=True)
    dtype = a.draw("dtype", DTYPES, optional=True)

    def check(out: torch.Tensor) -> None:
        mode = convention or "exact"
        want = posenc.alibi_bias(
            int(heads), query, key, form=form or "distance", convention=mode, dtype=np.float64
        )
        out_dtype = dtype or torch.float32
        got = expect_tensor(out, want.shape, out_dtype)
        # the framework conventions round in float32 (bfloat16: Falcon) before the cast
        _close(got, want, out_dtype, slack=1.0 if mode == "exact" else 2.0)

    run(a.call("posenc.torch.alibi_bias", pt.alibi_bias, check))


@fuzz()
@given(st.data())
def test_sandwich_and_kerple_bias(data: st.DataObject) -> None:
    a = Args(data)
    which = data.draw(st.sampled_from(["sandwich", "kerple"]), label="which")
    if which == "sandwich":
        a.draw("heads", count(1, 6))
    a.draw("query_positions", bias_positions())
    a.draw("key_positions", bias_positions())
    if which == "sandwich":
        a.draw("dim", count(2, 32), optional=True)
        if a.kwargs.get("dim") is not None and a.kinds["dim"] == "valid" and a.kwargs["dim"] % 2:
            a.kinds["dim"] = DOUBTFUL
        a.draw("base", positive(2.0, 1e5), optional=True)
    else:
        a.draw("r1", choose(st.floats(0.01, 4.0), st.sampled_from([NAN, -1.0, 0.0, "x"])))
        a.draw("r2", choose(st.floats(0.01, 2.0), st.sampled_from([NAN, INF, -1.0, None])))
        a.draw("kind", name(("log", "power")), optional=True)
    dtype = a.draw("dtype", DTYPES, optional=True)

    def check(out: torch.Tensor) -> None:
        kwargs = {k: v for k, v in a.kwargs.items() if k != "dtype"}
        core = posenc.sandwich_bias if which == "sandwich" else posenc.kerple_bias
        want = core(**kwargs, dtype=np.float64)
        out_dtype = dtype or torch.float32
        got = expect_tensor(out, want.shape, out_dtype)
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(got, want, atol=_tolerance(out_dtype) * scale)

    if which == "sandwich":
        run(a.call("posenc.torch.sandwich_bias", pt.sandwich_bias, check))
    else:
        run(a.call("posenc.torch.kerple_bias", pt.kerple_bias, check))


@fuzz()
@given(st.data())
def test_bucket_tensors(data: st.DataObject) -> None:
    a = Args(data)
    which = data.draw(st.sampled_from(["t5", "deberta"]), label="which")
    rel = a.draw("relative_positions", RELATIVE)
    if isinstance(rel, np.ndarray) and data.draw(st.booleans(), label="as tensor"):
        a.set("relative_positions", torch.from_numpy(rel), a.kinds["relative_positions"])
    if which == "t5":
        a.draw("bidirectional", flag(), optional=True)
        a.draw("num_buckets", st.just(32).map(lambda v: _valid(v)), optional=True)
        a.draw("max_distance", choose(st.integers(17, 1000), st.sampled_from([8, 0, NAN])))
    else:
        a.draw("bucket_size", choose(st.sampled_from([8, 64, 256]), st.sampled_from([1, "8"])))
        a.draw("max_position", choose(st.sampled_from([512, 1024]), st.sampled_from([0, 2.5])))
    convention = a.draw("convention", name(BUCKET_CONVENTIONS), optional=True)

    def check(out: torch.Tensor) -> None:
        values = np.asarray(a.kwargs["relative_positions"], dtype=np.int64)
        assert isinstance(out, torch.Tensor), out
        assert out.dtype == torch.int64, out.dtype
        assert tuple(out.shape) == values.shape, (out.shape, values.shape)
        if which == "t5":
            both = a.kwargs.get("bidirectional", True)
            want = [t5_reference(int(r), both, 32, a.kwargs["max_distance"]) for r in values.flat]
        else:
            size, top = a.kwargs["bucket_size"], a.kwargs["max_position"]
            want = [deberta_reference(int(r), size, top) for r in values.flat]
        got = out.reshape(-1).tolist()
        slack = 1 if convention == "transformers" else 0  # a float32 log at a bucket edge
        assert all(abs(g - w) <= slack for g, w in zip(got, want, strict=True)), (got, want)

    if which == "t5":
        run(a.call("posenc.torch.t5_buckets", pt.t5_buckets, check))
    else:
        run(a.call("posenc.torch.deberta_buckets", pt.deberta_buckets, check))


def _valid(value: Any) -> Any:
    from .contract import Drawn

    return Drawn(value, "valid")


def evaluate(score_mod: Any, heads: int, q: int, k: int) -> np.ndarray:
    """A ``score_mod`` evaluated on zero scores over every (head, query, key): its bias."""
    score = torch.zeros(1, heads, q, k)
    b = torch.zeros(1, 1, 1, 1, dtype=torch.int64)
    h = torch.arange(heads)[None, :, None, None]
    qi = torch.arange(q)[None, None, :, None]
    ki = torch.arange(k)[None, None, None, :]
    out = score_mod(score, b, h, qi, ki)
    assert out.dtype == torch.float32, out.dtype
    return out[0].double().numpy()


@fuzz()
@given(st.data())
def test_score_mods(data: st.DataObject) -> None:
    a = Args(data)
    which = data.draw(st.sampled_from(["alibi", "kerple", "t5", "sandwich"]), label="which")
    q_len = int(data.draw(st.integers(1, 6), label="q"))
    k_len = int(data.draw(st.integers(1, 6), label="k"))
    heads = 3
    if which == "alibi":
        a.draw("heads", choose(st.just(heads), st.sampled_from([0, -1, 2.5, None, 2**60])))
        a.draw("form", name(("distance", "relative", "key")), optional=True)
    elif which == "kerple":
        a.draw("r1", choose(st.just([0.5, 1.0, 2.0]), st.sampled_from([[NAN] * 3, -1.0, "x"])))
        a.draw("r2", choose(st.just([1.0, 0.5, 0.25]), st.sampled_from([[INF] * 3, 0.0, None])))
        a.draw("kind", name(("log", "power")), optional=True)
    elif which == "t5":
        table = torch.linspace(-1, 1, 32 * heads).reshape(32, heads)
        a.draw(
            "table",
            choose(
                st.just(table), st.sampled_from([None, "x", torch.zeros(32), np.zeros((32, 3))])
            ),
        )
        a.draw("query_len", choose(st.just(q_len), st.sampled_from([0, -1, 2.5, None])))
        a.draw("key_len", choose(st.just(k_len), st.sampled_from([0, "3", 10**30])))
        a.draw("bidirectional", flag(), optional=True)
    else:
        a.draw("heads", choose(st.just(heads), st.sampled_from([0, None, 2.5])))
        a.draw("query_len", choose(st.just(q_len), st.sampled_from([0, -1, None])))
        a.draw("key_len", choose(st.just(k_len), st.sampled_from([0, 2.5, 10**30])))
        a.draw("dim", choose(st.sampled_from([2, 8, 16]), st.sampled_from([0, 3, None])))
    q0 = a.draw("query_offset", OFFSETS, optional=True)
    k0 = a.draw("key_offset", OFFSETS, optional=True)

    def check(score_mod: Any) -> None:
        got = evaluate(score_mod, heads, q_len, k_len)
        query = np.arange(q_len) + int(q0 or 0)
        key = np.arange(k_len) + int(k0 or 0)
        kw = a.kwargs
        if which == "alibi":
            want = posenc.alibi_bias(heads, query, key, form=kw.get("form") or "distance")
        elif which == "kerple":
            want = posenc.kerple_bias(
                query, key, r1=kw["r1"], r2=kw["r2"], kind=kw.get("kind") or "log"
            )
        elif which == "t5":
            both = kw.get("bidirectional", True)
            want = posenc.t5_bias(kw["table"].numpy(), query, key, bidirectional=both)
        else:
            want = posenc.sandwich_bias(heads, query, key, dim=kw["dim"])
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(got, want, atol=4 * 2**-23 * scale)

    if which == "alibi":
        run(a.call("posenc.torch.alibi_score_mod", pt.alibi_score_mod, check))
    elif which == "kerple":
        run(a.call("posenc.torch.kerple_score_mod", pt.kerple_score_mod, check))
    elif which == "t5":
        run(a.call("posenc.torch.t5_score_mod", pt.t5_score_mod, check))
    else:
        run(a.call("posenc.torch.sandwich_score_mod", pt.sandwich_score_mod, check))


@fuzz()
@given(st.data())
def test_relative_score_mod(data: st.DataObject) -> None:
    a = Args(data)
    values = torch.linspace(-2, 2, 2 * 11).reshape(2, 11)
    a.draw(
        "values",
        choose(st.just(values), st.sampled_from([None, "x", torch.zeros(3), np.zeros((2, 11))])),
    )
    a.draw("min_relative", choose(st.just(-5), st.sampled_from([None, 2.5, "1", 2**60])))

    def check(score_mod: Any) -> None:
        got = evaluate(score_mod, 2, 4, 4)
        rel = np.arange(4)[None, :] - np.arange(4)[:, None]
        want = values.double().numpy()[:, rel + 5]
        # the table's own float32 values, looked up: at most one rounding of the largest
        assert_close_ulp(got, want, ulps=1, dtype="float32")

    run(a.call("posenc.torch.relative_score_mod", pt.relative_score_mod, check))


DOCUMENTS = choose(
    st.lists(st.integers(0, 2), min_size=4, max_size=4).map(lambda v: sorted(v)),
    st.sampled_from(["x", [0.5, 0, 0, 1], [0, 0], np.zeros((2, 2), int), [True] * 4]),
)


@fuzz()
@given(st.data())
def test_masks(data: st.DataObject) -> None:
    a = Args(data)
    which = data.draw(st.sampled_from(["allowed", "attn_mask"]), label="which")
    if which == "allowed":
        a.draw("query_len", choose(st.just(4), st.sampled_from([-1, 2.5, None, 10**30])))
        a.draw("key_len", choose(st.just(4), st.sampled_from([-1, "4", 2**62])))
    else:
        bias = torch.linspace(-1, 1, 2 * 16).reshape(2, 4, 4)
        a.draw("bias", choose(st.just(bias), st.sampled_from([None, np.zeros((2, 4, 4)), "x"])))
        a.draw("dtype", DTYPES, optional=True)
    a.draw("causal", flag(), optional=True)
    docs = a.draw("query_documents", DOCUMENTS, optional=True)

    def check(out: torch.Tensor) -> None:
        causal = bool(a.kwargs.get("causal", False))
        allowed = np.ones((4, 4), dtype=bool)
        if causal:
            allowed = np.tril(allowed)
        if docs is not None:
            ids = np.asarray(docs)
            allowed &= ids[:, None] == ids[None, :]
        if which == "allowed":
            assert out.dtype == torch.bool, out.dtype
            assert tuple(out.shape) == (4, 4), out.shape
            np.testing.assert_array_equal(out.numpy(), allowed)
            return
        out_dtype = a.kwargs.get("dtype") or torch.float32
        assert out.dtype == out_dtype, out.dtype
        assert tuple(out.shape) == (2, 4, 4), out.shape
        got = out.double().numpy()
        want = np.where(allowed, bias.to(out_dtype).double().numpy(), -np.inf)
        np.testing.assert_array_equal(got, want)

    if which == "allowed":
        run(a.call("posenc.torch.allowed_pairs", pt.allowed_pairs, check))
    else:
        run(a.call("posenc.torch.bias_attn_mask", pt.bias_attn_mask, check))


@fuzz(scale=0.3)
@given(st.data())
def test_bias_block_mask(data: st.DataObject) -> None:
    a = Args(data)
    a.draw("query_len", choose(st.sampled_from([4, 130]), st.sampled_from([0, -1, 2.5, None])))
    a.draw("key_len", choose(st.sampled_from([4, 130]), st.sampled_from([0, "4", 2**62])))
    a.draw("causal", flag(), optional=True)
    q, k = a.kwargs["query_len"], a.kwargs["key_len"]
    if data.draw(st.booleans(), label="documents"):
        valid = torch.arange(q if a.kinds["query_len"] == "valid" else 4) // 3
        a.draw(
            "documents",
            choose(st.just(valid), st.sampled_from([[0, 0, 1, 1], "x", torch.zeros(2, 2)])),
        )
        if q != k and a.kinds["documents"] == "valid":
            a.kinds["documents"] = DOUBTFUL

    def check(mask: Any) -> None:
        dense = mask.to_dense()
        assert dense.shape[-2:] == ((q + 127) // 128, (k + 127) // 128), dense.shape

    run(a.call("posenc.torch.bias_block_mask", pt.bias_block_mask, check))


@fuzz(scale=0.5)
@given(st.data())
def test_bias_modules(data: st.DataObject) -> None:
    a = Args(data)
    which = data.draw(st.sampled_from(["T5RelativeBias", "KerpleBias", "FireBias"]), label="which")
    a.draw("heads", count(1, 4))
    if which == "T5RelativeBias":
        a.draw("num_buckets", choose(st.sampled_from([8, 32]), st.sampled_from([1, 2.5, None])))
        a.draw("max_distance", choose(st.sampled_from([64, 128]), st.sampled_from([0, NAN])))
        a.draw("bidirectional", flag(), optional=True)
    elif which == "KerpleBias":
        a.draw("kind", name(("log", "power")), optional=True)
        a.draw(
            "eps",
            choose(st.sampled_from([0.01, 1e-3]), st.sampled_from([NAN, -1.0])),
            optional=True,
        )
    else:
        a.draw("hidden", count(1, 8), optional=True)
        a.draw("c", positive(0.1, 4.0), optional=True)
        a.draw("threshold", positive(0.5, 64.0), optional=True)
    query = data.draw(st.integers(1, 5), label="q")
    key = data.draw(st.integers(1, 5), label="k")

    def check(module: Any) -> None:
        out = module(query, key)
        heads = int(a.kwargs["heads"])
        got = expect_tensor(out, (heads, query, key), torch.float32)
        if which == "T5RelativeBias":
            want = posenc.t5_bias(
                module.table.weight.detach().numpy(), query, key,
                bidirectional=module.bidirectional, num_buckets=module.num_buckets,
                max_distance=module.max_distance,
            )  # fmt: skip
            np.testing.assert_array_equal(got, want)
        if which != "T5RelativeBias":  # its like() takes a transformers T5 attention
            twin = type(module).like(module)
            again = expect_tensor(twin(query, key), got.shape, torch.float32)
            np.testing.assert_array_equal(again, got)

    if which == "T5RelativeBias":
        run(a.call("posenc.torch.T5RelativeBias", pt.T5RelativeBias, check))
    elif which == "KerpleBias":
        run(a.call("posenc.torch.KerpleBias", pt.KerpleBias, check))
    else:
        run(a.call("posenc.torch.FireBias", pt.FireBias, check))
