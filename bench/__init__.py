"""`make bench`: how fast and how light the operator is, against `liqoctl peer` and at scale.

Not a test: nothing here asserts a duration. `python -m bench --help` for the flags; the results go to
docs/performance.json and docs/performance.png, and docs/performance.md explains them.
"""
