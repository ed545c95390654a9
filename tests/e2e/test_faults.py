"""A pass failing at any client call it makes, against the Liqo stand-in: the operator's clients/faults.py
raises an arbitrary exception (RuntimeError), once, at that call. The status must name the failure (Ready=False
with reason InternalError and a message naming the exception; the failing stage's condition too; a Warning
Event; the errors metric), the next pass must recover to Ready by itself, and on each cluster the count of
objects per kind must change as in a peering with no fault: nothing duplicated or left behind.

The calls are those of a clean peering's passes until Ready, recorded first (45 against the stand-in:
gets, lists, applies, creates and patches on both clusters); testenv.killpoints' reference cycle gives the
counts. Posting an Event is left out: it is best effort, and a failure there fails nothing. Each call costs
a peering made and unpeered.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from testenv import inventory
from testenv.killpoints import NAME, Cycle, reaches
from testenv.operator_support import GROUP, PLURAL, SECRET, VERSION, PeeringCase
from testenv.trigger import Event, When

pytestmark = pytest.mark.faults  # tier solo: clusters of its own (testenv.pytest_plugin.tier_of)

STAGE_CONDITIONS = {
    "networking": "NetworkReady",
    "authentication": "AuthenticationReady",
    "offloading": "OffloadingReady",
}
SPEC = {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m"}


class Faults:
    """The operator's fault directory (testenv.operator_support.OperatorProcess.faults_dir)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def record(self) -> None:
        (self.dir / "calls").unlink(missing_ok=True)
        (self.dir / "record").touch()

    def recorded(self) -> list[str]:
        """The distinct calls made since ``record``, in the order first made."""
        (self.dir / "record").unlink()
        calls = (self.dir / "calls").read_text().splitlines()
        return [call for call in dict.fromkeys(calls) if not call.endswith(" events")]

    def arm(self, call: str) -> None:
        (self.dir / "raised").unlink(missing_ok=True)
        armed = self.dir / "raise.new"
        armed.write_text(call)
        armed.rename(self.dir / "raise")  # whole, never half written

    def disarm(self) -> bool:
        """Whether the armed call raised (the operator took the file)."""
        try:
            (self.dir / "raise").unlink()
        except FileNotFoundError:
            return True
        return False


def _internal_errors(port: int) -> float:
    """The errors metric's count of InternalError."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "liqo_peering_reconcile_errors_total" and sample.labels.get("reason") == "InternalError"
    )


def _ready_condition(obj: dict[str, Any]) -> dict[str, Any]:
    conds = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == "Ready"), {})


def _check_reported(call: str, status: dict[str, Any], case: PeeringCase) -> None:
    injected = f"fault injected at {call}"
    conds = {c["type"]: c for c in status["conditions"]}
    ready = conds["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "InternalError"), (call, ready)
    assert "RuntimeError" in ready["message"] and injected in ready["message"], (call, ready)
    step = status["stage"].split(":")[0]
    if step in STAGE_CONDITIONS:  # the fault hit a stage: its condition says so
        cond = conds[STAGE_CONDITIONS[step]]
        assert (cond["status"], cond["reason"]) == ("False", "InternalError") and injected in cond["message"], cond
    events = case.peerings.events(case.namespace, NAME)
    assert any(e.type == "Warning" and e.reason == "InternalError" and injected in (e.message or "") for e in events)


def test_a_pass_failing_at_any_client_call_reports_it_and_recovers(case: PeeringCase) -> None:
    env, ns, peerings = case.env, case.namespace, case.peerings
    assert env.operator.faults_dir is not None
    faults = Faults(env.operator.faults_dir)
    apis: dict[str, k8s.ApiClient] = {"consumer": peerings.api, "provider": env.provider_api}
    cycle = Cycle(env, ns, apis, SPEC)
    expected = cycle.reference({})

    faults.record()
    peerings.create(ns, NAME, SPEC)
    peerings.wait_status(ns, NAME, "ready")
    calls = faults.recorded()
    peerings.delete(ns, NAME)
    peerings.wait_gone(ns, NAME)
    assert any(c.startswith("provider ") for c in calls) and any(" apply " in c for c in calls), calls

    custom = k8s.CustomObjectsApi(peerings.api)
    unreached: list[str] = []
    for call in calls:
        before = inventory.counts(apis)
        errors_before = _internal_errors(env.operator.metrics_port)
        reported: list[dict[str, Any]] = []

        def failed(e: Event, reported: list[dict[str, Any]] = reported) -> bool:
            if e["type"] == "DELETED" or _ready_condition(e["object"]).get("reason") != "InternalError":
                return False
            reported.append(e["object"])
            return True

        listed: Any = custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
        since = listed["metadata"]["resourceVersion"]  # every change after it is seen, however late the watch starts
        watched = (custom.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL)
        with When(failed, lambda: None, *watched, resource_version=since) as when:
            faults.arm(call)
            peerings.create(ns, NAME, SPEC)
            peerings.wait_status(ns, NAME, "ready")
            fired = faults.disarm()
            if fired:
                when.wait(timeout=30)  # the failure was in the status before Ready
        if not fired:
            unreached.append(call)
        else:
            _check_reported(call, reported[0]["status"], case)
            assert _internal_errors(env.operator.metrics_port) > errors_before, call
        reaches(apis, before, expected[0], f"the objects once Ready after a fault at {call}")
        peerings.delete(ns, NAME)
        peerings.wait_gone(ns, NAME)
        reaches(apis, before, expected[1], f"the objects once unpeered after a fault at {call}")
    print(f"\n{len(calls) - len(unreached)} of {len(calls)} calls failed once and recovered")
    assert not unreached, f"calls a fresh peering no longer made: {unreached}"
