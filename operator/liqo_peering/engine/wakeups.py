"""What wakes an object's loop in the runner (engine/runner.py): each object's trigger, set from the watch
hub's threads through the event loop, and what woke it since its last pass. A pass's own threads may listen
for the object's wake-ups while it runs (engine/stagerunner.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Any


class Listener:
    """An object's wake-ups while a pass of it runs: ``event`` is set by each (and by whoever ends the
    listening early); ``causes``, what woke it, in order."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.causes: list[str] = []

    def heard(self, cause: str) -> None:
        self.causes.append(cause)
        self.event.set()


class Wakeups:
    """Each object's trigger and what woke it; the watch hub's callback, from any thread."""

    def __init__(self) -> None:
        self._triggers: dict[Hashable, asyncio.Event] = {}
        self._causes: dict[Hashable, set[str]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: dict[Hashable, list[Listener]] = {}
        self._guard = threading.Lock()  # the listeners: added and removed by pass threads

    def __call__(self, key: Hashable, cause: str) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.wake, key, cause)

    def later(self, key: Hashable, cause: str, delay: float) -> None:
        """From any thread: wake the object in ``delay`` seconds, by a timer of the event loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.call_later, delay, self.wake, key, cause)

    def wake(self, key: Hashable, cause: str) -> None:
        """On the event loop: wake the object's loop, if it runs."""
        trigger = self._triggers.get(key)
        if trigger is not None:
            self._causes.setdefault(key, set()).add(cause)
            trigger.set()
        with self._guard:
            listeners = list(self._listeners.get(key, ()))
        for listener in listeners:
            listener.heard(cause)

    @contextmanager
    def listening(self, key: Hashable) -> Iterator[Listener]:
        """From any thread: the object's wake-ups until the block ends (its pass still gets them all)."""
        listener = Listener()
        with self._guard:
            self._listeners.setdefault(key, []).append(listener)
        try:
            yield listener
        finally:
            with self._guard:
                kept = [other for other in self._listeners.get(key, ()) if other is not listener]
                if kept:
                    self._listeners[key] = kept
                else:
                    self._listeners.pop(key, None)

    def open(self, key: Hashable) -> asyncio.Event:
        self._loop = asyncio.get_running_loop()
        trigger = self._triggers[key] = asyncio.Event()
        self._causes[key] = set()
        return trigger

    def take(self, key: Hashable) -> frozenset[str]:
        """What woke the object since the last take, and forget it."""
        causes = self._causes.get(key)
        if causes is None:
            return frozenset()
        taken = frozenset(causes)
        causes.clear()
        return taken

    def pending(self, key: Hashable) -> frozenset[str]:
        return frozenset(self._causes.get(key) or ())

    def due(self, key: Hashable) -> bool:
        """Whether the object was woken since its pass began (from any thread: a set's size is read at once)."""
        return bool(self._causes.get(key))

    def close(self, key: Hashable, trigger: asyncio.Event) -> bool:
        """Unless a new object of the same name already runs its own loop; whether it was this one's."""
        if self._triggers.get(key) is not trigger:
            return False
        self._triggers.pop(key, None)
        self._causes.pop(key, None)
        return True


async def wait(trigger: asyncio.Event, stopped: Any, timeout: float) -> None:
    """Until the trigger is set, the operator stops, or ``timeout`` seconds."""
    waiter = asyncio.ensure_future(trigger.wait())
    stopper = asyncio.ensure_future(stopped.wait())
    try:
        await asyncio.wait({waiter, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        stopper.cancel()


class _Never:
    """A ``stopped`` flag that is never set."""

    async def wait(self) -> None:
        await asyncio.Event().wait()


NEVER = _Never()  # for a wait that only its trigger or its timeout ends
