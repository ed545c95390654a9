"""Polling until something holds (a truthy result), with a readable timeout error."""

from __future__ import annotations

import ssl
import time
import urllib.request
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")
SEEN_CHARS = 500  # of what a wait saw last, in its failure: a caller with more to say adds its own report


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


def wait_progressing(
    what: str,
    fn: Callable[[], T | None],
    progress: Callable[[], Hashable],
    timeout: float,
    limit: float = 3,
    interval: float = 0.5,
) -> T:
    """Poll fn() until it returns something truthy, for as long as what it waits on makes progress: each new
    value of progress() (a Pod started, a condition changed) gives it ``timeout`` more seconds, up to ``limit``
    times ``timeout`` in all. On a loaded machine the same steps take longer; a wait that sees none for
    ``timeout`` seconds has its verdict, and says what it saw last."""
    started = time.monotonic()
    deadline, end = started + timeout, started + limit * timeout
    seen: Hashable = None
    last: T | None = None
    while True:
        last = fn()
        if last:
            return last
        now, state = time.monotonic(), progress()
        if state != seen:
            seen, deadline = state, min(now + timeout, end)
        if now > deadline:
            raise AssertionError(
                f"gave up waiting for {what} after {now - started:.0f}s, the last {timeout:.0f}s without progress"
                f" (or {limit * timeout:.0f}s in all); last seen: {repr(seen)[:SEEN_CHARS]} (last: {last!r})"
            )
        time.sleep(interval)


def answers_ok(url: str, context: ssl.SSLContext | None = None, timeout: float = 2) -> bool:
    """Whether a GET of `url` is answered 200 now: a readiness probe to poll (refused, unreachable or
    any other status is False)."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except OSError:  # urllib's URLError and HTTPError are OSErrors
        return False
