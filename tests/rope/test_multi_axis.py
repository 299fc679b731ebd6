"""Tests of multi-axis RoPE (``posenc.multi_axis_cos_sin``, ``multi_axis_frequencies``) and of
``posenc.grid_positions``, in NumPy.

References here are written independently of posenc: the axis and frequency of every pair
slot from the rules as the documentation states them, angles with Python's ``math`` one value
at a time, the layouts channel by channel, block orders with plain loops. The comparisons with
the real framework implementations (transformers, diffusers, timm) are in
``tests/references/hf/test_multi_axis.py``.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from posenc import (
    MultiAxisFrequencies,
    apply_rotary,
    grid_positions,
    multi_axis_cos_sin,
    multi_axis_frequencies,
    rotary_cos_sin,
)
from tests.tolerance import assert_close_ulp

PAIRS = ("half", "interleaved")
SCALINGS = (
    None,
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
    {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16},
)


# -- independent references --------------------------------------------------------------------


def slot_axes(sections, order):
    """The axis of every pair slot, from the rule as documented."""
    n, stride = sum(sections), len(sections)
    if order == "sectioned":
        return [a for a, s in enumerate(sections) for _ in range(s)]
    axes = []
    for k in range(n):
        a = k % stride
        axes.append(a if a > 0 and k // stride < sections[a] else 0)
    return axes


def slot_frequencies(sections, order, schedule, base):
    """(axis, ω) of every pair slot with math.pow: shared, dealt or per-axis schedules."""
    n = sum(sections)
    axes = slot_axes(sections, order)
    shared = [math.pow(base, -2.0 * k / (2 * n)) for k in range(n)]
    if schedule == "shared":
        return [(a, shared[k]) for k, a in enumerate(axes)]
    taken = [0] * len(sections)
    out = []
    dealt = {
        a: [w for w, b in zip(shared, slot_axes(sections, "interleaved"), strict=False) if b == a]
        for a in range(len(sections))
    }
    for a in axes:
        j = taken[a]
        taken[a] += 1
        w = dealt[a][j] if schedule == "dealt" else math.pow(base, -2.0 * j / (2 * sections[a]))
        out.append((a, w))
    return out


def reference_tables(positions, slots, pairs):
    """float64 cos/sin of rows of coordinates: θ_k = p[a_k]·ω_k, one value at a time."""
    rows = np.asarray(positions, dtype=np.float64).reshape(-1, np.shape(positions)[-1])
    n = len(slots)
    cos = np.empty((rows.shape[0], 2 * n))
    sin = np.empty((rows.shape[0], 2 * n))
    for r, p in enumerate(rows):
        for k, (a, w) in enumerate(slots):
            cols = (k, k + n) if pairs == "half" else (2 * k, 2 * k + 1)
            for col in cols:
                cos[r, col], sin[r, col] = math.cos(p[a] * w), math.sin(p[a] * w)
    shape = np.shape(positions)[:-1]
    return cos.reshape(*shape, 2 * n), sin.reshape(*shape, 2 * n)


def interleavable(sections) -> bool:
    n, stride = sum(sections), len(sections)
    return all(s <= len(range(a, n, stride)) for a, s in enumerate(sections) if a)


sections_st = st.lists(st.integers(0, 5), min_size=1, max_size=4).filter(lambda s: sum(s) > 0)
positions_st = st.integers(-5000, 5000)


# -- tables against the formula ----------------------------------------------------------------


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("schedule", ["shared", "dealt", "per_axis"])
@pytest.mark.parametrize("order", ["sectioned", "interleaved"])
def test_tables_match_the_documented_rules(order, schedule, pairs):
    sections = (3, 2, 2)
    positions = np.array([[0, 0, 0], [1, 2, 3], [17, -4, 250], [4096, 9, 12345]])
    cos, sin = multi_axis_cos_sin(
        positions,
        14,
        sections=sections,
        order=order,
        schedule=schedule,
        base=500.0,
        pairs=pairs,
        dtype=np.float64,
    )
    slots = slot_frequencies(sections, order, schedule, 500.0)
    ref_cos, ref_sin = reference_tables(positions, slots, pairs)
    # float64 angles: a few roundings of the largest angle (4 float64 ulps of it)
    assert_close_ulp(cos, ref_cos, ulps=4, scale=12346)
    assert_close_ulp(sin, ref_sin, ulps=4, scale=12346)


def test_qwen3_vl_interleaving_and_pixtral_dealing():
    """The two interleaved rules on the sizes the models ship."""
    axis = multi_axis_frequencies([24, 20, 20], order="interleaved").axis
    assert axis.tolist() == [k % 3 for k in range(60)] + [0, 0, 0, 0]
    f = multi_axis_frequencies((8, 8), schedule="dealt", base=10000.0)
    omega = [math.pow(10000.0, -2.0 * k / 32) for k in range(16)]
    want = np.asarray(omega)
    # frequencies from two float64 formulas: an ulp or two of each ω, relative
    assert_close_ulp(f.frequencies[0, :8], want[0::2], ulps=4, scale=want[0::2])
    assert_close_ulp(f.frequencies[1, 8:], want[1::2], ulps=4, scale=want[1::2])
    assert not f.frequencies[0, 8:].any()
    assert not f.frequencies[1, :8].any()


@given(sections=sections_st, order=st.sampled_from(["sectioned", "interleaved"]))
def test_each_axis_gets_its_section(sections, order):
    assume(order == "sectioned" or interleavable(sections))
    f = multi_axis_frequencies(sections, order=order)
    assert f.frequencies.shape == (len(sections), sum(sections))
    assert np.bincount(f.axis, minlength=len(sections)).tolist() == list(sections)
    assert f.axis.tolist() == slot_axes(sections, order)
    np.testing.assert_array_equal(f.attention, 1.0)


def test_float32_is_the_float64_table_rounded_once():
    positions = grid_positions((3, 40, 50), start=(0, 7, 1_000_000))
    kwargs = {"sections": (24, 20, 20), "order": "interleaved"}
    cos32, sin32 = multi_axis_cos_sin(positions, 128, **kwargs)
    cos64, sin64 = multi_axis_cos_sin(positions, 128, dtype=np.float64, **kwargs)
    assert cos32.dtype == np.float32
    assert cos64.dtype == np.float64
    np.testing.assert_array_equal(cos32, cos64.astype(np.float32))
    np.testing.assert_array_equal(sin32, sin64.astype(np.float32))


# -- properties --------------------------------------------------------------------------------


@given(
    positions=st.lists(positions_st, min_size=1, max_size=6),
    n=st.integers(1, 8),
    schedule=st.sampled_from(["shared", "dealt", "per_axis"]),
    order=st.sampled_from(["sectioned", "interleaved"]),
    pairs=st.sampled_from(PAIRS),
    scaling=st.sampled_from(SCALINGS),
    extra=st.integers(0, 3),
)
def test_one_axis_is_1d_rope(positions, n, schedule, order, pairs, scaling, extra):
    """A single axis is plain RoPE, bit for bit (partial rotation and scalings included)."""
    assume(not (scaling and scaling["rope_type"] == "dynamic" and n == 1))
    head_dim = 2 * n + 2 * extra
    kwargs = {"rotary_dim": 2 * n, "pairs": pairs, "scaling": scaling, "base": 500.0}
    ours = multi_axis_cos_sin(
        np.array(positions)[:, None],
        head_dim,
        sections=[n],
        order=order,
        schedule=schedule,
        **kwargs,
    )
    flat = rotary_cos_sin(positions, head_dim, **kwargs)
    for mine, theirs in zip(ours, flat, strict=True):
        np.testing.assert_array_equal(mine, theirs)


@given(
    positions=st.lists(positions_st, min_size=1, max_size=6),
    sections=sections_st,
    order=st.sampled_from(["sectioned", "interleaved"]),
    pairs=st.sampled_from(PAIRS),
)
def test_equal_coordinates_are_1d_rope(positions, sections, order, pairs):
    """M-RoPE (shared schedule) with t = h = w is the 1-D RoPE table: how Qwen2-VL encodes
    text tokens. The dealt schedule gives the same numbers, its columns permuted."""
    assume(order == "sectioned" or interleavable(sections))
    n = sum(sections)
    same = np.repeat(np.array(positions)[:, None], len(sections), axis=1)
    kwargs = {"sections": sections, "pairs": pairs}
    flat = rotary_cos_sin(positions, 2 * n, pairs=pairs)
    shared = multi_axis_cos_sin(same, 2 * n, order=order, **kwargs)
    for mine, theirs in zip(shared, flat, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    if not interleavable(sections):
        return
    dealt = multi_axis_cos_sin(same, 2 * n, order="sectioned", schedule="dealt", **kwargs)
    for mine, theirs in zip(dealt, flat, strict=True):
        np.testing.assert_array_equal(np.sort(mine, axis=-1), np.sort(theirs, axis=-1))


@given(
    sections=sections_st,
    schedule=st.sampled_from(["shared", "dealt", "per_axis"]),
    pairs=st.sampled_from(PAIRS),
    p=st.lists(positions_st, min_size=4, max_size=4),
    q=st.lists(positions_st, min_size=4, max_size=4),
    shift=st.lists(positions_st, min_size=4, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_rotation_preserves_norm_and_scores_depend_on_offsets(
    sections, schedule, pairs, p, q, shift, seed
):
    """|R(p) x| = |x|, and <R(p) x, R(q) y> depends only on p - q, axis by axis."""
    assume(schedule != "dealt" or interleavable(sections))
    axes = len(sections)
    dim = 2 * sum(sections)
    kwargs = {"sections": sections, "schedule": schedule, "pairs": pairs, "dtype": np.float64}
    x, y = np.random.default_rng(seed).standard_normal((2, dim + 2))

    def rotate(vector, where):
        cos, sin = multi_axis_cos_sin(np.array([where[:axes]]), dim + 2, rotary_dim=dim, **kwargs)
        return apply_rotary(vector[None], cos, sin, pairs=pairs)[0]

    xp, yq = rotate(x, p), rotate(y, q)
    assert math.isclose(np.linalg.norm(xp), np.linalg.norm(x), rel_tol=1e-13)
    np.testing.assert_array_equal(xp[dim:], x[dim:])  # the unrotated tail
    moved = (
        [a + b for a, b in zip(p, shift, strict=True)],
        [a + b for a, b in zip(q, shift, strict=True)],
    )
    score, shifted = xp @ yq, rotate(x, moved[0]) @ rotate(y, moved[1])
    assert math.isclose(score, shifted, abs_tol=1e-9 * np.linalg.norm(x) * np.linalg.norm(y))


def test_the_relative_property_fails_with_the_wrong_layout():
    """Negative control of the property above: half tables applied as interleaved pairs
    (x·cos + rotate(x)·sin written out, since apply_rotary refuses the mismatch)."""
    x, y = np.random.default_rng(0).standard_normal((2, 8))

    def rotated(v, cos, sin, pairs):
        turned = np.empty_like(v)
        if pairs == "half":
            turned[:4], turned[4:] = -v[4:], v[:4]
        else:
            turned[0::2], turned[1::2] = -v[1::2], v[0::2]
        return v * cos[0] + turned * sin[0]

    def score(p, q, apply_as):
        cp, sp = multi_axis_cos_sin([p], 8, sections=(2, 2), dtype=np.float64)
        cq, sq = multi_axis_cos_sin([q], 8, sections=(2, 2), dtype=np.float64)
        return rotated(x, cp, sp, apply_as) @ rotated(y, cq, sq, apply_as)

    assert math.isclose(score([3, 5], [1, 2], "half"), score([13, 8], [11, 5], "half"))
    assert not math.isclose(
        score([3, 5], [1, 2], "interleaved"), score([13, 8], [11, 5], "interleaved")
    )
    cos, sin = multi_axis_cos_sin([[3, 5]], 8, sections=(2, 2))
    # float64 x times float32 tables, either way: x·cos + rotate(x)·sin, two products and a
    # sum rounded in float64 in the same order (a float64 ulp or two of the largest output)
    written_out = rotated(x, cos, sin, "half")
    assert_close_ulp(apply_rotary(x[None], cos, sin)[0], written_out, ulps=2, dtype=np.float64)
    with pytest.raises(ValueError, match="laid out for pairs='half'"):
        apply_rotary(x[None], cos, sin, pairs="interleaved")


def test_frequency_matrix_mixed_axes_and_unrotated_pairs():
    """A given matrix: a zero column is a pair left unrotated, a mixed one turns with
    p·F[:, k] (RoPE-Mixed)."""
    matrix = np.array([[0.0, 1.0, 0.5], [0.0, 0.0, -0.25]])
    positions = np.array([[2.0, 4.0], [-1.0, 3.0]])
    cos, sin = multi_axis_cos_sin(positions, 6, frequencies=matrix, dtype=np.float64)
    theta = positions @ matrix
    np.testing.assert_array_equal(cos, np.cos(np.concatenate([theta, theta], -1)))
    np.testing.assert_array_equal(sin[:, [0, 3]], 0.0)
    given_f = MultiAxisFrequencies(matrix, np.full(3, 2.0))
    np.testing.assert_array_equal(
        multi_axis_cos_sin(positions, 6, frequencies=given_f, dtype=np.float64)[0], 2 * cos
    )
    assert given_f.axis.tolist() == [-1, 0, -1]


def test_scalings_transform_the_shared_schedule_and_each_axis():
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    shared = multi_axis_frequencies((4, 2, 2), scaling=yarn)
    omega, attention = __import__("posenc").rope_frequencies(16, scaling=yarn)
    np.testing.assert_array_equal(shared.frequencies.sum(axis=0), omega)
    np.testing.assert_array_equal(shared.attention, attention)
    per_axis = multi_axis_frequencies((4, 2), schedule="per_axis", scaling=yarn)
    np.testing.assert_array_equal(
        per_axis.frequencies[1, 4:], __import__("posenc").rope_frequencies(4, scaling=yarn)[0]
    )


def test_dynamic_scaling_reads_the_largest_coordinate():
    """Hugging Face's rule: seq_len = largest position id (over every axis) + 1."""
    dynamic = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}
    positions = np.array([[3, 100, 5]])
    cos = multi_axis_cos_sin(positions, 16, sections=(4, 2, 2), scaling=dynamic)[0]
    same = multi_axis_cos_sin(positions, 16, sections=(4, 2, 2), scaling=dynamic, seq_len=101)[0]
    other = multi_axis_cos_sin(positions, 16, sections=(4, 2, 2), scaling=dynamic, seq_len=16)[0]
    np.testing.assert_array_equal(cos, same)
    assert not np.array_equal(cos, other)


