"""testenv.kube.follow: watches that resume where they ended, and the passes of liqo_real's loops they wake."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from testenv import kube as k
from testenv.liqo_real.loop import SyncLoop


class ScriptedKube:
    """A Kube whose watches play the scripted events, one list per watch, and record where each started."""

    def __init__(self, watches: list[list[dict[str, Any]]], stopped: threading.Event) -> None:
        self.watches = watches
        self.stopped = stopped
        self.started_at: list[str | None] = []

    def watch(self, res: k.Res, selector: str | None = None, timeout: int = 30, **kw: Any) -> Iterator[dict[str, Any]]:
        self.started_at.append(kw.get("resource_version"))
        if not self.watches:
            self.stopped.set()
            return iter(())
        events = self.watches.pop(0)
        if events == [{"raise": True}]:
            raise k.KubeError(500, "", "watch")
        return iter(events)


def event(kind: str, version: str) -> dict[str, Any]:
    return {"type": kind, "object": {"metadata": {"resourceVersion": version}}}


def test_a_renewed_watch_resumes_where_the_last_ended_and_only_changes_count() -> None:
    stopped = threading.Event()
    kube = ScriptedKube(
        [
            [event("ADDED", "3"), event("ADDED", "4")],  # afresh: what exists
            [event("BOOKMARK", "9")],  # nothing changed: the point to resume from moves on
            [event("MODIFIED", "10")],
        ],
        stopped,
    )
    changes: list[int] = []
    k.follow(kube, k.POD, None, lambda: changes.append(1), stopped)  # type: ignore[arg-type]
    assert kube.started_at == [None, "4", "9", "10"]
    assert len(changes) == 3  # two objects at the start, one change; no bookmark


def test_a_watch_too_old_to_resume_or_failed_starts_afresh() -> None:
    stopped = threading.Event()
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410}}
    kube = ScriptedKube([[event("ADDED", "3")], [gone], [{"raise": True}], [event("ADDED", "7")]], stopped)
    changes: list[int] = []
    started = time.monotonic()
    k.follow(kube, k.POD, None, lambda: changes.append(1), stopped)  # type: ignore[arg-type]
    assert kube.started_at == [None, "3", None, None, "7"]
    assert len(changes) == 2
    assert time.monotonic() - started >= 2  # a failed watch is retried after a pause


class Counting(SyncLoop):
    def __init__(self, interval: float) -> None:
        super().__init__("test", interval)
        self.passes = 0
        self.ask: float | None = None

    def sync(self) -> None:
        self.passes += 1
        if self.ask is not None:
            self.due_in(self.ask)
            self.ask = None


def wait_passes(loop: Counting, n: int, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while loop.passes < n:
        assert time.monotonic() < deadline, f"{loop.passes} passes, wanted {n}"
        time.sleep(0.01)


def test_a_loop_passes_when_woken_and_when_a_pass_asked_not_on_a_timer() -> None:
    loop = Counting(interval=60)
    loop.ask = 0.2  # the first pass asks for another in 0.2 s
    loop.start()
    try:
        wait_passes(loop, 2)
        time.sleep(0.3)
        assert loop.passes == 2  # nothing more until woken
        loop.wake()
        wait_passes(loop, 3)
    finally:
        loop.stop()
