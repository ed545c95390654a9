"""Independent reads of one pass, side by side: each asks an API server, and one after another their round
trips add up (an unpeering pass reads a dozen objects that are gone, none of them in a cache)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# Shared by every pass; the calls never submit to it themselves, so none waits for a thread it holds.
_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="reads")


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, in order, once all have ended; the first failure in that order is raised then.
    Each runs in a copy of the caller's context, so that its log lines name the caller's peering."""
    futures = [_POOL.submit(contextvars.copy_context().run, call) for call in calls]
    errors = [exc for future in futures if (exc := future.exception()) is not None]
    if errors:
        raise errors[0]
    return [future.result() for future in futures]
