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

from .contract import DOUBTFUL, Args, Call, choose, run  # noqa: E402
from .frontends import expect_tensor  # noqa: E402
from .profile import fuzz  # noqa: E402
from .test_bias import (  # noqa: E402
    ALIBI_CONVENTIONS,
    BUCKET_CONVENTIONS,
    deberta_reference,
    t5_reference,
)
from .values import (  # noqa: E402
    INF,
    NAN,
    RELATIVE,
    WRONG_TYPES,
    bias_positions,
    count,
    flag,
    name,
    positive,
)
from .values import bias_meaning as meaning  # noqa: E402

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
#: extra heads beyond ``heads`` (valid draws are added to ``heads``), or a bad total_heads
TOTAL_HEADS = choose(
    st.integers(0, 3), st.sampled_from([*WRONG_TYPES, 2.5, NAN, -1, 2**62]), st.just(None)
)


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
    total = a.draw("total_heads", TOTAL_HEADS, optional=True)
    if total is not None and a.kinds["heads"] == "valid" and a.kinds["total_heads"] == "valid":
        total = a.set("total_heads", int(heads) + int(total))  # a count of extra heads
    dtype = a.draw("dtype", DTYPES, optional=True)

    def check(out: torch.Tensor) -> None:
        mode = convention or "exact"
        want = posenc.alibi_bias(
            int(heads), query, key, form=form or "distance", convention=mode, dtype=np.float64
        )
        if total is not None:  # zeros on the heads after the first ``heads``
            want = np.concatenate([want, np.zeros((int(total) - int(heads), *want.shape[1:]))])
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
    numeric = isinstance(rel, np.ndarray) and rel.dtype.kind in "biuf"  # what torch can hold
    if numeric and data.draw(st.booleans(), label="as tensor"):
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
        alibi_heads = data.draw(st.integers(1, heads), label="ALiBi heads")
        a.draw("heads", choose(st.just(alibi_heads), st.sampled_from([0, -1, 2.5, None, 2**60])))
        if alibi_heads < heads or data.draw(st.booleans(), label="total_heads"):
            a.draw(
                "total_heads",
                choose(st.just(heads), st.sampled_from([0, alibi_heads - 1, 2.5, "3", 2**62])),
            )
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
        # the lengths are optional: one score_mod serves every length (evaluated beyond them)
        a.draw("query_len", choose(st.just(1), st.sampled_from([0, -1, 2.5])), optional=True)
        a.draw("key_len", choose(st.just(2), st.sampled_from([0, "3", 10**30])), optional=True)
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
            want = posenc.alibi_bias(kw["heads"], query, key, form=kw.get("form") or "distance")
            want = np.concatenate([want, np.zeros((heads - int(kw["heads"]), q_len, k_len))])
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
    st.lists(st.integers(0, 2), min_size=4, max_size=4).map(lambda v: sorted(v))
    | st.lists(st.integers(0, 2), min_size=8, max_size=8).map(
        lambda v: torch.tensor(v).reshape(2, 4).sort(dim=1).values
    ),
    st.sampled_from(["x", [0.5, 0, 0, 1], [0, 0], np.zeros((2, 2), int), [True] * 4]),
)
WINDOWS = choose(st.integers(1, 5), st.sampled_from([0, -1, 2.5, "2", True, NAN]))
PADDING = choose(
    st.lists(st.booleans(), min_size=8, max_size=8).map(lambda v: torch.tensor(v).reshape(2, 4))
    | st.lists(st.integers(0, 1), min_size=4, max_size=4),
    st.sampled_from([[[1, 2, 1, 1]], torch.ones(2, 4), torch.ones(2, 3, dtype=torch.bool), "x"]),
)
MASK_BIASES = choose(
    st.sampled_from(["float", "bool", "batched"]),
    st.sampled_from(["int", "5-d", "nan", "array", None]),
)


def _bias(kind: str) -> Any:
    values = torch.linspace(-1, 1, 2 * 16).reshape(2, 4, 4)
    return {
        "float": values, "bool": values > -0.5, "batched": values[None].expand(2, 2, 4, 4),
        "int": values.long(), "5-d": values[None, None], "nan": values.masked_fill(values > 0.9,
        NAN), "array": values.numpy(), None: None,
    }[kind]  # fmt: skip


