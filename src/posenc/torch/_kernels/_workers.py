"""Work shared by threads with one synchronisation per call: how the fast paths use the cores.

PyTorch runs each CPU operation on a tensor of ``GRAIN`` elements or more as a parallel region
of its intra-op threads, with a barrier at its end. A fast path that walks a tensor in
cache-sized pieces, a few operations per piece, would cross a few hundred barriers per call,
and on a busy machine each barrier waits for whichever thread the scheduler has taken off its
core (a rotation ran 3.5 times slower beside one busy process). So the fast paths cut their
work into pieces of fewer than ``GRAIN`` elements, whose operations PyTorch runs on the calling
thread without a barrier, and :func:`run` hands the pieces to threads: the calling thread and
``torch.get_num_threads() - 1`` workers each take the next task as they come free, so a thread
that lost its core delays only the task it holds. The call waits once, at its end, for the
tasks in progress.

PyTorch releases the global interpreter lock inside each operation, so the threads compute in
parallel; the Python between operations (a few microseconds a piece) is what they share.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

__all__ = ["GRAIN", "run", "threads"]

#: PyTorch's ``at::internal::GRAIN_SIZE``: an elementwise operation on fewer elements runs on
#: the thread that calls it, without a parallel region.
GRAIN = 32768

_lock = threading.Lock()
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, workers, pool)


def threads() -> int:
    """Threads a call may use: PyTorch's intra-op setting (``torch.set_num_threads``)."""
    return max(1, torch.get_num_threads())


def _workers(count: int) -> ThreadPoolExecutor:
    """A pool of at least ``count`` threads for this process (a forked child makes its own)."""
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid() or _pool[1] < count:
            _pool = (os.getpid(), count, ThreadPoolExecutor(count, "posenc-kernel"))
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


def run(count: int, task: Callable[[int, int], None], *, tensor: torch.Tensor) -> None:
    """Call ``task(index, slot)`` for each index in ``range(count)``, spread over threads.

    ``slot`` (``0 <= slot < threads()``) tells the threads apart, so that each keeps its own
    scratch. Tasks run in index order as threads come free; each should touch its own part
    of the output. On a tensor off the CPU, with one thread, one task or a dispatch mode
    active, the calling thread runs them all. The first exception of a task is raised here
    once the tasks in progress have ended (no task starts after it).
    """
    width = min(threads(), count)
    if width <= 1 or tensor.device.type != "cpu" or _modes_active():
        for index in range(count):
            task(index, 0)
        return
    tasks = _Tasks(count, task)
    pool = _workers(width - 1)
    for slot in range(1, width):
        pool.submit(tasks.work_elsewhere, slot)
    tasks.work(0)
    # Wait for the tasks in progress only: a worker that starts later finds none left, so a
    # pool busy with other calls (or lost to a fork) cannot hold this one.
    with tasks.done:
        tasks.done.wait_for(lambda: tasks.running == 0)
    if tasks.error is not None:
        raise tasks.error
