"""Polling until something holds (a truthy result), with a readable timeout error."""

from __future__ import annotations

import ssl
import time
import urllib.request
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


def answers_ok(url: str, context: ssl.SSLContext | None = None, timeout: float = 2) -> bool:
    """Whether a GET of `url` is answered 200 now: a readiness probe to poll (refused, unreachable or
    any other status is False)."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except OSError:  # urllib's URLError and HTTPError are OSErrors
        return False