def _allowed_by_hand(kwargs: dict[str, Any]) -> np.ndarray:
    """(rows, 4, 4) booleans of 4 queries against 4 keys, one pair at a time."""
    docs = kwargs.get("query_documents")
    keys = kwargs.get("key_documents", docs)
    docs = keys if docs is None else docs
    padding = kwargs.get("padding_mask")
    tables = [np.asarray(t) for t in (docs, keys, padding) if t is not None]
    rows = max([t.shape[0] for t in tables if t.ndim == 2], default=1)
    out = np.zeros((rows, 4, 4), dtype=bool)
    window = kwargs.get("window")
    for b, i, j in np.ndindex(rows, 4, 4):
        ok = j <= i or not kwargs.get("causal", False)
        ok &= window is None or abs(i - j) < window
        if docs is not None:
            mine, theirs = (np.asarray(t) for t in (docs, keys))
            mine, theirs = (t[b] if t.ndim == 2 else t for t in (mine, theirs))
            ok &= mine[i] == theirs[j]
        if padding is not None:
            pad = np.asarray(padding)
            ok &= bool((pad[b] if pad.ndim == 2 else pad)[j])
        out[b, i, j] = ok
    return out


@fuzz()
@given(st.data())
def test_masks(data: st.DataObject) -> None:
    a = Args(data)
    which = data.draw(st.sampled_from(["allowed", "attn_mask"]), label="which")
    if which == "allowed":
        a.draw("query_len", choose(st.just(4), st.sampled_from([-1, 2.5, None, 10**30])))
        a.draw("key_len", choose(st.just(4), st.sampled_from([-1, "4", 2**62])))
    else:
        kind = data.draw(MASK_BIASES, label="bias kind")
        a.set("bias", _bias(kind.value), kind.kind)
        a.draw("dtype", DTYPES, optional=True)
    a.draw("causal", flag(), optional=True)
    a.draw("window", WINDOWS, optional=True)
    if data.draw(st.booleans(), label="keys' documents"):
        a.draw("key_documents", DOCUMENTS)
    a.draw("query_documents", DOCUMENTS, optional=True)
    a.draw("padding_mask", PADDING, optional=True)
    rows = {np.shape(a.kwargs[n])[0] for n in ("query_documents", "key_documents", "padding_mask")
            if a.kinds.get(n) == "valid" and np.ndim(a.kwargs[n]) == 2}  # fmt: skip
    if len(rows) > 1:  # never here (every batch is 2), kept as the rule
        a.kinds["padding_mask"] = DOUBTFUL

    def check(out: torch.Tensor) -> None:
        allowed = _allowed_by_hand(a.kwargs)
        batched = any(
            np.ndim(a.kwargs.get(n)) == 2
            for n in ("query_documents", "key_documents", "padding_mask")
        )
        if which == "allowed":
            assert out.dtype == torch.bool, out.dtype
            np.testing.assert_array_equal(out.numpy(), allowed if batched else allowed[0])
            return
        bias = a.kwargs["bias"]
        out_dtype = a.kwargs.get("dtype") or bias.dtype
        assert out.dtype == out_dtype, out.dtype
        shape = (2, 2, 4, 4) if batched or bias.ndim == 4 else (2, 4, 4)
        assert tuple(out.shape) == shape, out.shape
        allowed = np.broadcast_to(allowed[:, None] if len(shape) == 4 else allowed[0], shape)
        values = np.broadcast_to(bias.double().numpy(), shape)
        if bias.dtype == torch.bool:
            allowed = allowed & values.astype(bool)
            if a.kwargs.get("dtype") is None:
                np.testing.assert_array_equal(out.numpy(), allowed)
                return
            values = np.zeros(shape)
        want = np.where(allowed, torch.from_numpy(values.copy()).to(out_dtype).double(), -np.inf)
        np.testing.assert_array_equal(out.double().numpy(), want)

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
    a.draw("window", WINDOWS, optional=True)
    q, k = a.kwargs["query_len"], a.kwargs["key_len"]
    sizes_valid = a.kinds["query_len"] == a.kinds["key_len"] == "valid"
    if data.draw(st.booleans(), label="documents"):
        valid = torch.arange(k if sizes_valid else 4) // 3
        a.draw(
            "documents",
            choose(
                st.sampled_from([valid, valid.tolist(), valid.expand(2, -1)]),
                st.sampled_from(["x", torch.zeros(2, 2), [0.5] * 4]),
            ),
        )
        if sizes_valid and q > k and a.kinds["documents"] == "valid":
            a.kinds["documents"] = "hostile"  # queries beyond the keys have no document
    if data.draw(st.booleans(), label="padding"):
        valid = torch.ones(2, k if sizes_valid else 4, dtype=torch.bool)
        valid[0, :2] = False
        a.draw("padding_mask", choose(st.just(valid), st.sampled_from([torch.ones(2, 3), "x"])))

    def check(mask: Any) -> None:
        dense = mask.to_dense()
        assert dense.shape[-2:] == ((q + 127) // 128, (k + 127) // 128), dense.shape
        pairs = pt.allowed_pairs(
            q, k, causal=a.kwargs.get("causal", True), window=a.kwargs.get("window"),
            key_documents=a.kwargs.get("documents"), padding_mask=a.kwargs.get("padding_mask"),
        )  # fmt: skip
        rows = pairs.shape[0] if pairs.ndim == 3 else 1
        b = torch.arange(rows)[:, None, None]
        got = mask.mask_mod(b, 0, torch.arange(q)[:, None], torch.arange(k))
        assert torch.equal(got.expand(rows, q, k), pairs.expand(rows, q, k))

    run(a.call("posenc.torch.bias_block_mask", pt.bias_block_mask, check))


MODULE_DTYPES = choose(
    st.sampled_from([None, torch.float32, torch.float64, torch.bfloat16]),
    st.sampled_from([torch.int64, torch.bool, np.float32, "float32", 1.5]),
    st.sampled_from([torch.float16]),  # may overflow: refused by name (dtype) or finite
)


def _module_reference(module: Any, query: Any, key: Any) -> torch.Tensor:
    """The module's bias in float64 from the NumPy core (T5, Kerple) or the float64 formula
    of FIRE's MLP, before the one rounding to the parameters' dtype."""
    q, k = meaning(query), meaning(key)
    if isinstance(module, pt.T5RelativeBias):
        table = module.table.weight.detach().double().numpy()
        return torch.from_numpy(posenc.t5_bias(
            table, q, k, bidirectional=module.bidirectional, num_buckets=module.num_buckets,
            max_distance=module.max_distance, dtype=np.float64,
        ))  # fmt: skip
    if isinstance(module, pt.KerpleBias):
        r1, r2 = (p.detach().double().clamp(min=module.eps).numpy() for p in (module.r1, module.r2))
        r2 = np.minimum(r2, 2.0) if module.kind == "power" else r2
        return torch.from_numpy(
            posenc.kerple_bias(q, k, r1=r1, r2=r2, kind=module.kind, dtype=np.float64)
        )
    c, threshold = (float(p.detach().abs()) for p in (module.c, module.threshold))
    hidden = torch.from_numpy(posenc.fire_distance(q, k, c=c, threshold=threshold))[..., None]
    for layer in module.mlp:
        if isinstance(layer, torch.nn.Linear):
            weight, bias = layer.weight.detach().double(), layer.bias.detach().double()
            hidden = torch.nn.functional.linear(hidden, weight, bias)
        else:
            hidden = layer(hidden)
    return hidden.permute(2, 0, 1)


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
        activation = choose(
            st.sampled_from([torch.nn.GELU(), torch.nn.SiLU(), torch.nn.ReLU()]),
            st.sampled_from([torch.relu, torch.nn.PReLU(), "gelu"]),
        )
        a.draw("activation", activation, optional=True)
    a.draw("dtype", MODULE_DTYPES, optional=True)
    query = data.draw(bias_positions(), label="query_positions")
    key = data.draw(bias_positions(), label="key_positions")

    def check(module: Any) -> None:
        torch.manual_seed(0)
        with torch.no_grad():  # parameters away from their initial values
            for parameter in module.parameters():
                parameter.uniform_(0.25, 1.5)
        kinds = {"query_positions": query.kind, "key_positions": key.kind}
        if which == "FireBias" and query.kind == "valid" and np.any(meaning(query.value) < 0):
            kinds["query_positions"] = "hostile"  # FIRE's queries are at positions >= 0
        dtype = module.table.weight.dtype if which == "T5RelativeBias" else module.r1.dtype \
            if which == "KerpleBias" else module.c.dtype  # fmt: skip
        doubtful = {n for n, k in kinds.items() if k == "doubtful"}
        if dtype == torch.float16:  # the bias may not fit: refused, naming dtype
            doubtful |= set(kinds)
        forward = Call(
            f"posenc.torch.{which}.forward", module,
            {"query_positions": query.value, "key_positions": key.value},
            frozenset(n for n, k in kinds.items() if k == "hostile"), frozenset(doubtful),
            aliases={"query_positions": ("dtype",), "key_positions": ("dtype",)},
        )  # fmt: skip

        def check_forward(out: torch.Tensor) -> None:
            want = _module_reference(module, query.value, key.value)
            got = expect_tensor(out, tuple(want.shape), dtype)
            rounded = pt.cast_exact(want, dtype).double().numpy()
            assert_close_ulp(got, rounded, ulps=1, dtype=dtype, scale=np.abs(rounded) + 1e-30)

        forward.check = check_forward
        run(forward)
        if a.kinds.get("dtype", "valid") == "valid":
            twin = type(module).like(_as_source(module))
            same = Call(f"posenc.torch.{which}.like", twin, dict(forward.kwargs),
                        forward.hostile, forward.doubtful, aliases=forward.aliases)  # fmt: skip
            result = run(same)
            if result is not None:
                assert torch.equal(result, module(query.value, key.value))

    if which == "T5RelativeBias":
        run(a.call("posenc.torch.T5RelativeBias", pt.T5RelativeBias, check))
    elif which == "KerpleBias":
        run(a.call("posenc.torch.KerpleBias", pt.KerpleBias, check))
    else:
        run(a.call("posenc.torch.FireBias", pt.FireBias, check))


def _as_source(module: Any) -> Any:
    """The module as the model it would be taken from (T5: a T5Attention's attributes)."""
    if not isinstance(module, pt.T5RelativeBias):
        return module
    source = torch.nn.Module()
    source.relative_attention_bias = module.table
    source.relative_attention_num_buckets = module.num_buckets
    source.relative_attention_max_distance = module.max_distance
    source.is_decoder = not module.bidirectional
    return source


def _mismatched(which: str, how: str) -> Any:
    """A module of ``which``'s structure with one part broken (``how``), or a good one."""
    if which == "T5RelativeBias":
        source = _as_source(pt.T5RelativeBias(3, num_buckets=16, max_distance=64))
        broken = {
            "rows": ("relative_attention_num_buckets", 32),
            "missing": ("is_decoder", None),
            "table": ("relative_attention_bias", torch.nn.Linear(3, 3)),
            "max_distance": ("relative_attention_max_distance", 4),
        }
    elif which == "KerpleBias":
        source = pt.KerpleBias(3)
        broken = {
            "rows": ("r2", torch.nn.Parameter(torch.ones(4))),
            "missing": ("r1", None),
            "table": ("r1", torch.nn.Parameter(torch.full((3,), NAN))),
            "max_distance": ("kind", "exp"),
        }
    else:
        source = pt.FireBias(3, hidden=4)
        broken = {
            "rows": ("c", torch.nn.Parameter(torch.ones(2))),
            "missing": ("mlp", None),
            "table": ("threshold", torch.nn.Parameter(torch.tensor(-1.0))),
            "max_distance": ("c", torch.nn.Parameter(torch.tensor(0.0))),
        }
    if how != "good":
        attribute, value = broken[how]
        if value is None:
            delattr(source, attribute)
        else:
            setattr(source, attribute, value)
    return source


@fuzz(scale=0.2)
@given(st.data())
def test_like_of_mismatched_modules(data: st.DataObject) -> None:
    which = data.draw(st.sampled_from(["T5RelativeBias", "KerpleBias", "FireBias"]), label="which")
    how = data.draw(
        st.sampled_from(["good", "rows", "missing", "table", "max_distance"]), label="how"
    )
    source = data.draw(
        st.sampled_from([_mismatched(which, how), None, "x", torch.nn.Linear(2, 2)]),
        label="module",
    )
    good = how == "good" and isinstance(source, torch.nn.Module) and not isinstance(
        source, torch.nn.Linear
    )  # fmt: skip

    def check(module: Any) -> None:
        got = module(3, 5)
        assert got.shape == (3, 3, 5), got.shape
        if isinstance(source, pt.FireBias | pt.KerpleBias):
            assert torch.equal(got, source(3, 5))

    aliases = {"module": ("r1", "r2", "kind", "c", "threshold", "mlp", "relative_attention",
                          "is_decoder", "max_distance", "num_buckets")}  # fmt: skip
    hostile = frozenset() if good else frozenset({"module"})
    like = getattr(pt, which).like
    run(Call(f"posenc.torch.{which}.like", like, {"module": source}, hostile, check=check,
             aliases=aliases))  # fmt: skip