def test_shapes_dtypes_and_partial_rotation():
    assert multi_axis_cos_sin(np.zeros((2, 5, 3)), 16, sections=(4, 2, 2))[0].shape == (2, 5, 16)
    assert multi_axis_cos_sin(np.zeros((0, 2)), 8, sections=(2, 2))[0].shape == (0, 8)
    cos, sin = multi_axis_cos_sin([[1, 2]], 64, sections=(4, 4), rotary_dim=16, dtype=np.float16)
    assert cos.shape == sin.shape == (1, 16)
    assert cos.dtype == np.float16
    partial = {"rope_type": "default", "partial_rotary_factor": 0.25}
    assert multi_axis_cos_sin([[1, 2, 3]], 256, sections=[11, 11, 10], scaling=partial)[
        0
    ].shape == (
        1,
        64,
    )
    x = np.arange(12.0)[None]
    turned = apply_rotary(x, *multi_axis_cos_sin([[1.5, -2.0]], 12, sections=(2, 2), rotary_dim=8))
    np.testing.assert_array_equal(turned[0, 8:], x[0, 8:])


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"sections": (16, 24, 24)}, ValueError, "sections [16, 24, 24] give 64 rotary pairs"),
        ({"sections": (2, 2, 2)}, ValueError, "pass rotary_dim=12"),
        ({"sections": "thw"}, TypeError, "sections must be a sequence of integers"),
        ({"sections": []}, ValueError, "sections must name at least one axis"),
        ({"sections": (0, 0, 0)}, ValueError, "at least one pair"),
        ({"sections": (8, -1, 9)}, ValueError, "sections[1] must be an integer >= 0"),
        ({"sections": (8, 4.0, 4)}, TypeError, "sections[1] must be an integer"),
        ({"sections": (4, 6, 6), "order": "interleaved"}, ValueError, "sections[1] = 6 is more"),
        ({"sections": (8, 4, 4), "order": "rows"}, ValueError, "order must be 'sectioned', 'inter"),
        (
            {"sections": (8, 4, 4), "schedule": "axial"},
            ValueError,
            "schedule must be 'shared', 'dealt' or 'per_axis', got 'axial'",
        ),
        ({"sections": (8, 4, 4), "base": (1.0, 2.0, 3.0)}, TypeError, "for schedule='shared'"),
        (
            {"sections": (8, 4, 4), "schedule": "per_axis", "base": (1.0, 2.0)},
            ValueError,
            "base must give one value per axis (3 sections), got 2",
        ),
        ({"sections": (8, 4, 4), "base": -1.0}, ValueError, "base must be a positive"),
        ({}, TypeError, "needs sections"),
        (
            {"sections": (8, 4, 4), "frequencies": np.ones((3, 16))},
            TypeError,
            "give frequencies or sections",
        ),
        ({"frequencies": np.ones(16)}, ValueError, "frequencies must have shape (n_axes, n_pairs)"),
        ({"frequencies": np.full((3, 16), np.nan)}, ValueError, "frequencies must be finite"),
        ({"frequencies": np.ones((3, 8))}, ValueError, "frequencies of shape (3, 8) give 8"),
        (
            {"frequencies": MultiAxisFrequencies(np.ones((3, 16)), np.full(16, np.inf))},
            ValueError,
            "frequencies.attention must be finite, of shape (16,)",
        ),
        ({"frequencies": np.array([["a"] * 16] * 3)}, TypeError, "array of real numbers"),
        ({"sections": (8, 4, 4), "pairs": "neox"}, ValueError, "pairs must be"),
        ({"sections": (8, 4, 4), "dtype": np.int32}, TypeError, "dtype must be one of"),
    ],
)
def test_errors_name_the_argument(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        multi_axis_cos_sin(np.zeros((2, 3)), 32, **kwargs)


@pytest.mark.parametrize(
    ("positions", "error", "message"),
    [
        (np.zeros((5,)), ValueError, "positions must have shape (..., 3)"),
        (np.zeros((5, 2)), ValueError, "got shape (5, 2)"),
        (np.zeros((3, 1, 7)), ValueError, "pass np.moveaxis(ids, 0, -1)"),
        (7, TypeError, "got the number 7"),
        ([[0, 1, np.inf]], ValueError, "positions must be finite"),
        ([[0, 1, 2**60]], ValueError, "positions must lie within +-2**53"),
        ([[True, False, True]], TypeError, "booleans are not positions"),
    ],
)
def test_position_errors(positions, error, message):
    with pytest.raises(error, match=re.escape(message)):
        multi_axis_cos_sin(positions, 32, sections=(8, 4, 4))


# -- grid positions ----------------------------------------------------------------------------


def blocked_order(shape, blocks):
    """Cells block by block (row-major), then row-major inside each block, with loops."""
    import itertools

    outer = [range(n // b) for n, b in zip(shape, blocks, strict=True)]
    inner = [range(b) for b in blocks]
    return [
        [o * b + i for o, i, b in zip(block, cell, blocks, strict=True)]
        for block in itertools.product(*outer)
        for cell in itertools.product(*inner)
    ]


@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    factors=st.lists(st.integers(1, 3), min_size=4, max_size=4),
)
def test_grid_positions_block_order(shape, factors):
    blocks = factors[: len(shape)]
    full = [n * b for n, b in zip(shape, blocks, strict=True)]
    ours = grid_positions(full, merge=blocks)
    assert ours.dtype == np.int64
    assert ours.shape == (math.prod(full), len(full))
    assert ours.tolist() == blocked_order(full, blocks)


def test_grid_positions_row_major_merge_and_start():
    np.testing.assert_array_equal(grid_positions((2, 3, 4)), np.indices((2, 3, 4)).reshape(3, -1).T)
    np.testing.assert_array_equal(
        grid_positions((2, 4, 6), merge=2), grid_positions((2, 4, 6), merge=(1, 2, 2))
    )
    np.testing.assert_array_equal(grid_positions((4,), merge=2), [[0], [1], [2], [3]])
    np.testing.assert_array_equal(grid_positions((2, 2), start=5), [[5, 5], [5, 6], [6, 5], [6, 6]])
    assert grid_positions((0, 3)).shape == (0, 2)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((5,), {}, TypeError, "shape must be a sequence of grid sizes"),
        (((),), {}, ValueError, "shape must have at least one axis"),
        (((2, -1),), {}, ValueError, "shape[1] must be an integer >= 0"),
        (((2, 3),), {"merge": 2}, ValueError, "shape[1] = 3 is not a multiple of 2"),
        (((2, 4),), {"merge": (2, 2, 2)}, ValueError, "merge must give one value per axis"),
        (((2, 4),), {"merge": 0}, ValueError, "merge must be an integer >= 1"),
        (((2, 4),), {"start": "0"}, TypeError, "start must be an integer or a sequence"),
        (((2, 4),), {"start": 2**53}, ValueError, "within +-2**53"),
    ],
)
def test_grid_positions_errors(args, kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        grid_positions(*args, **kwargs)


@pytest.mark.parametrize("sections", [[2**63, 1], [2**40, 1], [2**62], [1, 2**62, 2**62]])
def test_sections_too_large_are_refused_before_allocating(sections):
    with pytest.raises(ValueError, match=r"sections ask for .* more than"):
        multi_axis_frequencies(sections)
    with pytest.raises(ValueError, match=r"sections ask for .* more than"):
        multi_axis_cos_sin(np.zeros((1, len(sections))), 8, sections=sections)
