"""The operator SIGKILLed at a step of a peering (docs/reliability.md: "operator killed"), for any pair of clusters
(tests/e2e/test_real_liqo.py: Liqo's own); the reference cycle also serves tests/e2e/test_faults.py (the stand-in).

A cycle peers and unpeers once, killing the operator the moment a given object appears (or a condition
turns True, or a deletion starts), seen through a watch started before the peering (testenv.trigger), and
starting it again. The count of objects per kind on each cluster must change exactly as in a cycle with no
kill: nothing missing, duplicated or left over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import client as k8s

from testenv import inventory
from testenv.operator_support import GROUP, PLURAL, VERSION, OperatorProcess, Peerings, wait_for
from testenv.trigger import Event, When, condition_true, deleting, named

NAME = "provider"
Counts = dict[str, dict[str, int]]
LIQO = "v1beta1"


@dataclass(frozen=True)
class KillPoint:
    side: str
    group: str
    version: str
    plural: str
    # (consumer cluster ID, provider cluster ID) -> the predicate on watch events
    predicate: Callable[[str, str], Callable[[Event], bool]]
    teardown: bool = False


POINTS = {
    # During each stage (its first object) and at its end (its condition turning True), and during teardown.
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


class KillEnv(Protocol):
    """What a cycle needs of a test environment (testenv's OperatorEnv, test_real_liqo's RealEnv)."""

    @property
    def operator(self) -> OperatorProcess: ...
    @property
    def peerings(self) -> Peerings: ...
    @property
    def consumer_id(self) -> str: ...
    @property
    def provider_id(self) -> str: ...


def _delta(after: Counts, before: Counts) -> Counts:
    return {
        side: {k: n - before[side].get(k, 0) for k, n in after[side].items() if n != before[side].get(k, 0)}
        | {k: -n for k, n in before[side].items() if k not in after[side]}
        for side in after
    }


def settled(apis: dict[str, k8s.ApiClient], before: Counts) -> Counts:
    """The change since `before` once it holds for three reads a second apart: the reference run's end state
    (Liqo's controllers and the garbage collector finish after the LiqoPeering is Ready, or gone)."""
    reads: list[Counts] = []

    def probe() -> Counts | None:
        reads.append(_delta(inventory.counts(apis), before))
        return reads[-1] if len(reads) >= 3 and reads[-1] == reads[-2] == reads[-3] else None

    return wait_for("the objects to settle", probe, timeout=60, interval=1)


def reaches(apis: dict[str, k8s.ApiClient], before: Counts, expected: Counts, what: str) -> None:
    last: list[Counts] = []

    def probe() -> bool:
        last.append(_delta(inventory.counts(apis), before))
        return last[-1] == expected

    try:
        wait_for(what, probe, timeout=30, interval=0.5)
    except AssertionError:
        raise AssertionError(f"{what}: {last[-1]}\nwith no kill: {expected}") from None


@dataclass
class Cycle:
    """Peer and unpeer `spec` once in `namespace` (LiqoPeering NAME), on the clusters of `apis`."""

    env: KillEnv
    namespace: str
    apis: dict[str, k8s.ApiClient]  # {"consumer": ..., "provider": ...}
    spec: dict[str, Any]
    ready_timeout: float = 120

    def run(self, point: KillPoint | None, expected: tuple[Counts, Counts] | None) -> tuple[Counts, Counts]:
        """Killing the operator at `point`. Without `expected` (the reference run), returns the change in
        objects once Ready and once unpeered; with it, asserts the same changes come about."""
        env, ns, apis, peerings = self.env, self.namespace, self.apis, self.env.peerings
        before = inventory.counts(apis)

        def watching(p: KillPoint) -> When:
            custom = k8s.CustomObjectsApi(apis[p.side])
            predicate = p.predicate(env.consumer_id, env.provider_id)
            return When(predicate, env.operator.kill, custom.list_cluster_custom_object, p.group, p.version, p.plural)

        def settle(phase: int, what: str) -> Counts:
            if expected is None:
                return settled(apis, before)
            reaches(apis, before, expected[phase], what)
            return expected[phase]

        def reached(when: When, what: str) -> None:
            """Until the kill point: it comes before Ready (or before gone), so within the same time."""
            try:
                when.wait(timeout=self.ready_timeout)
            except AssertionError as exc:
                status = peerings.status(ns, NAME) if peerings.get(ns, NAME) is not None else "gone"
                raise AssertionError(f"{point}: {exc} ({what}); the peering's status then: {status}") from None

        if point is not None and not point.teardown:
            with watching(point) as when:
                peerings.create(ns, NAME, self.spec)
                reached(when, "while establishing")
                env.operator.start()
        else:
            peerings.create(ns, NAME, self.spec)
        peerings.wait_status(ns, NAME, "ready", timeout=self.ready_timeout)
        ready = settle(0, "the objects once Ready")
        if point is not None and point.teardown:
            with watching(point) as when:
                # The object exists: wait for the watch to replay it, or a fast deletion (Liqo's own ResourceSlice
                # goes within a second) could be over before the watch starts, and never be seen.
                when.wait_seen(timeout=30)
                peerings.delete(ns, NAME)
                reached(when, "while unpeering")
                env.operator.start()
        else:
            peerings.delete(ns, NAME)
        peerings.wait_gone(ns, NAME, timeout=self.ready_timeout)
        return ready, settle(1, "the objects once unpeered")

    def reference(self, cache: dict[str, tuple[Counts, Counts]]) -> tuple[Counts, Counts]:
        """The changes of a cycle with no kill, made once per pair of clusters (`cache`). The first peering of a
        pair may leave what every later one re-uses (Liqo keeps tenant namespaces and the ForeignCluster): a
        cycle that left something is followed by another, which is the reference."""
        if "counts" not in cache:
            counts = self.run(None, None)
            cache["counts"] = counts if counts[1] == {"consumer": {}, "provider": {}} else self.run(None, None)
        counts = cache["counts"]
        assert counts[0]["consumer"] and counts[0]["provider"], counts  # the reference peering made objects
        assert counts[1] == {"consumer": {}, "provider": {}}, counts  # and left nothing once unpeered
        return counts
