"""Fuzz the functional PyTorch API: tables, rotations, casts, timesteps (see ``contract.py``)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import posenc.torch as pt  # noqa: E402

from .checks import (  # noqa: E402
    check_rope_tables,
    check_rotation,
    check_rows,
    effective_seq_len,
    exact,
    rope_reference,
)
from .contract import DOUBTFUL, VALID, Args, choose, run  # noqa: E402
from .frontends import PAIRS, expect_tensor, torch_dtype  # noqa: E402
from .profile import fuzz  # noqa: E402
from .reference import (  # noqa: E402
    check_pair_norms,
    round_bfloat16,
    sinusoid_channels,
    timestep_channels,
)
from .test_core import BAD_PAIRS, SCALING_NAMES, fast_paths, near_pole, rope_arguments  # noqa: E402
from .torch_values import (  # noqa: E402
    DEVICES,
    DTYPES,
    NAMES,
    NOT_TENSORS,
    float_tensors,
    meaning,
    positions,
)
from .values import BASES, CONVENTIONS, HUGE, count, finite, flag, name  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


TORCH_NAMES = {"positions": ("positions",), "device": ("device",), "dtype": ("dtype",)}


@fuzz(scale=3)
@given(st.data())
def test_sinusoidal(data: st.DataObject) -> None:
    a = Args(data)
    pos = a.draw("positions", positions())
    d = a.draw("d_model", count(1, 40))
    base = a.draw("base", BASES, optional=True)
    conv = a.draw("convention", name(CONVENTIONS), optional=True)
    a.draw("dtype", DTYPES, optional=True)
    a.draw("device", DEVICES, optional=True)

    def check(out):
        shape, flat = meaning(pos)
        dtype = torch_dtype(a)
        values = expect_tensor(out, (*shape, int(d)), dtype)
        channels = sinusoid_channels(int(d), float(base or 10000.0), conv or "paper")
        check_rows(values.reshape(-1, int(d)), flat, channels, NAMES[dtype])

    run(
        a.call(
            "posenc.torch.sinusoidal", fast_paths(data, pt.sinusoidal), check, aliases=TORCH_NAMES
        )
    )


@fuzz(scale=2)
@given(st.data())
def test_rotary_cos_sin(data: st.DataObject) -> None:
    a = Args(data)
    pos = a.draw("positions", positions())
    rope = rope_arguments(a, data)
    pairs = a.draw("pairs", name(PAIRS), optional=True)
    a.draw("dtype", DTYPES, optional=True)
    a.draw("device", DEVICES, optional=True)
    seq_len = a.draw("seq_len", count(0, 10**6, huge="doubtful", none=True), optional=True)

    def check(result):
        cos, sin = result
        shape, flat = meaning(pos)
        length = effective_seq_len(rope["scaling"], seq_len, flat)
        r, omega, attention = rope_reference(
            int(rope["head_dim"]), rope["rotary_dim"], rope["base"], rope["scaling"], length
        )
        dtype = torch_dtype(a)
        tables = [expect_tensor(t, (*shape, r), dtype).reshape(-1, r) for t in (cos, sin)]
        check_rope_tables(*tables, flat, omega, attention, pairs or "half", NAMES[dtype])

    run(
        a.call(
            "posenc.torch.rotary_cos_sin",
            pt.rotary_cos_sin,
            check,
            aliases={**SCALING_NAMES, **TORCH_NAMES},
        )
    )


@fuzz(scale=2)
@given(st.data())
def test_apply_rotary(data: st.DataObject) -> None:
    a = Args(data)
    head_dim = data.draw(st.integers(1, 8).map(lambda k: 2 * k), label="head_dim")
    r = data.draw(st.integers(1, head_dim // 2).map(lambda k: 2 * k), label="r")
    lead = data.draw(st.sampled_from([(3,), (2, 3), (1, 2, 3), (2, 1, 3), (0,), (2, 0)]))
    dtype = data.draw(st.sampled_from(list(NAMES)), label="x dtype")
    layout = data.draw(st.sampled_from(PAIRS), label="table layout")
    s = lead[-1]
    pos = torch.tensor(
        data.draw(st.lists(st.integers(-(10**6), 10**6), min_size=s, max_size=s)), dtype=torch.int64
    )
    table_dtype = data.draw(st.sampled_from(list(NAMES)), label="table dtype")
    cos, sin = pt.rotary_cos_sin(pos, head_dim, rotary_dim=r, pairs=layout, dtype=table_dtype)
    x = data.draw(float_tensors((*lead, head_dim), dtype), label="x values")
    a.draw(
        "x",
        choose(
            st.just(x),
            st.sampled_from(
                [
                    *NOT_TENSORS,
                    x.to(torch.int32),
                    x[..., :1],
                    x.to(torch.complex64),
                    torch.tensor(1.0),
                ]
            ),
        ),
    )
    a.draw(
        "cos",
        choose(
            st.just(cos),
            st.sampled_from(
                [
                    cos[..., :1],
                    cos.to("meta"),
                    cos.to(torch.int64),
                    torch.ones(5, r),
                    np.ones((s, r)),
                ]
            ),
        ),
    )
    a.draw("sin", choose(st.just(sin), st.sampled_from([torch.zeros(7, r), sin.to("meta")])))
    pairs = a.draw(
        "pairs", choose(st.sampled_from(PAIRS), st.sampled_from(BAD_PAIRS)), optional=True
    )
    mismatch = (pairs or "half") != layout
    if mismatch and a.kinds.get("pairs", VALID) == VALID:
        a.kinds["pairs"] = DOUBTFUL  # tables of the other layout: refuse, or rotate correctly

    def check(out):
        values = expect_tensor(out, tuple(x.shape), x.dtype)
        wide = torch.float64 in (x.dtype, cos.dtype)
        work = 2.0**-52 if wide else 2.0**-23
        c, si = cos.to(torch.float64).numpy(), sin.to(torch.float64).numpy()
        x64 = x.to(torch.float64).numpy()
        check_rotation(x64, values, c, si, layout, NAMES[x.dtype], work)
        rtol = 4 * torch.finfo(table_dtype).eps + 4 * torch.finfo(x.dtype).eps + 8 * work
        check_pair_norms(x64, values, layout, r, 1.0, rtol, NAMES[x.dtype])

    run(a.call("posenc.torch.apply_rotary", pt.apply_rotary, check, facts={"mismatch": mismatch}))


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


@fuzz(scale=2)
@given(st.data())
def test_timestep_embedding(data: st.DataObject) -> None:
    a = Args(data)
    t = a.draw("timesteps", positions())
    dim = a.draw("dim", count(1, 40))
    period = a.draw("max_period", BASES, optional=True)
    flip = a.draw("flip_sin_to_cos", flag(), optional=True)
    shift = a.draw("downscale_freq_shift", finite(-4.0, 4.0, extra=(0.0, 1.0)), optional=True)
    scale = a.draw("scale", finite(-1e3, 1e3, extra=(1.0, 1000.0)), optional=True)
    a.draw("dtype", DTYPES, optional=True)
    single = isinstance(t, int) and not isinstance(t, bool)
    if single and a.kinds["timesteps"] != VALID and t not in HUGE[2:]:
        a.kinds["timesteps"] = VALID  # an int is one timestep here, not a length
    near_pole(a, dim, shift)

    def check(out):
        if isinstance(t, torch.Tensor):
            shape, flat = meaning(t)
        else:
            array = np.asarray(t)
            array = array if array.dtype.kind in "iuf" else array.astype(np.int64)
            shape, flat = array.shape, array.reshape(-1).tolist()
        dtype = torch_dtype(a)
        values = expect_tensor(out, (*shape, int(dim)), dtype)
        s = exact(1 if scale is None else scale)
        channels = timestep_channels(
            int(dim),
            float(period or 10000.0),
            float(shift if shift is not None else 1.0),
            bool(flip),
        )
        check_rows(
            values.reshape(-1, int(dim)), [exact(v) * s for v in flat], channels, NAMES[dtype]
        )

    run(
        a.call(
            "posenc.torch.timestep_embedding",
            pt.timestep_embedding,
            check,
            aliases={"scale": ("scale",)},
        )
    )


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
