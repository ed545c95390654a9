"""A background thread that calls ``sync()`` until stopped: the shape of every piece of liqo_real."""

from __future__ import annotations

import threading
from typing import Self


class SyncLoop:
    """Calls ``sync()`` every ``interval`` seconds in a daemon thread; a failing pass is recorded in
    ``errors`` (the last 50) and the loop goes on, as a controller would."""

    name: str
    interval: float

    def __init__(self, name: str, interval: float) -> None:
        self.name = name
        self.interval = interval
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._loop, name=f"{type(self).__name__}-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)

    def sync(self) -> None:
        raise NotImplementedError

    def record_error(self, message: str) -> None:
        self.errors = [*self.errors[-49:], message]

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as e:  # keep going; report in errors
                self.record_error(f"{type(e).__name__}: {e}")
            self._stop.wait(self.interval)
