"""spec.commonMetadata end to end, shared by the stand-in and Liqo's chart suites: every object the peering
made on either cluster carries the labels and annotations, and a change of them reaches each of those objects
in place (same uids), removing the keys dropped from the spec."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from testenv.inventory import labelled, metadata_off
from testenv.operator_support import Peerings, wait_for

LABELS = {"example.com/team": "blue", "cost-centre": "cc-1234"}
ANNOTATIONS = {"example.com/owner": "platform-team"}
SPEC = {"labels": LABELS, "annotations": ANNOTATIONS}
# Then: one label changed, one dropped, the annotation dropped and another added.
CHANGE = {
    "labels": {"example.com/team": "green", "cost-centre": None},
    "annotations": {"example.com/owner": None, "example.com/note": "moved"},
}
LABELS_AFTER = {"example.com/team": "green"}
ANNOTATIONS_AFTER = {"example.com/note": "moved"}
DROPPED = ("cost-centre", "example.com/owner")

# What a peering makes on each side in any case (the tenant namespaces only when Liqo had none), with the
# gateway server on the provider (spec.networking.gatewayServer.location: Provider).
MADE = {
    "consumer": {"configurations", "gatewayclients", "publickeies", "identities", "resourceslices"},
    "provider": {"configurations", "gatewayservers", "publickeies", "tenants", "secrets"},
}


def made_kinds(location: str) -> dict[str, set[str]]:
    """MADE for a gateway server on the cluster of ``location``: the gateways change sides with Consumer."""
    if location == "Provider":
        return MADE
    swap = {"gatewayclients": "gatewayservers", "gatewayservers": "gatewayclients"}
    return {side: {swap.get(kind, kind) for kind in kinds} for side, kinds in MADE.items()}


def owner_selector(namespace: str, name: str) -> str:
    return f"peering.liqo-operator.io/peering-namespace={namespace},peering.liqo-operator.io/peering-name={name}"


# Liqo's CRD replicator copies the ResourceSlice to the provider, labels and all: Liqo's object, not the peering's.
REPLICATED = "liqo.io/replicated"


def made(apis: dict[str, k8s.ApiClient], namespace: str, name: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The objects labelled as the peering's on each side, but Liqo's copies of them."""
    return {
        side: {
            key: meta
            for key, meta in labelled(api, owner_selector(namespace, name)).items()
            if REPLICATED not in (meta.get("labels") or {})
        }
        for side, api in apis.items()
    }


def check_then_change(
    apis: dict[str, k8s.ApiClient], peerings: Peerings, namespace: str, name: str, location: str = "Provider"
) -> list[str]:
    """On a Ready peering created with SPEC: each of its objects carries it; after CHANGE, each carries the new
    set and none the dropped keys, with its uid unchanged. Returns the objects checked. ``location``: the
    peering's spec.networking.gatewayServer.location."""
    before = made(apis, namespace, name)
    for side, kinds in made_kinds(location).items():
        found = {key.split("/")[0] for key in before[side]}
        assert kinds <= found, f"{side}: no {sorted(kinds - found)} labelled as the peering's: {sorted(before[side])}"
        assert metadata_off(before[side], LABELS, ANNOTATIONS) == {}, side
    peerings.patch(namespace, name, {"spec": {"commonMetadata": CHANGE}})
    last: list[dict[str, dict[str, list[str]]]] = [{}]

    def updated() -> bool:
        now = made(apis, namespace, name)
        last[0] = {side: metadata_off(now[side], LABELS_AFTER, ANNOTATIONS_AFTER, DROPPED) for side in now}
        return not any(last[0].values())

    try:
        wait_for("every object of the peering to carry the new labels and annotations", updated, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nstill off: {last[0]}") from None
    after = made(apis, namespace, name)
    for side, objects in before.items():
        uids = {key: meta["uid"] for key, meta in objects.items()}
        assert {key: after[side].get(key, {}).get("uid") for key in uids} == uids, f"{side}: an object was re-created"
    return sorted(f"{side}:{key}" for side, objects in before.items() for key in objects)
