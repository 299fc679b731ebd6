"""Shared test configuration: a deterministic, CI-sized hypothesis profile, the profiles of the
fuzz suite (``tests/fuzz``; ``POSENC_FUZZ=long`` selects the long one, ``POSENC_FUZZ=quick``
the small one of ``make check``, which shrinks the other hypothesis tests too), and the
``sweep`` marker: its tests run only when asked for (``pytest -m sweep``, or
``POSENC_SWEEP=1`` as ``make test`` sets it).

The other markers are set by folder (``tests/folders.py``) and listed in ``pyproject.toml``."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from .fuzz import profile as fuzz_profile


def _inductor_cache_per_kernel_set() -> None:
    """Under ``ATEN_CPU_CAPABILITY`` (a forced kernel set), Inductor's FX graph cache is off.

    torch 2.13's cache key leaves out the vector width that the variable selects, so a graph
    cached by a run under the machine's own kernels would be loaded and built for another
    width: wrong values under ``avx2``, a C++ compile error under ``default`` (reproducer
    and proof: tests/torch/kernels/test_kernel_sets.py). With the cache off, every graph is
    generated for the kernels of the run; runs without the variable keep the cache.
    """
    if not os.environ.get("ATEN_CPU_CAPABILITY") or importlib.util.find_spec("torch") is None:
        return
    import torch._inductor.config

    torch._inductor.config.fx_graph_cache = False


_inductor_cache_per_kernel_set()

settings.register_profile(
    "posenc",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# make check: the same tests with a tenth of the examples (POSENC_FUZZ=quick)
settings.register_profile("posenc-quick", settings.get_profile("posenc"), max_examples=6)
settings.load_profile("posenc-quick" if fuzz_profile.PROFILE == fuzz_profile.QUICK else "posenc")

_FUZZ_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

# The whole fuzz suite in about two minutes on a busy two-core machine, the same examples on
# every run.
settings.register_profile(
    fuzz_profile.FIXED,
    max_examples=fuzz_profile.EXAMPLES[fuzz_profile.FIXED],
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=_FUZZ_HEALTH,
)
settings.register_profile(
    fuzz_profile.QUICK,
    settings.get_profile(fuzz_profile.FIXED),
    max_examples=fuzz_profile.EXAMPLES[fuzz_profile.QUICK],
)
# POSENC_FUZZ=long: many more examples, from a random seed printed in the header and summary.
settings.register_profile(
    fuzz_profile.LONG,
    max_examples=fuzz_profile.EXAMPLES[fuzz_profile.LONG],
    deadline=None,
    derandomize=False,
    database=None,
    print_blob=True,
    suppress_health_check=_FUZZ_HEALTH,
)


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Tiny tensors: one intra-op thread is fastest and steady on a busy machine."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_report_header(config: pytest.Config) -> str:
    return fuzz_profile.header()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if fuzz_profile.SEED is not None:
        terminalreporter.write_line(fuzz_profile.header())


#: marker -> the environment variable that asks for its tests (``-m`` naming it does too)
ASKED_BY = {"sweep": "POSENC_SWEEP"}


def _asked_for(config: pytest.Config, marker: str) -> bool:
    """``-m`` names ``marker``, or its variable (``ASKED_BY``) is 1."""
    return marker in (config.option.markexpr or "") or os.environ.get(ASKED_BY[marker]) == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The default run leaves out the tests marked ``sweep`` unless asked for (deselected, as
    ``-m`` would). The tests marked ``slow`` run first, in their order, then the rest:
    pytest-xdist hands tests out in this order, so its workers end together instead of one
    waiting at the end on a test of tens of seconds (the last percent of ``make test``'s suite
    took a minute)."""
    for marker in ASKED_BY:
        if _asked_for(config, marker):
            continue
        left = [item for item in items if item.get_closest_marker(marker) is not None]
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = [item for item in items if item.get_closest_marker(marker) is None]
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
