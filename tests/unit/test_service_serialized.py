"""PeeringService: a peering's teardown waits for its in-flight reconcile (which kopf cannot cancel: it runs
in a worker thread), so nothing that reconcile applies outlives the unpeering."""

from __future__ import annotations

import threading
from typing import Any, cast

from liqo_peering.engine.service import Outcome, PeeringService


def service() -> PeeringService:
    return PeeringService(cast(Any, None), cast(Any, None), cast(Any, None), cast(Any, None))


def body(namespace: str, name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}}


def test_teardown_waits_for_the_running_reconcile_of_the_same_peering() -> None:
    svc = service()
    order: list[str] = []
    reconciling, release = threading.Event(), threading.Event()

    def slow_reconcile(namespace: str, name: str) -> Outcome:
        reconciling.set()
        release.wait(10)
        order.append("reconcile applied")
        return Outcome()

    def teardown(body: dict[str, Any]) -> list[str]:
        order.append("teardown")
        return []

    svc._reconcile = slow_reconcile  # type: ignore[method-assign]
    svc._teardown = teardown  # type: ignore[method-assign]
    worker = threading.Thread(target=svc.reconcile, args=("ns", "p"))
    worker.start()
    assert reconciling.wait(10)
    unpeer = threading.Thread(target=svc.teardown, args=(body("ns", "p"),))
    unpeer.start()
    unpeer.join(0.3)
    assert unpeer.is_alive() and order == []  # blocked behind the reconcile, not skipped
    release.set()
    worker.join(10)
    unpeer.join(10)
    assert order == ["reconcile applied", "teardown"]


def test_other_peerings_are_not_blocked() -> None:
    svc = service()
    reconciling, release = threading.Event(), threading.Event()

    def slow_reconcile(namespace: str, name: str) -> Outcome:
        reconciling.set()
        release.wait(10)
        return Outcome()

    svc._reconcile = slow_reconcile  # type: ignore[method-assign]
    svc._teardown = lambda body: ["something"]  # type: ignore[method-assign]
    worker = threading.Thread(target=svc.reconcile, args=("ns", "p"))
    worker.start()
    try:
        assert reconciling.wait(10)
        assert svc.teardown(body("ns", "other")) == ["something"]
    finally:
        release.set()
        worker.join(10)
