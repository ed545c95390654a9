"""The per-peering loop kopf runs as a daemon, and everything a peering keeps between passes.

Each peering's loop reconciles, then sleeps until the watch hub wakes it (an event on either cluster
concerning it, or a (re)list), a spec change, the timeout deadline or the resync interval. The runner
holds, per peering: the lock that keeps its reconcile, mirror refresh and teardown from overlapping,
and the last pass's outcome (the ForeignCluster fast path re-mirrors onto it). Passes run on the
runner's own thread pool, sized so that peerings never queue behind each other.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import structlog

from liqo_peering.engine.loop import keep_reconciling
from liqo_peering.engine.service import Outcome, PeeringKey, PeeringService
from liqo_peering.engine.watches import HEALTH_CHANGED, KUBECONFIG, LIQO_IDENTITY, Route, WatchHub, peering_routes

log = structlog.get_logger("liqo_peering.runner")
# Bursts of watch events (Liqo updating several objects at once) are coalesced into one reconcile.
DEBOUNCE_SECONDS = 0.05
MAX_PASSES = 64  # concurrent passes (threads); a pass mostly waits on the API servers
T = TypeVar("T")


class PeeringRunner:
    def __init__(
        self,
        service: PeeringService,
        resync_interval: float,
        namespaced_tenant_reads: bool = False,
        hub: WatchHub | None = None,
    ) -> None:
        self.service = service
        self.resync_interval = resync_interval
        self.namespaced_tenant_reads = namespaced_tenant_reads
        self.hub = hub if hub is not None else WatchHub(self._notify)
        self._pool = ThreadPoolExecutor(max_workers=MAX_PASSES, thread_name_prefix="pass")
        self._guard = threading.Lock()
        self._locks: dict[PeeringKey, threading.Lock] = {}
        self._last: dict[PeeringKey, Outcome] = {}
        self._triggers: dict[Hashable, asyncio.Event] = {}
        self._kinds: dict[Hashable, set[str]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- wake-ups ------------------------------------------------------------------------------------
    def _notify(self, key: Hashable, kind: str) -> None:
        """From any thread (informers): wake a peering's loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake, key, kind)

    notify = _notify  # the watch hub's callback (through engine.setrunner.WakeRouter when sets share the hub)

    def _wake(self, key: Hashable, kind: str) -> None:
        trigger = self._triggers.get(key)
        if trigger is not None:
            self._kinds.setdefault(key, set()).add(kind)
            trigger.set()

    def poke(self, namespace: str, name: str) -> None:
        """Wake a peering's loop now (spec or annotation change)."""
        self._wake((namespace, name), "spec")

    # -- one pass, under the peering's lock ------------------------------------------------------------
    def _lock(self, key: PeeringKey) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def reconcile(self, namespace: str, name: str, mirror_only: bool = False, full: bool = True) -> Outcome:
        """One pass (synchronous): the ForeignCluster fast path when only it changed, else a reconcile;
        ``full=False`` (only Liqo's objects changed) lets it reuse the last pass's discovery.

        The lock matters because kopf cancelling a daemon on deletion does not stop its worker thread:
        a reconcile already past its deletionTimestamp check would re-apply objects while, or after,
        teardown deletes them, and they would stay orphaned. With the lock, teardown waits for it.
        """
        key = (namespace, name)
        with self._lock(key):
            outcome = None
            last = self._last.get(key)
            if mirror_only and last is not None:
                outcome = self.service.refresh_mirror(namespace, name, last)
            if outcome is None:
                outcome = self.service.reconcile(namespace, name, None if full else last)
            if outcome.gone:
                return outcome
            self._last[key] = outcome
            self.hub.set_routes(key, self.routes(outcome))
            return outcome

    def routes(self, outcome: Outcome) -> list[Route]:
        if outcome.secret is None:
            return []
        return peering_routes(
            self.service.local,
            outcome.remote,
            outcome.ctx,
            outcome.secret,
            self.namespaced_tenant_reads,
            outcome.minted_secret,
            reverse=outcome.reverse,
            liqo_namespaces=outcome.liqo_namespaces,
        )

    def teardown(self, body: dict[str, Any]) -> list[str]:
        """One unpeering pass (synchronous); once nothing remains, the peering's state is dropped."""
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        with self._lock(key):
            remaining = self.service.teardown(body)
        if not remaining:
            self.forget(key)
        return remaining

    def forget(self, key: PeeringKey) -> None:
        # Under the peering's lock, so that no pass of it sets routes or takes a client in between. A pass
        # still waiting for the lock then finds the peering gone and changes nothing.
        with self._lock(key):
            self.hub.drop(key)
            self.service.release(*key)
            with self._guard:
                self._last.pop(key, None)
                self._locks.pop(key, None)

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        # In a copy of the caller's context: what a pass binds for its log lines stays out of the pool thread.
        call = contextvars.copy_context().run
        return await asyncio.get_running_loop().run_in_executor(self._pool, call, fn, *args)

    # -- the loop ----------------------------------------------------------------------------------------
    async def run(self, namespace: str, name: str, stopped: Any) -> None:
        self._loop = asyncio.get_running_loop()
        key = (namespace, name)
        trigger = self._triggers[key] = asyncio.Event()
        kinds = self._kinds.setdefault(key, set())
        state = {"mirror_only": False, "full": True}

        def next_pass(failures: int) -> None:
            state["mirror_only"] = kinds == {"ForeignCluster"}
            # A timer (resync, timeout), a spec change, the kubeconfig Secret, Liqo's cluster-ID ConfigMap or an
            # error: discover again. A relist alone does not.
            state["full"] = not kinds or bool(kinds & {"spec", KUBECONFIG, LIQO_IDENTITY}) or failures > 0

        try:
            await keep_reconciling(
                lambda: self.in_thread(self.reconcile, namespace, name, state["mirror_only"], state["full"]),
                self.delay,
                trigger,
                stopped,
                log,
                {"peering": f"{namespace}/{name}"},
                DEBOUNCE_SECONDS,
                before_pass=kinds.clear,
                after_wait=next_pass,
                restart_backoff=lambda: HEALTH_CHANGED in kinds,
            )
        finally:
            # Deleted (teardown forgets the rest once done), or the operator stops: nothing to wake. Unless
            # a new peering of the same name already runs its own loop: its trigger and routes stay.
            if self._triggers.get(key) is trigger:
                self._triggers.pop(key, None)
                self._kinds.pop(key, None)
                self.hub.drop(key)

    def delay(self, outcome: Outcome, failures: int) -> float:
        """How long to sleep without events: the requeue, backed off exponentially while errors persist."""
        if outcome.requeue_after is None:
            return self.resync_interval
        backoff = 2 ** max(failures - 1, 0) if failures else 1
        return min(outcome.requeue_after * backoff, self.resync_interval)

    def stop(self) -> None:
        self.hub.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
