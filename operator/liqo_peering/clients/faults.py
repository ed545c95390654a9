"""Faults injected at the client calls of a pass, for the tests only (tests/e2e/test_faults.py).

Off unless the environment variable LIQO_PEERING_FAULTS names a directory, which only the test harness sets;
then each call a ClusterClient makes (get, find, apply, create, delete, patch, ...) first looks there:

- a file ``record``: the call is appended to ``calls``, one line ``<side> <verb> <plural>``;
- a file ``raise`` holding such a line: the first call that matches it takes the file (renamed ``raised``)
  and raises a RuntimeError, once.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "LIQO_PEERING_FAULTS"
_DIR = Path(os.environ[ENV]) if os.environ.get(ENV) else None


def at(side: str, verb: str, plural: str) -> None:
    """Called at the start of each client call: records it, or raises at it, when the tests ask."""
    if _DIR is None:
        return
    call = f"{side} {verb} {plural}"
    if (_DIR / "record").exists():
        with (_DIR / "calls").open("a") as calls:
            calls.write(call + "\n")
    try:
        armed = (_DIR / "raise").read_text().strip()
    except FileNotFoundError:
        return
    if armed != call:
        return
    try:
        (_DIR / "raise").rename(_DIR / "raised")  # atomic: one call of all those racing for it raises
    except FileNotFoundError:
        return
    raise RuntimeError(f"fault injected at {call}")
