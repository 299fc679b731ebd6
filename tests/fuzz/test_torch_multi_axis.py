"""Fuzz multi-axis RoPE of the PyTorch front-end: ``multi_axis_cos_sin``,
``multimodal_positions``, ``RotaryEmbedding(sections=...)`` and ``hf.MultiAxisRotary``
(see ``contract.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from posenc.torch import hf  # noqa: E402

from .axes import (  # noqa: E402
    NAMES,
    axis_request,
    check_tables,
    coords_of,
    exact_tables,
    length_of,
    reference_columns,
)
from .checks import check_rotation  # noqa: E402
from .contract import DOUBTFUL, VALID, Args, choose, run  # noqa: E402
from .frontends import PAIRS, expect_tensor, torch_dtype  # noqa: E402
from .profile import fuzz  # noqa: E402
from .reference import check_pair_norms  # noqa: E402
from .test_multi_axis import check_multimodal, multimodal_case, table_arguments  # noqa: E402
from .torch_values import (  # noqa: E402
    DEVICES,
    DTYPES,
    NOT_TENSORS,
    float_tensors,
)
from .torch_values import NAMES as DTYPE_NAMES  # noqa: E402
from .values import HUGE, count, name  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def as_tensor_or_not(data: st.DataObject, value: Any) -> Any:
    """Valid coordinates as they are or as a CPU tensor (bfloat16 rounded for floats)."""
    if not data.draw(st.booleans(), label="as tensor"):
        return value
    tensor = torch.as_tensor(np.asarray(value))
    return tensor


@fuzz(scale=1.5)
@given(st.data())
def test_multi_axis_cos_sin(data: st.DataObject) -> None:
    a = Args(data)
    r = axis_request(a, data)
    width, pos = table_arguments(a, data, r)
    if a.kinds["positions"] == VALID:
        pos = a.set("positions", as_tensor_or_not(data, pos), VALID)
    pairs = a.draw("pairs", name(PAIRS), optional=True)
    a.draw("dtype", DTYPES, optional=True)
    a.draw("device", DEVICES, optional=True)
    seq_len = a.draw("seq_len", count(0, 10**6, huge="doubtful", none=True), optional=True)

    def check(result):
        cos, sin = result
        shape, coords = coords_of(
            pos.numpy() if isinstance(pos, torch.Tensor) else pos, r["n_axes"]
        )
        dtype = torch_dtype(a)
        flat = [expect_tensor(t, (*shape, width), dtype).reshape(-1, width) for t in (cos, sin)]
        length = seq_len if seq_len is not None else length_of(coords)
        cols = reference_columns(r, None if length is None else int(length))
        check_tables(*flat, coords, cols, pairs or "half", DTYPE_NAMES[dtype])

    names = {**NAMES, "device": ("device",), "dtype": ("dtype",)}
    run(a.call("posenc.torch.multi_axis_cos_sin", pt.multi_axis_cos_sin, check, aliases=names))


@fuzz()
@given(st.data())
def test_multimodal_positions(data: st.DataObject) -> None:
    a, want = multimodal_case(data)
    for key in ("token_types", "image_grids", "video_grids", "attention_mask"):
        value = a.kwargs.get(key)
        if a.kinds.get(key) == VALID and value is not None and data.draw(st.booleans(), label=key):
            a.set(key, torch.as_tensor(np.asarray(value, dtype=np.int64)))

    def check(result):
        positions, deltas = result
        expect_tensor(positions, want["ids"].shape, torch.int64)
        expect_tensor(deltas, want["deltas"].shape, torch.int64)
        check_multimodal((positions.numpy(), deltas.numpy()), want, array=False)
        plain = {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in a.kwargs.items()}
        core = posenc.multimodal_positions(**plain)
        assert np.array_equal(positions.numpy(), core.positions), "differs from the NumPy core"
        assert np.array_equal(deltas.numpy(), core.deltas), "deltas differ from the NumPy core"

    run(a.call("posenc.torch.multimodal_positions", pt.multimodal_positions, check))


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
    module = run(
        a.call("posenc.torch.RotaryEmbedding", pt.RotaryEmbedding, lambda m: None, aliases=NAMES)
    )
    if module is None or not a.clean:
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
    module = run(a.call("hf.MultiAxisRotary", hf.MultiAxisRotary, lambda m: None, aliases=NAMES))
    if module is None or not a.clean:
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
