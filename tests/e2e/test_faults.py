"""A pass failing at any client call it makes, against the Liqo stand-in: the fault points of the harness's wrapper
(tests/faultpoints.py) raise an arbitrary exception (RuntimeError), once, at that call. The status must name the
failure (Ready=False with reason InternalError; the message of Ready or of the stage's condition naming the
exception; a Warning Event as the peering turns to error; the errors metric), a later pass must recover to Ready by
itself, and on each cluster the count of objects per kind must change as in a peering with no fault: nothing
duplicated or left behind.

The calls are those of a clean peering's passes until Ready, recorded first (45 against the stand-in: gets, lists,
applies, creates and patches on both clusters); testenv.killpoints' reference cycle gives the counts. Posting an
Event is left out: it is best effort, and a failure there fails nothing. The calls are armed a few at a time: each
pass of a peering fails at the next armed call it reaches, until one gets to Ready. A call that did not fire, or
whose report another fault hid, is then armed alone.
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
from testenv.operator_support import GROUP, PLURAL, SECRET, VERSION, PeeringCase, wait_for
from testenv.trigger import Event, When

pytestmark = pytest.mark.faults  # tier solo: clusters of its own (testenv.pytest_plugin.tier_of)

STAGE_CONDITIONS = {
    "networking": "NetworkReady",
    "authentication": "AuthenticationReady",
    "offloading": "OffloadingReady",
}
SPEC = {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m"}
# Calls armed per peering: its passes back off 1, 2, 4 s between failures (INTERNAL_RETRY_SECONDS, doubled).
BATCH = 3


FAULT_MESSAGE = "fault injected at "  # tests/faultpoints.py raises RuntimeError(f"{FAULT_MESSAGE}{call}")


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

    def arm(self, calls: list[str]) -> None:
        (self.dir / "raised").unlink(missing_ok=True)
        armed = self.dir / "raise.armed"
        armed.write_text("".join(call + "\n" for call in calls))
        armed.rename(self.dir / "raise")  # whole, never half written

    def disarm(self) -> list[str]:
        """The armed calls that raised (the operator took their lines), in the order they did."""
        (self.dir / "raise").unlink(missing_ok=True)
        try:
            return (self.dir / "raised").read_text().splitlines()
        except FileNotFoundError:
            return []


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


def _naming(status: dict[str, Any], call: str) -> list[str]:
    """The conditions that report the fault at ``call`` (reason InternalError, the call in the message)."""
    injected = f"fault injected at {call}"
    return [
        c["type"]
        for c in status.get("conditions") or []
        if c.get("reason") == "InternalError" and injected in (c.get("message") or "")
    ]


def _check_reported(call: str, status: dict[str, Any]) -> None:
    """Ready is False with InternalError, and the status names the fault: in Ready, or in the condition of
    the stage it hit when another fault of the same peering is in Ready (the stages run side by side)."""
    conds = {c["type"]: c for c in status["conditions"]}
    ready = conds["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "InternalError"), (call, ready)
    named = set(_naming(status, call)) & {"Ready", *STAGE_CONDITIONS.values()}
    assert named, (call, conds)
    assert all(conds[t]["status"] == "False" and "RuntimeError" in conds[t]["message"] for t in named), (call, conds)


def _check_event(calls: list[str], case: PeeringCase) -> None:
    """A Warning Event names a fault: one is posted as the peering turns to error with Ready's message; the
    later faults of the same peering (the same reason) are in the status only."""
    events = case.peerings.events(case.namespace, NAME)
    injected = [f"fault injected at {call}" for call in calls]
    assert any(
        e.type == "Warning" and e.reason == "InternalError" and any(i in (e.message or "") for i in injected)
        for e in events
    ), calls


def test_a_pass_failing_at_any_client_call_reports_it_and_recovers(case: PeeringCase) -> None:
    env, ns, peerings = case.env, case.namespace, case.peerings
    assert env.operator.faults_dir is not None
    faults = Faults(env.operator.faults_dir)
    # The operator logs the traceback of each fault it meets (an unexpected error): provoked here, and allowed
    # (testenv.crashwatch); any other traceback still fails the test.
    env.operator.watch.allow(f"RuntimeError: {FAULT_MESSAGE}")
    apis: dict[str, k8s.ApiClient] = {"consumer": peerings.api, "provider": env.provider_api}
    cycle = Cycle(env, ns, apis, SPEC)
    expected = cycle.reference({})

    before = inventory.counts(apis)
    faults.record()
    peerings.create(ns, NAME, SPEC)
    peerings.wait_status(ns, NAME, "ready")
    calls = faults.recorded()
    peerings.delete(ns, NAME)
    peerings.wait_gone(ns, NAME)
    # Liqo's garbage collection removes what is left after the peering (the Identity's kubeconfig Secret) a
    # little later: the first batch counts its changes from clusters without it.
    reaches(apis, before, expected[1], "the objects once the recorded peering is unpeered")
    assert any(c.startswith("provider ") for c in calls) and any(" apply " in c for c in calls), calls

    # A few calls armed at once: each pass fails at the next of them, so a peering proves several. A call no
    # pass of its batch reached, or whose report another fault hid (a failed status write loses the pass's
    # report), gets a peering of its own.
    batches = [calls[i : i + BATCH] for i in range(0, len(calls), BATCH)]
    unreached: list[str] = []
    while batches:
        batch = batches.pop(0)
        fired, proven = _peer_with_faults(case, faults, apis, expected, batch)
        if len(batch) > 1:
            batches.extend([call] for call in batch if call not in proven)
        elif not fired:
            unreached.extend(batch)
    print(f"\n{len(calls) - len(unreached)} of {len(calls)} calls failed once and recovered")
    assert not unreached, f"calls a fresh peering no longer made: {unreached}"


def _peer_with_faults(
    case: PeeringCase, faults: Faults, apis: dict[str, k8s.ApiClient], expected: Any, batch: list[str]
) -> tuple[list[str], list[str]]:
    """A peering made with ``batch`` armed, then unpeered: the faults that fired are reported and recovered
    from, and the objects are as with no fault. Returns the calls that fired and those whose report was seen
    (alone, a call that fired must be reported)."""
    ns, peerings = case.namespace, case.peerings
    before = inventory.counts(apis)
    errors_before = _internal_errors(case.env.operator.metrics_port)
    reported: dict[str, dict[str, Any]] = {}

    def failed(e: Event) -> bool:
        if e["type"] != "DELETED":
            for call in batch:
                if _naming(e["object"].get("status") or {}, call):
                    reported.setdefault(call, e["object"])
        return False  # collects until the watch stops

    custom = k8s.CustomObjectsApi(peerings.api)
    listed: Any = custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    since = listed["metadata"]["resourceVersion"]  # every change after it is seen, however late the watch starts
    watched = (custom.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL)
    with When(failed, lambda: None, *watched, resource_version=since):
        faults.arm(batch)
        peerings.create(ns, NAME, SPEC)
        peerings.wait_status(ns, NAME, "ready")
        fired = faults.disarm()
        # Each failure was in the status before Ready; the watch may deliver it a little later.
        try:
            wait_for(
                f"the failures at {fired} in the status",
                lambda: set(fired) <= set(reported),
                timeout=30 if len(batch) == 1 else 5,
            )
        except AssertionError as exc:
            if len(batch) == 1:
                raise AssertionError(f"{exc}; now: {peerings.status(ns, NAME)}") from None
    proven = [call for call in fired if call in reported]
    for call in proven:
        _check_reported(call, reported[call]["status"])
    if proven:
        _check_event(proven, case)
    # Counted per failed pass: two faults of one pass (in stages running side by side) count once.
    assert not fired or _internal_errors(case.env.operator.metrics_port) > errors_before, fired
    reaches(apis, before, expected[0], f"the objects once Ready after faults at {fired}")
    peerings.delete(ns, NAME)
    peerings.wait_gone(ns, NAME)
    reaches(apis, before, expected[1], f"the objects once unpeered after faults at {fired}")
    return fired, proven
