"""Stage 3: offloading (ResourceSlice and VirtualNode), one non-blocking pass."""

from __future__ import annotations

from liqo_peering.engine.run import PeeringRun
from liqo_peering.errors import ResourceSliceDenied
from liqo_peering.liqo import naming, offloading
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.networking import connection_state
from liqo_peering.stages import StageResult

STAGE = "offloading"


def reconcile(p: PeeringRun) -> StageResult:
    spec = p.offloading
    ctx = p.ctx
    name, ns = ctx.provider.cluster_id, ctx.consumer_tenant_ns
    if not spec.create_resource_slice:
        # Remove only our own slice (and the virtual node Liqo made from it): a ResourceSlice of the same
        # name made by liqoctl or another peering is not ours to delete, as in teardown.
        existing = p.local.get(r.RESOURCE_SLICE, name, ns)
        labels = ((existing or {}).get("metadata") or {}).get("labels") or {}
        if existing is None or all(labels.get(k) == v for k, v in ctx.owner.items()):
            _delete_if_present(p, r.RESOURCE_SLICE, name, ns)
            _delete_if_present(p, r.VIRTUAL_NODE, name, ns)
        return StageResult.disabled(STAGE, "no ResourceSlice requested")
    slice_ = p.local.ensure(r.RESOURCE_SLICE, offloading.resource_slice(ctx, spec))
    conds = offloading.slice_conditions(slice_)
    denied = [t for t in ("Authentication", "Resources") if conds.get(t) == "Denied"]
    if denied:
        raise ResourceSliceDenied(
            f"the {p.remote.side} Denied ResourceSlice {ns}/{name} on the {p.local.side} ({' and '.join(denied)});"
            f" ask for fewer resources in {p.offloading_field}.resources or check the {p.remote.side}'s Liqo"
            f" resource plugin"
        )
    if conds.get("Authentication") != "Accepted" or conds.get("Resources") != "Accepted":
        return StageResult.waiting(
            STAGE, "WaitingForResourceSlice", f"waiting for the {p.remote.side} to accept the ResourceSlice"
        )
    if not spec.create_virtual_node:
        _delete_if_present(p, r.VIRTUAL_NODE, name, ns)
        return StageResult.ready(STAGE, "the ResourceSlice is accepted (no virtual node requested)")
    vnode = p.local.get(r.VIRTUAL_NODE, name, ns)
    if vnode is None:
        return StageResult.waiting(
            STAGE, "WaitingForVirtualNode", f"waiting for Liqo on the {p.local.side} to create the VirtualNode"
        )
    node = p.local.get(r.NODE, vnode["metadata"]["name"])
    pods = p.local.find(r.POD, ns, labels=offloading.virtual_kubelet_selector(name))
    usable, message = offloading.virtual_node_usable(node, pods, _node_ready_checks_network(p))
    if not usable:
        return StageResult.waiting(STAGE, "WaitingForVirtualNode", message)
    return StageResult.ready(STAGE, f"the ResourceSlice is accepted and {message}")


def _delete_if_present(p: PeeringRun, res: r.Resource, name: str, ns: str) -> None:
    """Delete only what exists and is not already going: a pass at rest writes nothing."""
    obj = p.local.get(res, name, ns)
    if obj is not None and not obj["metadata"].get("deletionTimestamp"):
        p.local.delete(res, name, ns)


def _node_ready_checks_network(p: PeeringRun) -> bool:
    """Liqo before v1.2 reports the virtual Node Ready before its network check: then look at the tunnel."""
    consumer = p.ctx.consumer.liqo_version
    networking = p.spec.networking.enabled
    if not networking or consumer.at_least(1, 2) is not False:
        return True
    conns = p.local.find(r.CONNECTION, p.ctx.consumer_tenant_ns, labels=f"{naming.REMOTE_CLUSTER_ID}={p.provider_id}")
    return offloading.node_ready_checks_network(consumer, networking, connection_state(conns) == "Connected")
