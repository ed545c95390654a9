"""The one runner of LiqoPeerings and LiqoPeeringSets: each object's loop, its lock, its wake-ups, and the error
boundary every pass goes through.

kopf runs each object's ``run`` as a daemon (controller-runtime's worker for one key): a pass, then a wait for
an event or the delay the pass asked for, backing off while passes fail, until the object is gone or the
operator stops. What a pass of each kind does, and what it keeps between passes, is that kind's
(engine/kinds.py). The object's lock keeps its pass and its teardown from overlapping: kopf cancelling a
daemon on deletion does not stop its worker thread, and a pass already past its deletionTimestamp check
would otherwise write objects while, or after, the teardown deletes them.

Whatever a pass raises, reconcile or teardown, its kind reports it in the object's status (``report``,
``report_teardown``), and the next pass starts afresh; only the operator's own API server being unavailable is
retried without a word (the status could not be written anyway).

The runner also marks each pass in flight (engine/passmarkers.py): an object whose passes killed the operator
twice in a row is put aside after the restart, its status saying so, while the others go on.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import structlog

from liqo_peering.engine.passmarkers import FORCED_TEARDOWN, RECONCILE, TEARDOWN, Deaths, Key, PassMarkers
from liqo_peering.engine.wakeups import NEVER, Wakeups, wait
from liqo_peering.engine.watches import Route, WatchHub
from liqo_peering.errors import (
    PassCrashed,
    PeeringError,
    as_peering_error,
    own_cluster_unavailable,
    unexpected,
)
from liqo_peering.health import TrackedPool
from liqo_peering.liqo import naming

log = structlog.get_logger("liqo_peering.runner")
MAX_PASSES = 72  # concurrent passes (threads): a pass mostly waits on the API servers
MAX_CALLS = 2 * MAX_PASSES  # sub-calls (threads): a pass's authentication stages, its reads side by side
UNPEER_WINDOW = 30.0  # seconds of teardown passes per call of the delete handler
UNPEER_POLL = 1.0  # between teardown passes while nothing is watched
UNPEER_SAFETY_NET = 10.0  # between teardown passes without an event: a wake-up lost is late, never missed
T = TypeVar("T")


@dataclass(frozen=True)
class ObjectKey:
    """An object the runner runs, and its key in the watch hub."""

    kind: str  # LiqoPeering or LiqoPeeringSet
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def marker(self) -> Key:
        return (self.kind, self.namespace, self.name)


class Outcome(Protocol):
    @property
    def gone(self) -> bool: ...

    @property
    def transient_error(self) -> bool: ...


class TeardownOutcome(Protocol):
    @property
    def remaining(self) -> tuple[str, ...]:
        """What must still go (empty: done)."""
        ...

    @property
    def routes(self) -> tuple[Route, ...]:
        """What wakes the next teardown pass: what this one deleted and waits for."""
        ...

    @property
    def failure(self) -> str | None:
        """Why the pass failed, as its status says (None: it did not)."""
        ...


class Kind(Protocol):
    """What a pass of one kind of object does; the runner does the rest."""

    @property
    def kind(self) -> str: ...

    @property
    def debounce(self) -> float:
        """Events come in bursts (one write, several objects): one pass for those this close together."""
        ...

    def reconcile(self, key: ObjectKey, woken_by: frozenset[str]) -> Any:
        """One pass; ``woken_by``: what changed since the last one (empty: a timer, or the first pass)."""
        ...

    def report(self, key: ObjectKey, error: PeeringError) -> Any:
        """The pass raised ``error``: say so in the object's status; the next pass starts afresh."""
        ...

    def routes(self, key: ObjectKey, outcome: Any) -> list[Route]: ...

    def delay(self, outcome: Any, failures: int) -> float:
        """How long to wait without events after a pass, ``failures`` passes in a row having failed."""
        ...

    def restart_backoff(self, woken_by: frozenset[str]) -> bool:
        """Whether what woke the object is a new situation the failures so far say nothing about."""
        ...

    def teardown(self, key: ObjectKey, body: dict[str, Any]) -> TeardownOutcome:
        """One teardown pass of the object being deleted (``body``: as the delete handler got it)."""
        ...

    def report_teardown(self, key: ObjectKey, body: dict[str, Any], error: PeeringError) -> TeardownOutcome:
        """The teardown pass raised ``error``: say so in the object's status; kopf calls again."""
        ...

    def forget(self, key: ObjectKey) -> None:
        """The object is gone: drop what its kind keeps for it."""
        ...


