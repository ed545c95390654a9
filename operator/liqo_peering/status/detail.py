"""What `liqoctl info peer` shows about a peering, computed from Liqo's own objects (pure).

The engine reads the objects (from its informers' caches) and passes them here; the result is the status's
``network``, ``gateway``, ``resourceSlices``, ``virtualNodes`` and ``apiServer``. Each value is what the
objects hold now, with nothing empty or null inside it (the API server drops those, and a value that reads
back different from what was written would be written again on every pass), and None when there is nothing
to show (a merge patch then removes the field).

Field names as Liqo v1.2.0 stores them: a Configuration's ``spec.remote.cidr.{pod,external}`` (the described
cluster's CIDRs) and ``status.remote.cidr`` (what this cluster remaps them to); a GatewayServer's
``status.endpoint`` and a GatewayClient's ``spec.endpoint`` (``addresses``, ``port`` or, after v1.2.0, ``ports``,
``protocol``); a
ResourceSlice's ``spec.{class,resources}``, ``status.resources`` and ``status.conditions``; a VirtualNode's
label ``liqo.io/resourceslice-name`` and ``spec.resourceQuota.hard``; an Identity's
``spec.authParams.{apiServer,proxyURL}``. The choices follow `liqoctl info peer`
(pkg/liqoctl/info/peer/{network,auth,offloading}.go).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from liqo_peering.api.model import GatewayLocation
from liqo_peering.fields import endpoint_ports, mapping_at, mappings_at, strings, text_at

# The status fields this module fills, in the order the docs list them.
FIELDS = ("network", "gateway", "resourceSlices", "virtualNodes", "apiServer")
RESOURCE_SLICE_NAME_LABEL = "liqo.io/resourceslice-name"  # on a VirtualNode: the slice it was made from
# A slice seen from the cluster the LiqoPeering lives on, as liqoctl says it: this cluster asks the provider
# for resources (Consuming), or, in a bidirectional peering, the provider asks this cluster (Providing).
Action = Literal["Consuming", "Providing"]
SLICE_CONDITION_KEYS = ("type", "status", "reason", "message")


@dataclass(frozen=True)
class LiqoObjects:
    """The objects of one peering that the status describes, as read in one pass (None: absent)."""

    # The Configuration on each cluster: each describes the OTHER cluster.
    consumer_configuration: dict[str, Any] | None = None
    provider_configuration: dict[str, Any] | None = None
    gateway_server: dict[str, Any] | None = None
    gateway_client: dict[str, Any] | None = None
    server_side: GatewayLocation = "Provider"  # the cluster whose gateway serves
    # ResourceSlices by action: the consumer's own (Consuming) and, bidirectional, the provider's (Providing).
    resource_slices: tuple[tuple[Action, dict[str, Any]], ...] = ()
    virtual_nodes: tuple[dict[str, Any], ...] = ()
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # the virtual Nodes, by name
    identity: dict[str, Any] | None = None  # the ControlPlane Identity on the consumer


def _cidrs(configuration: dict[str, Any] | None) -> dict[str, Any] | None:
    """The described cluster's CIDRs, and what the cluster holding the Configuration remaps them to."""
    if configuration is None:
        return None
    # A CIDR field is a list since Liqo v1.0, a string before.
    described = mapping_at(configuration, "spec", "remote", "cidr")
    remapped = mapping_at(configuration, "status", "remote", "cidr")
    out = {
        "podCIDRs": strings(described.get("pod")),
        "externalCIDRs": strings(described.get("external")),
        "remappedPodCIDRs": strings(remapped.get("pod")),
        "remappedExternalCIDRs": strings(remapped.get("external")),
    }
    return {k: v for k, v in out.items() if v} or None


def network(objects: LiqoObjects) -> dict[str, Any] | None:
    """Each cluster's pod and external CIDRs, and what the other cluster remaps them to: ``provider`` from
    the consumer's Configuration, ``consumer`` from the provider's."""
    sides = {"provider": _cidrs(objects.consumer_configuration), "consumer": _cidrs(objects.provider_configuration)}
    return {k: v for k, v in sides.items() if v} or None


def gateway(objects: LiqoObjects) -> dict[str, Any] | None:
    """Which cluster serves, and the endpoint the client dials: the GatewayClient's spec (the server's
    published endpoint, or spec.networking.gatewayClient's override), else what the server publishes."""
    client_endpoint = mapping_at(objects.gateway_client, "spec", "endpoint")
    server_endpoint = mapping_at(objects.gateway_server, "status", "endpoint")
    if objects.gateway_client is None and objects.gateway_server is None:
        return None
    endpoint = client_endpoint if objects.gateway_client is not None else server_endpoint
    out: dict[str, Any] = {"server": objects.server_side}
    addresses = strings(endpoint.get("addresses"))
    if addresses:
        out["addresses"] = addresses
    ports = endpoint_ports(endpoint)
    if ports:
        out["port"] = ports[0]
    if len(ports) > 1:
        out["ports"] = ports
    if isinstance(endpoint.get("protocol"), str) and endpoint["protocol"]:
        out["protocol"] = endpoint["protocol"]
    return out


