"""Fuzz the tables, frequencies, RoPE, grids and timesteps of the NumPy core and, where it has
them, of the PyTorch front-end, with its casts and switches (see ``contract.py``)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import posenc

from .checks import (
    check_rope_tables,
    check_rotation,
    check_rows,
    effective_seq_len,
    exact,
    grid_coords,
    rope_reference,
)
from .contract import DOUBTFUL, HOSTILE, VALID, Args, choose, expect_array, run
from .frontends import (
    MODULE_MARKS,
    PAIRS,
    TORCH,
    Frontend,
    each_frontend,
    numpy_dtype,
    torch_only,
)
from .profile import fuzz
from .reference import (
    EPS,
    check_pair_norms,
    check_relative,
    compare,
    exact_omega,
    exact_rows,
    grid_channels,
    round_bfloat16,
    sinusoid_channels,
    timestep_channels,
    ulp,
)
from .values import (
    BASES,
    CONVENTIONS,
    HUGE,
    NUMPY_DTYPES,
    ROPE_BASES,
    WRONG_TYPES,
    count,
    finite,
    flag,
    name,
    positive,
    scalings,
)

if TORCH is not None:
    import torch

    import posenc.torch as pt

    from .torch_values import NAMES

pytestmark = MODULE_MARKS

NOT_NONE = [v for v in WRONG_TYPES if v is not None]
BAD_PAIRS = ["", "neox", "HALF", None, 1, ["half"], b"half"]


def fast_paths(data: st.DataObject, fn):
    """``fn`` under ``posenc.set_fast_paths(True or False)`` (both must give correct tables)."""
    enabled = data.draw(st.booleans(), label="fast paths")

    def call(**kwargs):
        with posenc.set_fast_paths(enabled):
            return fn(**kwargs)

    return call


@each_frontend
@fuzz(scale=3)
@given(st.data())
def test_sinusoidal(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    pos = a.draw("positions", frontend.positions())
    d = a.draw("d_model", count(1, 40))
    base = a.draw("base", BASES, optional=True)
    conv = a.draw("convention", name(CONVENTIONS), optional=True)
    a.draw("dtype", frontend.dtypes, optional=True)
    frontend.draw_device(a)

    def check(out):
        shape, flat = frontend.meaning(pos)
        dtype = frontend.result_dtype(a)
        values = frontend.expect(out, (*shape, int(d)), dtype)
        channels = sinusoid_channels(int(d), float(base or 10000.0), conv or "paper")
        check_rows(values.reshape(-1, int(d)), flat, channels, frontend.dtype_name(dtype))

    run(a.call(frontend.label("sinusoidal"), fast_paths(data, frontend.api.sinusoidal), check))


@fuzz()
@given(st.data())
def test_frequencies(data: st.DataObject) -> None:
    a = Args(data)
    d = a.draw("d_model", count(1, 64))
    base = a.draw("base", BASES, optional=True)
    conv = a.draw("convention", name(CONVENTIONS), optional=True)

    def check(omega):
        d_, b = int(d), float(base or 10000.0)
        if (conv or "paper") == "tensor2tensor":
            exps = [Fraction(k, max(d_ // 2 - 1, 1)) for k in range(d_ // 2)]
        else:
            exps = [Fraction(2 * k, d_) for k in range((d_ + 1) // 2)]
        expect_array(omega, (len(exps),), np.float64)
        for k, e in enumerate(exps):
            want, rel = exact_omega(b, e)
            assert abs(omega[k] - float(want)) <= rel * float(want) + 1e-300, f"ω_{k}"

    run(a.call("posenc.frequencies", posenc.frequencies, check))


def rope_arguments(a: Args, data: st.DataObject) -> dict:
    """head_dim, base, rotary_dim, scaling (jointly valid when drawn valid)."""
    head_dim = a.draw("head_dim", count(2, 32, huge="doubtful"))  # huge: fine with rotary_dim
    base = a.draw("base", ROPE_BASES, optional=True)
    h = int(head_dim) if a.kinds["head_dim"] == VALID else 8
    rotary_dim = a.draw(
        "rotary_dim",
        choose(
            st.integers(1, h // 2).map(lambda k: 2 * k),
            st.sampled_from([h + 2, 1, 3, 0, -2, *NOT_NONE, 2.0, *HUGE[:3]]),
        ),
        optional=True,
    )
    r = h if rotary_dim is None or a.kinds["rotary_dim"] != VALID else int(rotary_dim)
    if r % 2:
        a.kinds["head_dim"] = DOUBTFUL  # an odd head_dim needs an even rotary_dim
        r = max(2, r - 1)
    b = float(base) if base is not None and a.kinds["base"] != HOSTILE else 10000.0
    scaling = a.draw("scaling", scalings(r, b), optional=True)
    spec = posenc.rope_scaling(scaling) if a.kinds.get("scaling") == VALID else None
    if spec is not None and spec.rope_type == "dynamic" and r < 4:
        a.kinds["scaling"] = DOUBTFUL
    return {"head_dim": head_dim, "base": base, "rotary_dim": rotary_dim, "scaling": scaling}


SCALING_NAMES = {"scaling": ("scaling", "rope_type", "dim"), "base": ("base", "rope_theta")}


@each_frontend
@fuzz(scale=2)
@given(st.data())
def test_rotary_cos_sin(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    pos = a.draw("positions", frontend.positions())
    rope = rope_arguments(a, data)
    pairs = a.draw("pairs", name(PAIRS), optional=True)
    a.draw("dtype", frontend.dtypes, optional=True)
    frontend.draw_device(a)
    seq_len = a.draw("seq_len", count(0, 10**6, huge="doubtful", none=True), optional=True)

    def check(result):
        cos, sin = result
        shape, flat = frontend.meaning(pos)
        length = effective_seq_len(rope["scaling"], seq_len, flat)
        r, omega, attention = rope_reference(
            int(rope["head_dim"]), rope["rotary_dim"], rope["base"], rope["scaling"], length
        )
        dtype = frontend.result_dtype(a)
        tables = [frontend.expect(t, (*shape, r), dtype).reshape(-1, r) for t in (cos, sin)]
        name_ = frontend.dtype_name(dtype)
        check_rope_tables(*tables, flat, omega, attention, pairs or "half", name_)

    rotary_cos_sin = frontend.api.rotary_cos_sin
    run(a.call(frontend.label("rotary_cos_sin"), rotary_cos_sin, check, aliases=SCALING_NAMES))


@fuzz()
@given(st.data())
def test_rope_frequencies(data: st.DataObject) -> None:
    a = Args(data)
    dim = a.draw(
        "dim",
        choose(
            st.integers(1, 32).map(lambda k: 2 * k),
            st.sampled_from([1, 3, 0, -2, *WRONG_TYPES, 4.0, *HUGE]),
        ),
    )
    base = a.draw("base", ROPE_BASES, optional=True)
    r = int(dim) if a.kinds["dim"] == VALID else 8
    b = float(base) if base is not None and a.kinds["base"] != HOSTILE else 10000.0
    scaling = a.draw("scaling", scalings(r, b), optional=True)
    a.draw("seq_len", count(0, 10**6, huge="doubtful", none=True), optional=True)
    spec = posenc.rope_scaling(scaling) if a.kinds.get("scaling") == VALID else None
    if spec is not None and spec.rope_type == "dynamic" and r < 4:
        a.kinds["scaling"] = DOUBTFUL

    def check(result):
        omega, attention = result
        expect_array(omega, (r // 2,), np.float64)
        assert isinstance(attention, float)
        assert math.isfinite(attention)
        assert attention > 0
        assert np.all(omega >= 0), "a negative frequency"
        if spec is None or spec.rope_type in ("default", "linear"):
            factor = 1.0 if spec is None or spec.rope_type == "default" else spec.factor
            for k in range(r // 2):
                want, rel = exact_omega(b, Fraction(2 * k, r))
                want = float(want) / factor
                assert abs(omega[k] - want) <= (rel + 2 * EPS) * want + 1e-300, f"ω_{k}"
            assert attention == 1.0

    run(a.call("posenc.rope_frequencies", posenc.rope_frequencies, check, aliases=SCALING_NAMES))


@fuzz(scale=0.5)
@given(st.data())
def test_rope_scaling(data: st.DataObject) -> None:
    a = Args(data)
    scaling = a.draw("scaling", scalings(8, 10000.0))
    needs_more = isinstance(scaling, dict) and (
        "rope_theta" in scaling or "short_factor" in scaling
    )
    if needs_more and a.kinds["scaling"] != VALID:
        a.kinds["scaling"] = DOUBTFUL  # checked against a base or a dim, given elsewhere

    def check(spec):
        if scaling is None:
            assert spec is None
            return
        assert isinstance(spec, posenc.RopeScaling)
        assert posenc.rope_scaling(spec) is spec
        assert spec == posenc.RopeScaling(spec.rope_type, **spec.params)

    run(a.call("posenc.rope_scaling", posenc.rope_scaling, check))


#: a missing parameter is named by the error; which are required is the rope type's choice
REQUIRED = ("factor", "original_max_position_embeddings", "short_factor", "long_factor")


@fuzz(scale=0.5)
@given(st.data())
def test_rope_scaling_class(data: st.DataObject) -> None:
    drawn = data.draw(
        scalings(8, 10000.0).filter(
            lambda d: isinstance(d.value, dict) and all(isinstance(k, str) for k in d.value)
        )
    )
    params = dict(drawn.value)
    if "rope_type" not in params:
        params["rope_type"] = params.pop("type", "default")
    kind = drawn.kind
    if "short_factor" in params or "rope_theta" in params:
        kind = DOUBTFUL  # checked against a dim or a base, given elsewhere
    a = Args(data)
    for key, value in params.items():
        a.set(key, value, kind)  # a hostile set: the key at fault is one of them

    def check(spec):
        assert isinstance(spec, posenc.RopeScaling)
        assert spec == posenc.rope_scaling(dict(params))
        assert spec.rope_type == params["rope_type"]

    aliases = {"rope_type": ("rope_type", *REQUIRED)}
    run(a.call("posenc.RopeScaling", posenc.RopeScaling, check, aliases=aliases))


def rotary_inputs(frontend: Frontend, data: st.DataObject, a: Args):
    """x, and cos/sin tables built for a layout, drawn valid or hostile."""
    head_dim = data.draw(st.integers(1, 8).map(lambda k: 2 * k), label="head_dim")
    r = data.draw(st.integers(1, head_dim // 2).map(lambda k: 2 * k), label="r")
    lead = data.draw(st.sampled_from([(3,), (2, 3), (1, 2, 3), (2, 1, 3), (0,), (2, 0)]))
    dtype = data.draw(st.sampled_from(frontend.float_names), label="x dtype")
    x = data.draw(frontend.float_arrays((*lead, head_dim), dtype), label="x values")
    layout = data.draw(st.sampled_from(PAIRS), label="table layout")
    pos = data.draw(st.lists(st.integers(-(10**6), 10**6), min_size=lead[-1], max_size=lead[-1]))
    table_dtype = data.draw(st.sampled_from(frontend.float_names), label="table dtype")
    cos, sin = frontend.api.rotary_cos_sin(
        frontend.array(np.array(pos, dtype=np.int64)),
        head_dim,
        rotary_dim=r,
        pairs=layout,
        dtype=frontend.dtype(table_dtype),
    )
    bad_x = [
        *frontend.not_arrays,
        frontend.cast(x, "int32"),
        frontend.cast(x, "int64"),
        frontend.cast(x, "complex64"),
        frontend.cast(x, "complex128"),
        x[..., :1],
        frontend.array(np.float64(1.0)),
    ]
    a.draw("x", choose(st.just(x), st.sampled_from(bad_x)))
    bad_tables = [
        cos[..., :1],
        cos[..., :-1] if r > 2 else cos[..., :1],
        frontend.array(np.ones((*cos.shape[:-1], head_dim + 2))),
        frontend.cast(cos, "complex64"),
        frontend.cast(cos, "int32"),
        frontend.cast(cos, "int64"),
        frontend.array(np.ones((5, r))),
        None,
        *frontend.misplaced(cos),
    ]
    a.draw("cos", choose(st.just(cos), st.sampled_from(bad_tables)))
    bad_sin = [frontend.array(np.zeros((7, r))), "s", *frontend.misplaced(sin)]
    a.draw("sin", choose(st.just(sin), st.sampled_from(bad_sin)))
    return layout, r


@each_frontend
@fuzz(scale=2)
@given(st.data())
def test_apply_rotary(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    layout, r = rotary_inputs(frontend, data, a)
    pairs = a.draw(
        "pairs", choose(st.sampled_from(PAIRS), st.sampled_from(BAD_PAIRS)), optional=True
    )
    rotary_dim = a.draw(
        "rotary_dim", choose(st.just(r), st.sampled_from([r + 2, 1, "4", None])), optional=True
    )
    if rotary_dim is None and "rotary_dim" in a.kwargs and a.kinds["rotary_dim"] == HOSTILE:
        a.kinds["rotary_dim"] = VALID  # None means "cos.shape[-1]"
    if rotary_dim == 2 * r and a.kinds.get("rotary_dim") == HOSTILE:
        a.kinds["rotary_dim"] = DOUBTFUL  # the tables may be read as one column per pair
    inverse = a.draw("inverse", flag(), optional=True)
    mismatch = (pairs or "half") != layout
    if mismatch and a.kinds.get("pairs", VALID) == VALID:
        a.kinds["pairs"] = DOUBTFUL  # tables of the other layout: refuse, or rotate correctly

    def check(out):
        x, cos, sin = (a.kwargs[key] for key in ("x", "cos", "sin"))
        x_name, table_name = frontend.dtype_name(x.dtype), frontend.dtype_name(cos.dtype)
        got = frontend.expect(out, tuple(x.shape), x.dtype)
        x64 = frontend.to_numpy(x)
        work = frontend.work_eps(x_name, table_name)
        sines = frontend.to_numpy(sin)
        tables = (frontend.to_numpy(cos), -sines if inverse is not None and inverse else sines)
        check_rotation(x64, got, *tables, layout, x_name, work)
        rtol = 4 * float(ulp(table_name, 1.0)) + 4 * float(ulp(x_name, 1.0)) + 8 * work
        check_pair_norms(x64, got, layout, r, 1.0, rtol, x_name)

    call = a.call(
        frontend.label("apply_rotary"),
        frontend.api.apply_rotary,
        check,
        facts={"mismatch": mismatch},
    )
    run(call)


@fuzz(scale=0.5)
@given(
    q=st.lists(st.floats(-2, 2), min_size=8, max_size=8),
    k=st.lists(st.floats(-2, 2), min_size=8, max_size=8),
    at=st.tuples(st.integers(-(10**5), 10**5), st.integers(-(10**5), 10**5)),
    shift=st.integers(-(10**5), 10**5),
    pairs=st.sampled_from(PAIRS),
)
def test_rope_dot_products_depend_on_distance_only(q, k, at, shift, pairs) -> None:
    def rotate(v, p):
        cos, sin = posenc.rotary_cos_sin([p], 8, pairs=pairs, dtype=np.float64)
        return posenc.apply_rotary(np.asarray(v)[None], cos, sin, pairs=pairs)[0]

    check_relative(rotate, np.asarray(q), np.asarray(k), at, shift, 1e-9)


GRID_D = {"mae": 4, "timm": 4, "timm_interleaved": 4, "diffusers_3d": 16, "positional_encodings": 1}
GRID_NDIMS = {"diffusers_3d": (3,), "positional_encodings": (1, 2, 3)}


def per_axis(strategy, ndim: int):
    """A number, or one per axis."""
    drawn = st.tuples(*[strategy] * ndim).map(list)
    return strategy | drawn | drawn.map(tuple) | drawn.map(np.array)


@fuzz(scale=2)
@given(st.data())
def test_sinusoidal_grid(data: st.DataObject) -> None:
    a = Args(data)
    conv = a.draw("convention", name(tuple(GRID_D)), optional=True)
    c = conv if a.kinds.get("convention", VALID) == VALID and conv else "mae"
    ndim = data.draw(st.sampled_from(GRID_NDIMS.get(c, (2,))), label="ndim")
    unit = GRID_D[c]
    a.draw(
        "d_model",
        choose(
            st.integers(1, 6).map(lambda m: m * unit)
            | st.integers(1, 13).filter(lambda v: v % unit == 0),
            st.sampled_from([unit + 2 if unit > 1 else 0, 0, -4, *WRONG_TYPES, *HUGE[:4]]),
        ),
    )
    a.draw(
        "shape",
        choose(
            st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim).map(tuple),
            st.sampled_from(bad_shapes(ndim)),
        ),
    )
    base = a.draw("base", BASES, optional=True)
    a.draw("dtype", NUMPY_DTYPES, optional=True)
    size = a.draw(
        "base_size",
        choose(per_axis(reals_pos(), ndim), st.sampled_from([0, -1.0, "x", [1.0] * (ndim + 1)])),
        optional=True,
    )
    scale = a.draw(
        "interpolation_scale",
        choose(per_axis(reals_pos(), ndim), st.sampled_from([0, math.nan, [1.0] * (ndim + 2)])),
        optional=True,
    )
    offset = a.draw(
        "offset",
        choose(
            per_axis(st.integers(-100, 100) | st.floats(-50, 50), ndim),
            st.sampled_from([math.inf, "1", [0] * (ndim + 1), 2.0**60]),
        ),
        optional=True,
    )
    cls = a.draw("cls_token", flag(), optional=True)
    extra = a.draw("extra_tokens", count(0, 3), optional=True)
    flatten = a.draw("flatten", flag(), optional=True)
    if cls and extra and a.kinds["cls_token"] == a.kinds["extra_tokens"] == VALID:
        a.kinds["extra_tokens"] = DOUBTFUL  # documented: not both
    rows_extra = 0
    if a.kinds.get("extra_tokens", VALID) == VALID and a.kinds.get("cls_token", VALID) == VALID:
        rows_extra = int(extra or 0) + int(bool(cls))
    if flatten is not None and not flatten and rows_extra and a.kinds["flatten"] == VALID:
        a.kinds["flatten"] = DOUBTFUL  # documented: no place for extra rows

    def check(out):
        shape = tuple(int(n) for n in a.kwargs["shape"])
        d = int(a.kwargs["d_model"])
        dtype = numpy_dtype(a)
        flat = flatten is None or bool(flatten)
        cells = math.prod(shape)
        expect_array(out, (rows_extra + cells, d) if flat else (*shape, d), dtype)
        table = out.reshape(-1, d).astype(np.float64)
        assert not np.any(table[:rows_extra]), "extra rows are not zero"
        axes = [grid_coords(i, shape, size, scale, offset) for i in range(len(shape))]
        channels = grid_channels(c, d, len(shape), float(base or 10000.0))
        picks = sorted({0, cells // 2, cells - 1})
        coords = [
            tuple(axes[ax][idx] for ax, idx in enumerate(np.unravel_index(p, shape))) for p in picks
        ]
        values, errors = exact_rows(coords, channels)
        compare(table[[rows_extra + p for p in picks]], values, errors, dtype.name)

    run(
        a.call(
            "posenc.sinusoidal_grid",
            posenc.sinusoidal_grid,
            check,
            aliases={
                "shape": ("shape", "grid positions"),
                "offset": ("offset", "grid positions"),
                "base_size": ("base_size",),
                "interpolation_scale": ("interpolation_scale",),
            },
        )
    )


def bad_shapes(ndim: int) -> list:
    """Shapes no grid of ``ndim`` axes has (empty, negative, fractional, bool, too large)."""
    rest = (2,) * (ndim - 1)
    return [
        (0, *rest),
        (*rest, -1),
        (2, 2, 2, 2),
        (2.5, *rest),
        (True, *rest),
        "22",
        None,
        5,
        (2**40,) * ndim,
        (*rest, 2**53),
    ]


def reals_pos():
    return st.floats(0.25, 64.0) | st.integers(1, 32)


def near_pole(a: Args, dim, shift) -> None:
    """A shift near dim // 2 makes the exponent blow up: it may be refused."""
    if a.kinds["dim"] == VALID and a.kinds.get("downscale_freq_shift") == VALID:
        h = int(dim) // 2
        if h >= 2 and abs(h - float(shift)) < 0.5:
            a.kinds["downscale_freq_shift"] = DOUBTFUL


