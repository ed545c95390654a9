"""Self-tests of the harness against the local clusters (marker `e2e`)."""
