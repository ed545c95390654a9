"""Shared pytest configuration for the whole suite: the test environment's plugin (testenv.pytest_plugin)
gives the fixtures, and marks everything under tests/e2e `e2e`."""

from hypothesis import HealthCheck, Phase, settings

pytest_plugins = ["testenv.pytest_plugin"]

# Hypothesis (the unit suite's property tests): no deadline and no too-slow health check, since this
# suite runs beside builds and benchmarks on small machines, where any timing limit is flaky; no explain
# phase, which reruns a failing property hundreds of times (minutes) to comment the shrunk example. Each
# property sets its own max_examples.
settings.register_profile(
    "suite",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[p for p in Phase if p != Phase.explain],
)
settings.load_profile("suite")
