"""The per-peering loop kopf runs as a daemon: reconcile, then sleep until a watch event, a spec
change, the timeout deadline or the resync interval, whichever comes first."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from liqo_peering.engine.service import PeeringService
from liqo_peering.engine.triggers import PeeringWatches

log = structlog.get_logger("liqo_peering.runner")
# Bursts of watch events (Liqo updating several objects at once) are coalesced into one reconcile.
DEBOUNCE_SECONDS = 0.1


class PeeringRunner:
    def __init__(self, service: PeeringService, resync_interval: float) -> None:
        self.service = service
        self.resync_interval = resync_interval
        self._triggers: dict[tuple[str, str], asyncio.Event] = {}
        self._kinds: dict[tuple[str, str], set[str]] = {}

    def poke(self, namespace: str, name: str) -> None:
        """Wake a peering's loop now (spec or annotation change)."""
        trigger = self._triggers.get((namespace, name))
        if trigger is not None:
            self._kinds.setdefault((namespace, name), set()).add("spec")
            trigger.set()

    async def run(self, namespace: str, name: str, stopped: Any) -> None:
        loop = asyncio.get_running_loop()
        trigger = asyncio.Event()
        self._triggers[(namespace, name)] = trigger

        kinds = self._kinds.setdefault((namespace, name), set())

        def wake(kind: str) -> None:
            kinds.add(kind)
            trigger.set()

        def notify(kind: str) -> None:
            loop.call_soon_threadsafe(wake, kind)

        watches = PeeringWatches(notify)
        failures = 0
        try:
            mirror_only = False
            while not stopped:
                trigger.clear()
                try:
                    outcome = None
                    if mirror_only:
                        # Only Liqo's ForeignCluster changed: mirror it without a full pass.
                        outcome = await asyncio.to_thread(self.service.refresh_mirror, namespace, name)
                    if outcome is None:
                        outcome = await asyncio.to_thread(self.service.reconcile, namespace, name)
                except Exception:
                    failures += 1
                    log.exception("reconcile crashed; retrying", peering=f"{namespace}/{name}")
                    await self._wait(trigger, stopped, min(2.0**failures, 60.0))
                    continue
                if outcome.gone:
                    return
                failures = failures + 1 if outcome.transient_error else 0
                wanted = [(self.service.local, res, ns, fs) for res, ns, fs in outcome.watch_local]
                if outcome.remote is not None:
                    wanted += [(outcome.remote, res, ns, fs) for res, ns, fs in outcome.watch_remote]
                watches.ensure(wanted)
                delay = self.resync_interval
                if outcome.requeue_after is not None:
                    # Transient errors back off exponentially up to the resync interval.
                    delay = min(
                        outcome.requeue_after * (2 ** max(failures - 1, 0)) if failures else outcome.requeue_after,
                        self.resync_interval,
                    )
                kinds.clear()
                await self._wait(trigger, stopped, delay)
                await asyncio.sleep(DEBOUNCE_SECONDS)
                mirror_only = kinds == {"ForeignCluster"}
        finally:
            watches.stop()
            self.service.forget(namespace, name)
            self._triggers.pop((namespace, name), None)
            self._kinds.pop((namespace, name), None)

    @staticmethod
    async def _wait(trigger: asyncio.Event, stopped: Any, timeout: float) -> None:
        waiter = asyncio.ensure_future(trigger.wait())
        stopper = asyncio.ensure_future(stopped.wait())
        try:
            await asyncio.wait({waiter, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            stopper.cancel()