@each_frontend
@fuzz(scale=2)
@given(st.data())
def test_timestep_embedding(frontend: Frontend, data: st.DataObject) -> None:
    a = Args(data)
    t = a.draw("timesteps", frontend.timesteps())
    dim = a.draw("dim", count(1, 40))
    period = a.draw("max_period", BASES, optional=True)
    flip = a.draw("flip_sin_to_cos", flag(), optional=True)
    shift = a.draw("downscale_freq_shift", finite(-4.0, 4.0, extra=(0.0, 1.0)), optional=True)
    scale = a.draw("scale", finite(-1e3, 1e3, extra=(1.0, 1000.0)), optional=True)
    a.draw("dtype", frontend.dtypes, optional=True)
    near_pole(a, dim, shift)

    def check(out):
        array = np.asarray(frontend.to_numpy(t))
        if array.dtype.kind not in "iuf":
            array = array.astype(np.int64)
        dtype = frontend.result_dtype(a)
        values = frontend.expect(out, (*array.shape, int(dim)), dtype)
        s = exact(1 if scale is None else scale)
        flat = [exact(v) * s for v in array.reshape(-1).tolist()]
        channels = timestep_channels(
            int(dim),
            float(period or 10000.0),
            float(shift if shift is not None else 1.0),
            bool(flip),
        )
        check_rows(values.reshape(-1, int(dim)), flat, channels, frontend.dtype_name(dtype))

    run(a.call(frontend.label("timestep_embedding"), frontend.api.timestep_embedding, check))


