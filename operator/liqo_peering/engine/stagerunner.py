"""The stages of one reconcile pass, the independent ones side by side.

Authentication (each direction's) runs in the pool of sub-calls (engine/together.py) while networking runs on
the pass's own thread: liqoctl runs them one after the other, and no peering waits for another one's. Each
stage has a boundary of its own: whatever it raises is its result, so that no stage goes missing from the
status; only the operator's own cluster being unavailable leaves the pass, as the runner puts it off.

A job that waits runs again, on the same thread, each time the peering is woken while networking still runs:
Liqo answers a pass's first writes (the nonce, the signature) within tens of ms, and networking's writes of
the same pass often take longer; the next pass would only begin once they end.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import wait
from contextlib import AbstractContextManager
from functools import partial

import structlog

from liqo_peering.engine import authentication, networking, offloading, reverse
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.engine.together import start
from liqo_peering.engine.wakeups import Listener
from liqo_peering.errors import InternalError, PeeringError, as_peering_error, own_cluster_unavailable
from liqo_peering.health import TrackedPool
from liqo_peering.redact import redact
from liqo_peering.stages import REVERSE_STAGES, StageResult

log = structlog.get_logger("liqo_peering")
Guard = Callable[[str, Callable[[], StageResult]], StageResult]
Listen = Callable[[], AbstractContextManager[Listener]]  # the peering's wake-ups while the block runs
MAX_RUNS = 5  # runs of a waiting job in one pass: the writes it makes wake the peering too


def run_stages(
    run: PeeringRun, calls: TrackedPool | None, removing_reverse: bool = False, listen: Listen | None = None
) -> dict[str, StageResult]:
    """The stages of this pass: the forward ones, and the reverse direction's when spec.bidirectional is
    true (``removing_reverse``: it was, and what it made may remain). ``calls``: the pool of sub-calls
    (None: the stages run one after another); ``listen``: the peering's wake-ups (None: no job runs again)."""
    spec = run.spec
    rev = reverse.run_of(run) if spec.bidirectional else None
    outage: list[PeeringError] = []

    def guarded(stage: str, fn: Callable[[], StageResult]) -> StageResult:
        """The stage's boundary: whatever it raises is its result, so that no stage goes missing."""
        try:
            return fn()
        except Exception as raised:
            exc = as_peering_error(raised, f"the {stage} stage")
            if own_cluster_unavailable(exc):
                outage.append(exc)  # raised below: the authentication stage runs in another thread
            elif isinstance(exc, InternalError):
                log.error("stage failed", stage=stage, exc_info=raised)
            # Its message reaches the stage condition as it is: scrub it like the Ready one.
            return StageResult.failed(stage, exc, redact(exc.message))

    proxy = spec.authentication.proxy_url
    in_band = spec.authentication.in_band
    api_server = spec.authentication.api_server
    results: dict[str, StageResult] = {}
    auth_jobs: dict[str, Callable[[], StageResult]] = {
        "authentication": (
            (lambda: authentication.reconcile_in_band(run, proxy, api_server))
            if in_band
            else (lambda: authentication.reconcile(run, proxy, api_server))
        )
    }
    if rev is not None:
        auth_jobs["reverse-authentication"] = lambda: reverse.authenticate(rev, in_band)
    if in_band:
        # In-band authentication reaches the other cluster through the tunnel: networking first.
        results["networking"] = guarded("networking", lambda: networking.reconcile(run))
        if results["networking"].state == "ready":
            results.update(side_by_side(calls, guarded, auth_jobs))
    else:
        results.update(
            side_by_side(
                calls, guarded, auth_jobs, main=("networking", lambda: networking.reconcile(run)), listen=listen
            )
        )
    if results.get("authentication") and results["authentication"].state == "ready" and not outage:
        results["offloading"] = guarded("offloading", lambda: offloading.reconcile(run))
    if rev is not None and not outage:
        back = results.get("reverse-authentication")
        if back is not None and back.state == "ready":
            results["reverse-offloading"] = guarded("reverse-offloading", lambda: reverse.offload(rev))
    elif removing_reverse and not outage:
        # One unpeering of the reverse direction: its result (still removing, gone, or an error) is both
        # reverse stages'.
        gone = guarded(REVERSE_STAGES[0], lambda: reverse.remove(run, calls)[REVERSE_STAGES[0]])
        results.update({stage: dataclasses.replace(gone, stage=stage) for stage in REVERSE_STAGES})
    if outage:
        raise outage[0]
    return results


def side_by_side(
    calls: TrackedPool | None,
    guarded: Guard,
    jobs: dict[str, Callable[[], StageResult]],
    main: tuple[str, Callable[[], StageResult]] | None = None,
    listen: Listen | None = None,
) -> dict[str, StageResult]:
    """Each job in the pool of sub-calls (and ``main`` on this thread meanwhile); their results by stage.
    With ``listen`` and ``main``, a job that waits runs again each time the peering is woken before ``main``
    ends (at most MAX_RUNS times in all)."""
    main_ended = threading.Event()
    listeners: list[Listener] = []
    lock = threading.Lock()
    here = threading.get_ident()

    def again(stage: str, fn: Callable[[], StageResult], listener: Listener) -> StageResult:
        with lock:
            listeners.append(listener)
        runs = 0
        while True:
            listener.event.clear()  # a wake-up during the run below makes another at once
            result = guarded(stage, fn)
            runs += 1
            if result.state != "progressing" or runs >= MAX_RUNS or main_ended.is_set():
                return result
            listener.event.wait()  # a wake-up, or the main stage's end (which sets it too)
            if main_ended.is_set():
                return result
            log.debug("stage again", stage=stage, woken_by=sorted(set(listener.causes)))

    def job(stage: str, fn: Callable[[], StageResult]) -> StageResult:
        if listen is None or main is None or threading.get_ident() == here:
            return guarded(stage, fn)  # run here, before the main stage: nothing would end its wait
        with listen() as listener:
            return again(stage, fn, listener)

    futures = {stage: start(calls, partial(job, stage, fn)) for stage, fn in jobs.items()}
    results: dict[str, StageResult] = {}
    try:
        if main is not None:
            results[main[0]] = guarded(*main)
    finally:
        main_ended.set()
        with lock:
            for listener in listeners:
                listener.event.set()
        # Whatever the main stage does, no job outlives the pass (nor the peering's lock).
        wait(futures.values())
    results.update({stage: future.result() for stage, future in futures.items()})
    return results
