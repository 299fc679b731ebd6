"""Every kernel that hands work to threads against its reference path, bit for bit.

The fast paths (``posenc.torch._kernels``) are optimisations, never behaviours: whatever the
shape, the strides, the dtype, the pair layout, the thread count and the order in which
threads take their tasks, their result is the bits of the plain formula written next to them.

Three things vary here that the other fast-path tests hold fixed:

- **PyTorch's own thread count** (``torch.set_num_threads`` 1, 2, 3 and 8, for real): it decides
  how PyTorch splits an operation among its threads, and, for the tasks handed to posenc's
  workers, how many threads take them;
- **the order in which tasks reach threads**: besides real threads, a scheduler that runs the
  tasks on the calling thread in an adversarial order (the last, shortest piece first on each
  thread's scratch, or the tasks reversed), so that a kernel's per-thread state is exercised
  deterministically rather than when the operating system happens to schedule it so;
- **sizes on both sides of the thresholds**: the threshold for handing work to threads and the
  piece sizes are lowered on small tensors (so hypothesis runs stay fast), and a few shapes
  are large enough for PyTorch to split an operation among its own threads.
"""

from __future__ import annotations

import contextlib
import itertools
from unittest import mock

import pytest

import posenc

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import posenc.torch._kernels._add as fused  # noqa: E402
import posenc.torch._kernels._rope as rotary  # noqa: E402
from posenc.torch import RotaryEmbedding, rotary_cos_sin  # noqa: E402
from posenc.torch._kernels import _workers  # noqa: E402

THREADS = (1, 2, 3, 8)
PAIRS = ("half", "interleaved")
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
SCHEDULES = ("threads", "caller", "last-first", "reversed")


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values (NaN where the other is NaN), equal shapes and dtypes, equal zero signs."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not torch.equal(a.isnan(), b.isnan()):
        return False
    a, b = a.masked_fill(a.isnan(), 0), b.masked_fill(b.isnan(), 0)
    return torch.equal(a, b) and torch.equal(a.signbit(), b.signbit())


def _scheduled_run(order: str):
    """``_workers.run`` replaced by a deterministic scheduler on the calling thread: each of
    ``width`` slots takes tasks in ``order`` (``last-first``: every slot's first task is
    among the last ones, so its scratch is first sized by a short piece; ``reversed``: all
    tasks backwards on slot 0 then 1, ...)."""

    def run(count, task, *, tensor, spread=True):
        width = min(_workers.threads(), count) if spread else 1
        indices = list(range(count))
        if order == "reversed":
            slots = [index % width for index in range(count)]
            for index, slot in zip(reversed(indices), slots, strict=True):
                task(index, slot)
            return
        # last-first: slot k starts with task count-1-k, then takes the rest round robin
        first = {slot: count - 1 - slot for slot in range(width)}
        for slot, index in first.items():
            task(index, slot)
        rest = [i for i in indices if i not in first.values()]
        for position, index in enumerate(rest):
            task(index, position % width)

    return run


