"""A real-Liqo pair (testenv.liqo_install) as a LiqoPeering test sees it, and the end state every such test
asserts on both clusters: each object of the peering there once, and nothing of it left once unpeered.

Shared by the real-Liqo suite with the operator as a process (tests/e2e/test_real_liqo.py) and with the
chart's two replicas (tests/e2e/test_real_liqo_ha.py).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from testenv import inventory
from testenv.liqo_install import LiqoInstall
from testenv.operator_support import SECRET, Peerings, get, items, tenant_ns, wait_for

SIDES = ("consumer", "provider")


@dataclass
class RealPair:
    pair: LiqoInstall
    peerings: Peerings  # on the consumer
    consumer_api: k8s.ApiClient
    provider_api: k8s.ApiClient

    @property
    def consumer_id(self) -> str:
        return self.pair.ids["consumer"]

    @property
    def provider_id(self) -> str:
        return self.pair.ids["provider"]

    @property
    def apis(self) -> dict[str, k8s.ApiClient]:
        return {"consumer": self.consumer_api, "provider": self.provider_api}

    def provider_kubeconfig(self) -> bytes:
        return Path(self.pair["provider"].kubeconfig).read_bytes()

    def spec(self, **overrides: Any) -> dict[str, Any]:
        """A LiqoPeering's spec for this pair (what its installation needs of spec.networking included)."""
        base: dict[str, Any] = {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "3m"}
        if self.pair.peering_networking:
            base["networking"] = dict(self.pair.peering_networking)
        base.update(overrides)
        return base

    def set_connection_fault(self, value: str | None) -> None:
        self.pair.set_connection_fault(value)

    def diagnostics(self) -> str:
        return "\n".join(self.pair.diagnostics())


def case_namespace(env: RealPair, nodeid: str) -> str:
    """A namespace named after the test, holding the provider's kubeconfig in Secret SECRET."""
    namespace = "rl-" + re.sub(r"[^a-z0-9-]", "-", nodeid.lower())[-50:].strip("-")
    env.peerings.make_namespace(namespace)
    env.peerings.put_kubeconfig_secret(namespace, SECRET, env.provider_kubeconfig())
    return namespace


def liqos_own(obj: dict[str, Any]) -> bool:
    """Liqo's objects for its own cluster, in its namespace or cluster-scoped, and for no peer (routes for its
    nodes, the remaps of its API server's IPs, MSS clamping, its InternalNodes): no peering's, and Liqo keeps
    them. On a chart pair just started, the first test saw them appear on the provider (liqo/gw-mss-clamping,
    liqo/provider-node-0-gw-node...)."""
    meta = obj.get("metadata") or {}
    return meta.get("namespace") in ("liqo", None) and "liqo.io/remote-cluster-id" not in (meta.get("labels") or {})


def peering_leftovers(env: RealPair, sides: tuple[str, ...] = SIDES) -> dict[str, dict[str, list[str]]]:
    """Per side, the Liqo objects of a peering still there: all but Liqo's own (liqos_own) and the
    ForeignClusters, which Liqo keeps after any unpeering."""

    def ignore(obj: dict[str, Any]) -> bool:
        return liqos_own(obj) or obj.get("kind") == "ForeignCluster"

    return {side: inventory.liqo_names(env.apis[side], ignore) for side in sides}


def wait_liqo_done(env: RealPair, sides: tuple[str, ...] = SIDES) -> None:
    """Once the LiqoPeering is gone, Liqo still removes what hangs off the deleted objects (IPAM Networks and
    IPs, remapping FirewallConfigurations, the CRD replicator's copies) on its own time; the next test counts
    from the state after that. A test whose unpeering leaves something fails here, naming it. ``sides``: a
    cluster destroyed for good keeps its side of the peering, as nobody could unpeer it."""
    last: list[dict[str, dict[str, list[str]]]] = []

    def done() -> bool:
        last[:] = [peering_leftovers(env, sides)]
        return last[0] == {side: {} for side in sides}

    try:
        wait_for("Liqo to remove the unpeered objects on both clusters", done, timeout=240, interval=1)
    except AssertionError:
        raise AssertionError(f"left on the clusters after unpeering: {last[0]}") from None


def object_uids(env: RealPair, missing_ok: bool = False) -> dict[str, str]:
    """uid of every object making up the peering, by kind (ForeignClusters on both sides included); with
    missing_ok, of those there are so far (a peering still establishing)."""
    c_ns, p_ns = tenant_ns(env.consumer_api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)
    wanted = [
        (env.consumer_api, "core.liqo.io", "foreignclusters", None, env.provider_id),
        (env.provider_api, "core.liqo.io", "foreignclusters", None, env.consumer_id),
        (env.consumer_api, "networking.liqo.io", "configurations", c_ns, env.provider_id),
        (env.provider_api, "networking.liqo.io", "configurations", p_ns, env.consumer_id),
        (env.provider_api, "networking.liqo.io", "gatewayservers", p_ns, env.consumer_id),
        (env.consumer_api, "networking.liqo.io", "gatewayclients", c_ns, env.provider_id),
        (env.provider_api, "authentication.liqo.io", "tenants", p_ns, env.consumer_id),
        (env.consumer_api, "authentication.liqo.io", "identities", c_ns, f"controlplane-{env.provider_id}"),
        (env.consumer_api, "authentication.liqo.io", "resourceslices", c_ns, env.provider_id),
        (env.consumer_api, "offloading.liqo.io", "virtualnodes", c_ns, env.provider_id),
    ]
    uids = {}
    for api, group, plural, ns, name in wanted:
        obj = get(api, group, plural, ns, name)
        side = "consumer" if api is env.consumer_api else "provider"
        if obj is None and missing_ok:
            continue
        assert obj, f"{plural} {ns}/{name} missing on the {side}"
        uids[f"{side}/{plural}/{name}"] = obj["metadata"]["uid"]
    return uids


