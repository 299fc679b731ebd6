"""One conformance suite for every module of ``posenc.torch`` (the Hugging Face drop-ins too).

For each module:

- **threads**: 8 Python threads share one module and call it with mixed lengths, dtypes and
  offsets (hundreds of calls); every result equals, bit for bit, the same call made one at a
  time on a fresh module. With dropout in training mode: shapes, dtypes, the kept fraction.
- **compile**: ``torch.compile(module, fullgraph=True)``, automatic and ``dynamic=True``, over
  four sequence lengths, in eval mode and, for modules with dropout, in training mode (for the
  others training mode changes nothing, which is held eagerly), equals eager (tables and
  additions bit for bit, rotations within one unit in the last place) with at most two
  compilations. Dropout is
  compared with the eager module under ``posenc.set_fast_paths(False)`` (the plain formula,
  which draws its mask like ``nn.Dropout``). Tracing-only: ``backend="eager"``.
- **meta**: built on the meta device, then ``to_empty`` + forward equals a fresh module; an
  eager forward on meta inputs runs (so nothing reads tensor data on the hot path).
- **state_dict**: holds no table, and loads into a module built with another ``max_len``.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
import posenc.torch.hf as hf  # noqa: E402

DTYPES = (torch.float32, torch.bfloat16, torch.float64, torch.float16)
D = 16


def _x(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    if torch.get_default_device().type == "meta":
        return torch.empty(shape, dtype=dtype)
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


@dataclass
class Case:
    """How to build one module and call it with a sequence of length ``n``."""

    make: Callable[..., Any]
    # (module, n, dtype, offset, seed) -> output (a tensor or a tuple of tensors)
    call: Callable[[Any, int, torch.dtype, int, int], Any]
    dtypes: tuple[torch.dtype, ...] = DTYPES
    offsets: tuple[int, ...] = (0, 3, 300)
    lengths: tuple[int, ...] = (1, 7, 64, 250, 1200)
    rotation: bool = False  # compiled results within one ulp instead of bit for bit
    dropout: bool = False
    max_len_kwarg: str | None = "max_len"
    extra: dict[str, Any] = field(default_factory=dict)


def _seeded(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """A module with parameters: the same initial weights every time."""
    torch.manual_seed(0)
    return cls(*args, **kwargs)


def _sinusoidal_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    return m(_x((2, n, D), dtype, seed), offset=offset)


def _positions_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    positions = torch.arange(n) * 2 + offset
    return m(_x((2, n, D), dtype, seed), positions=positions)


def _embedding_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    if torch.get_default_device().type == "meta":
        return m(torch.empty((2, n), dtype=torch.int64), offset=offset)
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 50, (2, n), generator=generator)
    return m(tokens, offset=offset)


def _rotary_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    return m(_x((2, 3, n, D), dtype, seed), _x((2, 1, n, D), dtype, seed + 1), offset=offset)


def _mrope_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    """Multi-axis RoPE with explicit (t, h, w) coordinates per token, (b, s, 3)."""
    i = torch.arange(n) + offset
    ids = torch.stack([i, i // 4 + offset, i % 5 + offset], dim=-1)
    ids = torch.stack([ids, ids + 7])  # (2, n, 3): one row of coordinates per batch element
    q, k = _x((2, 3, n, D), dtype, seed), _x((2, 1, n, D), dtype, seed + 1)
    return m(q, k, positions=ids)


def _grid_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    shape = (1 + n % 5, n)
    return m(_x((2, shape[0] * shape[1], D), dtype, seed), grid_shape=shape)


def _timestep_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    steps = torch.arange(n, dtype=torch.float64) * 7.5 + offset
    return m(steps, dtype=dtype)


def _marian_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    return m(torch.Size((2, n)), past_key_values_length=offset)


def _m2m100_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    ids = torch.full((2, n), 5)
    ids[1, : n // 3] = 1  # left padding
    return m(ids, past_key_values_length=offset)


def _whisper_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    return m(torch.arange(n) + offset)


def _relative_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    return m(_x((2, n, D), dtype, seed))


def _llama_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    position_ids = (torch.arange(n) + offset)[None].expand(2, n)
    return m(torch.zeros(1, dtype=dtype), position_ids)


def _multi_axis_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    """Qwen2-VL's call: (t, h, w) ids of shape (3, b, s)."""
    i = torch.arange(n) + offset
    ids = torch.stack([i, i // 4 + offset, i % 5 + offset])[:, None].expand(3, 2, n)
    return m(torch.zeros(1, dtype=dtype), ids)


#: a bias is (heads, q, k): shorter sequences than the tables' keep its threads test brief
BIAS_LENGTHS, BIAS_OFFSETS = (1, 7, 30, 64), (0, 3, 40)


def _bias_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    """A decoding-like call: ``n`` queries after ``offset`` cached keys."""
    return m(torch.arange(n) + offset, torch.arange(n + offset))


def _timestamp_call(m: Any, n: int, dtype: torch.dtype, offset: int, seed: int) -> Any:
    """MusicFlamingo's call: two windows of ``n`` frames, their times in seconds."""
    frames = torch.arange(2 * n, dtype=torch.float32).view(2, n) + offset
    return m(frames * 0.04, seq_len=n)


CASES: dict[str, Case] = {
    "SinusoidalPositionalEncoding": Case(
        lambda **kw: pt.SinusoidalPositionalEncoding(D, dropout=0.25, **kw),
        _sinusoidal_call,
        dropout=True,
    ),
    "SinusoidalPositionalEncoding(positions)": Case(
        lambda **kw: pt.SinusoidalPositionalEncoding(D, convention="tensor2tensor", **kw),
        _positions_call,
    ),
    "TransformerEmbedding": Case(
        lambda **kw: _seeded(pt.TransformerEmbedding, 50, D, num_segments=2, dropout=0.25, **kw),
        _embedding_call,
        dtypes=(torch.float32,),
        dropout=True,
    ),
    "RotaryEmbedding": Case(lambda **kw: pt.RotaryEmbedding(D, **kw), _rotary_call, rotation=True),
    "RotaryEmbedding(interleaved, yarn)": Case(
        lambda **kw: pt.RotaryEmbedding(
            D,
            pairs="interleaved",
            scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
            **kw,
        ),
        _rotary_call,
        rotation=True,
    ),
    "RotaryEmbedding(multi-axis, interleaved M-RoPE, positions)": Case(
        lambda **kw: pt.RotaryEmbedding(D, sections=[4, 2, 2], order="interleaved", **kw),
        _mrope_call,
        rotation=True,
    ),
    "RotaryEmbedding(multi-axis, per_axis, interleaved pairs)": Case(
        lambda **kw: pt.RotaryEmbedding(
            D, sections=[2, 3, 3], schedule="per_axis", pairs="interleaved", **kw
        ),
        _rotary_call,
        rotation=True,
    ),
    "SinusoidalGridEncoding": Case(
        lambda **kw: pt.SinusoidalGridEncoding(D, dropout=0.25, **kw),
        _grid_call,
        lengths=(1, 3, 8, 20, 40),
        dropout=True,
        max_len_kwarg=None,
    ),
    "TimestepEmbedding": Case(
        lambda **kw: pt.TimestepEmbedding(D, **kw), _timestep_call, max_len_kwarg=None
    ),
    "hf.MarianPositions": Case(
        lambda **kw: hf.MarianPositions(D, **kw),
        _marian_call,
        dtypes=(torch.float32,),
        max_len_kwarg="num_positions",
    ),
    "hf.M2M100Positions": Case(
        lambda **kw: hf.M2M100Positions(D, 1, **kw),
        _m2m100_call,
        dtypes=(torch.float32,),
        max_len_kwarg="num_positions",
    ),
    "hf.WhisperEncoderPositions": Case(
        lambda **kw: hf.WhisperEncoderPositions(kw.pop("max_len", 8), D, **kw),
        _whisper_call,
        dtypes=(torch.float32,),
    ),
    "hf.RelativeSinusoidPositions": Case(
        lambda **kw: hf.RelativeSinusoidPositions(D, **kw),
        _relative_call,
        max_len_kwarg=None,
    ),
    "hf.LlamaRotary": Case(
        lambda **kw: hf.LlamaRotary(
            D,
            scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32,
            },
        ),
        _llama_call,
        rotation=True,
        max_len_kwarg=None,
    ),
    "hf.MultiAxisRotary": Case(
        lambda **kw: hf.MultiAxisRotary(D, sections=[4, 2, 2], order="interleaved"),
        _multi_axis_call,
        rotation=True,
        max_len_kwarg=None,
    ),
    "hf.TimestampRotary": Case(
        lambda **kw: hf.TimestampRotary(
            D, base=1200.0, frame_seconds=0.04, max_positions=1200.0, **kw
        ),
        _timestamp_call,
        dtypes=(torch.float32,),
        max_len_kwarg=None,
    ),
    "T5RelativeBias": Case(
        lambda **kw: _seeded(pt.T5RelativeBias, 3, num_buckets=8, max_distance=20, **kw),
        _bias_call,
        dtypes=(torch.float32,),
        lengths=BIAS_LENGTHS,
        offsets=BIAS_OFFSETS,
        max_len_kwarg=None,
    ),
    "KerpleBias": Case(
        lambda **kw: _seeded(pt.KerpleBias, 3, **kw),
        _bias_call,
        dtypes=(torch.float32,),
        lengths=BIAS_LENGTHS,
        offsets=BIAS_OFFSETS,
        max_len_kwarg=None,
    ),
    "FireBias": Case(
        lambda **kw: _seeded(pt.FireBias, 3, hidden=8, **kw),
        _bias_call,
        dtypes=(torch.float32,),
        lengths=BIAS_LENGTHS,
        offsets=BIAS_OFFSETS,
        max_len_kwarg=None,
    ),
}


def test_every_module_has_a_case() -> None:
    """Every ``nn.Module`` that ``posenc.torch`` and ``posenc.torch.hf`` export is built by a
    case above (a module added without one fails here)."""
    exported = {
        obj
        for api in (pt, hf)
        for obj in (getattr(api, name) for name in api.__all__)
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module)
    }
    built = {type(case.make()) for case in CASES.values()}
    missing = sorted(cls.__qualname__ for cls in exported - built)
    assert not missing, f"no conformance case builds {missing}"