def _quantities(value: Any) -> dict[str, str]:
    """A Kubernetes ResourceList, each quantity as the string Liqo stores."""
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if v is not None and v != ""}


def slice_conditions(obj: dict[str, Any]) -> list[dict[str, str]]:
    """A ResourceSlice's conditions as Liqo wrote them (type, status, reason, message), by type. One without a
    status says Unknown, as Kubernetes conditions do: the status requires one, and it is not Accepted."""
    out = [
        {"status": "Unknown"} | {k: c[k] for k in SLICE_CONDITION_KEYS if isinstance(c.get(k), str) and c[k]}
        for c in mappings_at(obj, "status", "conditions")
        if isinstance(c.get("type"), str) and c["type"]
    ]
    return sorted(out, key=lambda c: c["type"])


def _resource_slice(action: Action, obj: dict[str, Any]) -> dict[str, Any]:
    spec = mapping_at(obj, "spec")
    conds = slice_conditions(obj)
    # liqoctl's rule: accepted once Liqo has written conditions and every one of them says Accepted.
    accepted = bool(conds) and all(c.get("status") == "Accepted" for c in conds)
    out: dict[str, Any] = {"name": obj["metadata"]["name"], "action": action, "accepted": accepted}
    if isinstance(spec.get("class"), str) and spec["class"]:
        out["class"] = spec["class"]
    for key, value in (
        ("requested", _quantities(spec.get("resources"))),
        ("granted", _quantities(mapping_at(obj, "status").get("resources"))),
    ):
        if value:
            out[key] = value
    if conds:
        out["conditions"] = conds
    return out


def resource_slices(objects: LiqoObjects) -> list[dict[str, Any]] | None:
    """Each ResourceSlice: what it asks for, what the provider granted, and whether it accepted it, with
    Liqo's reasons."""
    out = [_resource_slice(action, obj) for action, obj in objects.resource_slices]
    return sorted(out, key=lambda s: (s["action"], s["name"])) or None


def _node_ready(node: dict[str, Any] | None) -> tuple[bool, str]:
    """The virtual Node's Ready condition (the earliest authoritative signal that it is usable)."""
    if node is None:
        return False, "the virtual kubelet has not registered the Node yet"
    ready = next((c for c in mappings_at(node, "status", "conditions") if c.get("type") == "Ready"), None)
    if ready is None:
        return False, "the Node has no Ready condition yet"
    if ready.get("status") == "True":
        return True, ""
    return False, str(ready.get("message") or ready.get("reason") or f"the Node's Ready is {ready.get('status')}")


def virtual_nodes(objects: LiqoObjects) -> list[dict[str, Any]] | None:
    """Each virtual node: its name, the ResourceSlice it comes from, whether its Node is Ready (and why not),
    and its resources (its quota, spec.resourceQuota.hard)."""
    out = []
    for vnode in objects.virtual_nodes:
        meta = vnode["metadata"]
        ready, why = _node_ready(objects.nodes.get(meta["name"]))
        entry: dict[str, Any] = {"name": meta["name"], "ready": ready}
        made_from = (meta.get("labels") or {}).get(RESOURCE_SLICE_NAME_LABEL)
        if made_from:
            entry["resourceSlice"] = made_from
        if why:
            entry["message"] = why
        quota = _quantities(mapping_at(vnode, "spec", "resourceQuota").get("hard"))
        if quota:
            entry["resources"] = quota
        out.append(entry)
    return sorted(out, key=lambda n: n["name"]) or None


def api_server(objects: LiqoObjects) -> dict[str, Any] | None:
    """The provider's API server address the ControlPlane Identity uses, and its proxy when there is one
    (liqoctl shows the proxy when set, else the address). Nothing else of authParams: the rest is credentials."""
    out = {
        "address": text_at(objects.identity, "spec", "authParams", "apiServer"),
        "proxyURL": text_at(objects.identity, "spec", "authParams", "proxyURL"),
    }
    return {k: v for k, v in out.items() if v} or None


def detail(objects: LiqoObjects) -> dict[str, Any]:
    """The status fields (FIELDS), each None when there is nothing to show."""
    return {
        "network": network(objects),
        "gateway": gateway(objects),
        "resourceSlices": resource_slices(objects),
        "virtualNodes": virtual_nodes(objects),
        "apiServer": api_server(objects),
    }
