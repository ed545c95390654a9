"""The operator SIGKILLed at every step (issue "Survives", point 1), against the Liqo stand-in.

Each case kills the operator the moment a given object appears (or a condition turns True, or a deletion
starts), seen through a watch started before the peering (testenv.trigger), then starts it again. The
peering must complete (or the unpeering finish), and on each cluster the count of objects per kind must
change exactly as in a run with no kill: nothing missing, duplicated or left over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s

from testenv import inventory
from testenv.operator_support import GROUP, PLURAL, SECRET, VERSION, PeeringCase, wait_for
from testenv.trigger import Event, When, condition_true, deleting, named

NAME = "provider"
Counts = dict[str, dict[str, int]]


def spec() -> dict[str, Any]:
    return {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m"}


@dataclass(frozen=True)
class KillPoint:
    side: str
    group: str
    version: str
    plural: str
    # (consumer cluster ID, provider cluster ID) -> the predicate on watch events
    predicate: Callable[[str, str], Callable[[Event], bool]]
    teardown: bool = False


LIQO = "v1beta1"
POINTS = {
    # During each stage (its first object) and at its end (its condition turning True), and during teardown:
    # six kills, each about 8 s of the suite. (The GatewayServer and the Tenant's deletion were kill points
    # too; they passed, and were dropped to keep the warm CI run under 25 minutes.)
    # networking
    "networking-first-object": KillPoint(
        "consumer", "networking.liqo.io", LIQO, "configurations", lambda c, p: named(p)
    ),
    "networking-ready": KillPoint(
        "consumer", GROUP, VERSION, PLURAL, lambda c, p: condition_true(NAME, "NetworkReady")
    ),
    # authentication
    "authentication-tenant": KillPoint("provider", "authentication.liqo.io", LIQO, "tenants", lambda c, p: named(c)),
    "authentication-ready": KillPoint(
        "consumer", GROUP, VERSION, PLURAL, lambda c, p: condition_true(NAME, "AuthenticationReady")
    ),
    # offloading
    "offloading-resource-slice": KillPoint(
        "consumer", "authentication.liqo.io", LIQO, "resourceslices", lambda c, p: named(p)
    ),
    # teardown
    "teardown-resource-slice": KillPoint(
        "consumer", "authentication.liqo.io", LIQO, "resourceslices", lambda c, p: deleting(p), teardown=True
    ),
}

_no_kill: dict[str, tuple[Counts, Counts]] = {}


def _apis(case: PeeringCase) -> dict[str, k8s.ApiClient]:
    return {"consumer": case.peerings.api, "provider": case.env.provider_api}


def _delta(after: Counts, before: Counts) -> Counts:
    return {
        side: {k: n - before[side].get(k, 0) for k, n in after[side].items() if n != before[side].get(k, 0)}
        | {k: -n for k, n in before[side].items() if k not in after[side]}
        for side in after
    }


def _settled(apis: dict[str, k8s.ApiClient], before: Counts) -> Counts:
    """The change since `before` once it holds for three reads a second apart: the reference run's end state
    (Liqo's controllers and the garbage collector finish after the LiqoPeering is Ready, or gone)."""
    reads: list[Counts] = []

    def probe() -> Counts | None:
        reads.append(_delta(inventory.counts(apis), before))
        return reads[-1] if len(reads) >= 3 and reads[-1] == reads[-2] == reads[-3] else None

    return wait_for("the objects to settle", probe, timeout=60, interval=1)


def _reaches(apis: dict[str, k8s.ApiClient], before: Counts, expected: Counts, what: str) -> None:
    last: list[Counts] = []

    def probe() -> bool:
        last.append(_delta(inventory.counts(apis), before))
        return last[-1] == expected

    try:
        wait_for(what, probe, timeout=30, interval=0.5)
    except AssertionError:
        raise AssertionError(f"{what}: {last[-1]}\nwith no kill: {expected}") from None


def _cycle(case: PeeringCase, point: KillPoint | None, expected: tuple[Counts, Counts] | None) -> tuple[Counts, Counts]:
    """Peer and unpeer once, killing the operator at `point`. Without `expected` (the reference run), returns
    the change in objects once Ready and once unpeered; with it, asserts the same changes come about."""
    env, ns, apis = case.env, case.namespace, _apis(case)
    before = inventory.counts(apis)

    def watching(p: KillPoint) -> When:
        custom = k8s.CustomObjectsApi(apis[p.side])
        predicate = p.predicate(env.consumer_id, env.provider_id)
        return When(predicate, env.operator.kill, custom.list_cluster_custom_object, p.group, p.version, p.plural)

    def settle(phase: int, what: str) -> Counts:
        if expected is None:
            return _settled(apis, before)
        _reaches(apis, before, expected[phase], what)
        return expected[phase]

    if point is not None and not point.teardown:
        with watching(point) as when:
            case.peerings.create(ns, NAME, spec())
            when.wait(timeout=90)
            env.operator.start()
    else:
        case.peerings.create(ns, NAME, spec())
    case.peerings.wait_status(ns, NAME, "ready", timeout=120)
    ready = settle(0, "the objects once Ready")
    if point is not None and point.teardown:
        with watching(point) as when:
            case.peerings.delete(ns, NAME)
            when.wait(timeout=90)
            env.operator.start()
    else:
        case.peerings.delete(ns, NAME)
    case.peerings.wait_gone(ns, NAME, timeout=120)
    return ready, settle(1, "the objects once unpeered")


def _expected(case: PeeringCase) -> tuple[Counts, Counts]:
    if "counts" not in _no_kill:
        # The first peering on these clusters may leave what every later one re-uses (Liqo keeps tenant
        # namespaces and the ForeignCluster): the reference is the second run with no kill.
        _cycle(case, None, None)
        _no_kill["counts"] = _cycle(case, None, None)
    return _no_kill["counts"]


@pytest.mark.parametrize("where", list(POINTS))
def test_killed_at(case: PeeringCase, where: str) -> None:
    """Killed at `where`, restarted: the peering completes, and unpeers, with nothing duplicated or left.
    (A short name: the case's namespace is made from it, parameter included, cut at 50 characters.)"""
    expected = _expected(case)
    assert expected[0]["consumer"] and expected[0]["provider"], expected  # the reference peering made objects
    assert expected[1] == {"consumer": {}, "provider": {}}, expected  # and left nothing once unpeered
    _cycle(case, POINTS[where], expected)