def _as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, tuple | list) else (out,)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16) if t.dtype in (torch.float16, torch.bfloat16) else t


def _same(a: Any, b: Any) -> bool:
    a, b = _as_tuple(a), _as_tuple(b)
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and torch.equal(_bits(x), _bits(y))
        for x, y in zip(a, b, strict=True)
    )


def _within_ulp(a: Any, b: Any) -> bool:
    for x, y in zip(_as_tuple(a), _as_tuple(b), strict=True):
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        ulp = torch.finfo(x.dtype).eps * torch.maximum(x.abs(), y.abs()).double().clamp(min=1.0)
        if not bool(((x.double() - y.double()).abs() <= ulp).all()):
            return False
    return True


def _plan(case: Case, count: int, seed: int) -> list[tuple[int, torch.dtype, int, int]]:
    rng = random.Random(seed)
    return [
        (rng.choice(case.lengths), rng.choice(case.dtypes), rng.choice(case.offsets), i)
        for i in range(count)
    ]


def _run_threads(work: Callable[[int], None], count: int, threads: int = 8) -> list[BaseException]:
    """``work(i)`` for i < count on ``threads`` threads that start together."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)
    lock = threading.Lock()

    def worker(start: int) -> None:
        barrier.wait()
        for i in range(start, count, threads):
            try:
                work(i)
            except BaseException as exc:  # reported by the test
                with lock:
                    errors.append(exc)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return errors


# -- threads ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_threads_share_one_module(name: str) -> None:
    case = CASES[name]
    plan = _plan(case, 400, seed=len(name))
    reference = case.make().eval()
    with torch.no_grad():
        expected = [case.call(reference, n, dtype, off, s) for n, dtype, off, s in plan]
    shared = case.make().eval()
    results: list[Any] = [None] * len(plan)

    def work(i: int) -> None:
        n, dtype, off, s = plan[i]
        with torch.no_grad():
            results[i] = case.call(shared, n, dtype, off, s)

    errors = _run_threads(work, len(plan))
    assert not errors, f"{len(errors)} calls raised, e.g. {errors[0]!r}"
    wrong = [i for i in range(len(plan)) if not _same(results[i], expected[i])]
    assert not wrong, (
        f"{len(wrong)} of {len(plan)} concurrent calls differ from the same calls made one at a "
        f"time, e.g. call {plan[wrong[0]][:3]}"
    )


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.dropout])
def test_threads_training_with_dropout(name: str) -> None:
    case = CASES[name]
    plan = _plan(case, 200, seed=7)
    shared = case.make().train()
    outputs: list[Any] = [None] * len(plan)

    def work(i: int) -> None:
        n, dtype, off, s = plan[i]
        with torch.no_grad():
            outputs[i] = case.call(shared, n, dtype, off, s)

    errors = _run_threads(work, len(plan))
    assert not errors, f"{len(errors)} calls raised, e.g. {errors[0]!r}"
    zeros = total = 0
    for (_, dtype, _, _), out in zip(plan, outputs, strict=True):
        expected_dtype = torch.float32 if name == "TransformerEmbedding" else dtype
        assert out.dtype == expected_dtype
        assert out.shape[-1] == D
        zeros += int((out == 0).sum())
        total += out.numel()
    # p = 0.25; the values themselves are almost never exactly 0
    assert abs(zeros / total - 0.25) < 0.02, zeros / total


# -- torch.compile ------------------------------------------------------------------------------


COMPILE_LENGTHS = (5, 9, 14, 23)


#: training mode changes only dropout (no module reads ``self.training`` otherwise, which
#: test_training_mode_changes_nothing_without_dropout holds): compiled in training mode too
#: where there is dropout
COMPILE_MODES = [
    pytest.param(name, training, dynamic, id=f"{name}-{mode}-{how}")
    for name, case in CASES.items()
    for training, mode in ((False, "eval"), (True, "train"))[: 2 if case.dropout else 1]
    for dynamic, how in ((None, "automatic"), (True, "dynamic"))
]


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if not c.dropout])
def test_training_mode_changes_nothing_without_dropout(name: str) -> None:
    case = CASES[name]
    module = case.make()
    for n in (1, 9, 23):
        want = case.call(module.eval(), n, case.dtypes[0], 3, n)
        assert _same(case.call(module.train(), n, case.dtypes[0], 3, n), want), n


@pytest.mark.slow
@pytest.mark.parametrize(("name", "training", "dynamic"), COMPILE_MODES)
def test_compile_over_changing_lengths(name: str, training: bool, dynamic: bool | None) -> None:
    from torch._dynamo.utils import counters

    case = CASES[name]
    dtype = case.dtypes[0]
    torch._dynamo.reset()
    counters.clear()
    module = case.make().train(training)
    compiled = torch.compile(module, fullgraph=True, dynamic=dynamic, backend="eager")
    for n in COMPILE_LENGTHS:
        seed = 100 + n
        torch.manual_seed(seed)
        got = case.call(compiled, n, dtype, 3, seed)
        torch.manual_seed(seed)
        with posenc.set_fast_paths(False):
            want = case.call(module, n, dtype, 3, seed)
        if case.rotation:
            assert _within_ulp(got, want), n
        else:
            assert _same(got, want), n
    assert counters["stats"]["unique_graphs"] <= 2, dict(counters["stats"])


# -- meta device and state_dict ---------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_meta_init_then_to_empty(name: str) -> None:
    case = CASES[name]
    try:
        module = case.make(device="meta")
    except TypeError:  # the module takes no device (it keeps no table)
        pytest.skip("no device argument: nothing is built in __init__")
    module.to_empty(device="cpu").eval()
    fresh = case.make().eval()
    if any(True for _ in module.parameters()):  # learned weights: copy them over
        module.load_state_dict(fresh.state_dict())
    with torch.no_grad():
        assert _same(
            case.call(module, 9, case.dtypes[0], 2, 0), case.call(fresh, 9, case.dtypes[0], 2, 0)
        )


@pytest.mark.parametrize("name", list(CASES))
def test_eager_forward_on_meta_inputs(name: str) -> None:
    case = CASES[name]
    module = case.make().eval().to("meta")
    with torch.device("meta"), torch.no_grad():
        out = case.call(module, 11, case.dtypes[0], 2, 0)
    for t in _as_tuple(out):
        assert t.device.type == "meta"


@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_holds_no_table(name: str) -> None:
    case = CASES[name]
    kwargs = {} if case.max_len_kwarg is None else {case.max_len_kwarg: 40}
    module = case.make(**kwargs)
    state = module.state_dict()
    assert set(state) == {n for n, _ in module.named_parameters()}, list(state)  # parameters only
    other = case.make()
    other.load_state_dict(state)  # another max_len loads
    module.eval()
    other.eval()
    with torch.no_grad():
        assert _same(
            case.call(module, 9, case.dtypes[0], 2, 0), case.call(other, 9, case.dtypes[0], 2, 0)
        )


@pytest.mark.slow
def test_inductor_over_changing_lengths() -> None:
    """The real code generator too (one module of each kind, ``dynamic=True``): tables and
    additions bit for bit, dropout equal under ``fallback_random``, rotations within one ulp."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    module = pt.SinusoidalPositionalEncoding(D, dropout=0.25)
    rope = pt.RotaryEmbedding(D, pairs="interleaved")
    compiled = torch.compile(module, fullgraph=True, dynamic=True)
    compiled_rope = torch.compile(rope, fullgraph=True, dynamic=True)
    with torch._inductor.config.patch(fallback_random=True):
        for training in (True, False):
            module.train(training)
            for n in COMPILE_LENGTHS:
                x = _x((2, n, D), torch.float32, n)
                torch.manual_seed(n)
                got = compiled(x, offset=3)
                torch.manual_seed(n)
                with posenc.set_fast_paths(False):
                    want = module(x, offset=3)
                assert _same(got, want), (training, n)
        for n in COMPILE_LENGTHS:
            q = _x((1, 2, n, D), torch.float32, n)
            assert _within_ulp(compiled_rope(q, q, offset=5), rope(q, q, offset=5)), n
    assert counters["stats"]["unique_graphs"] <= 4, dict(counters["stats"])  # <= 2 per module
