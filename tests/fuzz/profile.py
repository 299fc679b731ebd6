"""Which hypothesis profile the fuzz suite runs under, chosen by the environment.

- default: ``posenc-fuzz``, deterministic (``derandomize=True``, no example database),
  sized for a couple of minutes for the whole suite;
- ``POSENC_FUZZ=long``: ``posenc-fuzz-long``, many more examples from a random seed that the
  pytest header and summary print; ``POSENC_FUZZ_SEED=<n>`` replays a given seed;
- ``POSENC_FUZZ=quick``: ``posenc-fuzz-quick``, deterministic and a tenth of the examples, for
  ``make check`` (the other hypothesis tests of the suite shrink with it: ``tests/conftest.py``).

The profiles themselves are registered in ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

from hypothesis import seed, settings

FIXED = "posenc-fuzz"
LONG = "posenc-fuzz-long"
QUICK = "posenc-fuzz-quick"

#: Examples per fuzz test (before a test's own ``scale``) in each profile.
EXAMPLES = {FIXED: 110, LONG: 1500, QUICK: 11}

_CHOICES = {"": FIXED, "fixed": FIXED, "long": LONG, "quick": QUICK}


def _profile_name() -> str:
    value = os.environ.get("POSENC_FUZZ", "").strip().lower()
    if value not in _CHOICES:
        raise ValueError(
            "POSENC_FUZZ must be unset, 'fixed', 'long' or 'quick', "
            f"got {os.environ['POSENC_FUZZ']!r}"
        )
    return _CHOICES[value]


def _random_seed() -> int | None:
    if PROFILE != LONG:
        return None
    given = os.environ.get("POSENC_FUZZ_SEED", "").strip()
    if given:
        return int(given)
    return random.SystemRandom().randrange(2**32)


PROFILE = _profile_name()
SEED = _random_seed()


def header() -> str:
    """One line for pytest's header and summary: the profile, and the seed of a long run."""
    if SEED is None:
        return f"posenc fuzz: profile {PROFILE} (deterministic, {EXAMPLES[PROFILE]} examples)"
    return (
        f"posenc fuzz: profile {PROFILE} ({EXAMPLES[PROFILE]} examples), seed {SEED}; "
        f"replay with POSENC_FUZZ=long POSENC_FUZZ_SEED={SEED}"
    )


def fuzz(scale: float = 1.0) -> Callable[[Any], Any]:
    """Decorator for a fuzz test (put it above ``@given``): the profile's settings with
    ``scale`` times its examples, and the seed of a long run."""

    def apply(test: Any) -> Any:
        profile = settings.get_profile(PROFILE)
        examples = max(1, round(EXAMPLES[PROFILE] * scale))
        test = settings(profile, max_examples=examples)(test)
        return test if SEED is None else seed(SEED)(test)

    return apply
