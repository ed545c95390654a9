"""The per-set loop kopf runs as a daemon for each LiqoPeeringSet, as runner.py does for LiqoPeerings.

Each set's loop reconciles, then sleeps until the watch hub wakes it (a Secret of its namespace or one of
its LiqoPeerings changed, or an informer (re)listed), a spec change, or the resync interval. The set's
lock keeps a reconcile and the teardown from overlapping: a pass that already read the set must not
create LiqoPeerings while, or after, the teardown deletes them.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import structlog

from liqo_peering.engine.loop import keep_reconciling
from liqo_peering.engine.peeringset import SetOutcome, SetService
from liqo_peering.engine.watches import WatchHub, set_routes

log = structlog.get_logger("liqo_peering.setrunner")
# A set's LiqoPeerings change status in bursts (one per stage each): coalesce them into one pass.
DEBOUNCE_SECONDS = 0.2
MAX_PASSES = 8
T = TypeVar("T")


@dataclass(frozen=True)
class SetKey:
    """A LiqoPeeringSet in the watch hub (a LiqoPeering's key is a plain (namespace, name) tuple)."""

    namespace: str
    name: str


class Notified(Protocol):
    def notify(self, key: Hashable, kind: str) -> None: ...


class WakeRouter:
    """The watch hub's one wake-up callback: a set's wake-ups to the set runner, the rest to the peering
    runner. Both runners share the hub, so a namespace's Secret informer serves peerings and sets alike."""

    def __init__(self) -> None:
        self.peerings: Notified | None = None
        self.sets: Notified | None = None

    def __call__(self, key: Hashable, kind: str) -> None:
        target = self.sets if isinstance(key, SetKey) else self.peerings
        if target is not None:
            target.notify(key, kind)


class SetRunner:
    def __init__(self, service: SetService, hub: WatchHub, resync_interval: float) -> None:
        self.service = service
        self.hub = hub
        self.resync_interval = resync_interval
        self._pool = ThreadPoolExecutor(max_workers=MAX_PASSES, thread_name_prefix="set")
        self._guard = threading.Lock()
        self._locks: dict[SetKey, threading.Lock] = {}
        self._triggers: dict[SetKey, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def notify(self, key: Hashable, kind: str) -> None:
        """From any thread (informers): wake a set's loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake, key)

    def _wake(self, key: Hashable) -> None:
        trigger = self._triggers.get(key) if isinstance(key, SetKey) else None
        if trigger is not None:
            trigger.set()

    def poke(self, namespace: str, name: str) -> None:
        """Wake a set's loop now (its spec changed)."""
        self._wake(SetKey(namespace, name))

    def _lock(self, key: SetKey) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def reconcile(self, namespace: str, name: str) -> SetOutcome:
        """One pass (synchronous), under the set's lock; then the hub is told what wakes the set."""
        key = SetKey(namespace, name)
        with self._lock(key):
            outcome = self.service.reconcile(namespace, name)
            if not outcome.gone:
                self.hub.set_routes(key, set_routes(self.service.local, namespace, name))
            return outcome

    def teardown(self, body: dict[str, Any]) -> list[str]:
        """One teardown pass (synchronous); once nothing remains, the set's state is dropped."""
        key = SetKey(body["metadata"]["namespace"], body["metadata"]["name"])
        with self._lock(key):
            remaining = self.service.teardown(body)
            if not remaining:
                self.hub.drop(key)
                with self._guard:
                    self._locks.pop(key, None)
        return remaining

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        # In a copy of the caller's context: what a pass binds for its log lines stays out of the pool thread.
        call = contextvars.copy_context().run
        return await asyncio.get_running_loop().run_in_executor(self._pool, call, fn, *args)

    async def run(self, namespace: str, name: str, stopped: Any) -> None:
        self._loop = asyncio.get_running_loop()
        key = SetKey(namespace, name)
        trigger = self._triggers[key] = asyncio.Event()
        try:
            await keep_reconciling(
                lambda: self.in_thread(self.reconcile, namespace, name),
                lambda _outcome, failures: (
                    min(2.0**failures, self.resync_interval) if failures else self.resync_interval
                ),
                trigger,
                stopped,
                log,
                {"set": f"{namespace}/{name}"},
                DEBOUNCE_SECONDS,
            )
        finally:
            if self._triggers.get(key) is trigger:
                self._triggers.pop(key, None)
                self.hub.drop(key)

    def stop(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
