"""Fuzz multi-axis RoPE: the NumPy core's frequency matrices, tables, grid and multimodal
position ids and the RoPE plans of Hugging Face configs; the tables and multimodal ids of
``posenc.torch``, with ``RotaryEmbedding(sections=...)`` and ``hf.MultiAxisRotary`` (see
``contract.py``)."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import posenc

from .axes import (
    NAMES,
    axis_positions,
    axis_request,
    check_matrix,
    check_tables,
    columns,
    coords_of,
    exact_tables,
    hostile_axis_positions,
    length_of,
    reference_columns,
    sections_for,
)
from .checks import check_rotation
from .contract import DOUBTFUL, HOSTILE, VALID, Args, choose, expect_array, run
from .frontends import (
    MODULE_MARKS,
    NUMPY,
    PAIRS,
    TORCH,
    Frontend,
    each_frontend,
    expect_tensor,
    torch_only,
)
from .profile import fuzz
from .reference import EPS, check_pair_norms, exact_omega
from .values import (
    HUGE,
    INF,
    NAN,
    count,
    integers,
    name,
)

if TORCH is not None:
    import torch

    import posenc.torch as pt
    from posenc.torch import hf

    from .torch_values import NAMES as DTYPE_NAMES
    from .torch_values import NOT_TENSORS, float_tensors

pytestmark = MODULE_MARKS


@fuzz()
@given(st.data())
def test_multi_axis_frequencies(data: st.DataObject) -> None:
    a = Args(data)
    r = axis_request(a, data)
    seq_len = a.draw("seq_len", count(0, 10**6, huge="doubtful", none=True), optional=True)

    def check(result):
        assert isinstance(result, posenc.MultiAxisFrequencies), type(result).__name__
        check_matrix(result, reference_columns(r, seq_len), r["n_axes"])

    fn = posenc.multi_axis_frequencies
    run(a.call("posenc.multi_axis_frequencies", fn, check, aliases=NAMES))


def table_arguments(a: Args, data: st.DataObject, r: dict[str, Any]) -> tuple[int, Any]:
    """positions, head_dim and rotary_dim for the request ``r``: ``(rotary_dim, positions)``."""
    pos = a.draw(
        "positions", choose(axis_positions(r["n_axes"]), hostile_axis_positions(r["n_axes"]))
    )
    width = 2 * r["n"]
    extra = data.draw(st.integers(0, 3), label="unrotated channels")
    bad_dims = st.sampled_from([1, 0, -2, "8", None, 2.5])
    huge_dims = st.sampled_from(HUGE[:2])  # fine with a rotary_dim
    a.draw("head_dim", choose(integers(width + extra, width + extra), bad_dims, huge_dims))
    if extra or data.draw(st.booleans(), label="give rotary_dim"):
        a.draw(
            "rotary_dim",
            choose(
                st.just(width), st.sampled_from([width + 2 * extra + 2, width - 1, 0, -2, "4", 2.5])
            ),
        )
    if not r["sections_drawn"]:  # other sections: the number of axes and pairs is unknown
        for arg in ("positions", "head_dim", "rotary_dim"):
            if a.kinds.get(arg) == VALID:
                a.kinds[arg] = DOUBTFUL
    return width, pos


@each_frontend
@fuzz(scale=2)
@given(st.data())
def test_multi_axis_cos_sin(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    r = axis_request(a, data)
    width, pos = table_arguments(a, data, r)
    if a.kinds["positions"] == VALID:
        pos = a.set("positions", data.draw(frontend.forms(pos), label="positions form"))
    pairs = a.draw("pairs", name(PAIRS), optional=True)
    a.draw("dtype", frontend.dtypes, optional=True)
    frontend.draw_device(a)
    seq_len = a.draw("seq_len", count(0, 10**6, huge="doubtful", none=True), optional=True)

    def check(result):
        cos, sin = result
        shape, coords = coords_of(frontend.to_numpy(pos), r["n_axes"])
        dtype = frontend.result_dtype(a)
        flat = [frontend.expect(t, (*shape, width), dtype).reshape(-1, width) for t in (cos, sin)]
        length = seq_len if seq_len is not None else length_of(coords)
        cols = reference_columns(r, None if length is None else int(length))
        check_tables(*flat, coords, cols, pairs or "half", frontend.dtype_name(dtype))

    fn = frontend.api.multi_axis_cos_sin
    run(a.call(frontend.label("multi_axis_cos_sin"), fn, check, aliases=NAMES))


# -- grid positions ----------------------------------------------------------------------------


def grid_reference(dims, blocks, starts) -> np.ndarray:
    """Cells block by block (blocks row-major, cells of a block row-major), plus ``start``."""
    outer = itertools.product(*(range(n // b) for n, b in zip(dims, blocks, strict=True)))
    rows = [
        [o * b + i + s for o, i, b, s in zip(block, cell, blocks, starts, strict=True)]
        for block in outer
        for cell in itertools.product(*(range(b) for b in blocks))
    ]
    return np.array(rows, dtype=np.int64).reshape(-1, len(dims))


@fuzz()
@given(st.data())
def test_grid_positions(data: st.DataObject) -> None:
    a = Args(data)
    n_axes = data.draw(st.integers(1, 4), label="n_axes")
    blocks = data.draw(st.lists(st.integers(1, 3), min_size=n_axes, max_size=n_axes))
    dims = [
        b * data.draw(st.integers(0, 3), label=f"blocks on axis {i}") for i, b in enumerate(blocks)
    ]
    bad_shape = [[], "23", None, 5, [2, -1], [2.5, 2], [2**63, 1], [True, 2], [[2]]]
    a.draw(
        "shape",
        choose(
            st.sampled_from([dims, tuple(dims), np.array(dims, dtype=np.int64)]),
            st.sampled_from(bad_shape),
        ),
    )
    square = n_axes >= 2 and blocks[-1] == blocks[-2] and set(blocks[:-2]) <= {1}
    valid_merge = [blocks, tuple(blocks)] + ([blocks[-1]] if square or n_axes == 1 else [])
    bad_merge = [0, -1, [0] * n_axes, [1] * (n_axes + 1), "2", 2.5, None, True]
    merge = a.draw(
        "merge", choose(st.sampled_from(valid_merge), st.sampled_from(bad_merge)), optional=True
    )
    if merge is None:
        blocks = [1] * n_axes
    starts = data.draw(st.lists(st.integers(-(10**6), 10**6), min_size=n_axes, max_size=n_axes))
    bad_start = [None, "1", 1.5, [0] * (n_axes + 1), [2**53 + 1] * n_axes, 2**63, NAN]
    valid_start = st.sampled_from([starts, starts[0]])
    start = a.draw("start", choose(valid_start, st.sampled_from(bad_start)), optional=True)
    if start is None:
        starts = [0] * n_axes
    elif not isinstance(start, list):
        starts = [start] * n_axes
    if a.kinds.get("shape") != VALID and a.kinds.get("merge") == VALID and merge != 1:
        a.kinds["merge"] = DOUBTFUL  # a hostile shape: the merge may not divide it

    def check(out):
        want = grid_reference(dims, blocks, starts)
        expect_array(out, want.shape, np.int64)
        assert np.array_equal(out, want), f"cells {out.tolist()[:6]}, expected {want.tolist()[:6]}"

    run(a.call("posenc.grid_positions", posenc.grid_positions, check))


# -- multimodal positions ----------------------------------------------------------------------


def multimodal_row(data: st.DataObject, merge: int, label: str) -> tuple[list, list, list]:
    """One sequence: token types, its image grids, its video grids (in order)."""
    types: list[int] = []
    grids: dict[int, list] = {1: [], 2: []}
    for _ in range(data.draw(st.integers(0, 4), label=f"{label} pieces")):
        kind = data.draw(st.sampled_from([0, 0, 1, 2]), label=f"{label} kind")
        if kind == 0:
            types += [0] * data.draw(st.integers(1, 3))
            continue
        t, h, w = (data.draw(st.integers(1, k)) for k in (2, 3, 3))
        grids[kind].append([t, h * merge, w * merge])
        types += [kind] * (t * h * w)
    return types, grids[1], grids[2]


def multimodal_reference(types: list[int], grids: dict[int, list], merge: int):
    """The ids and delta of one sequence (module docstring of ``posenc._positions.multimodal``):
    text at ``(p, p, p)``; a grid ``(T, H, W)`` at ``(p + j, p + y, p + x)``, then
    ``p += max(H, W) / m``."""
    taken = {1: iter(grids[1]), 2: iter(grids[2])}
    out: list[tuple[int, int, int]] = []
    p, i = 0, 0
    while i < len(types):
        if types[i] == 0:
            out.append((p, p, p))
            p, i = p + 1, i + 1
            continue
        t, h, w = next(taken[types[i]])
        h, w = h // merge, w // merge
        out += [(p + j, p + y, p + x) for j in range(t) for y in range(h) for x in range(w)]
        p, i = p + max(h, w), i + t * h * w
    delta = max((max(c) for c in out), default=-1) + 1 - len(out)
    return out, delta


def multimodal_case(data: st.DataObject) -> tuple[Args, dict[str, Any]]:
    """Arguments of a batch (rows padded left or right) and its reference ids and deltas."""
    a = Args(data)
    merge = data.draw(st.integers(1, 2), label="merge value")
    rows = [multimodal_row(data, merge, f"row {r}") for r in range(data.draw(st.integers(1, 2)))]
    length = max(len(t) for t, _, _ in rows)
    left = data.draw(st.booleans(), label="left padding")
    mask = [[1] * len(t) for t, _, _ in rows]
    types = [list(t) for t, _, _ in rows]
    for r, t in enumerate(types):
        pad = [0] * (length - len(t))
        types[r], mask[r] = (pad + t, pad + mask[r]) if left else (t + pad, mask[r] + pad)
    images = [g for _, im, _ in rows for g in im]
    videos = [g for _, _, vi in rows for g in vi]
    padded = any(0 in m for m in mask)
    bad_types = [[3] * max(length, 1), [[-1]], "0", [[0.5]], 0, None, [["1"]]]
    a.draw(
        "token_types", choose(st.sampled_from([types, np.array(types)]), st.sampled_from(bad_types))
    )
    bad_grids = [[[1, 0, 2]], [[1, 2]], "g", [[1, 2, 2.5]], [[1, merge + 1, merge]] * 9]
    for key, grids in (("image_grids", images), ("video_grids", videos)):
        if grids:
            a.draw(key, choose(st.just(grids), st.sampled_from([*bad_grids, grids[:-1]])))
        elif data.draw(st.booleans(), label=f"{key} given"):
            a.draw(key, choose(st.just(None), st.sampled_from([[[1, merge, merge]], "g"])))
    if merge > 1 or data.draw(st.booleans(), label="spatial_merge given"):
        a.draw("spatial_merge", choose(st.just(merge), st.sampled_from([0, -1, "2", 2.5, None])))
    if padded or data.draw(st.booleans(), label="mask given"):
        a.draw(
            "attention_mask",
            choose(
                st.just(mask),
                st.sampled_from(
                    [[[2] * max(length, 1)] * len(rows), [[1] * (length + 1)] * len(rows), "m"]
                ),
            ),
        )
    lo = data.draw(st.integers(0, length), label="shard start")
    hi = data.draw(st.integers(lo, length), label="shard stop")
    bad_shard = [(0, length + 1), (1, 0) if length else (0, -1), "s", (0.5, 1)]
    shards = st.sampled_from([(lo, hi), slice(lo, hi)])
    a.draw("shard", choose(shards, st.sampled_from(bad_shard)), optional=True)
    if a.kinds["token_types"] != VALID and a.kinds.get("shard") == VALID:
        a.kinds["shard"] = DOUBTFUL  # other token types: the sequence length is unknown
    if not a.clean and a.kinds["token_types"] == VALID:
        for key in ("image_grids", "video_grids"):  # a count of grids that does not fit
            if a.kinds.get(key) == HOSTILE:
                a.kinds["token_types"] = HOSTILE
    ids, deltas = [], []
    start, stop = (0, length) if "shard" not in a.kwargs else (lo, hi)
    queue = {1: list(images), 2: list(videos)}
    for r, t in enumerate(types):
        real = [i for i in range(length) if mask[r][i]]
        row = [t[i] for i in real]
        mine = {k: [queue[k].pop(0) for _ in range(len(rows[r][k]))] for k in (1, 2)}
        got, delta = multimodal_reference(row, mine, merge)
        full = [(0, 0, 0)] * length
        for i, c in zip(real, got, strict=True):
            full[i] = c
        ids.append(full[start:stop])
        deltas.append(delta if row else 0)
    return a, {
        "ids": np.array(ids, dtype=np.int64).reshape(len(rows), stop - start, 3),
        "deltas": np.array(deltas, dtype=np.int64),
        "types": types,
    }


def check_multimodal(positions: np.ndarray, deltas: np.ndarray, want: dict[str, Any]) -> None:
    assert np.array_equal(positions, want["ids"]), f"ids {positions.tolist()}"
    assert np.array_equal(deltas, want["deltas"]), f"deltas {deltas.tolist()}"


@each_frontend
@fuzz()
@given(st.data())
def test_multimodal_positions(frontend: Frontend, data: st.DataObject) -> None:
    a, want = multimodal_case(data)
    for key in ("token_types", "image_grids", "video_grids", "attention_mask"):
        value = a.kwargs.get(key)
        if a.kinds.get(key) == VALID and value is not None:
            a.set(key, data.draw(frontend.forms(value, np.int64), label=f"{key} form"))

    def check(result):
        if frontend is NUMPY:
            assert isinstance(result, posenc.MultimodalPositions), type(result).__name__
        int64 = frontend.dtype("int64")
        positions, deltas = result
        positions = frontend.expect(positions, want["ids"].shape, int64)
        deltas = frontend.expect(deltas, want["deltas"].shape, int64)
        check_multimodal(positions, deltas, want)
        text = np.array(want["types"])[:, : positions.shape[1]] == 0
        if "shard" not in a.kwargs:  # text tokens: one id on every axis, increasing
            same = positions[text]
            assert np.all(same == same[:, :1]), "a text token with different ids per axis"

    fn = frontend.api.multimodal_positions
    run(a.call(frontend.label("multimodal_positions"), fn, check))


# -- RoPE plans of configs ---------------------------------------------------------------------

#: hostile values of config keys (``*``: the value the rope parameters give the key).
HOSTILE_KEYS: dict[str, list[Any]] = {
    "rope_theta": [NAN, -1.0, 0.0, "1e4", INF, [1.0]],
    "head_dim": [0, -2, 7, "8", 2.5],
    "hidden_size": [0, -8, "32", 2.5],
    "num_attention_heads": [0, -1, "4", 2.5],
    "num_hidden_layers": [-1, "2", 2.5],
    "layer_types": ["full", [1], [None]],
    "partial_rotary_factor": [1.5, 0.0, NAN, "0.5", -0.5],
}
#: rope parameters that are not posenc's: each must be an error naming it
HOSTILE_PARAMS: dict[str, list[Any]] = {
    "bogus_key": [1, "x", [1]],  # None counts as not given (``posenc.rope_scaling``)
    "rope_type": ["nope", 3],
    "factor": [NAN, -2.0, "2"],
    "mrope_section": ["abc", [-1, 2, 2], [1, 1]],
}


def plan_config(data: st.DataObject) -> tuple[dict[str, Any], dict[str, Any]]:
    """A valid config dict, and what it means."""
    heads = data.draw(st.integers(1, 4), label="heads")
    hd = 2 * data.draw(st.integers(1, 8), label="head_dim / 2")
    layers = data.draw(st.integers(1, 4), label="layers")
    theta = float(data.draw(st.sampled_from([10000.0, 100.0, 500000.0, 2.0, 1e6])))
    style = data.draw(st.sampled_from(["4.x", "5.x", "mrope"]), label="style")
    config: dict[str, Any] = {
        "hidden_size": heads * hd,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
    }
    if data.draw(st.booleans(), label="explicit head_dim"):
        config["head_dim"] = hd
    if data.draw(st.booleans(), label="layer_types"):
        config["layer_types"] = ["full_attention"] * layers
    meaning: dict[str, Any] = {"head_dim": hd, "layers": layers, "theta": theta, "r": hd}
    if style == "mrope":
        sec = data.draw(sections_for(hd // 2, 3), label="mrope_section")
        config["model_type"] = "qwen2_vl"
        config["rope_parameters"] = {
            "rope_type": "default",
            "mrope_section": list(sec),
            "rope_theta": theta,
        }
        meaning["sections"] = sec
        return config, meaning
    config["model_type"] = data.draw(st.sampled_from(["llama", "mistral", "qwen2"]))
    if data.draw(st.booleans(), label="partial rotation"):
        r = 2 * data.draw(st.integers(1, hd // 2), label="rotary pairs")
        config["partial_rotary_factor"] = r / hd
        meaning["r"] = r
    factor = data.draw(st.sampled_from([None, 2.0, 8.0]), label="linear factor")
    params = {} if factor is None else {"rope_type": "linear", "factor": factor}
    meaning["factor"] = factor or 1.0
    if style == "4.x":
        config["rope_theta"] = theta
        if params:
            config["rope_scaling"] = params
    else:
        config["rope_parameters"] = {"rope_type": "default", **params, "rope_theta": theta}
    return config, meaning


def check_plan(plan: Any, meaning: dict[str, Any]) -> None:
    assert isinstance(plan, posenc.RopePlan), type(plan).__name__
    assert len(plan.layers) == meaning["layers"], f"{len(plan.layers)} layers"
    r = meaning["r"]
    for layer in plan.layers:
        assert layer.uses_positions, repr(layer)
        assert layer.base == meaning["theta"], repr(layer)
        assert (layer.head_dim, layer.rotary_dim) == (meaning["head_dim"], r), repr(layer)
        if "sections" in meaning:
            cols = columns(meaning["sections"], "sectioned", "shared", [meaning["theta"]])
            check_matrix(layer.axis_frequencies(), cols, 3)
            continue
        omega = layer.frequencies
        expect_array(omega, (r // 2,), np.float64)
        for k in range(r // 2):
            want, rel = exact_omega(meaning["theta"], Fraction(2 * k, r))
            want = float(want) / meaning["factor"]
            assert abs(omega[k] - want) <= (rel + 2 * EPS) * want, f"ω_{k} = {omega[k]!r}"


@fuzz()
@given(st.data())
def test_rope_plan(data: st.DataObject) -> None:
    config, meaning = plan_config(data)
    a = Args(data)
    for key, value in config.items():
        a.set(key, value)
    aliases: dict[str, tuple[str, ...]] = {"rope_theta": ("rope_theta", "base")}
    if data.draw(st.booleans(), label="hostile"):
        nested = "rope_parameters" if "rope_parameters" in config else "rope_scaling"
        keys = list(HOSTILE_KEYS) + [f"{nested}.{k}" for k in HOSTILE_PARAMS]
        if nested not in config:
            keys = [k for k in keys if "." not in k]
        key = data.draw(st.sampled_from(keys), label="hostile key")
        if "." in key:
            sub = key.split(".")[1]
            if sub == "mrope_section" and "sections" not in meaning:
                sub = "bogus_key"  # 1-D RoPE has no mrope_section
            value = data.draw(st.sampled_from(HOSTILE_PARAMS[sub]), label=sub)
            a.set(nested, {**config[nested], sub: value}, HOSTILE)
            aliases[nested] = (sub, nested)
        else:
            a.set(key, data.draw(st.sampled_from(HOSTILE_KEYS[key]), label=key), HOSTILE)
            if key == "head_dim" and "head_dim" not in config:
                a.kinds["head_dim"] = DOUBTFUL  # hidden_size // num_attention_heads differs
            if key in ("hidden_size", "num_attention_heads") and "head_dim" in config:
                a.kinds[key] = DOUBTFUL  # the explicit head_dim decides
            if key == "num_hidden_layers" and "layer_types" in config:
                a.kinds[key] = DOUBTFUL  # the layer_types decide the layers
            if key == "rope_theta" and "rope_parameters" in config:
                a.kinds["rope_theta"] = DOUBTFUL  # the rope parameters' own rope_theta wins
    if "layer_types" in a.kwargs and data.draw(st.booleans(), label="odd layer_types"):
        odd = [["full_attention"] * (meaning["layers"] + 1), ["nope"] * meaning["layers"]]
        a.set("layer_types", data.draw(st.sampled_from(odd)), DOUBTFUL)
        for key in a.of_kind(HOSTILE):  # layers of other types may not read the key
            a.kinds[key] = DOUBTFUL

    def plan(**config):
        return posenc.rope_plan(config)

    def check(result):
        if a.kinds.get("layer_types") == DOUBTFUL:
            return  # the plan may follow layer_types or num_hidden_layers
        check_plan(result, meaning)

    run(a.call("posenc.rope_plan", plan, check, aliases=aliases))


# -- PyTorch only ------------------------------------------------------------------------------


def check_rotated(q, k, result, coords, shape, cols, pairs: str) -> None:
    """``q`` and ``k`` ``(b, h, s, d)`` rotated by the exact tables of ``coords`` (rows of
    ``shape`` = ``(s,)`` or ``(B, s)``, ``B`` in ``{1, b}``)."""
    cos, sin, angle_err = exact_tables(coords, cols, pairs)
    r = cos.shape[-1]
    tables = [t.reshape(*shape, r) for t in (cos, sin)]
    if len(shape) == 2:
        tables = [t[:, None] for t in tables]
    factor = max(c.attention for c in cols)
    for x, out in zip((q, k), result, strict=True):
        got = expect_tensor(out, tuple(x.shape), x.dtype)
        x64 = x.to(torch.float64).numpy()
        work = max(2.0**-22 if x.dtype != torch.float64 else 2.0**-50, angle_err)
        check_rotation(x64, got, *tables, pairs, DTYPE_NAMES[x.dtype], work)
        if len({c.attention for c in cols}) == 1:
            rtol = 8 * torch.finfo(x.dtype).eps + 2 * work
            check_pair_norms(x64, got, pairs, r, factor, rtol, DTYPE_NAMES[x.dtype])


@torch_only
@fuzz()
@given(st.data())
def test_rotary_embedding_sections(data: st.DataObject) -> None:
    a = Args(data)
    r = axis_request(a, data, n_max=4)
    width = 2 * r["n"]
    extra = data.draw(st.integers(0, 2), label="unrotated channels")
    head_dim = width + extra
    bad_dims, huge_dims = st.sampled_from([0, 1, "8", None]), st.sampled_from(HUGE[:2])
    a.draw("head_dim", choose(st.just(head_dim), bad_dims, huge_dims))
    if extra:
        a.draw("rotary_dim", choose(st.just(width), st.sampled_from([width + 2 * extra, -2])))
    pairs = a.draw("pairs", name(PAIRS), optional=True)
    if a.kwargs["sections"] is None:
        a.kinds["sections"] = DOUBTFUL  # sections=None: 1-D RoPE
    if not r["sections_drawn"]:
        for arg in ("head_dim", "rotary_dim"):
            if a.kinds.get(arg) == VALID:
                a.kinds[arg] = DOUBTFUL
    module = a.build("posenc.torch.RotaryEmbedding", pt.RotaryEmbedding, aliases=NAMES)
    if module is None:
        return
    b, h = (data.draw(st.integers(1, 2), label=n) for n in ("b", "h"))
    s = data.draw(st.integers(0, 4), label="s")
    dtype = data.draw(st.sampled_from(list(DTYPE_NAMES)), label="q dtype")
    q = data.draw(float_tensors((b, h, s, head_dim), dtype), label="q")
    k = data.draw(float_tensors((b, 1, s, head_dim), torch.float32), label="k")
    f = Args(data)
    f.set("q", q)
    f.draw("k", choose(st.just(k), st.sampled_from([*NOT_TENSORS, k[..., :1]])))
    n_axes = r["n_axes"]
    shapes = st.sampled_from([(s, n_axes), (1, s, n_axes), (b, s, n_axes)])

    def ids(shape):
        size = int(np.prod(shape))
        values = st.lists(st.integers(0, 10**5), min_size=size, max_size=size)
        return values.map(lambda v: torch.tensor(v, dtype=torch.int64).reshape(shape))

    valid = shapes.flatmap(ids)
    hostile = st.sampled_from(
        [torch.zeros(s, n_axes + 1, dtype=torch.int64), torch.full((s or 1, n_axes), float("nan"))]
    )
    positions = f.draw("positions", choose(valid, hostile), optional=True)
    offset = f.draw(
        "offset", choose(st.integers(0, 100), st.sampled_from([-1, "1", 1.5])), optional=True
    )

    def check(result):
        if positions is None:
            text = torch.arange(s) + int(offset or 0)
            pos = text[:, None].expand(s, n_axes)
        else:
            pos = positions + int(offset or 0)
        shape, coords = coords_of(pos.numpy(), n_axes)
        cols = reference_columns(r, length_of(coords))
        if len(shape) == 2 and shape[0] == 1:
            shape = (s,)
        check_rotated(q, f.kwargs["k"], result, coords, shape, cols, pairs or "half")

    run(f.call("RotaryEmbedding.forward", module, check))


@torch_only
@fuzz()
@given(st.data())
def test_hf_multi_axis_rotary(data: st.DataObject) -> None:
    a = Args(data)
    r = axis_request(a, data, n_max=4)
    width = 2 * r["n"]
    bad_dims, huge_dims = st.sampled_from([0, 1, "8", None]), st.sampled_from(HUGE[:2])
    a.draw("head_dim", choose(st.just(width), bad_dims, huge_dims))
    if isinstance(a.kwargs.get("base"), list) and a.kinds["base"] == VALID:
        a.kinds["base"] = DOUBTFUL  # one base per axis: the docs promise a number
    if 0 in r["sections"] and a.kinds["sections"] == VALID:
        a.kinds["sections"] = DOUBTFUL  # the docs promise positive sections
    if not r["sections_drawn"] and a.kinds.get("head_dim") == VALID:
        a.kinds["head_dim"] = DOUBTFUL
    axes_dim = a.draw(
        "axes_dim",
        choose(st.sampled_from([0, -1]), st.sampled_from([1, 2, "0", None, True])),
        optional=True,
    )
    pairs = a.draw(
        "pairs",
        choose(st.sampled_from(["half", "interleaved"]), st.sampled_from(["neox", None, 1])),
        optional=True,
    )
    module = a.build("hf.MultiAxisRotary", hf.MultiAxisRotary, aliases=NAMES)
    if module is None:
        return
    n_axes = r["n_axes"]
    b, s = data.draw(st.integers(1, 2), label="b"), data.draw(st.integers(0, 4), label="s")
    f = Args(data)
    floats = st.sampled_from(list(DTYPE_NAMES)).map(lambda t: torch.zeros(1, dtype=t))
    not_float = st.sampled_from([*NOT_TENSORS, torch.zeros(1, dtype=torch.int64)])
    x = f.draw("x", choose(floats, not_float))
    one_axis = data.draw(st.booleans(), label="(b, s) ids") and (axes_dim or 0) == 0
    lead = (b, s) if one_axis else ((n_axes, b, s) if (axes_dim or 0) == 0 else (b, s, n_axes))
    count_ = int(np.prod(lead))
    ids = st.lists(st.integers(0, 10**5), min_size=count_, max_size=count_)
    valid = ids.map(lambda v: torch.tensor(v, dtype=torch.int64).reshape(lead))
    wrong = torch.zeros(n_axes + 1, b, max(s, 1), dtype=torch.int64)
    nan = torch.full((n_axes, b, max(s, 1)), float("nan"))
    hostile = st.sampled_from([wrong, nan, "ids", None])
    pos = f.draw("position_ids", choose(valid, hostile))

    def check(result):
        per_token = pos[..., None].expand(b, s, n_axes) if one_axis else pos
        if (axes_dim or 0) == 0 and not one_axis:
            per_token = pos.permute(1, 2, 0)
        _, coords = coords_of(per_token.numpy(), n_axes)
        cols = reference_columns(r, length_of(coords))
        tables = [expect_tensor(t, (b, s, width), x.dtype).reshape(-1, width) for t in result]
        check_tables(*tables, coords, cols, pairs or "half", DTYPE_NAMES[x.dtype])

    run(f.call("MultiAxisRotary.forward", module, check, aliases={"x": ("x",)}))
