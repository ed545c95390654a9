"""What `liqoctl info peer` would show about a peering, read here from Liqo's objects on both clusters, and the
same view of a LiqoPeering's status: the end-to-end tests compare the two.

Read independently of the operator (the harness never imports it): the Configurations on both clusters (the
other cluster's CIDRs in spec.remote.cidr, the remap in status.remote.cidr), the gateway client's endpoint (or
the server's published one) on whichever cluster each is, the consumer's own ResourceSlices for the provider
(not the copies Liqo replicates in), its VirtualNodes and their Nodes' Ready, and the ControlPlane Identity's
API server address.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from testenv.operator_support import get, items, tenant_ns

REMOTE = "liqo.io/remote-cluster-id"


def _cidrs(conf: dict[str, Any] | None) -> dict[str, list[str]] | None:
    if conf is None:
        return None
    described = ((conf.get("spec") or {}).get("remote") or {}).get("cidr") or {}
    remapped = (((conf.get("status") or {}).get("remote") or {}).get("cidr")) or {}
    out = {
        "podCIDRs": described.get("pod") or [],
        "externalCIDRs": described.get("external") or [],
        "remappedPodCIDRs": remapped.get("pod") or [],
        "remappedExternalCIDRs": remapped.get("external") or [],
    }
    return {k: v for k, v in out.items() if v}


def _node_ready(api: k8s.ApiClient, name: str) -> bool:
    try:
        node = k8s.CoreV1Api(api).read_node(name)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))  # type: ignore[union-attr]


def _conditions(conds: list[dict[str, Any]] | None) -> list[tuple[str, str, str | None]]:
    return sorted((c["type"], c["status"], c.get("reason")) for c in conds or [])


def from_liqo(consumer: k8s.ApiClient, provider: k8s.ApiClient, consumer_id: str, provider_id: str) -> dict[str, Any]:
    """The view, from Liqo's objects on both clusters."""
    c_ns, p_ns = tenant_ns(consumer, provider_id), tenant_ns(provider, consumer_id)
    c_conf = get(consumer, "networking.liqo.io", "configurations", c_ns, provider_id)
    p_conf = get(provider, "networking.liqo.io", "configurations", p_ns, consumer_id)
    # The server on the provider (liqoctl's default), or on the consumer (--gw-server-service-location Consumer).
    server_side = "Provider"
    client = get(consumer, "networking.liqo.io", "gatewayclients", c_ns, provider_id)
    server = get(provider, "networking.liqo.io", "gatewayservers", p_ns, consumer_id)
    if client is None and server is None:
        client = get(provider, "networking.liqo.io", "gatewayclients", p_ns, consumer_id)
        server = get(consumer, "networking.liqo.io", "gatewayservers", c_ns, provider_id)
        server_side = "Consumer"
    endpoint = ((client or {}).get("spec") or {}).get("endpoint") or ((server or {}).get("status") or {}).get(
        "endpoint"
    )
    slices = [
        s
        for s in items(consumer, "authentication.liqo.io", "resourceslices", c_ns)
        if (s["metadata"].get("labels") or {}).get(REMOTE) == provider_id
        and (s["metadata"].get("labels") or {}).get("liqo.io/replicated") != "true"
    ]
    vnodes = [
        v
        for v in items(consumer, "offloading.liqo.io", "virtualnodes", c_ns)
        if (v["metadata"].get("labels") or {}).get(REMOTE) == provider_id
    ]
    identity = get(consumer, "authentication.liqo.io", "identities", c_ns, f"controlplane-{provider_id}")
    network = {k: v for k, v in (("provider", _cidrs(c_conf)), ("consumer", _cidrs(p_conf))) if v}
    return {
        "network": network or None,
        "gateway": None
        if endpoint is None
        else {
            "server": server_side,
            "addresses": endpoint.get("addresses"),
            "port": endpoint.get("port"),
            "protocol": endpoint.get("protocol"),
        },
        "resourceSlices": sorted(
            (
                s["metadata"]["name"],
                (s.get("spec") or {}).get("resources") or {},
                (s.get("status") or {}).get("resources") or {},
                _conditions((s.get("status") or {}).get("conditions")),
            )
            for s in slices
        ),
        "virtualNodes": sorted((v["metadata"]["name"], _node_ready(consumer, v["metadata"]["name"])) for v in vnodes),
        "apiServer": (((identity or {}).get("spec") or {}).get("authParams") or {}).get("apiServer"),
    }


def from_status(status: dict[str, Any]) -> dict[str, Any]:
    """The same view of a LiqoPeering's status."""
    gateway = status.get("gateway")
    return {
        "network": status.get("network"),
        "gateway": None
        if gateway is None
        else {k: gateway.get(k) for k in ("server", "addresses", "port", "protocol")},
        "resourceSlices": sorted(
            (
                s["name"],
                s.get("requested") or {},
                s.get("granted") or {},
                _conditions(s.get("conditions")),
            )
            for s in status.get("resourceSlices") or []
            if s["action"] == "Consuming"
        ),
        "virtualNodes": sorted((v["name"], v["ready"]) for v in status.get("virtualNodes") or []),
        "apiServer": (status.get("apiServer") or {}).get("address"),
    }