# -- PyTorch only ------------------------------------------------------------------------------


@torch_only
@fuzz()
@given(st.data())
def test_cast_exact(data: st.DataObject) -> None:
    a = Args(data)
    table = torch.tensor(
        data.draw(
            st.lists(
                st.floats(allow_nan=True, allow_infinity=True)
                | st.sampled_from(
                    [
                        1.0 + 2**-8 + 2**-30,
                        65520.0,
                        2.0**-25,
                        -0.0,
                        2.0**-134,
                        3.3895313892515355e38,
                    ]
                ),
                max_size=8,
            )
        ),
        dtype=torch.float64,
    )
    a.draw(
        "table",
        choose(
            st.just(table),
            st.sampled_from(
                [table.to(torch.float32), None, [1.0], np.zeros(2), table.to(torch.int64)]
            ),
        ),
    )
    a.draw(
        "dtype",
        choose(
            st.sampled_from(list(NAMES)),
            st.sampled_from([torch.int8, "float16", np.float16, None, torch.complex64]),
        ),
    )

    def check(out):
        dtype = a.kwargs["dtype"]
        assert isinstance(out, torch.Tensor)
        assert out.dtype == dtype
        assert tuple(out.shape) == tuple(table.shape)
        values = table.numpy()
        if dtype == torch.bfloat16:
            want = round_bfloat16(values)
        else:
            with np.errstate(over="ignore"):
                want = values.astype(NAMES[dtype]).astype(np.float64)
        got = out.to(torch.float64).numpy()
        same = (got == want) & (np.signbit(got) == np.signbit(want))
        assert np.all(same | (np.isnan(got) & np.isnan(want))), f"{got} != {want}"

    run(a.call("posenc.torch.cast_exact", pt.cast_exact, check))


