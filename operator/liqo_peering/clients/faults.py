"""Faults injected at the client calls of a pass, for the tests only (tests/e2e/test_faults.py).

Off unless the environment variable LIQO_PEERING_FAULTS names a directory, which only the test harness sets;
then each call a ClusterClient makes (get, find, apply, create, delete, patch, ...) first looks there:

- a file ``record``: the call is appended to ``calls``, one line ``<side> <verb> <plural>``;
- a file ``raise`` holding such lines: the first call that matches a line takes it (moved to ``raised``)
  and raises a RuntimeError, once per line.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

ENV = "LIQO_PEERING_FAULTS"
_DIR = Path(os.environ[ENV]) if os.environ.get(ENV) else None
_LOCK = threading.Lock()


def at(side: str, verb: str, plural: str) -> None:
    """Called at the start of each client call: records it, or raises at it, when the tests ask."""
    if _DIR is None:
        return
    call = f"{side} {verb} {plural}"
    if (_DIR / "record").exists():
        with (_DIR / "calls").open("a") as calls:
            calls.write(call + "\n")
    with _LOCK:  # the pass's threads race for the lines: each raises once
        try:
            armed = (_DIR / "raise").read_text().splitlines()
        except FileNotFoundError:
            return
        if call not in armed:
            return
        left = [line for line in armed if line != call]
        with (_DIR / "raised").open("a") as raised:
            raised.write(call + "\n")
        if left:
            (_DIR / "raise.new").write_text("".join(line + "\n" for line in left))
            (_DIR / "raise.new").rename(_DIR / "raise")  # whole, never half written
        else:
            (_DIR / "raise").unlink()
    raise RuntimeError(f"fault injected at {call}")
