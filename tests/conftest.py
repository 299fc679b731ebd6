"""Shared test configuration: a deterministic, CI-sized hypothesis profile."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "posenc",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("posenc")
