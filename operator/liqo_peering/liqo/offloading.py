"""Stage 3 builders: the ResourceSlice, and how to read its and its VirtualNode's state."""

from __future__ import annotations

from typing import Any

from liqo_peering.api.model import OffloadingSpec
from liqo_peering.liqo import naming, resources
from liqo_peering.liqo.context import PeeringContext, metadata
from liqo_peering.liqo.stored import canonical_quantity
from liqo_peering.liqo.versions import LiqoVersion


def resource_slice(ctx: PeeringContext, spec: OffloadingSpec) -> dict[str, Any]:
    provider_id = ctx.provider.cluster_id
    labels = ctx.labels(provider_id, **{naming.REPLICATION: "true", naming.REMOTE_ID: provider_id})
    annotations = {naming.CREATE_VIRTUAL_NODE: "true" if spec.create_virtual_node else "false"}
    slice_spec: dict[str, Any] = {"class": spec.resource_slice_class, "providerClusterID": provider_id}
    if spec.resources:
        # Liqo writes the slice back through Go structs: no empty map (omitempty), canonical quantities.
        slice_spec["resources"] = {name: canonical_quantity(qty) for name, qty in spec.resources.items()}
    return {
        "apiVersion": resources.RESOURCE_SLICE.api_version,
        "kind": resources.RESOURCE_SLICE.kind,
        "metadata": metadata(provider_id, ctx.consumer_tenant_ns, labels, annotations),
        "spec": slice_spec,
    }


def slice_conditions(obj: dict[str, Any] | None) -> dict[str, str]:
    """Condition type -> status (Accepted | Denied | …) of a ResourceSlice."""
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return {str(c.get("type")): str(c.get("status")) for c in conds}


def virtual_kubelet_selector(provider_id: str) -> str:
    """The virtual kubelet's Pods for a provider (Liqo's VirtualKubeletLabels)."""
    return f"{naming.VK_COMPONENT}={naming.VK_COMPONENT_VALUE},{naming.REMOTE_CLUSTER_ID}={provider_id}"


def _condition_true(obj: dict[str, Any], kind: str) -> bool:
    conds = ((obj.get("status") or {}).get("conditions")) or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conds)


def virtual_node_usable(
    node: dict[str, Any] | None, pods: list[dict[str, Any]], network_checked: bool = True
) -> tuple[bool, str]:
    """Liqo's own rule (ForeignCluster status.go), read at its source: the virtual Node is Ready and
    every virtual-kubelet Pod is Ready. Liqo's ForeignCluster learns it only when something wakes its
    controller (up to a minute later); the Node's Ready condition is the earliest authoritative signal.

    ``network_checked``: whether the Node's Ready includes the network. Liqo before v1.2 lets the virtual
    kubelet report Ready before it has looked at the network (see ``node_ready_checks_network``).

    Returns (usable, what is still missing).
    """
    if not pods:
        return False, "waiting for Liqo to start the virtual kubelet"
    unready = sorted(str(p["metadata"]["name"]) for p in pods if not _condition_true(p, "Ready"))
    if unready:
        return False, f"waiting for the virtual kubelet Pod(s) {', '.join(unready)} to be Ready"
    if node is None:
        return False, "waiting for the virtual kubelet to register its Node"
    if not _condition_true(node, "Ready"):
        return False, f"waiting for the virtual Node {node['metadata']['name']} to be Ready"
    if not network_checked:
        return False, (
            f"the virtual Node {node['metadata']['name']} is Ready, but Liqo before v1.2 says so before it checks"
            f" the network: waiting for the tunnel to be Connected"
        )
    return True, f"the virtual Node {node['metadata']['name']} is Ready"


def node_ready_checks_network(consumer: LiqoVersion, networking: bool, connected: bool) -> bool:
    """Whether the virtual Node's Ready can be taken as Liqo on the consumer means it. Up to v1.1 the virtual
    kubelet treats networking as disabled until it has seen the ForeignCluster, so its Node turns Ready before
    the network check: then the tunnel itself must be Connected. Unknown versions are taken as v1.2."""
    return not networking or connected or consumer.at_least(1, 2) is not False
