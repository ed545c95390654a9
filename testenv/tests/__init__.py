"""The test environment's own tests: pure ones here, the ones that need the local clusters in e2e/."""
