"""Calls of one pass side by side: each asks an API server, and one after another their round trips add up
(an unpeering pass reads a dozen objects that are gone, none of them in a cache).

They run in the pool of sub-calls that cli.py makes beside the runner's pool of passes, and registers with
the liveness check the same way. A pass runs in the runner's pool and waits here on the other one, so no pass
waits for a thread that another pass holds; a call already in the pool of sub-calls runs what it starts on its
own thread instead (it would otherwise wait for work queued behind it).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from liqo_peering.health import TrackedPool

T = TypeVar("T")


def start(pool: TrackedPool | None, call: Callable[[], T]) -> Future[T]:
    """``call`` under way in ``pool``, in a copy of the caller's context (its log lines name the caller's
    peering). Without a pool, or from one of its own threads, it runs here and is done on return."""
    if pool is not None and not pool.in_worker():
        return pool.submit(contextvars.copy_context().run, call)
    future: Future[T] = Future()
    try:
        future.set_result(call())
    except Exception as exc:  # raised where its result is asked for, as from a pool thread
        future.set_exception(exc)
    return future


def together(pool: TrackedPool | None, *calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, in order, once all have ended; the first failure in that order is raised then."""
    futures = [start(pool, call) for call in calls]
    errors = [exc for future in futures if (exc := future.exception()) is not None]
    if errors:
        raise errors[0]
    return [future.result() for future in futures]
