"""Work shared by threads with one synchronisation per call: how the fast paths use the cores.

PyTorch runs each CPU operation as a parallel region of its intra-op threads, each thread
taking an equal share, with a barrier at its end. A fast path that walks a tensor in
cache-sized pieces, a few operations per piece, crosses a hundred barriers per call, and on a
busy machine each waits for the thread that shares its core with another process (a rotation
ran 3.5 times slower beside one busy process, where a single operation lost 10%).

So the fast paths hand their pieces to threads instead: the calling thread and
``torch.get_num_threads() - 1`` workers each take the next task as they come free, so a thread
slowed down by another process simply takes fewer tasks; the call waits once, at its end, for
the tasks in progress. The operations on a piece run on the thread that took it: each of these
threads sets its own OpenMP thread count to one while it works (``omp_set_num_threads`` acts on
the calling thread only; the caller's count is restored before :func:`run` returns, and no
other thread's changes). Where no OpenMP runtime answers, pieces are kept below ``GRAIN``
elements, which PyTorch runs on the calling thread anyway.

PyTorch releases the global interpreter lock inside each operation, so the threads compute in
parallel; the Python between operations (a few microseconds a piece) is what they share.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import torch

__all__ = [
    "GRAIN",
    "SPREAD_MIN_BYTES",
    "TASK_BYTES",
    "alone",
    "piece_elements",
    "run",
    "spread",
    "threads",
]

#: PyTorch's ``at::internal::GRAIN_SIZE``: an elementwise operation on fewer elements runs on
#: the thread that calls it, without a parallel region.
GRAIN = 32768

#: Work smaller than this many bytes stays on the calling thread, its operations parallelised
#: by PyTorch: handing it to threads costs more than the barriers it saves (measured on
#: 8 MiB of rotation), and a short call is rarely caught by another process.
SPREAD_MIN_BYTES = 16 << 20

#: Bytes per task a kernel hands to a thread: enough work to make the hand-over cheap, few
#: enough that a thread which lost its core holds back little.
TASK_BYTES = 1 << 20

_lock = threading.Lock()
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, workers, pool)
_omp: Any = None  # omp_set_num_threads, False where it does not act, None before the probe


_get_num_threads = torch.get_num_threads  # taken at import: tests patch the module attribute


def _count() -> int:
    """This thread's OpenMP thread count as PyTorch reads it."""
    return int(_get_num_threads())


def threads() -> int:
    """Threads a call may use: PyTorch's intra-op setting (``torch.set_num_threads``)."""
    return max(1, torch.get_num_threads())


def _set_threads() -> Any:
    """``omp_set_num_threads`` of the OpenMP runtime PyTorch uses, if setting it to one on
    this thread makes PyTorch's operations here run on it alone (else False)."""
    global _omp
    if _omp is None:
        try:
            function = ctypes.CDLL(None).omp_set_num_threads
        except (OSError, AttributeError, TypeError):  # no such symbol, or no CDLL(None)
            _omp = False
            return _omp
        function.argtypes, function.restype = [ctypes.c_int], None
        before = _count()  # also PyTorch's per-thread start-up, which sets it
        function(1)
        acts = _count() == 1
        function(before)
        _omp = function if acts and _count() == before else False
    return _omp


@contextmanager
def alone() -> Iterator[bool]:
    """Run PyTorch's operations on the calling thread alone inside the block; yields whether
    it could (False where no OpenMP runtime answers: PyTorch may still split an operation of
    ``GRAIN`` elements or more among its threads)."""
    function = _set_threads()
    if not function:
        yield False
        return
    before = _count()
    function(1)
    try:
        yield True
    finally:
        function(before)


def spread(nbytes: int, tensor: torch.Tensor) -> bool:
    """Whether work of ``nbytes`` on ``tensor`` is handed to threads by :func:`run`."""
    return nbytes >= SPREAD_MIN_BYTES and tensor.device.type == "cpu" and threads() > 1


def piece_elements(limit: int) -> int:
    """Elements a piece may hold, for a kernel that wants at most ``limit``: ``limit`` where
    the threads run their operations alone, else fewer than ``GRAIN``."""
    return max(1, limit if _set_threads() else min(limit, GRAIN - 1))


def _start_worker() -> None:
    _count()  # PyTorch's per-thread start-up first: it sets the count
    function = _set_threads()
    if function:
        function(1)


def _workers(count: int) -> ThreadPoolExecutor:
    """A pool of at least ``count`` threads for this process (a forked child makes its own)."""
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid() or _pool[1] < count:
            pool = ThreadPoolExecutor(count, "posenc-kernel", initializer=_start_worker)
            _pool = (os.getpid(), count, pool)
        return _pool[2]


def _modes_active() -> bool:
    """Whether a dispatch mode (e.g. a FLOP counter) watches this thread's operations: the
    workers would escape it, so the calling thread does all the work."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    return _get_current_dispatch_mode() is not None


class _Tasks:
    """The state one call shares with its workers: the next task, those in progress, the
    first error."""

    def __init__(self, count: int, task: Callable[[int, int], None]) -> None:
        self.count, self.task = count, task
        self.next = self.running = 0
        self.error: BaseException | None = None
        self.done = threading.Condition(threading.Lock())
        self.inference = torch.is_inference_mode_enabled()

    def work(self, slot: int) -> None:
        """Take tasks until none is left (or one failed); ``slot`` names the thread's scratch."""
        while True:
            with self.done:
                if self.error is not None or self.next >= self.count:
                    return
                index, self.next = self.next, self.next + 1
                self.running += 1
            try:
                self.task(index, slot)
            except BaseException as error:  # re-raised by the calling thread
                with self.done:
                    self.error = self.error or error
            finally:
                with self.done:
                    self.running -= 1
                    self.done.notify_all()

    def work_elsewhere(self, slot: int) -> None:
        """:meth:`work` on a worker thread, with the caller's grad and inference modes."""
        with torch.inference_mode(self.inference), torch.no_grad():
            self.work(slot)


def run(
    count: int, task: Callable[[int, int], None], *, tensor: torch.Tensor, spread: bool = True
) -> None:
    """Call ``task(index, slot)`` for each index in ``range(count)``, spread over threads.

    ``slot`` (``0 <= slot < threads()``) tells the threads apart, so that each keeps its own
    scratch. Tasks run in index order as threads come free; each should touch its own part
    of the output. Without ``spread`` (see :func:`spread`), on a tensor off the CPU, with one
    thread or one task, the calling thread
    runs them all (its operations as PyTorch parallelises them); with a dispatch mode active
    it runs them all too, each operation on it alone.
    The first exception of a task is raised here once the tasks in progress have ended (no
    task starts after it).
    """
    width = min(threads(), count) if spread else 1
    if width <= 1 or tensor.device.type != "cpu":
        for index in range(count):
            task(index, 0)
        return
    if _modes_active():
        with alone():
            for index in range(count):
                task(index, 0)
        return
    tasks = _Tasks(count, task)
    pool = _workers(width - 1)
    for slot in range(1, width):
        pool.submit(tasks.work_elsewhere, slot)
    with alone():
        tasks.work(0)
        # Wait for the tasks in progress only: a worker that starts later finds none left, so
        # a pool busy with other calls (or lost to a fork) cannot hold this one.
        with tasks.done:
            tasks.done.wait_for(lambda: tasks.running == 0)
    if tasks.error is not None:
        raise tasks.error