@torch_only
@fuzz(scale=0.25)
@given(st.data())
def test_set_data_checks(data: st.DataObject) -> None:
    a = Args(data)
    a.draw("enabled", flag())

    def switch(enabled):
        with pt.set_data_checks(enabled):
            inside = pt.sinusoidal(torch.tensor([3]), 4)
        return inside

    def check(inside):
        assert torch.equal(inside, pt.sinusoidal(4, 4)[3:])

    run(a.call("posenc.torch.set_data_checks", switch, check))


@fuzz()
@given(st.data())
def test_attention_temperature(data: st.DataObject) -> None:
    a = Args(data)
    positions = a.draw(
        "positions",
        choose(
            st.integers(0, 64) | st.lists(st.integers(0, 2**53), max_size=6),
            st.sampled_from([[-1], [0.5], "x", [[1], [2, 3]], 2**62, -3, [True], None]),
        ),
    )
    kind = a.draw("kind", name(("llama4", "llama4_beta", "log", "constant")))
    params = {
        "llama4": ("attn_scale", "floor_scale"),
        "llama4_beta": ("beta", "original_max_position_embeddings"),
        "log": ("alpha", "n_floor"),
        "constant": ("scale",),
    }.get(kind if isinstance(kind, str) else "", ())
    for key in params:
        scale = key in ("floor_scale", "original_max_position_embeddings", "n_floor", "scale")
        a.draw(key, positive(0.5, 1e5) if scale else finite(-1.0, 1.0))

    def reference(p: int) -> float:
        k = {key: float(a.kwargs[key]) for key in params}
        if kind == "llama4":
            return 1 + k["attn_scale"] * math.log1p(math.floor((p + 1) / k["floor_scale"]))
        if kind == "llama4_beta":
            steps = math.floor(p / k["original_max_position_embeddings"])
            return 1 + k["beta"] * math.log1p(steps)
        if kind == "log":
            return 1 + k["alpha"] * math.log(max((p + 1) / k["n_floor"], 1.0))
        return k["scale"]

    def check(out: np.ndarray) -> None:
        p = np.arange(positions) if isinstance(positions, int) else np.asarray(positions)
        expect_array(out, p.shape, np.float64)
        want = np.array([reference(int(v)) for v in p.flat]).reshape(p.shape)
        np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-13)

    run(a.call("posenc.attention_temperature", posenc.attention_temperature, check))
