"""Reference values of multi-axis RoPE, written from the module docstring of
``posenc._multi_axis`` (never from its code), and argument values for it.

Pair ``k`` turns by ``θ_k = Σ_a p[a]·F[a, k]``; every recipe puts one frequency in column
``k``, on the axis that owns slot ``k``:

- ``order``: ``sectioned`` gives axis 0 the first ``s_0`` slots, axis 1 the next ``s_1``, ...;
  ``interleaved`` gives axis ``a >= 1`` the slots ``a, a + A, a + 2A, ...`` (``s_a`` of them)
  and axis 0 all the others;
- ``schedule``: ``shared`` gives slot ``k`` the frequency ``Ω_k`` of one schedule over all
  ``2n`` channels; ``dealt`` deals ``Ω`` to the axes as ``interleaved`` places slots, each
  axis's slots taking its share in increasing order; ``per_axis`` gives axis ``a`` its own
  schedule over ``2·s_a`` channels with its own base.

Unscaled frequencies are exact (``base^(-j/count)``, 60 digits); scaled ones are the 1-D
scaled schedule of :func:`posenc.rope_frequencies`, as for 1-D RoPE in ``checks.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NamedTuple

import mpmath
import numpy as np
from hypothesis import strategies as st

import posenc

from .checks import exact
from .contract import DOUBTFUL, HOSTILE, VALID, Args, choose
from .reference import EPS, Channel, compare, exact_omega, exact_rows, sample_rows
from .values import (
    FLOAT_DTYPES,
    INF,
    INT_DTYPES,
    NAN,
    ROPE_BASES,
    _float_array,
    _int_array,
    name,
    reals,
    scalings,
)

ORDERS = ("sectioned", "interleaved", "turns_then_last")
SCHEDULES = ("shared", "dealt", "per_axis")


class Impossible(Exception):
    """``order="interleaved"`` (or ``schedule="dealt"``) cannot give an axis its pairs."""


class Column(NamedTuple):
    """Pair ``k``: the axis it turns with, its exact frequency, the library's relative angle
    error, and the attention factor of its schedule."""

    axis: int
    omega: Any
    rel: float
    attention: float


def slot_axes(sections: Sequence[int], order: str) -> list[int]:
    """The axis that owns each pair slot."""
    n, count = sum(sections), len(sections)
    if order == "sectioned":
        return [a for a, s in enumerate(sections) for _ in range(s)]
    if order == "turns_then_last" and count > 1:  # the others in turns, then the last's block
        return slot_axes(sections[:-1], "interleaved") + [count - 1] * sections[-1]
    owner = [0] * n
    for a in range(1, count):
        mine = list(range(a, n, count))
        if sections[a] > len(mine):
            raise Impossible(a)
        for k in mine[: sections[a]]:
            owner[k] = a
    return owner


def _schedule(count: int, base: float, spec: Any, seq_len: int | None) -> list[tuple]:
    """``(omega, rel, attention)`` of the ``count`` pairs of one RoPE schedule."""
    if spec is None:
        return [(*exact_omega(base, Fraction(j, count)), 1.0) for j in range(count)]
    omega, attention = posenc.rope_frequencies(2 * count, base=base, scaling=spec, seq_len=seq_len)
    return [(mpmath.mpf(float(w)), 8.0 * EPS, float(attention)) for w in omega]


def columns(
    sections: Sequence[int],
    order: str,
    schedule: str,
    bases: Sequence[float],
    spec: Any = None,
    seq_len: int | None = None,
) -> list[Column]:
    """The column of each pair (raises :class:`Impossible` for an impossible interleaving)."""
    n = sum(sections)
    owner = slot_axes(sections, order)
    out: list[Column | None] = [None] * n
    if schedule == "per_axis":
        for a, count in enumerate(sections):
            if count:
                own = _schedule(count, bases[a], spec, seq_len)
                for j, k in enumerate(k for k in range(n) if owner[k] == a):
                    out[k] = Column(a, *own[j])
    else:
        omega = _schedule(n, bases[0], spec, seq_len)
        dealt = slot_axes(sections, "interleaved") if schedule == "dealt" else owner
        for a in range(len(sections)):
            share = [omega[i] for i in range(n) if dealt[i] == a]
            for j, k in enumerate(k for k in range(n) if owner[k] == a):
                out[k] = Column(a, *share[j])
    assert all(c is not None for c in out)
    return [c for c in out if c is not None]


def reference_columns(r: dict[str, Any], seq_len: int | None) -> list[Column]:
    """The exact columns of the request ``r`` (``axis_request``) at ``seq_len``."""
    return columns(r["sections"], r["order"], r["schedule"], r["bases"], r["spec"], seq_len)


def check_matrix(result: Any, cols: Sequence[Column], n_axes: int) -> None:
    """A :class:`posenc.MultiAxisFrequencies` equals the reference columns."""
    matrix, attention = result
    n = len(cols)
    assert matrix.shape == (n_axes, n), f"matrix {matrix.shape}"
    assert matrix.dtype == np.float64, f"matrix {matrix.dtype}"
    assert attention.shape == (n,), f"attention {attention.shape}"
    assert attention.dtype == np.float64, f"attention {attention.dtype}"
    for k, c in enumerate(cols):
        want = float(c.omega)
        for a in range(n_axes):
            got = matrix[a, k]
            if a != c.axis:
                assert got == 0.0, f"F[{a}, {k}] = {got!r}, expected 0 (pair {k} is axis {c.axis})"
            else:
                slack = (c.rel + 2 * EPS) * want + 1e-300
                assert abs(got - want) <= slack, f"F[{a}, {k}] = {got!r}, expected {want!r}"
        assert attention[k] == c.attention, f"attention[{k}] = {attention[k]!r}, not {c.attention}"


def exact_tables(
    coords: Sequence[Sequence[Any]], cols: Sequence[Column], pairs: str
) -> tuple[np.ndarray, np.ndarray, float]:
    """Exact float64 cos/sin ``(rows, 2n)`` at every row (attention factors applied), and the
    largest angle error of the library there."""
    n = len(cols)
    order = list(range(n)) * 2 if pairs == "half" else [k for k in range(n) for _ in range(2)]
    exact_coords = [tuple(exact(c) for c in row) for row in coords]
    factors = np.array([cols[k].attention for k in order])
    out = []
    worst = 0.0
    for kind in ("cos", "sin"):
        channels = [Channel(kind, cols[k].axis, cols[k].omega, cols[k].rel) for k in order]
        values, errors = exact_rows(exact_coords, channels)
        out.append(values * factors)
        worst = max(worst, float(np.max(errors, initial=0.0)))
    return out[0], out[1], worst


def check_tables(
    cos: np.ndarray,
    sin: np.ndarray,
    coords: Sequence[Sequence[Any]],
    cols: Sequence[Column],
    pairs: str,
    dtype_name: str,
) -> None:
    """cos/sin ``(rows, 2n)`` (float64 values) at sampled rows of exact ``coords``."""
    n = len(cols)
    if not coords:
        return
    order = list(range(n)) * 2 if pairs == "half" else [k for k in range(n) for _ in range(2)]
    largest = int(np.argmax([max((abs(float(c)) for c in row), default=0.0) for row in coords]))
    rows = sample_rows(len(coords), [largest])
    exact_coords = [tuple(exact(c) for c in coords[r]) for r in rows]
    for factor in sorted({c.attention for c in cols}):
        where = [i for i, k in enumerate(order) if cols[k].attention == factor]
        for kind, table in (("cos", cos), ("sin", sin)):
            picked = [cols[order[i]] for i in where]
            channels = [Channel(kind, c.axis, c.omega, c.rel) for c in picked]  # fmt: skip
            values, errors = exact_rows(exact_coords, channels, factor)
            compare(table[np.ix_(rows, where)], values, errors, dtype_name, factor, f"{kind}: ")


# -- argument values ---------------------------------------------------------------------------

#: names that count as naming a scaling or a base
NAMES = {"scaling": ("scaling", "rope_type", "dim"), "base": ("base", "rope_theta")}


def sections_for(n: int, n_axes: int) -> st.SearchStrategy[tuple[int, ...]]:
    """Non-negative sections of ``n_axes`` axes summing to ``n`` (zeros allowed)."""
    cuts = st.lists(st.integers(0, n), min_size=n_axes - 1, max_size=n_axes - 1).map(sorted)
    return cuts.map(lambda c: tuple(b - a for a, b in zip([0, *c], [*c, n], strict=True)))


BAD_SECTIONS = [
    [],
    [0, 0],
    [-1, 3],
    [2.5, 1],
    "abc",
    None,
    3,
    [1, "2"],
    [1, None],
    [True, 2],
    [2**63, 1],
    {"a": 1},
]

POSITION_SHAPES = [(0,), (1,), (3,), (2, 2), (), (1, 0)]


def axis_positions(n_axes: int) -> st.SearchStrategy[Any]:
    """Valid coordinates ``(*S, n_axes)``: every integer and float dtype, or nested lists."""
    limits = st.sampled_from([5_000, 10_000_000, 2**53])
    shapes = st.sampled_from(POSITION_SHAPES).map(lambda s: (*s, n_axes))
    ints = st.tuples(st.sampled_from(INT_DTYPES), shapes, limits).flatmap(lambda a: _int_array(*a))
    floats = st.tuples(st.sampled_from(FLOAT_DTYPES), shapes, limits).flatmap(
        lambda a: _float_array(*a)
    )
    row = st.lists(st.integers(-(10**6), 10**6), min_size=n_axes, max_size=n_axes)
    return ints | floats | st.lists(row, min_size=1, max_size=3)


def hostile_axis_positions(n_axes: int) -> st.SearchStrategy[Any]:
    other = n_axes + 1
    return st.sampled_from(
        [
            None,
            "3",
            3,
            2.5,
            np.zeros((2, other), dtype=np.int64),
            np.zeros((n_axes, 2, other), dtype=np.int64),  # (3, b, s) ids: moveaxis first
            np.zeros(n_axes + 2),
            np.full((1, n_axes), NAN),
            np.full((2, n_axes), INF, dtype=np.float32),
            np.full((1, n_axes), 2**53 + 1, dtype=np.int64),
            np.full((1, n_axes), 2**63, dtype=np.uint64),
            np.full((1, n_axes), True),
            np.full((1, n_axes), 1 + 1j),
            [["a"] + [1] * (n_axes - 1)],
            [[1] * n_axes, [1] * other],
        ]
    )


def coords_of(value: Any, n_axes: int) -> tuple[tuple[int, ...], list[tuple[Any, ...]]]:
    """Shape ``S`` and the exact rows of valid coordinates ``(*S, n_axes)``."""
    array = np.asarray(value)
    if array.size == 0 and not isinstance(value, np.ndarray):
        array = np.zeros((0, n_axes), dtype=np.int64)
    flat = array.reshape(-1, n_axes)
    if array.dtype.kind == "f":
        rows = [tuple(float(v) for v in r) for r in flat.astype(np.float64)]
    else:
        rows = [tuple(int(v) for v in r) for r in flat.tolist()]
    return array.shape[:-1], rows


def length_of(coords: Sequence[Sequence[Any]]) -> int | None:
    """The default ``seq_len`` of length-dependent scalings: the largest coordinate + 1."""
    values = [float(c) for row in coords for c in row]
    return max(int(np.floor(max(values))) + 1, 0) if values else None


def axis_request(a: Args, data: st.DataObject, n_max: int = 6) -> dict[str, Any]:
    """sections, order, schedule, base, scaling (jointly valid when drawn valid), and what
    they mean: ``n_axes``, ``n`` pairs, ``bases``, ``spec``."""
    n_axes = data.draw(st.integers(1, 4), label="n_axes")
    n = data.draw(st.integers(1, n_max), label="n")
    sec = data.draw(sections_for(n, n_axes), label="sections value")
    forms = st.sampled_from([sec, list(sec), np.array(sec), tuple(np.int64(s) for s in sec)])
    a.draw("sections", choose(forms, st.sampled_from(BAD_SECTIONS)))
    order = a.draw("order", name(ORDERS), optional=True)
    schedule = a.draw("schedule", name(SCHEDULES), optional=True)
    per_axis = schedule == "per_axis"
    if per_axis and data.draw(st.booleans(), label="one base per axis"):
        bad = [[1.0] * (n_axes + 1), [NAN] * n_axes, ["a"] * n_axes, [0.0] * n_axes, "ab"]
        each = st.lists(reals(0.5, 1e6, (100.0, 10000.0)), min_size=n_axes, max_size=n_axes)
        bases = a.draw("base", choose(each, st.sampled_from(bad)))
    else:
        base = a.draw("base", ROPE_BASES, optional=True)
        bases = [10000.0 if base is None else base] * n_axes
        if a.kinds.get("base") == HOSTILE or (per_axis and isinstance(base, list)):
            bases = [10000.0] * n_axes
    if a.kinds.get("base") == HOSTILE:
        bases = [10000.0] * n_axes
    bases = [float(b) for b in bases]
    live = [s for s in sec if s]
    dim = 2 * (min(live) if per_axis else n)
    scaling = a.draw("scaling", scalings(dim, min(bases)), optional=True)
    spec = posenc.rope_scaling(scaling) if a.kinds.get("scaling") == VALID else None
    if spec is not None:
        unequal = len(set(live)) > 1 and per_axis
        theta = spec.params.get("rope_theta")
        if (
            (spec.rope_type == "dynamic" and dim < 4)
            or (spec.rope_type == "longrope" and unequal)
            or (theta is not None and len(set(bases)) > 1)
        ):
            a.kinds["scaling"] = DOUBTFUL
    for key in ("order", "schedule", "base"):
        if key in a.kwargs and a.kwargs[key] is None:
            a.kinds[key] = DOUBTFUL  # None: the default where the signature says so
    drawn = a.kinds["sections"] == VALID
    try:
        columns(sec, order or "sectioned", schedule or "shared", bases)
    except Impossible:
        a.kinds["sections"] = HOSTILE  # the interleaving cannot give an axis its pairs
    return {
        "n_axes": n_axes,
        "n": n,
        "sections": sec,
        "order": order or "sectioned",
        "schedule": schedule or "shared",
        "bases": bases,
        "spec": spec,
        "sections_drawn": drawn,
    }
