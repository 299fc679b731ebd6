"""Content-dependent relative terms against the frameworks: DeBERTa-v2's (and SEW-D's)
``disentangled_attention_bias`` (c2p and p2c) and Wav2Vec2-Conformer's ``(q + v)·R`` with the
relative shift. Same operations in the same order: equal bit for bit in float32."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import posenc
from tests.references import require

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

HIDDEN, HEADS, BATCH = 16, 2, 3
TERMS = [("c2p",), ("p2c",), ("c2p", "p2c")]
#: (position_buckets, max_relative_positions): plain distances, then DeBERTa-v3's log buckets
POSITIONS = [(-1, 6), (8, 32)]


def _module(path: str):  # type: ignore[no-untyped-def]
    require("transformers")
    return require(path)


def _attention(family: str, terms: tuple[str, ...], buckets: int, far: int, share: bool):  # type: ignore[no-untyped-def]
    transformers = require("transformers")
    if family == "deberta_v2":
        modeling = _module("transformers.models.deberta_v2.modeling_deberta_v2")
        config = transformers.DebertaV2Config(
            hidden_size=HIDDEN, num_attention_heads=HEADS, intermediate_size=32,
            relative_attention=True, pos_att_type=list(terms), position_buckets=buckets,
            max_relative_positions=far, share_att_key=share,
        )  # fmt: skip
    else:
        modeling = _module("transformers.models.sew_d.modeling_sew_d")
        config = transformers.SEWDConfig(
            hidden_size=HIDDEN, num_attention_heads=HEADS, intermediate_size=32,
            relative_attention=True, pos_att_type=tuple(terms), position_buckets=buckets,
            max_relative_positions=far, share_att_key=share,
        )  # fmt: skip
    return modeling.DisentangledSelfAttention(config).eval()


def _position_layers(attention, rel_embeddings: torch.Tensor, terms: tuple[str, ...]):  # type: ignore[no-untyped-def]
    """pos_key_layer and pos_query_layer as the attention module projects them."""
    span = attention.pos_ebd_size
    table = rel_embeddings[0 : span * 2, :].unsqueeze(0)
    key_proj = (
        attention.key_proj if attention.share_att_key else getattr(attention, "pos_key_proj", None)
    )
    query_proj = (
        attention.query_proj
        if attention.share_att_key
        else getattr(attention, "pos_query_proj", None)
    )

    def project(proj):  # type: ignore[no-untyped-def]
        return attention.transpose_for_scores(proj(table), HEADS).repeat(BATCH, 1, 1)

    pos_key = project(key_proj) if "c2p" in terms else None
    pos_query = project(query_proj) if "p2c" in terms else None
    return pos_key, pos_query


CASES = list(itertools.product(["deberta_v2", "sew_d"], TERMS, POSITIONS, [True, False]))


@pytest.mark.parametrize(("family", "terms", "positions", "share"), CASES)
def test_disentangled_scores_equal_disentangled_attention_bias_bit_for_bit(
    family: str, terms: tuple[str, ...], positions: tuple[int, int], share: bool
) -> None:
    buckets, far = positions
    torch.manual_seed(0)
    attention = _attention(family, terms, buckets, far, share)
    length, head_dim = 40, HIDDEN // HEADS
    query = torch.randn(BATCH * HEADS, length, head_dim)
    key = torch.randn(BATCH * HEADS, length, head_dim)
    rel_embeddings = torch.randn(2 * attention.pos_ebd_size, HIDDEN)
    scale_factor = 1 + len(terms)
    with torch.no_grad():
        want = attention.disentangled_attention_bias(query, key, None, rel_embeddings, scale_factor)
        pos_key, pos_query = _position_layers(attention, rel_embeddings, terms)
    bucketed = {"bucket_size": buckets, "max_position": far} if buckets > 0 else {}
    rel = pt.deberta_relative_positions(length, length, **bucketed, convention="transformers")
    got = pt.disentangled_scores(
        query, key, pos_key_layer=pos_key, pos_query_layer=pos_query, relative_positions=rel
    )
    assert got.shape == want.shape == (BATCH * HEADS, length, length)
    assert torch.equal(got, want)
    # the relative positions reach beyond the span: the clamp is exercised
    assert int(rel.max()) >= attention.pos_ebd_size


@pytest.mark.parametrize("positions", POSITIONS)
def test_c2p_with_fewer_queries_than_keys_equals_disentangled_attention_bias(
    positions: tuple[int, int],
) -> None:
    buckets, far = positions
    torch.manual_seed(1)
    attention = _attention("deberta_v2", ("c2p",), buckets, far, True)
    query = torch.randn(BATCH * HEADS, 5, HIDDEN // HEADS)
    key = torch.randn(BATCH * HEADS, 30, HIDDEN // HEADS)
    rel_embeddings = torch.randn(2 * attention.pos_ebd_size, HIDDEN)
    with torch.no_grad():
        want = attention.disentangled_attention_bias(query, key, None, rel_embeddings, 2)
        pos_key, _ = _position_layers(attention, rel_embeddings, ("c2p",))
    bucketed = {"bucket_size": buckets, "max_position": far} if buckets > 0 else {}
    rel = pt.deberta_relative_positions(5, 30, **bucketed, convention="transformers")
    got = pt.disentangled_scores(query, key, pos_key_layer=pos_key, relative_positions=rel)
    assert torch.equal(got, want)


def _float64_reference(query, key, pos_key, pos_query, rel, scale_factor):  # type: ignore[no-untyped-def]
    """c2p + p2c from the index map, one pair at a time, in float64 (the scale in float32,
    as DeBERTa computes it in every dtype)."""
    q, k, pk, pq = (t.double().numpy() for t in (query, key, pos_key, pos_query))
    index = posenc.disentangled_index(rel, pk.shape[-2] // 2)
    scale = float(np.sqrt(np.float32(q.shape[-1]) * np.float32(scale_factor)))
    out = np.zeros((q.shape[0], q.shape[1], k.shape[1]))
    for i, j in np.ndindex(index.shape):
        r = index[i, j]
        out[:, i, j] = (q[:, i] * pk[:, r]).sum(-1) / scale + (k[:, j] * pq[:, r]).sum(-1) / scale
    return out


def test_disentangled_scores_with_fewer_queries_equal_the_index_map_in_float64() -> None:
    # transformers' p2c needs as many queries as keys; posenc's reads, for query i and key j,
    # the row of their relative position query − key, whatever the lengths
    torch.manual_seed(2)
    query, key = torch.randn(4, 3, 8), torch.randn(4, 9, 8)
    pos_key, pos_query = torch.randn(4, 8, 8), torch.randn(4, 8, 8)
    rel_np = posenc.deberta_relative_positions([6, 7, 8], 9)
    got = pt.disentangled_scores(
        query.double(), key.double(), pos_key_layer=pos_key.double(),
        pos_query_layer=pos_query.double(), relative_positions=torch.from_numpy(rel_np),
    )  # fmt: skip
    want = _float64_reference(query, key, pos_key, pos_query, rel_np, 3)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=1e-13)


def test_relative_positions_equal_build_relative_position() -> None:
    deberta = _module("transformers.models.deberta_v2.modeling_deberta_v2")
    q, k = torch.zeros(1, 7, 4), torch.zeros(1, 300, 4)
    for bucket_size, max_position in [(-1, -1), (8, 16), (256, 512)]:
        want = deberta.build_relative_position(
            q, k, bucket_size=bucket_size, max_position=max_position
        )[0]
        bucketed = (
            {"bucket_size": bucket_size, "max_position": max_position} if bucket_size > 0 else {}
        )
        got = pt.deberta_relative_positions(7, 300, **bucketed, convention="transformers")
        assert got.dtype == torch.int64
        assert torch.equal(got, want)
        core = posenc.deberta_relative_positions(7, 300, **bucketed, convention="transformers")
        np.testing.assert_array_equal(core, want.numpy())


def _conformer(length: int):  # type: ignore[no-untyped-def]
    transformers = require("transformers")
    modeling = _module("transformers.models.wav2vec2_conformer.modeling_wav2vec2_conformer")
    config = transformers.Wav2Vec2ConformerConfig(
        hidden_size=HIDDEN, num_attention_heads=HEADS, intermediate_size=32,
        position_embeddings_type="relative", num_hidden_layers=1,
    )  # fmt: skip
    config._attn_implementation = "eager"
    attention = modeling.Wav2Vec2ConformerSelfAttention(config).eval()
    with torch.no_grad():
        attention.pos_bias_u.normal_()
        attention.pos_bias_v.normal_()
    table = modeling.Wav2Vec2ConformerRelPositionalEmbedding(config)(torch.zeros(1, length, HIDDEN))
    return modeling, attention, table


def _position_keys(attention, table: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """linear_pos(table) split into heads, heads first: (1, heads, rows, head_dim)."""
    projected = attention.linear_pos(table)
    return projected.view(*table.shape[:2], HEADS, HIDDEN // HEADS).permute(0, 2, 1, 3)


@pytest.mark.parametrize("length", [1, 2, 17])
def test_relative_position_scores_equal_wav2vec2_conformer_bit_for_bit(length: int) -> None:
    torch.manual_seed(3)
    modeling, attention, table = _conformer(length)
    query = torch.randn(BATCH, HEADS, length, HIDDEN // HEADS)
    key = torch.randn(BATCH, HEADS, length, HIDDEN // HEADS)
    with torch.no_grad():
        _, want = modeling._apply_relative_position_encoding(attention, query, key, table)
        got = pt.relative_position_scores(
            query, _position_keys(attention, table), pos_bias_v=attention.pos_bias_v
        )
    assert got.shape == want.shape == (BATCH, HEADS, length, length)
    assert torch.equal(got, want)


def test_relative_position_scores_give_the_conformer_attention_weights() -> None:
    torch.manual_seed(4)
    length = 9
    _modeling, attention, table = _conformer(length)
    hidden = torch.randn(BATCH, length, HIDDEN)
    with torch.no_grad():
        _, want = attention(hidden, relative_position_embeddings=table)
        shape = (BATCH, length, HEADS, HIDDEN // HEADS)
        query = attention.linear_q(hidden).view(shape).transpose(1, 2)
        key = attention.linear_k(hidden).view(shape).transpose(1, 2)
        bd = pt.relative_position_scores(
            query, _position_keys(attention, table), pos_bias_v=attention.pos_bias_v
        )
        ac = torch.matmul(query + attention.pos_bias_u[:, None, :], key.transpose(2, 3))
        got = torch.softmax(ac * attention.scaling + bd, dim=-1)
    assert torch.equal(got, want)


def test_posenc_table_gives_the_conformer_term_within_the_table_rounding() -> None:
    torch.manual_seed(5)
    length = 12
    modeling, attention, table = _conformer(length)
    ours = torch.from_numpy(posenc.relative_sinusoid_table(length, HIDDEN))[None]
    query = torch.randn(1, HEADS, length, HIDDEN // HEADS)
    with torch.no_grad():
        _, want = modeling._apply_relative_position_encoding(attention, query, query, table)
        got = pt.relative_position_scores(
            query, _position_keys(attention, ours), pos_bias_v=attention.pos_bias_v
        )
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


@pytest.mark.parametrize(("q", "k"), [(1, 1), (3, 3), (2, 7), (7, 2)])
def test_relative_shift_reads_the_rows_of_relative_shift_index(q: int, k: int) -> None:
    rows = q + k - 1 + 2
    labels = torch.arange(rows, dtype=torch.float64).expand(2, q, rows)
    got = pt.relative_shift(labels, k)
    want = posenc.relative_shift_index(q, k, rows=rows)
    assert torch.equal(got[0], torch.from_numpy(want).double())
    assert torch.equal(got[1], got[0])


@pytest.mark.parametrize(
    ("call", "error", "named"),
    [
        (lambda: pt.relative_shift(torch.zeros(3, 4), 3), ValueError, "key_length"),
        (lambda: pt.relative_shift(torch.zeros(4), 1), ValueError, "scores"),
        (lambda: pt.relative_shift(torch.zeros(3, 5, dtype=torch.long), 3), TypeError, "scores"),
        (lambda: pt.relative_shift(torch.zeros(3, 5), 2.0), TypeError, "key_length"),
        (
            lambda: pt.relative_position_scores(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 5, 3)),
            ValueError,
            "position_keys",
        ),
        (
            lambda: pt.relative_position_scores(
                torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 5, 4), pos_bias_v=torch.zeros(3, 4)
            ),
            ValueError,
            "pos_bias_v",
        ),
        (
            lambda: pt.relative_position_scores(
                torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 5, 4, dtype=torch.float64)
            ),
            TypeError,
            "position_keys",
        ),
        (
            lambda: pt.disentangled_scores(torch.zeros(2, 3, 4), torch.zeros(2, 3, 4)),
            ValueError,
            "pos_key_layer",
        ),
        (
            lambda: pt.disentangled_scores(
                torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), pos_key_layer=torch.zeros(2, 5, 4)
            ),
            ValueError,
            "pos_key_layer",
        ),
        (
            lambda: pt.disentangled_scores(
                torch.zeros(2, 3, 4), torch.zeros(2, 3, 5), pos_key_layer=torch.zeros(2, 4, 4)
            ),
            ValueError,
            "key_layer",
        ),
        (
            lambda: pt.disentangled_scores(
                torch.zeros(2, 3, 4),
                torch.zeros(2, 3, 4),
                pos_key_layer=torch.zeros(2, 4, 4),
                relative_positions=torch.zeros(3, 4, dtype=torch.long),
            ),
            ValueError,
            "relative_positions",
        ),
        (
            lambda: pt.disentangled_scores(
                torch.zeros(2, 3, 4),
                torch.zeros(2, 3, 4),
                pos_key_layer=torch.zeros(2, 4, 4),
                relative_positions=torch.zeros(3, 3),
            ),
            TypeError,
            "relative_positions",
        ),
        (
            lambda: pt.disentangled_scores(
                torch.zeros(2, 3, 4),
                torch.zeros(2, 3, 4),
                pos_key_layer=torch.zeros(2, 4, 4),
                scale_factor=0,
            ),
            ValueError,
            "scale_factor",
        ),
        (
            lambda: pt.deberta_relative_positions(3, 3, bucket_size=0, max_position=8),
            ValueError,
            "bucket_size",
        ),
    ],
)
def test_bad_input_is_refused_by_name(call, error: type, named: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=named):
        call()


@pytest.mark.parametrize("family", ["deberta_v2", "sew_d"])
def test_disentangled_scores_equal_disentangled_attention_bias_in_bfloat16(family: str) -> None:
    torch.manual_seed(6)
    attention = _attention(family, ("c2p", "p2c"), 8, 32, False).to(torch.bfloat16)
    shape = (BATCH * HEADS, 20, HIDDEN // HEADS)
    query = torch.randn(shape, dtype=torch.bfloat16)
    key = torch.randn(shape, dtype=torch.bfloat16)
    rel_embeddings = torch.randn(2 * attention.pos_ebd_size, HIDDEN, dtype=torch.bfloat16)
    with torch.no_grad():
        want = attention.disentangled_attention_bias(query, key, None, rel_embeddings, 3)
        pos_key, pos_query = _position_layers(attention, rel_embeddings, ("c2p", "p2c"))
    rel = pt.deberta_relative_positions(
        20, 20, bucket_size=8, max_position=32, convention="transformers"
    )
    got = pt.disentangled_scores(
        query, key, pos_key_layer=pos_key, pos_query_layer=pos_query, relative_positions=rel
    )
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, want)


@pytest.mark.parametrize("dynamic", [False, True])
def test_the_terms_trace_into_one_graph_across_lengths(dynamic: bool) -> None:
    # fullgraph=True: a graph break (a host read, a Python branch on data) fails here
    def terms(query, key, pos_key, pos_query, table):  # type: ignore[no-untyped-def]
        rel = pt.deberta_relative_positions(
            torch.arange(query.shape[-2]), torch.arange(key.shape[-2]), bucket_size=8,
            max_position=32, convention="transformers",
        )  # fmt: skip
        c2p_p2c = pt.disentangled_scores(
            query, key, pos_key_layer=pos_key, pos_query_layer=pos_query, relative_positions=rel
        )
        bd = pt.relative_position_scores(query[None], table[None])
        return c2p_p2c, bd

    compiled = torch.compile(terms, fullgraph=True, dynamic=dynamic, backend="eager")
    for length in (5, 9):
        args = (
            torch.randn(2, length, 4), torch.randn(2, length, 4), torch.randn(2, 16, 4),
            torch.randn(2, 16, 4), torch.randn(2, 2 * length - 1, 4),
        )  # fmt: skip
        for got, want in zip(compiled(*args), terms(*args), strict=True):
            assert torch.equal(got, want)
