"""Fuzz the Hugging Face drop-ins of ``posenc.torch.hf`` (see ``contract.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from posenc.torch import hf  # noqa: E402

from .checks import check_rope_tables, check_rows, rope_reference  # noqa: E402
from .contract import Args, choose, run  # noqa: E402
from .frontends import expect_tensor, torch_dtype  # noqa: E402
from .profile import fuzz  # noqa: E402
from .reference import sinusoid_channels  # noqa: E402
from .torch_values import DTYPES, NAMES, NOT_TENSORS, hostile_tensors  # noqa: E402
from .values import (  # noqa: E402
    BASES,
    HUGE,
    ROPE_BASES,
    count,
    flag,
    integers,
    name,
    positive,
    scalings,
)

pytestmark = pytest.mark.usefixtures("one_thread")

PAST = choose(
    st.integers(0, 10**5) | st.integers(0, 100).map(torch.tensor),
    st.sampled_from(
        [
            -1,
            1.5,
            "1",
            None,
            [1],
            torch.tensor(-1),
            torch.tensor(1.5),
            torch.tensor([1, 2]),
            torch.tensor(True),
        ]
    ),
    st.sampled_from([*HUGE, torch.tensor(10**12), 10**12]),  # refused, or exact positions
)


@fuzz()
@given(st.data())
def test_marian_positions(data: st.DataObject) -> None:
    a = Args(data)
    d = a.draw("embedding_dim", count(1, 16))
    a.draw("num_positions", count(0, 32, none=True), optional=True)
    base = a.draw("base", BASES, optional=True)
    a.draw("dtype", DTYPES, optional=True)
    module = a.build("hf.MarianPositions", hf.MarianPositions)
    if module is None:
        return
    f = Args(data)
    s = data.draw(st.integers(0, 5), label="s")
    f.draw(
        "input_ids_shape",
        choose(
            st.sampled_from([(2, s), torch.Size([1, s]), [3, s]]),
            st.sampled_from(["ab", None, (1,), (1, 2.5), (1, -3), (1, "3"), 5, (1, 2**62)]),
        ),
    )
    past = f.draw("past_key_values_length", PAST, optional=True)
    pos_ids = f.draw(
        "position_ids",
        choose(st.lists(st.integers(0, 10**5), max_size=4).map(torch.tensor), hostile_tensors()),
        optional=True,
    )

    if pos_ids is not None and f.kinds.get("past_key_values_length") == "hostile":
        f.kinds["past_key_values_length"] = "doubtful"  # position_ids override it

    def check(out):
        if pos_ids is not None:
            positions = pos_ids.reshape(-1).tolist()
            shape = (*pos_ids.shape, int(d))
        else:
            start = int(past if past is not None else 0)
            positions = [start + i for i in range(s)]
            shape = (s, int(d))
        values = expect_tensor(out, shape, torch_dtype(a))
        channels = sinusoid_channels(int(d), float(base or 10000.0), "marian")
        check_rows(values.reshape(-1, int(d)), positions, channels, NAMES[torch_dtype(a)])

    run(f.call("MarianPositions.forward", module, check))


def fairseq(ids: torch.Tensor, pad: int, past: int) -> list[list[int]]:
    """fairseq numbering written out: pads at ``pad``, real tokens from ``pad + 1 + past``."""
    rows = []
    for row in ids.tolist():
        seen, line = 0, []
        for token in row:
            seen += token != pad
            line.append(pad if token == pad else pad + past + seen)
        rows.append(line)
    return rows


@fuzz()
@given(st.data())
def test_m2m100_positions(data: st.DataObject) -> None:
    a = Args(data)
    d = a.draw("embedding_dim", count(1, 16))
    pad = a.draw("padding_idx", count(0, 3, huge="doubtful"))
    a.draw("num_positions", count(0, 32, none=True), optional=True)
    base = a.draw("base", BASES, optional=True)
    a.draw("dtype", DTYPES, optional=True)
    module = a.build("hf.M2M100Positions", hf.M2M100Positions)
    if module is None:
        return
    f = Args(data)
    b, s = data.draw(st.integers(1, 3)), data.draw(st.integers(0, 5))
    ids = torch.tensor(data.draw(st.lists(st.integers(0, 6), min_size=b * s, max_size=b * s)))
    ids = ids.reshape(b, s).to(data.draw(st.sampled_from([torch.int64, torch.int32, torch.uint8])))
    use_ids = data.draw(st.booleans(), label="input_ids or inputs_embeds")
    if use_ids:
        f.draw(
            "input_ids",
            choose(
                st.just(ids),
                st.sampled_from(
                    [*NOT_TENSORS, ids.float(), ids[0], ids.to(torch.bool), ids.to(torch.complex64)]
                ),
            ),
        )
    else:
        embeds = torch.zeros(b, s, int(d))
        f.draw(
            "inputs_embeds",
            choose(st.just(embeds), st.sampled_from([*NOT_TENSORS, torch.zeros(3)])),
        )
    past = f.draw("past_key_values_length", PAST, optional=True)

    def check(out):
        p = int(pad)
        pos = fairseq(ids if use_ids else torch.full((b, s), p + 1), p, int(past or 0))
        values = expect_tensor(out, (b, s, int(d)), torch_dtype(a)).reshape(-1, int(d))
        flat = [q for row in pos for q in row]
        channels = sinusoid_channels(int(d), float(base or 10000.0), "tensor2tensor")
        pads = [i for i, q in enumerate(flat) if q == p]
        assert not np.any(values[pads]), "padding rows are not zero"
        real = [i for i, q in enumerate(flat) if q != p]
        check_rows(values[real], [flat[i] for i in real], channels, NAMES[torch_dtype(a)])

    run(f.call("M2M100Positions.forward", module, check))


@fuzz(scale=0.5)
@given(st.data())
def test_whisper_encoder_positions(data: st.DataObject) -> None:
    a = Args(data)
    a.draw("num_embeddings", count(0, 32))
    d = a.draw("embedding_dim", count(1, 16))
    base = a.draw("base", BASES, optional=True)
    module = a.build("hf.WhisperEncoderPositions", hf.WhisperEncoderPositions)
    if module is None:
        return
    f = Args(data)
    pos = f.draw(
        "positions",
        choose(st.lists(st.integers(0, 10**5), max_size=5).map(torch.tensor), hostile_tensors()),
    )

    def check(out):
        values = expect_tensor(out, (*pos.shape, int(d)), torch.get_default_dtype())
        channels = sinusoid_channels(int(d), float(base or 10000.0), "tensor2tensor")
        check_rows(values.reshape(-1, int(d)), pos.reshape(-1).tolist(), channels, "float32")

    run(f.call("WhisperEncoderPositions.forward", module, check))


@fuzz()
@given(st.data())
def test_llama_rotary(data: st.DataObject) -> None:
    a = Args(data)
    h = data.draw(st.integers(1, 8).map(lambda k: 2 * k), label="head_dim value")
    a.draw("head_dim", choose(st.just(h), st.sampled_from([1, 0, "8", None, 7, *HUGE[:2]])))
    base = a.draw("base", ROPE_BASES, optional=True)
    b_ = float(base) if base is not None and a.kinds["base"] == "valid" else 10000.0
    scaling = a.draw("scaling", scalings(h, b_), optional=True)
    if isinstance(scaling, dict) and scaling.get("rope_type") == "dynamic" and h < 4:
        a.kinds["scaling"] = "doubtful"
    from_config = data.draw(st.booleans(), label="from_config")
    if from_config and a.clean:
        params = (
            {"rope_type": "default"}
            if scaling is None
            else (
                dict(scaling)
                if isinstance(scaling, dict)
                else {"rope_type": scaling.rope_type, **scaling.params}
            )
        )
        params.setdefault("rope_theta", b_)
        config = SimpleNamespace(
            rope_parameters=params,
            hidden_size=h * 2,
            num_attention_heads=2,
            max_position_embeddings=None,
        )
        module = run(
            Args(data).call(
                "hf.LlamaRotary.from_config",
                lambda: hf.LlamaRotary.from_config(config),
                lambda m: None,
            )
        )
    else:
        module = run(
            a.call(
                "hf.LlamaRotary",
                hf.LlamaRotary,
                lambda m: None,
                aliases={"scaling": ("scaling", "rope_type", "dim")},
            )
        )
    if module is None or not a.clean:
        return
    f = Args(data)
    x = f.draw(
        "x",
        choose(
            st.sampled_from(list(NAMES)).map(lambda t: torch.zeros(1, dtype=t)),
            st.sampled_from([*NOT_TENSORS, torch.zeros(1, dtype=torch.int64)]),
        ),
    )
    b, s = data.draw(st.integers(1, 2)), data.draw(st.integers(0, 4))
    valid_ids = st.lists(st.integers(0, 10**5), min_size=b * s, max_size=b * s).map(
        lambda v: torch.tensor(v, dtype=torch.int64).reshape(b, s)
    )
    ids = f.draw("position_ids", choose(valid_ids, hostile_tensors()))

    def check(result):
        flat = ids.reshape(-1).tolist()
        spec_len = max(flat) + 1 if flat else 0
        r, omega, attention = rope_reference(h, None, b_, scaling, spec_len)
        tables = [expect_tensor(t, (*ids.shape, r), x.dtype).reshape(-1, r) for t in result]
        check_rope_tables(*tables, flat, omega, attention, "half", NAMES[x.dtype])

    run(f.call("LlamaRotary.forward", module, check, aliases={"x": ("x",)}))


@fuzz(scale=0.5)
@given(st.data())
def test_fairseq_positions(data: st.DataObject) -> None:
    a = Args(data)
    ids = torch.tensor(data.draw(st.lists(st.integers(0, 5), min_size=6, max_size=6))).reshape(2, 3)
    a.draw(
        "input_ids",
        choose(
            st.just(ids)
            | st.just(ids.to(torch.int32))
            | st.just(ids.to(torch.uint8))
            | st.just(ids[0]),
            st.sampled_from(
                [
                    *NOT_TENSORS,
                    ids.float(),
                    ids.to(torch.bool),
                    ids.to(torch.complex64),
                    torch.tensor(1),
                ]
            ),
        ),
    )
    pad = a.draw(
        "padding_idx",
        choose(
            integers(0, 5),
            st.sampled_from([-1, "1", None, 1.5]),
            st.sampled_from([257, 2**31 + 1, 2**32 + 1, *HUGE]),
        ),
    )
    past = a.draw("past_key_values_length", PAST, optional=True)

    def check(out):
        given_ids = a.kwargs["input_ids"]
        rows = given_ids.reshape(-1, given_ids.shape[-1])
        want = fairseq(rows, int(pad), int(past or 0))
        assert isinstance(out, torch.Tensor)
        assert out.dtype == torch.int64
        assert out.reshape(-1, given_ids.shape[-1]).tolist() == want

    run(a.call("hf.fairseq_positions", hf.fairseq_positions, check))


class _Table(torch.nn.Module):
    def __init__(self, attribute: str, table) -> None:
        super().__init__()
        self.register_buffer(attribute, table)
        self.padding_idx = 1
        self.num_positions = table.shape[0] if table.dim() else 0


@fuzz(scale=0.5)
@given(st.data())
def test_like_and_swap(data: st.DataObject) -> None:
    a = Args(data)
    kind = data.draw(st.sampled_from(["marian", "m2m100", "whisper"]), label="kind")
    cls = {
        "marian": hf.MarianPositions,
        "m2m100": hf.M2M100Positions,
        "whisper": hf.WhisperEncoderPositions,
    }[kind]
    attribute = "weights" if kind == "m2m100" else "weight"
    good = (
        hf.MarianPositions(8, num_positions=6).weight
        if kind == "marian"
        else (hf.WhisperEncoderPositions(6, 8).weight)
    )
    if kind == "m2m100":
        good = hf.M2M100Positions(8, 1).sinusoidal.encoding(6).clone()
        good[1] = 0
    bad = [torch.randn(6, 8), torch.zeros(8), good.flip(0) + 1]
    a.draw(
        "module",
        choose(
            st.just(_Table(attribute, good)),
            st.sampled_from(
                [None, "m", torch.nn.Linear(2, 2), *[_Table(attribute, t) for t in bad]]
            ),
        ),
    )
    a.draw("check", flag(), optional=True)
    if (
        a.kwargs.get("check") is not None
        and not a.kwargs["check"]
        and a.kinds["module"] == "hostile"
    ):
        a.kinds["module"] = "doubtful"  # check=False replaces tables it does not verify

    def check(new):
        assert isinstance(new, cls)

    run(a.call(f"hf.{cls.__name__}.like", cls.like, check))


@fuzz(scale=0.25)
@given(st.data())
def test_swap_positions(data: st.DataObject) -> None:
    a = Args(data)
    a.draw(
        "model",
        choose(
            st.just(torch.nn.Sequential(torch.nn.Linear(2, 2))),
            st.sampled_from([None, "model", [torch.nn.Linear(2, 2)], {"a": 1}]),
        ),
    )
    a.draw("strict", flag(), optional=True)

    def check(report):
        assert report.names == []
        assert report.replaced == ()

    run(a.call("hf.swap_positions", hf.swap_positions, check))


@fuzz(scale=0.5)
@given(st.data())
def test_relative_sinusoid_positions(data: st.DataObject) -> None:
    a = Args(data)
    d = a.draw(
        "embedding_dim",
        choose(
            st.integers(1, 8).map(lambda k: 2 * k),
            st.sampled_from([0, 1, 3, 7, -2, "8", None, 2.0, True, [4], 2 + 1j]),
        ),
    )
    output = a.draw("output", name(("shared", "batched", "scaled")), optional=True)
    a.draw(
        "dropout",
        choose(
            st.floats(0.0, 1.0),
            st.sampled_from([-0.1, 1.5, "0.1", None, float("nan"), True, [0.1], float("inf")]),
        ),
        optional=True,
    )
    base = a.draw("base", BASES, optional=True)
    module = a.build("hf.RelativeSinusoidPositions", hf.RelativeSinusoidPositions)
    if module is None:
        return
    module.eval()
    f = Args(data)
    b, length = data.draw(st.integers(1, 3), label="b"), data.draw(st.integers(1, 6), label="L")
    dtype = data.draw(
        st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]), label="dt"
    )
    f.draw(
        "x",
        choose(
            st.just(torch.ones(b, length, int(d), dtype=dtype)),
            st.sampled_from([None, "x", 5, torch.zeros(3), torch.zeros(2, 0, 4)]),
        ),
    )

    def check(out):
        table = out[1] if output == "scaled" else out
        rows = b if output == "batched" else 1
        values = expect_tensor(table, (rows, 2 * length - 1, int(d)), dtype)
        positions = list(range(length - 1, -length, -1))
        channels = sinusoid_channels(int(d), float(base or 10000.0), "paper")
        for row in values:
            check_rows(row, positions, channels, str(dtype).removeprefix("torch."))

    run(f.call("RelativeSinusoidPositions.forward", module, check))


@fuzz(scale=0.5)
@given(st.data())
def test_timestamp_rotary(data: st.DataObject) -> None:
    a = Args(data)
    a.draw("rotary_dim", choose(st.sampled_from([2, 4, 8]), st.sampled_from([0, 3, "8", None])))
    a.draw("base", positive(2.0, 1e4, extra=(1200.0,)))
    step = a.draw("frame_seconds", positive(1e-3, 1.0, extra=(0.04,)))
    scale = a.draw("max_positions", positive(1.0, 1e4, extra=(1200.0,)))
    a.draw("dtype", DTYPES, optional=True)
    module = a.build("hf.TimestampRotary", hf.TimestampRotary)
    if module is None:
        return
    f = Args(data)
    n, s = data.draw(st.integers(1, 3), label="N"), data.draw(st.integers(1, 5), label="S")
    valid = st.lists(st.floats(0, 1e3), min_size=n * s, max_size=n * s).map(
        lambda v: torch.tensor(v, dtype=torch.float32).reshape(n, s)
    )
    tau = f.draw("timestamps", choose(valid, hostile_tensors()))
    f.set("seq_len", s)

    def check(result):
        t = tau.double()
        window = torch.round(t[:, :1] / (float(step) * s)) / float(scale)
        time = 2 * np.pi * torch.arange(s, dtype=torch.float64) / float(scale)
        coords = torch.stack([-2 * np.pi * t * window, -2 * np.pi * t * time], dim=-1)
        omega = module._omega
        theta = torch.cat([coords[..., :1] * omega, coords[..., 1:] * omega], -1)
        theta = theta.repeat_interleave(2, dim=-1)
        for got, exact in zip(result, (theta.cos(), theta.sin()), strict=True):
            expect_tensor(got, (n, s, 2 * module.rotary_dim), module.dtype)
            ulp = float(torch.finfo(module.dtype).eps)
            assert float((got.double() - exact).abs().max()) <= ulp + 1e-12 * theta.abs().max()

    run(f.call("TimestampRotary.forward", module, check))
