"""The fast paths synchronise their threads once per call, whatever the tensor's size.

Every PyTorch operation on ``GRAIN`` elements or more is a parallel region with a barrier at
its end; on a busy machine each barrier waits for a thread that lost its core. These tests
count such operations during a fast-path call (a dispatch mode sees every operation) and check
the work shared among threads: equal results for any thread count, errors raised in the
caller, calls from several threads at once, and a forked child.
"""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from posenc.torch import RotaryEmbedding, SinusoidalPositionalEncoding  # noqa: E402
from posenc.torch._kernels import _workers  # noqa: E402

#: Operations allowed to run on GRAIN elements or more in one call: allocating the output
#: (``empty``) and, for the dropout mask, one draw from the caller's generator.
WHOLE = {
    "aten.new_empty.default",
    "aten.empty.memory_format",
    "aten.empty_like.default",
    "aten.empty_strided.default",
}


class CountRegions(TorchDispatchMode):
    """Names of the operations that open a parallel region: GRAIN elements or more, run while
    PyTorch may use several threads on this one."""

    def __init__(self) -> None:
        super().__init__()
        self.regions: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        sizes = [t.numel() for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)]
        if isinstance(result, torch.Tensor):
            sizes.append(result.numel())
        name = str(func)
        views = (
            "view",
            "split",
            "slice",
            "select",
            "narrow",
            "expand",
            "alias",
            "as_strided",
            "squeeze",
        )
        alone = torch.get_num_threads() == 1  # the operation ran on this thread alone
        large = max(sizes, default=0) >= _workers.GRAIN and name not in WHOLE and not alone
        if large and not any(v in name for v in views) and "detach" not in name:
            self.regions.append(name)
        return result


def regions(fn) -> list[str]:
    with CountRegions() as mode:
        fn()
    return mode.regions


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotation_has_one_parallel_region_at_most(pairs, dtype, monkeypatch):
    monkeypatch.setattr(_workers, "SPREAD_MIN_BYTES", 0)  # as for a large tensor
    rope = RotaryEmbedding(64, pairs=pairs, max_len=512)
    q = torch.randn(2, 8, 512, 64).to(dtype)  # 512 K elements: several pieces
    found = regions(lambda: rope.rotate(q))
    # float32 interleaved pairs are one complex multiplication over the whole tensor
    assert len(found) <= 1, found


def test_training_add_with_dropout_adds_in_one_synchronisation(monkeypatch):
    monkeypatch.setattr(_workers, "SPREAD_MIN_BYTES", 0)  # as for a large tensor
    """The mask is drawn by a few whole-tensor operations (PyTorch's generator is one stream);
    the add, the mask and the scale then run in pieces."""
    module = SinusoidalPositionalEncoding(256, dropout=0.1, max_len=512).train()
    x = torch.randn(4, 512, 256, requires_grad=True)
    found = regions(lambda: module(x))
    assert not any(name.startswith(("aten.add", "aten.mul")) for name in found), found


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_results_do_not_depend_on_threads(threads, monkeypatch):
    monkeypatch.setattr(_workers, "SPREAD_MIN_BYTES", 0)
    rope = RotaryEmbedding(64, pairs="half", max_len=300)
    q = torch.randn(3, 5, 300, 64).to(torch.bfloat16)
    expected = rope.rotate(q)
    monkeypatch.setattr(_workers, "threads", lambda: threads)
    assert torch.equal(rope.rotate(q), expected)


def test_an_error_in_a_task_is_raised_in_the_caller(monkeypatch):
    monkeypatch.setattr(_workers, "threads", lambda: 3)
    seen = []

    def task(index, slot):
        seen.append(index)
        if index == 5:
            raise RuntimeError("task 5 failed")

    with pytest.raises(RuntimeError, match="task 5 failed"):
        _workers.run(50, task, tensor=torch.empty(1))
    assert 5 in seen
    assert len(seen) < 50  # no task starts after the failure is seen


def test_workers_keep_the_callers_inference_mode(monkeypatch):
    monkeypatch.setattr(_workers, "threads", lambda: 2)
    monkeypatch.setattr(_workers, "SPREAD_MIN_BYTES", 0)
    rope = RotaryEmbedding(64, pairs="half", max_len=512)
    q = torch.randn(2, 4, 512, 64)
    with torch.inference_mode():
        out = rope.rotate(q)
    assert out.is_inference()
    assert torch.equal(out, rope.rotate(q))


def test_several_threads_on_one_module(monkeypatch):
    monkeypatch.setattr(_workers, "SPREAD_MIN_BYTES", 0)
    rope = RotaryEmbedding(64, pairs="half", max_len=256)
    inputs = [
        torch.randn(2, 4, 256, 64, generator=torch.Generator().manual_seed(i)) for i in range(6)
    ]
    expected = [rope.rotate(q) for q in inputs]
    results: dict[int, torch.Tensor] = {}

    def call(i):
        for _ in range(5):
            results[i] = rope.rotate(inputs[i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(torch.equal(results[i], expected[i]) for i in range(6))


def test_a_forked_child_makes_its_own_workers(monkeypatch):
    """A fork copies the pool but not its threads: a process with another pid makes its own
    (PyTorch's OpenMP threads do not survive a fork either: use the spawn start method)."""
    monkeypatch.setattr(_workers, "threads", lambda: 2)
    first = _workers._workers(1)
    assert _workers._workers(1) is first
    monkeypatch.setattr(_workers.os, "getpid", lambda: -1)
    assert _workers._workers(1) is not first


def test_the_calling_threads_count_is_restored():
    before = _workers._count()
    with _workers.alone():
        inside = _workers._count()
    assert _workers._count() == before
    assert inside == (1 if _workers._set_threads() else before)


def test_small_work_stays_on_the_calling_thread():
    x = torch.empty(1)
    assert not _workers.spread(_workers.SPREAD_MIN_BYTES - 1, x)
    assert _workers.spread(_workers.SPREAD_MIN_BYTES, x) == (_workers.threads() > 1)
