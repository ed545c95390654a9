"""Watches on both clusters that record when the objects of a peering reach a state (arrival times, no polls).

A poll loop would both blur the times (by its interval) and add its own reads to the request counts; one
watch per kind costs one request each and reports every change within milliseconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from testenv import kube as k
from testenv.kube import Kube, Obj

from .procs import log

WATCH_SECONDS = 3600  # one watch per kind for a whole run: no gaps to resync


@dataclass(frozen=True)
class Kind:
    """One watched kind on one side; `key` names it in predicates ("consumer/resourceslices"). With `owner`,
    only the objects an object of that kind owns (an ownerReference), as the garbage collector sees them."""

    side: str
    res: k.Res
    selector: str | None = None
    owner: str | None = None

    @property
    def key(self) -> str:
        return f"{self.side}/{self.res.plural}" + (f" of {self.owner}" if self.owner else "")

    def holds(self, obj: Obj) -> bool:
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        return self.owner is None or any(ref.get("kind") == self.owner for ref in refs)


State = dict[str, dict[str, Obj]]  # kind key -> "namespace/name" -> object
Predicate = Callable[[State], bool]


@dataclass
class Tracker:
    kubes: dict[str, Kube]
    kinds: list[Kind]
    state: State = field(default_factory=dict)
    requests: int = 0  # our own (a list and a watch per kind), to tell them apart in the API servers' counts
    _milestones: dict[str, tuple[Predicate, float | None]] = field(default_factory=dict)
    _lock: threading.Condition = field(default_factory=threading.Condition)
    _stop: threading.Event = field(default_factory=threading.Event)
    _synced: set[str] = field(default_factory=set)

    def start(self) -> Tracker:
        for kind in self.kinds:
            self.state[kind.key] = {}
            threading.Thread(target=self._run, args=(kind,), daemon=True, name=f"track-{kind.key}").start()
        deadline = time.monotonic() + 30
        with self._lock:
            while len(self._synced) < len(self.kinds):
                if not self._lock.wait(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"watches not started: {set(self.state) - self._synced}")
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self, kind: Kind) -> None:
        kc = self.kubes[kind.side]
        while not self._stop.is_set():
            try:
                # A list first, so that a kind with no objects counts as known; the watch then replays
                # what exists as ADDED (harmless) and every change after.
                items = kc.list(kind.res, selector=kind.selector)
                with self._lock:
                    self.state[kind.key] = {_key(o): o for o in items if kind.holds(o)}
                    self.requests += 2
                    self._synced.add(kind.key)
                    self._evaluate(time.time())
                    self._lock.notify_all()
                for event in kc.watch(kind.res, kind.selector, timeout=WATCH_SECONDS):
                    self._apply(kind, event)
                    if self._stop.is_set():
                        return
            except Exception as e:  # the kind not installed yet, the server restarting (or stopped, at the end)
                if not self._stop.is_set():
                    log(f"watch {kind.key}: {e}")
                self._stop.wait(1)

    def _apply(self, kind: Kind, event: Obj) -> None:
        now = time.time()
        obj = event.get("object") or {}
        name = _key(obj)
        with self._lock:
            if event.get("type") == "DELETED" or not kind.holds(obj):
                self.state[kind.key].pop(name, None)
            elif event.get("type") in ("ADDED", "MODIFIED"):
                self.state[kind.key][name] = obj
            self._evaluate(now)
            self._lock.notify_all()

    def _evaluate(self, now: float) -> None:
        for name, (predicate, reached) in self._milestones.items():
            if reached is None and predicate(self.state):
                self._milestones[name] = (predicate, now)

    def expect(self, name: str, predicate: Predicate) -> None:
        """From now on, record the first time `predicate` holds (now, if it already does)."""
        with self._lock:
            self._milestones[name] = (predicate, None)
            self._evaluate(time.time())

    def reached(self, name: str) -> float | None:
        with self._lock:
            return self._milestones[name][1]

    def wait(self, names: list[str], timeout: float) -> dict[str, float]:
        """Block until every named milestone is reached; their wall-clock times."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                times = {n: self._milestones[n][1] for n in names}
                if all(t is not None for t in times.values()):
                    return {n: t for n, t in times.items() if t is not None}
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [n for n, t in times.items() if t is None]
                    raise TimeoutError(f"not reached within {timeout:.0f}s: {', '.join(missing)}")
                self._lock.wait(min(left, 1.0))

    def snapshot(self) -> State:
        with self._lock:
            return {key: dict(objs) for key, objs in self.state.items()}


def _key(obj: Obj) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace', '')}/{md.get('name', '')}"


def condition(obj: Obj, type_: str) -> str | None:
    """The status of condition `type_` (metav1-style or Liqo's), None when absent."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            status = cond.get("status")
            return str(status) if status is not None else None
    return None


def any_with(key: str, type_: str, status: str) -> Predicate:
    """Some object of that kind has condition `type_` = `status`."""
    return lambda state: any(condition(o, type_) == status for o in state.get(key, {}).values())


def all_gone(keys: list[str]) -> Predicate:
    return lambda state: all(not state.get(key) for key in keys)
