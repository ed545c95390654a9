"""Shared pytest configuration for the whole suite: the test environment's plugin (testenv.pytest_plugin)
gives the fixtures, and marks everything under tests/e2e `e2e`."""

pytest_plugins = ["testenv.pytest_plugin"]
