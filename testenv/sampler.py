"""ReadySampler: a peering must stay Ready throughout a block (an upgrade, a handover).

It reads the peering's status every half second in a thread, from entering the block to leaving it, and fails
closed: a read that raises is a failed sample with its error, not the end of the sampling, and no sample at all
is a failure too. A failure names each sample that was not Ready, with the Ready condition's reason and message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

INTERVAL = 0.5
QUOTED = 5  # failed samples quoted in a failure's message


def ready_condition(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})


def is_ready(status: dict[str, Any]) -> bool:
    """The status's Ready condition is True."""
    return ready_condition(status).get("status") == "True"


class ReadySampler:
    def __init__(self, read_status: Callable[[], dict[str, Any]], what: str = "the peering") -> None:
        self.read_status = read_status
        self.what = what
        self.samples: list[tuple[float, str | None]] = []  # (seconds since the start, None if Ready else why not)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = 0.0

    def _sample(self) -> str | None:
        try:
            cond = ready_condition(self.read_status())
        except Exception as exc:
            return f"status not read: {exc!r}"
        if cond.get("status") == "True":  # is_ready, with the condition kept for the message
            return None
        return f"Ready {cond.get('status', 'missing')} ({cond.get('reason', '')}): {cond.get('message', '')}"

    def _run(self) -> None:
        while not self._done.is_set():
            self.samples.append((time.monotonic() - self._started, self._sample()))
            self._done.wait(INTERVAL)

    def __enter__(self) -> ReadySampler:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        self._done.set()
        self._thread.join()
        if exc_type is None:
            self.check()

    def failures(self) -> list[tuple[float, str]]:
        return [(at, why) for at, why in self.samples if why is not None]

    def check(self) -> None:
        failed = self.failures()
        assert self.samples, f"{self.what}: no sample was taken"
        quoted = "\n".join(f"  +{at:.1f}s {why}" for at, why in failed[:QUOTED])
        assert not failed, f"{self.what} left Ready in {len(failed)} of {len(self.samples)} samples:\n{quoted}"
