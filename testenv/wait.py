"""Polling until something holds (a truthy result), with a readable timeout error."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(what: str, fn: Callable[[], T | None], timeout: float = 30, interval: float = 0.3) -> T:
    """Poll fn() until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
