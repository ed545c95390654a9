"""Stage 3 builders: the ResourceSlice, and how to read its and its VirtualNode's state."""

from __future__ import annotations

from typing import Any

from liqo_peering.api.model import OffloadingSpec
from liqo_peering.liqo import naming, resources
from liqo_peering.liqo.context import PeeringContext, metadata


def resource_slice(ctx: PeeringContext, spec: OffloadingSpec) -> dict[str, Any]:
    provider_id = ctx.provider.cluster_id
    labels = ctx.labels(provider_id, **{naming.REPLICATION: "true", naming.REMOTE_ID: provider_id})
    annotations = {naming.CREATE_VIRTUAL_NODE: "true" if spec.create_virtual_node else "false"}
    return {
        "apiVersion": resources.RESOURCE_SLICE.api_version,
        "kind": resources.RESOURCE_SLICE.kind,
        "metadata": metadata(provider_id, ctx.consumer_tenant_ns, labels, annotations),
        "spec": {
            "class": spec.resource_slice_class,
            "providerClusterID": provider_id,
            "resources": {name: str(qty) for name, qty in spec.resources.items()},
        },
    }


def slice_conditions(obj: dict[str, Any] | None) -> dict[str, str]:
    """Condition type -> status (Accepted | Denied | …) of a ResourceSlice."""
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return {str(c.get("type")): str(c.get("status")) for c in conds}


def virtual_node_running(obj: dict[str, Any] | None) -> bool:
    """True when the VirtualNode's VirtualKubelet and Node conditions are both Running."""
    conds = {c.get("type"): c.get("status") for c in ((obj or {}).get("status") or {}).get("conditions") or []}
    return conds.get("VirtualKubelet") == "Running" and conds.get("Node") == "Running"