def every_object_uids(env: RealPair) -> dict[str, str] | None:
    """object_uids once every object of the peering exists, else None: liqoctl returns once the
    ResourceSlice is accepted, and Liqo makes the VirtualNode from it right after, on a busy host later."""
    try:
        return object_uids(env)
    except AssertionError:
        return None


# Where each object of a peering lives: the side, and its kind as (group, plural).
TENANT = "authentication.liqo.io", "tenants"
RESOURCE_SLICE = "authentication.liqo.io", "resourceslices"
IDENTITY = "authentication.liqo.io", "identities"
VIRTUAL_NODE = "offloading.liqo.io", "virtualnodes"
GATEWAY_SERVER = "networking.liqo.io", "gatewayservers"
GATEWAY_CLIENT = "networking.liqo.io", "gatewayclients"
CONFIGURATION = "networking.liqo.io", "configurations"


def tenant_namespaces(env: RealPair) -> dict[str, str]:
    """Each side's tenant namespace for its peer."""
    return {
        "consumer": tenant_ns(env.consumer_api, env.provider_id),
        "provider": tenant_ns(env.provider_api, env.consumer_id),
    }


def in_tenant_namespaces(
    env: RealPair, kinds: list[tuple[str, tuple[str, str]]], namespaces: dict[str, str] | None = None
) -> dict[str, int]:
    """How many objects of each (side, (group, plural)) there are in that side's tenant namespace for its peer
    (``namespaces``, if found earlier), by "side/plural"."""
    where = namespaces or tenant_namespaces(env)
    return {
        f"{side}/{plural}": len(items(env.apis[side], group, plural, where[side])) for side, (group, plural) in kinds
    }


def assert_one_of_each(env: RealPair) -> None:
    """One of each object of the peering on either cluster, and one tenant namespace: nothing duplicated."""
    kinds = [
        ("provider", TENANT),
        ("provider", GATEWAY_SERVER),
        ("consumer", GATEWAY_CLIENT),
        ("consumer", RESOURCE_SLICE),
        ("consumer", VIRTUAL_NODE),
    ]
    found = in_tenant_namespaces(env, kinds)
    assert found == dict.fromkeys(found, 1), found
    c_ns = tenant_ns(env.consumer_api, env.provider_id)
    # Liqo adds an Identity of type ResourceSlice of its own; ours is the ControlPlane one.
    identities = items(env.consumer_api, "authentication.liqo.io", "identities", c_ns)
    assert [i["spec"]["type"] for i in identities].count("ControlPlane") == 1, identities
    namespaces = k8s.CoreV1Api(env.consumer_api).list_namespace(
        label_selector=f"liqo.io/remote-cluster-id={env.provider_id},liqo.io/tenant-namespace=true"
    )
    assert len(namespaces.items) == 1


def unpeer(env: RealPair, namespace: str, name: str) -> float:
    """Delete the LiqoPeering and wait until it is gone: then nothing of the peering is left in the tenant
    namespaces, nor anything the provider's Tenant owned. The seconds from the deletion to gone."""
    namespaces = tenant_namespaces(env)
    deleted = time.monotonic()
    env.peerings.delete(namespace, name)
    env.peerings.wait_gone(namespace, name, timeout=180)
    took = time.monotonic() - deleted
    kinds = [
        ("consumer", RESOURCE_SLICE),
        ("consumer", VIRTUAL_NODE),
        ("consumer", IDENTITY),
        ("provider", TENANT),
        ("consumer", GATEWAY_CLIENT),
        ("provider", GATEWAY_SERVER),
        ("consumer", CONFIGURATION),
        ("provider", CONFIGURATION),
    ]
    left = in_tenant_namespaces(env, kinds, namespaces)
    assert left == dict.fromkeys(left, 0), f"left in the tenant namespaces: {left}"
    p_ns = namespaces["provider"]
    # The Tenant went in the foreground: none of the RoleBindings it owned is left for a next Tenant to adopt.
    rbac = k8s.RbacAuthorizationV1Api(env.provider_api)
    listed: Any = rbac.list_namespaced_role_binding(p_ns, _preload_content=False)
    bindings: list[dict[str, Any]] = listed.json()["items"]
    owners = {b["metadata"]["name"]: b["metadata"].get("ownerReferences", []) for b in bindings}
    owned = [name for name, refs in owners.items() if any(o["kind"] == "Tenant" for o in refs)]
    assert owned == [], f"RoleBindings of the deleted Tenant left in {p_ns}"
    return took
