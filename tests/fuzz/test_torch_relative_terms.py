"""Fuzz the content-dependent relative terms of ``posenc.torch`` (see ``contract.py``): the
DeBERTa relative map against the core's, the c2p/p2c scores and the ``(q + v)·R`` term against
float64 sums over the core's index maps, the relative shift against its row formula."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402

from .contract import DOUBTFUL, HOSTILE, Args, choose, run  # noqa: E402
from .frontends import expect_tensor  # noqa: E402
from .profile import fuzz  # noqa: E402
from .test_relative_terms import deberta_map, draw_bucketing  # noqa: E402
from .values import INF, NAN, bias_positions, count  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

FLOATS = [torch.float32, torch.float64]


def _random(generator: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> Any:
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def _bound(dtype: torch.dtype, terms: int, magnitude: np.ndarray) -> np.ndarray:
    """Rounding of sums of ``terms`` products in ``dtype``, scaled by the sums of their
    magnitudes (a generous forward error bound)."""
    return (terms + 4) * float(torch.finfo(dtype).eps) * magnitude + 1e-300


@fuzz()
@given(st.data())
def test_deberta_relative_positions(data: st.DataObject) -> None:
    a = Args(data)
    query = a.draw("query_positions", bias_positions())
    key = a.draw("key_positions", bias_positions())
    size, top = draw_bucketing(a)

    def check(out: torch.Tensor) -> None:
        want = deberta_map(query, key, size, top)
        assert isinstance(out, torch.Tensor)
        assert out.dtype == torch.int64, out.dtype
        got = out.numpy()
        assert got.shape == want.shape, (got.shape, want.shape)
        if a.kwargs.get("convention") == "transformers" and size is not None:
            assert np.all(np.abs(got - want) <= 1), (got, want)
        else:
            np.testing.assert_array_equal(got, want)

    run(a.call("posenc.torch.deberta_relative_positions", pt.deberta_relative_positions, check))


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


@fuzz(scale=0.5)
@given(st.data())
def test_disentangled_scores(data: st.DataObject) -> None:
    a = Args(data)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
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


@fuzz(scale=0.5)
@given(st.data())
def test_relative_position_scores(data: st.DataObject) -> None:
    a = Args(data)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
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
