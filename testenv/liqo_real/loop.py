"""A background thread that calls ``sync()`` until stopped: the shape of every piece of liqo_real."""

from __future__ import annotations

import threading
import time
from typing import Self

from testenv import kube as k
from testenv.kube import Kube

COALESCE = 0.05  # one pass for the events of one write (a Deployment and its Pods change together)
RETRY = 1.0  # after a failed pass


class SyncLoop:
    """Calls ``sync()`` in a daemon thread whenever what ``watched()`` names changes, when a pass asked for
    another (``due_in``), and every ``interval`` seconds as a safety net; a failing pass is recorded in
    ``errors`` (the last 50) and the loop goes on, as a controller would."""

    name: str
    interval: float

    def __init__(self, name: str, interval: float) -> None:
        self.name = name
        self.interval = interval
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._due: float | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        for kube, res, selector in self.watched():
            threading.Thread(
                target=k.follow,
                args=(kube, res, selector, self.wake, self._stop),
                name=f"{type(self).__name__}-{self.name}-{res.plural}",
                daemon=True,
            ).start()
        self._thread = threading.Thread(target=self._loop, name=f"{type(self).__name__}-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=30)

    def watched(self) -> list[tuple[Kube, k.Res, str | None]]:
        """The kinds (client, kind, label selector) whose changes call for a pass."""
        return []

    def wake(self) -> None:
        self._wake.set()

    def due_in(self, seconds: float) -> None:
        """Ask for a pass in ``seconds`` (something a pass waits for that no watch sees)."""
        at = time.monotonic() + max(seconds, 0.0)
        self._due = at if self._due is None else min(self._due, at)

    def sync(self) -> None:
        raise NotImplementedError

    def record_error(self, message: str) -> None:
        self.errors = [*self.errors[-49:], message]

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # what changes during the pass wakes the next one
            self._due = None
            try:
                self.sync()
            except Exception as e:  # keep going; report in errors, and try again soon
                self.record_error(f"{type(e).__name__}: {e}")
                self.due_in(RETRY)
            timeout = self.interval if self._due is None else min(self.interval, self._due - time.monotonic())
            self._wake.wait(max(timeout, 0.0))
            self._stop.wait(COALESCE)