def _to_report(key: ObjectKey, raised: Exception, step: str) -> PeeringError:
    """The error boundary's rule, for a pass and a teardown pass alike: what ``step`` raised, typed, for its kind
    to report; logged, with a traceback for the unexpected only. Re-raised while the operator's own API server
    is unavailable: the status could not be written either."""
    error = as_peering_error(raised, f"the {step}")
    if own_cluster_unavailable(error):
        raise error from None
    log.error(f"{step} failed; reporting it", object=str(key), reason=error.reason, exc_info=unexpected(raised))
    return error


class Runner:
    def __init__(
        self,
        kinds: Iterable[Kind],
        hub: WatchHub,
        wakeups: Wakeups,
        markers: PassMarkers | None = None,
        calls: TrackedPool | None = None,
    ) -> None:
        """``hub`` wakes objects through ``wakeups`` (built with ``WatchHub(wakeups)``); ``markers``: the passes
        in flight (recovered already), None: not recorded; ``calls``: the pool of sub-calls the kinds' passes
        wait on (engine/together.py), stopped with the runner's own."""
        self.kinds = {k.kind: k for k in kinds}
        self.markers = markers if markers is not None else PassMarkers(None)
        self.hub = hub
        self.wakeups = wakeups
        self.pool = TrackedPool(MAX_PASSES, "pass")  # health.py: liveness fails when it stalls
        self.calls = calls
        self._guard = threading.Lock()
        self._locks: dict[ObjectKey, threading.Lock] = {}

    def poke(self, key: ObjectKey) -> None:
        """Wake an object's loop now (its spec or annotations changed): put aside or not, it runs."""
        self.markers.reset(key.marker)
        self.wakeups.wake(key, "spec")

    def _lock(self, key: ObjectKey) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    # -- one pass, under the object's lock: the error boundary ------------------------------------------
    def one_pass(self, key: ObjectKey, woken_by: frozenset[str] = frozenset(), uid: str = "") -> Any:
        """One pass (synchronous). Whatever it raises is reported in the object's status, and its kind forgets
        what it kept from earlier passes; raises only while the operator's own API server is unavailable."""
        kind = self.kinds[key.kind]
        # What woke it (nothing: the resync timer, or its first pass) shows a lost wake-up in the tests.
        log.debug("pass", object=str(key), woken_by=sorted(woken_by))
        with self._lock(key), self.markers.in_flight(key.marker, uid, RECONCILE):
            try:
                outcome = kind.reconcile(key, woken_by)
            except Exception as raised:
                # Its routes stay: they still say what concerns the object.
                return kind.report(key, _to_report(key, raised, "pass"))
            if not outcome.gone:
                self.hub.set_routes(key, kind.routes(key, outcome))
            return outcome

    def put_aside(self, key: ObjectKey, deaths: Deaths) -> bool:
        """Say in the object's status that its passes are put aside (synchronous): the report only, no pass,
        once per death (a restart for another reason finds it said). Whether the object is gone."""
        error = PassCrashed(deaths.count, deaths.phase, self.markers.backoff(deaths.count))
        log.warning("passes put aside: " + error.message, reason=error.reason, object=str(key))
        if self.markers.to_report(key.marker):
            with self._lock(key):
                if self.kinds[key.kind].report(key, error).gone:
                    return True
        self.markers.mark_aside(key.marker)
        return False

    def teardown(self, key: ObjectKey, body: dict[str, Any]) -> TeardownOutcome:
        """One teardown pass (synchronous), under the object's lock: the error boundary of the deletion, as
        ``one_pass`` is of the reconcile. Whatever it raises is reported by its kind (``report_teardown``);
        raises only while the operator's own API server is unavailable. Once nothing remains, the object's state
        is dropped. A put-aside object is reported as such (PassCrashed) without a pass; a forced teardown
        still runs: the way out."""
        kind = self.kinds[key.kind]
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        forced = (meta.get("annotations") or {}).get(naming.FORCE_DELETE) == "true"
        phase = FORCED_TEARDOWN if forced else TEARDOWN
        with self._lock(key):
            aside = self.markers.aside(key.marker, uid, phase)
            if aside is not None:
                deaths = aside[0]
                crashed = PassCrashed(deaths.count, deaths.phase, self.markers.backoff(deaths.count))
                log.warning("teardown put aside: " + crashed.message, reason=crashed.reason, object=str(key))
                return kind.report_teardown(key, body, crashed)
            with self.markers.in_flight(key.marker, uid, phase):
                try:
                    outcome = kind.teardown(key, body)
                except Exception as raised:
                    # Its routes stay, as a reconcile's.
                    return kind.report_teardown(key, body, _to_report(key, raised, "teardown"))
        if not outcome.remaining:
            self.forget(key)
        return outcome

    async def unpeer(self, key: ObjectKey, body: dict[str, Any], window: float = UNPEER_WINDOW) -> TeardownOutcome:
        """Teardown passes, each as soon as what the last one waits for changes (the events of its routes), for
        up to ``window`` seconds or until one fails; the last pass's value (nothing remaining: done). The delete
        handler returns to kopf after each window, so that a change of the object itself (a force-delete
        annotation) reaches the next one. Without routes (nothing watched), a pass follows the last one after
        UNPEER_POLL seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + window
        trigger = self.wakeups.open(key)  # the object's loop, if it still runs, has been stopped by its deletion
        try:
            while True:
                trigger.clear()
                self.wakeups.take(key)  # what woke it does not matter: the pass reads everything again
                outcome = await self.in_thread(self.teardown, key, body)
                left = deadline - loop.time()
                if outcome.failure is not None or not outcome.remaining or left <= 0:
                    return outcome
                self.hub.set_routes(key, list(outcome.routes))
                await wait(trigger, NEVER, min(UNPEER_SAFETY_NET if outcome.routes else UNPEER_POLL, left))
                await asyncio.sleep(self.kinds[key.kind].debounce)
        finally:
            # Its routes stay while something remains (kopf calls again); the last pass forgets them.
            self.wakeups.close(key, trigger)

    def forget(self, key: ObjectKey) -> None:
        # Under the object's lock, so that no pass of it sets routes or takes a client in between. A pass
        # still waiting for the lock then finds the object gone and changes nothing.
        with self._lock(key):
            self.hub.drop(key)
            self.kinds[key.kind].forget(key)
            self.markers.forget(key.marker)
            with self._guard:
                self._locks.pop(key, None)

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        # In a copy of the caller's context: what a pass binds for its log lines stays out of the pool thread.
        call = contextvars.copy_context().run
        return await asyncio.get_running_loop().run_in_executor(self.pool, call, fn, *args)

    # -- the loop ----------------------------------------------------------------------------------------
    async def run(self, key: ObjectKey, stopped: Any, uid: str = "") -> None:
        """The object's loop; ``uid``: the object's, which its pass markers name."""
        kind = self.kinds[key.kind]
        trigger = self.wakeups.open(key)
        failures = 0
        reported = 0  # the deaths the status says the object is put aside for
        try:
            while not stopped:
                trigger.clear()
                aside = self.markers.aside(key.marker, uid, RECONCILE)
                try:
                    if aside is not None:
                        deaths, left = aside
                        if reported != deaths.count:
                            if await self.in_thread(self.put_aside, key, deaths):
                                return
                            reported = deaths.count
                        await wait(trigger, stopped, left)  # a spec change resets it (poke)
                        continue
                    outcome = await self.in_thread(self.one_pass, key, self.wakeups.take(key), uid)
                except Exception as exc:  # the operator's own API server (or the report of a failure) failed
                    failures += 1
                    error = as_peering_error(exc, "the report of a failed pass")
                    log.warning(
                        "pass put off: " + error.message, reason=error.reason, object=str(key), exc_info=unexpected(exc)
                    )
                    await wait(trigger, stopped, min(2.0**failures, 30.0))
                    continue
                if outcome.gone:
                    return
                failures = failures + 1 if outcome.transient_error else 0
                await wait(trigger, stopped, kind.delay(outcome, failures))
                await asyncio.sleep(kind.debounce)
                if kind.restart_backoff(self.wakeups.pending(key)):
                    # A provider back up: the first pass failing in it (an API server just back still
                    # initialising its caches answers 429) is retried soon, not after the longest delay.
                    failures = 0
        finally:
            # Deleted (teardown forgets the rest once done), or the operator stops: nothing to wake.
            if self.wakeups.close(key, trigger):
                self.hub.drop(key)

    def stop(self) -> None:
        self.hub.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self.calls is not None:
            self.calls.shutdown(wait=False, cancel_futures=True)
