"""Fuzz the PyTorch modules: constructors and forwards (see ``contract.py``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402

from .checks import check_rotation, exact, grid_coords, rope_reference  # noqa: E402
from .contract import DOUBTFUL, VALID, Args, choose, run  # noqa: E402
from .frontends import PAIRS, expect_tensor, torch_dtype  # noqa: E402
from .profile import fuzz  # noqa: E402
from .reference import (  # noqa: E402
    check_pair_norms,
    check_relative,
    compare,
    exact_rows,
    first_outside,
    grid_channels,
    rope_channels,
    sinusoid_channels,
    timestep_channels,
    ulp,
)
from .test_core import GRID_D, SCALING_NAMES, near_pole  # noqa: E402
from .torch_values import DTYPES, NAMES, NOT_TENSORS, float_tensors, hostile_tensors  # noqa: E402
from .values import (  # noqa: E402
    BASES,
    CONVENTIONS,
    HUGE,
    ROPE_BASES,
    WRONG_TYPES,
    count,
    finite,
    flag,
    name,
    scalings,
)

pytestmark = pytest.mark.usefixtures("one_thread")

PROBABILITY = choose(
    st.sampled_from([0.0, 0, 0.1, 0.5, 1.0, np.float32(0.25)]),
    st.sampled_from([*WRONG_TYPES, -0.1, 1.5, math.nan, 10**400]),
)
OFFSETS = count(0, 10**6, huge="doubtful")  # 2**53 - 1 is fine for one token


def offset_shifts_positions(f: Args, positions: Any, offset: Any) -> Any:
    """The offset to use. The limit holds for positions + offset, so an out-of-range integer
    position (-2**53 - 1) plus an offset may be valid again, at the very edge where the
    reference knows no digit of the angle: hostile integer positions are drawn without one."""
    if isinstance(positions, torch.Tensor):
        integral = not (positions.is_floating_point() or positions.is_complex())
    else:
        integral = isinstance(positions, np.ndarray) and positions.dtype.kind in "iu"
    if offset and integral and f.kinds.get("positions") != VALID:
        f.kwargs.pop("offset", None)
        f.kinds.pop("offset", None)
        return None
    return offset


def check_sum(got, x64, exact_pe, errors, dtype_name):
    """``got == x + PE`` within PE's accuracy in the dtype plus the addition's rounding."""
    want = x64 + exact_pe
    slack = (
        ulp(dtype_name, want) + ulp(dtype_name, exact_pe) + np.where(np.isinf(errors), 2.0, errors)
    )
    i = first_outside(got, want, slack + (1e-7 if dtype_name == "float32" else 0.0))
    if i is not None:
        raise AssertionError(f"x + PE at {i}: got {got[i]!r}, expected {want[i]!r}")


@fuzz(scale=2)
@given(st.data())
def test_sinusoidal_positional_encoding(data: st.DataObject) -> None:
    a = Args(data)
    d = a.draw("d_model", count(1, 24))
    a.draw("dropout", PROBABILITY, optional=True)
    base = a.draw("base", BASES, optional=True)
    conv = a.draw("convention", name(CONVENTIONS), optional=True)
    batch_first = a.draw("batch_first", flag(), optional=True)
    a.draw("max_len", count(0, 64, none=True), optional=True)
    a.draw("dtype", DTYPES, optional=True)
    module = a.build("posenc.torch.SinusoidalPositionalEncoding", pt.SinusoidalPositionalEncoding)
    if module is None:
        return
    module.train(data.draw(st.booleans(), label="train"))
    d, bf = int(d), batch_first is None or bool(batch_first)
    f = Args(data)
    layout = data.draw(st.sampled_from(["bsd", "sd"]), label="x layout")
    b, s = data.draw(st.integers(1, 3)), data.draw(st.integers(0, 5))
    shape = ((b, s, d) if bf else (s, b, d)) if layout == "bsd" else (s, d)
    dtype = data.draw(st.sampled_from(list(NAMES)), label="x dtype")
    x = data.draw(float_tensors(shape, dtype), label="x values")
    f.draw(
        "x",
        choose(
            st.just(x),
            st.sampled_from(
                [*NOT_TENSORS, x.to(torch.int64), torch.zeros(s, d + 1), torch.zeros(1, 1, 1, d)]
            ),
        ),
    )
    per_token = shape[:-1]
    pos_valid = st.lists(st.integers(-(10**6), 10**6), min_size=s, max_size=s).map(
        torch.tensor
    ) | st.lists(
        st.integers(0, 10**5), min_size=math.prod(per_token), max_size=math.prod(per_token)
    ).map(lambda v: torch.tensor(v, dtype=torch.int32).reshape(per_token))
    positions = f.draw(
        "positions",
        choose(pos_valid, hostile_tensors() | st.sampled_from([torch.zeros(s + 1)])),
        optional=True,
    )
    offset = f.draw("offset", OFFSETS, optional=True)
    offset = offset_shifts_positions(f, positions, offset)

    def check(out):
        got = expect_tensor(out, shape, dtype)
        seq_axis = 0 if (layout == "sd" or not bf) else 1
        if positions is None:
            pos = [int(offset or 0) + i for i in range(s)]
            pos_of = lambda index: pos[index[seq_axis]]  # noqa: E731
        else:
            given = torch.as_tensor(positions)  # a hostile NumPy array an offset made valid
            flat = given.to(torch.float64 if given.is_floating_point() else torch.int64)
            flat = flat + int(offset or 0)
            pos_of = lambda index: flat[index[seq_axis]] if flat.dim() == 1 else flat[index]  # noqa: E731
        p = float(a.kwargs.get("dropout", 0.0))
        channels = sinusoid_channels(d, float(base or 10000.0), conv or "paper")
        x64 = x.to(torch.float64).numpy()
        for index in list(np.ndindex(*shape[:-1]))[:3]:
            where = pos_of(index)
            values, errors = exact_rows(
                [(exact(where.item() if hasattr(where, "item") else where),)], channels
            )
            row = got[index]
            if module.training and p > 0:
                keep = row != 0
                row = np.where(keep, row * (1 - p), 0.0)
                check_sum(
                    row[keep], x64[index][keep], values[0][keep], errors[0][keep], NAMES[dtype]
                )
            else:
                check_sum(row, x64[index], values[0], errors[0], NAMES[dtype])

    run(
        f.call(
            "SinusoidalPositionalEncoding.forward",
            module,
            check,
            aliases={"x": ("x",), "positions": ("positions",), "offset": ("offset",)},
        )
    )


@fuzz()
@given(st.data())
def test_transformer_embedding(data: st.DataObject) -> None:
    a = Args(data)
    vocab = a.draw("vocab_size", count(1, 50))
    d = a.draw("d_model", count(1, 16))
    a.draw(
        "padding_idx",
        choose(st.none() | st.integers(0, 0), st.sampled_from([-1, 10**6, "0", 1.0, True])),
        optional=True,
    )
    segs = a.draw("num_segments", count(0, 3), optional=True)
    a.draw("dropout", choose(st.just(0.0), st.sampled_from([2.0, "x", None])), optional=True)
    a.draw("scale", flag(), optional=True)
    module = a.build("posenc.torch.TransformerEmbedding", pt.TransformerEmbedding)
    if module is None:
        return
    module.eval()
    v, d, n_seg = int(vocab), int(d), int(segs or 0)
    f = Args(data)
    shape = data.draw(st.sampled_from([(2, 3), (1, 0), (4,), (1, 1)]))
    ids = torch.tensor(
        data.draw(
            st.lists(st.integers(0, v - 1), min_size=math.prod(shape), max_size=math.prod(shape))
        )
    ).reshape(shape)
    id_dtype = data.draw(st.sampled_from([torch.int64, torch.int32, torch.uint8, torch.int16]))
    tokens = f.draw(
        "tokens",
        choose(
            st.just(ids.to(id_dtype)) if v <= 127 else st.just(ids),
            st.sampled_from([*NOT_TENSORS, ids.float(), ids + v, ids[None, None], torch.tensor(1)]),
        ),
    )
    zeros = torch.zeros(shape, dtype=torch.int64)
    hostile_segments = st.sampled_from([zeros + 0.5, ids[..., :0], zeros + n_seg, [0]])
    f.draw(
        "segments",
        choose(st.just(zeros), hostile_segments) if n_seg else choose(None, st.just(zeros)),
        optional=True,
    )

    def check(out):
        got = expect_tensor(out, (*shape, d), torch.get_default_dtype())
        weight = module.token.weight.detach().to(torch.float64).numpy()
        scale = math.sqrt(d) if module.scale else 1.0
        channels = sinusoid_channels(d, 10000.0, "paper")
        seq_axis = 1 if len(shape) == 2 else 0
        for index in list(np.ndindex(*shape))[:3]:
            values, errors = exact_rows([(index[seq_axis],)], channels)
            base_row = weight[int(tokens[index])] * scale
            if module.segment is not None:  # segments are all 0 (given or not)
                base_row = base_row + module.segment.weight.detach().double().numpy()[0]
            check_sum(
                got[index], base_row, values[0], errors[0] + 4e-7 * np.abs(base_row), "float32"
            )

    run(f.call("TransformerEmbedding.forward", module, check))


def align(table, pos_dim: int, seq_dim: int):
    """A ``(*P, r)`` table shaped to broadcast against ``(b, h, s, d)`` / ``(b, s, h, d)``."""
    if pos_dim == 1:
        return table if seq_dim == -2 else table[:, None, :]
    return table[:, None] if seq_dim == -2 else table[:, :, None]


def rotary_module_inputs(data, head_dim: int, seq_dim: int):
    b, h, s = (
        data.draw(st.integers(1, 2)),
        data.draw(st.integers(1, 2)),
        data.draw(st.integers(0, 4)),
    )
    shape = (b, h, s, head_dim) if seq_dim == -2 else (b, s, h, head_dim)
    dtype = data.draw(st.sampled_from(list(NAMES)), label="q dtype")
    k_dtype = data.draw(st.sampled_from([dtype, torch.float32]), label="k dtype")
    q = data.draw(float_tensors(shape, dtype), label="q")
    k = data.draw(float_tensors(shape, k_dtype), label="k")
    return q, k, s, b


@fuzz(scale=2)
@given(st.data())
def test_rotary_embedding(data: st.DataObject) -> None:
    a = Args(data)
    head_dim = a.draw(
        "head_dim",
        choose(
            st.integers(1, 8).map(lambda k: 2 * k),
            st.sampled_from([1, 0, "8", None, 8.0, *HUGE[:2]]),
        ),
    )
    base = a.draw("base", ROPE_BASES, optional=True)
    if base is None and "base" in a.kwargs:
        a.kinds["base"] = VALID  # None means 10000.0 (or no base with frequencies=)
    pairs = a.draw("pairs", name(PAIRS), optional=True)
    h = int(head_dim) if a.kinds["head_dim"] == VALID else 8
    b_ = float(base) if base is not None and a.kinds["base"] == VALID else 10000.0
    scaling = a.draw("scaling", scalings(h, b_), optional=True)
    seq_dim = a.draw(
        "seq_dim",
        choose(st.sampled_from([-2, 1]), st.sampled_from([-1, "1", None, 1.5])),
        optional=True,
    )
    a.draw("max_len", count(0, 32, none=True), optional=True)
    spec = posenc.rope_scaling(scaling) if a.kinds.get("scaling") == VALID else None
    if spec is not None and spec.rope_type == "dynamic" and h < 4:
        a.kinds["scaling"] = DOUBTFUL
    module = a.build("posenc.torch.RotaryEmbedding", pt.RotaryEmbedding, aliases=SCALING_NAMES)
    if module is None:
        return
    sd = -2 if seq_dim is None else int(seq_dim)
    q, k, s, bsz = rotary_module_inputs(data, h, sd)
    f = Args(data)
    f.draw("q", choose(st.just(q), st.sampled_from([*NOT_TENSORS, q.to(torch.int32), q[..., :-1]])))
    f.draw("k", choose(st.just(k), st.sampled_from([k[..., :1], k.to(torch.complex64)])))
    pos_valid = st.lists(st.integers(-(10**6), 10**6), min_size=s, max_size=s).map(
        torch.tensor
    ) | st.lists(st.integers(0, 10**5), min_size=s * bsz, max_size=s * bsz).map(
        lambda v: torch.tensor(v).reshape(bsz, s)
    )
    positions = f.draw("positions", choose(pos_valid, hostile_tensors()), optional=True)
    offset = f.draw("offset", OFFSETS, optional=True)
    offset = offset_shifts_positions(f, positions, offset)
    seq_len = f.draw("seq_len", count(0, 10**5, huge="doubtful", none=True), optional=True)

    def check(result):
        q_rot, k_rot = result
        pos = torch.arange(s) if positions is None else torch.as_tensor(positions)
        pos = pos.to(torch.int64) + int(offset or 0)
        flat = pos.reshape(-1).tolist()
        if seq_len is not None:
            length = int(seq_len)
        elif positions is None:
            length = int(offset or 0) + s
        else:
            length = max(max(flat) + 1, 0) if flat else 0
        r, omega, attention = rope_reference(h, None, base, scaling, length)
        tables = []
        for channels in rope_channels(omega, pairs or "half"):
            values, errors = exact_rows([(p,) for p in flat], channels, attention)
            tables.append(align(values.reshape(*pos.shape, r), pos.dim(), sd))
            angle_err = float(np.max(errors, initial=0.0))
        for x, out in ((q, q_rot), (k, k_rot)):
            got = expect_tensor(out, tuple(x.shape), x.dtype)
            x64 = x.to(torch.float64).numpy()
            work = max(2.0**-22 if x.dtype != torch.float64 else 2.0**-50, angle_err)
            check_rotation(x64, got, *tables, pairs or "half", NAMES[x.dtype], work)
            rtol = 8 * torch.finfo(x.dtype).eps + 2 * work
            check_pair_norms(x64, got, pairs or "half", r, attention, rtol, NAMES[x.dtype])

    run(f.call("RotaryEmbedding.forward", module, check))


@fuzz(scale=0.5)
@given(
    q=st.lists(st.floats(-2, 2), min_size=8, max_size=8),
    k=st.lists(st.floats(-2, 2), min_size=8, max_size=8),
    at=st.tuples(st.integers(0, 10**5), st.integers(0, 10**5)),
    shift=st.integers(0, 10**5),
    pairs=st.sampled_from(PAIRS),
)
def test_rotary_embedding_dot_products_depend_on_distance_only(q, k, at, shift, pairs) -> None:
    rope = pt.RotaryEmbedding(8, pairs=pairs)

    def rotate(v, p):
        x = torch.tensor(v, dtype=torch.float64).reshape(1, 1, 1, 8)
        return rope.rotate(x, offset=int(p))[0, 0, 0].numpy()

    check_relative(rotate, np.asarray(q), np.asarray(k), at, shift, 1e-9)


@fuzz()
@given(st.data())
def test_sinusoidal_grid_encoding(data: st.DataObject) -> None:
    a = Args(data)
    conv = data.draw(st.sampled_from(sorted(GRID_D)), label="convention")
    a.set("convention", conv)
    ndim = (
        3
        if conv == "diffusers_3d"
        else data.draw(st.sampled_from((1, 2, 3) if conv == "positional_encodings" else (2,)))
    )
    unit = GRID_D[conv]
    d = a.draw(
        "d_model",
        choose(
            st.integers(1, 3).map(lambda m: m * unit * 2 if unit == 1 else m * unit),
            st.sampled_from([0, unit + 1 if unit > 1 else -1, "8", None, *HUGE[:2]]),
        ),
    )
    grid = a.draw(
        "grid_shape",
        choose(
            st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim).map(tuple),
            st.sampled_from([(0, 2), "ab", 5, (2**40, 2**40)]),
        ),
        optional=True,
    )
    cls = a.draw("cls_token", flag(), optional=True)
    a.draw("dropout", PROBABILITY, optional=True)
    a.draw("dtype", DTYPES, optional=True)
    module = a.build(
        "posenc.torch.SinusoidalGridEncoding",
        pt.SinusoidalGridEncoding,
        aliases={"grid_shape": ("grid_shape", "shape", "grid positions")},
    )
    if module is None:
        return
    module.eval()
    f = Args(data)
    shape = f.draw(
        "grid_shape",
        choose(
            st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim).map(tuple),
            st.sampled_from([(0, 1), "x", (1, 2**62)]),
        ),
        optional=True,
    )
    if shape is None and grid is None:
        f.kinds["grid_shape"] = DOUBTFUL  # documented: grid_shape needed somewhere
    dims = shape or grid or (1,) * ndim
    dtype = torch_dtype(a)

    def check(out):
        got = expect_tensor(out, (int(bool(cls)) + math.prod(dims), int(d)), dtype)
        channels = grid_channels(conv, int(d), len(dims), 10000.0)
        coords = [
            tuple(
                grid_coords(ax, dims, None, None, None)[i]
                for ax, i in enumerate(np.unravel_index(c, dims))
            )
            for c in sorted({0, math.prod(dims) - 1})
        ]
        values, errors = exact_rows(coords, channels)
        start = int(bool(cls))
        picked = got[[start + c for c in sorted({0, math.prod(dims) - 1})]]
        compare(picked, values, errors, NAMES[dtype])

    run(
        f.call(
            "SinusoidalGridEncoding.encoding",
            module.encoding,
            check,
            aliases={"grid_shape": ("grid_shape", "shape", "grid positions")},
        )
    )


@fuzz()
@given(st.data())
def test_timestep_embedding_module(data: st.DataObject) -> None:
    a = Args(data)
    dim = a.draw("dim", count(1, 24))
    period = a.draw("max_period", BASES, optional=True)
    flip = a.draw("flip_sin_to_cos", flag(), optional=True)
    shift = a.draw("downscale_freq_shift", finite(-4.0, 4.0, extra=(0.0, 1.0)), optional=True)
    scale = a.draw("scale", finite(-1e3, 1e3, extra=(1.0,)), optional=True)
    near_pole(a, dim, shift)
    module = a.build("posenc.torch.TimestepEmbedding", pt.TimestepEmbedding)
    if module is None:
        return
    f = Args(data)
    t = f.draw(
        "timesteps",
        choose(
            st.lists(st.floats(-1e4, 1e4), max_size=4).map(torch.tensor),
            hostile_tensors().filter(lambda v: isinstance(v, torch.Tensor)),
        ),
    )
    f.draw("dtype", DTYPES, optional=True)

    def check(out):
        dtype = torch_dtype(f)
        values = expect_tensor(out, (*t.shape, int(dim)), dtype)
        s = exact(1 if scale is None else scale)
        flat = [(exact(v) * s,) for v in t.to(torch.float64).reshape(-1).tolist()]
        channels = timestep_channels(
            int(dim),
            float(period or 10000.0),
            float(shift if shift is not None else 1.0),
            bool(flip),
        )
        if flat:
            want, errors = exact_rows(flat[:3], channels)
            compare(values.reshape(-1, int(dim))[:3], want, errors, NAMES[dtype])

    run(f.call("TimestepEmbedding.forward", module, check))