@contextlib.contextmanager
def torch_threads(count: int):
    """PyTorch at ``count`` intra-op threads inside the block (restored on exit)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@contextlib.contextmanager
def kernels(threads: int, schedule: str, *, chunk: int = 1024, block: int = 256):
    """PyTorch at ``threads`` threads, small pieces (rope ``chunk`` bytes, add ``block``
    bytes, tasks of one piece or block), handed to threads (``threads``, ``last-first``,
    ``reversed``) or all run by the calling thread (``caller``)."""
    values = [
        (_workers, "TASK_BYTES", 1),
        (rotary, "_CHUNK_BYTES", chunk),
        (rotary, "_SMALL_HALF", 0),
        (fused, "BLOCK_BYTES", block),
        (fused, "FUSE_MIN_BYTES", 0),
    ]
    if schedule != "caller":
        values.append((_workers, "SPREAD_MIN_BYTES", 0))
    if schedule in ("last-first", "reversed"):
        values.append((_workers, "run", _scheduled_run(schedule)))
    with contextlib.ExitStack() as stack:
        for owner, name, value in values:
            stack.enter_context(mock.patch.object(owner, name, value))
        stack.enter_context(torch_threads(threads))
        yield


def randn(shape, dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


# -- rope -----------------------------------------------------------------------------------------


def _layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """``x`` ``(b, h, s, d)`` as the same values in another memory layout."""
    if layout == "bshd":  # (b, s, h, d) memory, rotated as (b, h, s, d)
        return x.transpose(1, 2).contiguous().transpose(1, 2)
    if layout == "offset":  # one channel more in memory: not viewable as complex numbers
        wide = torch.zeros(*x.shape[:-1], x.shape[-1] + 1, dtype=x.dtype)
        wide[..., 1:] = x
        return wide[..., 1:]
    if layout == "expanded":  # one head read by every head (stride 0)
        return x[:, :1].expand(x.shape)
    return x


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(1, 3),
    heads=st.integers(1, 5),
    length=st.integers(1, 37),
    half=st.sampled_from([1, 3, 4, 5, 8, 16, 32]),
    extra=st.sampled_from([0, 0, 1, 6]),
    pairs=st.sampled_from(PAIRS),
    dtype=st.sampled_from(DTYPES),
    layout=st.sampled_from(["contiguous", "bshd", "offset", "expanded"]),
    per_batch=st.booleans(),
    threads=st.sampled_from(THREADS),
    schedule=st.sampled_from(SCHEDULES),
    chunk=st.sampled_from([256, 1024, 8192]),
    seed=st.integers(0, 2**16),
)
def test_rotation_equals_the_formula_for_any_shape_threads_and_schedule(
    batch,
    heads,
    length,
    half,
    extra,
    pairs,
    dtype,
    layout,
    per_batch,
    threads,
    schedule,
    chunk,
    seed,
):
    rotated, head_dim = 2 * half, 2 * half + extra
    table_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    if per_batch:  # (b, 1, s, r) tables of per-row positions, as Hugging Face's unsqueeze(1)
        positions = torch.randint(
            0, 10_000, (batch, length), generator=torch.Generator().manual_seed(seed)
        )
        cos, sin = (
            t.unsqueeze(1)
            for t in rotary_cos_sin(
                positions, head_dim, pairs=pairs, dtype=table_dtype, rotary_dim=rotated
            )
        )
    else:
        cos, sin = rotary_cos_sin(
            length, head_dim, pairs=pairs, dtype=table_dtype, rotary_dim=rotated
        )
    x = _layout(randn((batch, heads, length, head_dim), dtype, seed), layout)
    expected = rotary.rotate_formula(x, cos, sin, pairs)
    with kernels(threads, schedule, chunk=chunk):
        (out,) = rotary.rotate((x,), rotary.RopeTables(cos, sin), pairs)
    assert same_bits(out, expected)
    if layout != "expanded":
        assert out.stride() == x.stride() or layout == "offset"


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("schedule", ["last-first", "reversed"])
def test_a_thread_whose_first_piece_is_the_short_last_one(pairs, schedule):
    """A partial rotation whose rows do not split evenly: the thread that starts with the last,
    shorter piece of a row must still rotate the longer pieces it takes next."""
    cos, sin = rotary_cos_sin(50, 16, pairs=pairs, rotary_dim=8)
    x = randn((1, 3, 50, 16), torch.float32, 1)
    expected = rotary.rotate_formula(x, cos, sin, pairs)
    with kernels(2, schedule, chunk=8 * 4 * 20):  # pieces of 20 rows: 20, 20, 10 per head
        (out,) = rotary.rotate((x,), rotary.RopeTables(cos, sin), pairs)
    assert same_bits(out, expected)


@pytest.mark.parametrize(
    ("shape", "rotary_dim", "pairs", "dtype"),
    [
        ((1, 32, 5000, 128), 64, "half", torch.float32),
        ((1, 32, 5000, 128), None, "half", torch.float32),
        ((4, 17, 2048, 64), None, "half", torch.float32),
        ((1, 32, 5000, 128), None, "interleaved", torch.bfloat16),
    ],
)
def test_module_calls_that_crashed_on_uneven_rows(shape, rotary_dim, pairs, dtype):
    """The shapes of the reported crash, through the module at the machine's thread count
    (work above the threshold for threads) and through the adversarial schedule."""
    rope = RotaryEmbedding(shape[-1], rotary_dim=rotary_dim, pairs=pairs)
    q = randn(shape, dtype, 2)
    cos, sin = rotary_cos_sin(shape[-2], shape[-1], rotary_dim=rotary_dim, pairs=pairs)
    expected = rotary.rotate_formula(q, cos, sin, pairs)
    assert same_bits(rope.rotate(q), expected)
    with mock.patch.object(_workers, "run", _scheduled_run("last-first")):
        assert same_bits(rope.rotate(q), expected)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize(("rows", "half"), [(3001, 32), (1025, 16), (4099, 64), (700, 8)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_interleaved_rows_large_enough_for_pytorch_to_split(threads, rows, half, dtype):
    """Interleaved pairs over more than PyTorch's grain (it splits an operation among its
    threads at element counts of its choosing): the bits of the formula at every count."""
    cos, sin = rotary_cos_sin(rows, 2 * half, pairs="interleaved", dtype=dtype)
    x = randn((1, 3, rows, 2 * half), dtype, rows)
    expected = rotary.rotate_formula(x, cos, sin, "interleaved")
    with torch_threads(threads):
        (out,) = rotary.rotate((x,), rotary.RopeTables(cos, sin), "interleaved")
    assert same_bits(out, expected)


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("threads", THREADS)
def test_rotation_gradient_equals_the_formulas(pairs, threads):
    """The backward pass (the inverse rotation, by the fast path) against autograd through the
    formula, with the work handed to threads."""
    cos, sin = rotary_cos_sin(23, 40, pairs=pairs, rotary_dim=32)
    x = randn((2, 3, 23, 40), torch.float32, 3).requires_grad_()
    grad = randn((2, 3, 23, 40), torch.float32, 4)
    rotary.rotate_formula(x, cos, sin, pairs).backward(grad)
    expected, x.grad = x.grad, None
    with kernels(threads, "threads"):
        (out,) = rotary.rotate((x,), rotary.RopeTables(cos, sin), pairs)
        assert type(out.grad_fn).__name__ == "_RotationBackward"
        out.backward(grad)
    assert same_bits(x.grad, expected)


# -- add ------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    a=st.integers(1, 4),
    b=st.integers(1, 40),
    d=st.integers(1, 24),
    dtype=st.sampled_from(DTYPES),
    gather=st.booleans(),
    first_scale=st.sampled_from([None, 2.5]),
    masked=st.booleans(),
    scale=st.sampled_from([None, 1 / 0.7]),
    threads=st.sampled_from(THREADS),
    schedule=st.sampled_from(SCHEDULES),
    block=st.sampled_from([64, 256, 4096]),
    layout=st.sampled_from(["contiguous", "transposed", "in place"]),
    seed=st.integers(0, 2**16),
)
def test_fused_sum_equals_the_unfused_expression(
    a, b, d, dtype, gather, first_scale, masked, scale, threads, schedule, block, layout, seed
):
    generator = torch.Generator().manual_seed(seed)
    x = randn((a, b, d), dtype, seed)
    if layout == "transposed":  # (b, a, d) memory read as (a, b, d): sequence-first data
        x = x.transpose(0, 1).contiguous().transpose(0, 1)
    table = randn((b + 3, d), dtype, seed + 1)
    index = torch.randint(0, b + 3, (a, b), generator=generator)
    row = randn((d,), dtype, seed + 2)
    mask = (torch.rand(a * b * d, generator=generator) > 0.3).to(torch.uint8) if masked else None
    terms = [x, fused.Rows(table, index) if gather else table[:b], row]
    expected = x.clone() if first_scale is None else x * first_scale
    expected = expected + (table[index] if gather else table[:b]) + row
    if mask is not None:
        expected = expected * mask.view(a, b, d)
    if scale is not None:
        expected = expected * scale
    out = x if layout == "in place" else torch.empty(a, b, d, dtype=dtype)
    with kernels(threads, schedule, block=block):
        out = fused.fused_sum(
            out,
            terms,
            first_scale=first_scale,
            mask=mask,
            scale=scale,
        )
    assert same_bits(out, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_is_the_same_at_every_thread_count(dtype, p):
    """With the same generator state: the same output at every thread count and schedule, equal
    to ``(x + table) * keep_mask / (1 - p)`` with the mask drawn from that state."""
    x = randn((3, 37, 11), dtype, 5)
    table = randn((37, 11), dtype, 6)
    mask = fused.keep_mask(x.numel(), p, generator=torch.Generator().manual_seed(7))
    expected = (x + table) * mask.view(x.shape) * (1.0 / (1.0 - p))
    for threads, schedule in itertools.product(THREADS, SCHEDULES):
        with kernels(threads, schedule):
            out = fused.add_dropout(x, table, p, generator=torch.Generator().manual_seed(7))
        assert same_bits(out, expected), (threads, schedule)


@pytest.mark.parametrize("pairs", PAIRS)
@pytest.mark.parametrize("fast", [True, False])
def test_empty_inputs_on_both_paths(pairs, fast):
    """Empty inputs (no positions, no batch): the reference path too (it reshaped an empty
    interleaved tensor with an inferred size, which PyTorch refuses)."""
    cos, sin = rotary_cos_sin(0, 8, pairs=pairs)
    with posenc.set_fast_paths(fast):
        for x in (torch.zeros(2, 3, 0, 8), torch.zeros(0, 3, 0, 8)):
            (out,) = rotary.rotate((x,), rotary.RopeTables(cos, sin), pairs)
            assert out.shape == x.shape
