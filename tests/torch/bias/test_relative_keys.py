"""The relative-key terms in PyTorch: the index equals the NumPy core's, the scores equal
the published formula in float64 (BERT's ``relative_key`` and ``relative_key_query``, which
transformers 5 no longer builds) and the float64 value rounded within a dot product's error in
16-bit dtypes; one graph across lengths. The models' own modules:
tests/references/hf/test_relative_keys.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402


@given(
    q=st.integers(1, 7), k=st.integers(1, 7), left=st.integers(0, 5), right=st.integers(0, 5),
    sign=st.sampled_from(["key - query", "query - key"]), folded=st.booleans(),
    start=st.integers(-100, 100),
)  # fmt: skip
def test_the_index_tensor_is_the_numpy_core_s(
    q: int, k: int, left: int, right: int, sign: str, folded: bool, start: int
) -> None:
    queries = torch.arange(start, start + q)
    want = posenc.relative_key_index(
        queries.numpy(),
        k,
        left=left,
        right=right,
        sign=sign,
        folded=folded,  # type: ignore[arg-type]
    )
    got = pt.relative_key_index(queries, k, left=left, right=right, sign=sign, folded=folded)  # type: ignore[arg-type]
    assert got.dtype == torch.int64
    assert np.array_equal(got.numpy(), want)


def _bert_scores(query: np.ndarray, key: np.ndarray, table: np.ndarray, m: int, both: bool):  # type: ignore[no-untyped-def]
    """BERT's relative_key(_query) term as published, a loop in float64: distance
    ``i − j``, row ``distance + m − 1``, ``q_i·E`` (plus ``k_j·E``)."""
    q_len, k_len = query.shape[-2], key.shape[-2]
    out = np.zeros((*query.shape[:-2], q_len, k_len))
    for i, j in itertools.product(range(q_len), range(k_len)):
        row = table[i - j + m - 1]
        out[..., i, j] = query[..., i, :] @ row + (key[..., j, :] @ row if both else 0.0)
    return out


@pytest.mark.parametrize("both", [False, True], ids=["relative_key", "relative_key_query"])
def test_bert_terms_equal_the_published_formula_in_float64(both: bool) -> None:
    m, length = 6, 5  # max_position_embeddings: 2m - 1 rows
    rng = np.random.default_rng(0)
    query, key = rng.standard_normal((2, 2, 3, length, 8))
    table = rng.standard_normal((2 * m - 1, 8))
    index = pt.relative_key_index(length, length, left=m - 1, right=m - 1, sign="query - key")
    got = pt.relative_key_scores(
        torch.from_numpy(query), torch.from_numpy(table), index,
        key=torch.from_numpy(key) if both else None,
    )  # fmt: skip
    np.testing.assert_allclose(got.numpy(), _bert_scores(query, key, table, m, both), atol=1e-13)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_16_bit_scores_are_the_float64_scores_within_a_dot_product_error(
    dtype: torch.dtype,
) -> None:
    torch.manual_seed(0)
    query, key = torch.randn(2, 2, 4, 8, dtype=torch.float64)
    table = torch.randn(7, 8, dtype=torch.float64)
    index = pt.relative_key_index(4, 4, left=3, right=3)
    exact = pt.relative_key_scores(query, table, index, key=key)
    got = pt.relative_key_scores(query.to(dtype), table.to(dtype), index, key=key.to(dtype))
    assert got.dtype == dtype
    # inputs rounded once (relative eps/2 each), 16 products summed in dtype
    eps = torch.finfo(dtype).eps
    bound = (
        20 * eps * float((query.abs() @ table.abs().T).max() + (key.abs() @ table.abs().T).max())
    )
    assert float((got.double() - exact).abs().max()) <= bound


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: pt.relative_key_scores(
                [[1.0]], torch.zeros(3, 1), torch.zeros(1, 1, dtype=torch.long)
            ),
            TypeError,
            "query must be a torch.Tensor",
        ),
        (
            lambda: pt.relative_key_scores(
                torch.zeros(2, 4), torch.zeros(3, 5), torch.zeros(2, 2, dtype=torch.long)
            ),
            ValueError,
            "table must be \\(rows, head_dim\\)",
        ),
        (
            lambda: pt.relative_key_scores(
                torch.zeros(2, 4),
                torch.zeros(3, 4, dtype=torch.float64),
                torch.zeros(2, 2, dtype=torch.long),
            ),
            TypeError,
            "table must have query's dtype",
        ),
        (
            lambda: pt.relative_key_scores(torch.zeros(2, 4), torch.zeros(3, 4), torch.zeros(2, 2)),
            TypeError,
            "index must hold integers",
        ),
        (
            lambda: pt.relative_key_scores(
                torch.zeros(2, 4), torch.zeros(3, 4), torch.zeros(3, 2, dtype=torch.long)
            ),
            ValueError,
            "index must be \\(q, k\\) with the query's q = 2",
        ),
        (
            lambda: pt.relative_key_scores(
                torch.zeros(2, 4), torch.zeros(3, 4), torch.full((2, 2), 3)
            ),
            ValueError,
            "index reads rows 3 .. 3, but table has 3 rows",
        ),
        (
            lambda: pt.relative_key_scores(
                torch.zeros(2, 4),
                torch.zeros(3, 4),
                torch.zeros(2, 2, dtype=torch.long),
                key=torch.zeros(3, 4),
            ),
            ValueError,
            "key must be \\(..., k, head_dim\\)",
        ),
        (lambda: pt.relative_key_index(2, 2, left=-1, right=1), ValueError, "left must be"),
    ],
)
def test_bad_input_is_refused_by_name(call, error: type, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        call()


def test_an_empty_query_gives_an_empty_score() -> None:
    index = pt.relative_key_index(0, 3, left=1, right=1)
    assert pt.relative_key_scores(torch.zeros(2, 0, 4), torch.zeros(3, 4), index).shape == (2, 0, 3)


@pytest.mark.parametrize("dynamic", [False, True])
def test_the_terms_trace_into_one_graph_across_lengths(dynamic: bool) -> None:
    # fullgraph=True: a graph break (a host read, a Python branch on data) fails here
    def terms(query, key, table):  # type: ignore[no-untyped-def]
        index = pt.relative_key_index(
            torch.arange(query.shape[-2]), torch.arange(key.shape[-2]), left=3, right=2
        )
        return pt.relative_key_scores(query, table, index, key=key)

    compiled = torch.compile(terms, fullgraph=True, dynamic=dynamic, backend="eager")
    for length in (5, 9):
        args = (torch.randn(2, length, 4), torch.randn(2, length, 4), torch.randn(6, 4))
        assert torch.equal(compiled(*args), terms(*args))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_relative_logits_are_the_float64_logits_rounded_once(dtype: torch.dtype) -> None:
    """A gather: each 16-bit logit is the float64 one rounded to the dtype, bit for bit (zero
    where the pair reads no distance)."""
    torch.manual_seed(0)
    curves = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    positions = torch.tensor([3, 4, 6, 7, 9])
    exact = pt.relative_logits(curves, positions, torch.arange(10))
    got = pt.relative_logits(curves.to(dtype), positions, torch.arange(10))
    assert got.dtype == dtype
    assert torch.equal(got, exact.to(dtype))
    assert (exact != 0).any()  # pairs that read a distance
    assert (exact == 0).any()  # and pairs that read none


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_curves_give_the_score_mod_the_float64_curves_rounded_once(
    dtype: torch.dtype,
) -> None:
    """The score_mod adds the curves in float32: from 16-bit curves, exactly the float64
    curves rounded once to the dtype."""
    torch.manual_seed(0)
    curves = torch.randn(1, 2, 4, 3, dtype=torch.float64)
    score_mod = pt.relative_logits_score_mod(curves.to(dtype), query_offset=2)
    exact = pt.relative_logits(curves, torch.arange(2, 6), torch.arange(6))
    zero = torch.zeros((), dtype=torch.float32)
    for h in range(2):
        for i in range(4):
            for j in range(6):
                got = score_mod(zero, torch.tensor(0), torch.tensor(h), torch.tensor(i),
                                torch.tensor(j))  # fmt: skip
                assert got.dtype == torch.float32
                assert got == exact[0, h, i, j].to(dtype).float(), (h, i, j)
