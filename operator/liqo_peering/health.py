"""Liveness, readiness and start-up, as the probes ask them (GET /livez, /readyz; /healthz is /livez).

* live: the event loop ticked (the heartbeat task kopf's startup handler starts) and no tracked thread
  pool has work waiting without finishing any of it, each within ``stall_seconds``. Not live before the
  first tick: the startupProbe covers start-up, and the livenessProbe only begins once it passed.
* ready: kopf finished starting (its startup handlers ran and its watches begin), and every readiness
  check (the operator's informers on this cluster) reports nothing unsynced.

Served from a thread of its own, so that a stuck event loop cannot also stop the probe that reports it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Clock = Callable[[], float]
TICK_SECONDS = 1.0
DEFAULT_STALL_SECONDS = 300.0


class TrackedPool(ThreadPoolExecutor):
    """A thread pool that knows whether it makes progress: work waiting or running, and nothing of it
    finished for a while, is a stalled pool (every worker stuck, or a deadlock)."""

    def __init__(self, max_workers: int, thread_name_prefix: str, clock: Clock = time.monotonic) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self.name = thread_name_prefix
        self._clock = clock
        self._count_lock = threading.Lock()
        self._pending = 0
        self._progress = clock()  # the last completion, or when work arrived at an idle pool
        self._worker = threading.local()  # set on the pool's own threads while they run its work

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._count_lock:
            if self._pending == 0:
                self._progress = self._clock()
            self._pending += 1
        future = super().submit(self._run, fn, *args, **kwargs)
        future.add_done_callback(self._done)
        return future

    def _run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self._worker.active = True
        try:
            return fn(*args, **kwargs)
        finally:
            self._worker.active = False

    def in_worker(self) -> bool:
        """Whether this thread is one of the pool's, running its work: what it submits then could wait for a
        thread that it holds itself."""
        return bool(getattr(self._worker, "active", False))

    def _done(self, _: Future[Any]) -> None:
        with self._count_lock:
            self._pending -= 1
            self._progress = self._clock()

    def stalled_for(self) -> float:
        """Seconds the pool has had work without finishing any; 0 when idle."""
        with self._count_lock:
            return 0.0 if self._pending == 0 else max(self._clock() - self._progress, 0.0)


class Health:
    def __init__(self, stall_seconds: float = DEFAULT_STALL_SECONDS, clock: Clock = time.monotonic) -> None:
        self.stall_seconds = stall_seconds
        self.clock = clock
        self.started = threading.Event()  # kopf.run's ready_flag: raised once its startup handlers ran
        self.pools: list[TrackedPool] = []
        self.readiness: list[Callable[[], list[str]]] = []  # each names what is not ready yet
        self._tick: float | None = None

    def tick(self) -> None:
        self._tick = self.clock()

    async def beat(self) -> None:
        """The event loop's heartbeat: runs on it until cancelled."""
        while True:
            self.tick()
            await asyncio.sleep(TICK_SECONDS)

    def liveness(self) -> list[str]:
        """What is stuck; empty when live."""
        if self._tick is None:
            return ["the event loop has not started"]
        problems = []
        quiet = self.clock() - self._tick
        if quiet > self.stall_seconds:
            problems.append(f"the event loop has not run for {quiet:.0f} s")
        for pool in self.pools:
            stalled = pool.stalled_for()
            if stalled > self.stall_seconds:
                problems.append(f"thread pool {pool.name} has finished no work for {stalled:.0f} s")
        return problems

    def readiness_problems(self) -> list[str]:
        """What has not started or synced; empty when ready."""
        if not self.started.is_set():
            return ["kopf has not started"]
        return [problem for check in self.readiness for problem in check()]

    def serve(self, port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:  # probed by the kubelet
        server = ThreadingHTTPServer((host, port), _handler(self))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True, name="health").start()
        return server


def _handler(health: Health) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's naming
            checks = {"/livez": health.liveness, "/healthz": health.liveness, "/readyz": health.readiness_problems}
            check = checks.get(self.path.split("?", 1)[0])
            if check is None:
                self.send_error(404)
                return
            problems = check()
            body = ("\n".join(problems) if problems else "ok").encode() + b"\n"
            try:
                self.send_response(503 if problems else 200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the prober gave up (its timeout) and closed: nobody is left to answer
                return

        def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: no access log
            return

    return Handler
