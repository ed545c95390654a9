"""Stage 3: offloading (ResourceSlice and VirtualNode), one non-blocking pass."""

from __future__ import annotations

from typing import Any

from liqo_peering.engine.direction import PeeringRun
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
        existing = p.consumer.get(r.RESOURCE_SLICE, name, ns)
        labels = ((existing or {}).get("metadata") or {}).get("labels") or {}
        if existing is None or all(labels.get(k) == v for k, v in ctx.owner.items()):
            _delete_if_present(p, r.RESOURCE_SLICE, name, ns)
            _delete_if_present(p, r.VIRTUAL_NODE, name, ns)
        return StageResult.disabled(STAGE, "no ResourceSlice requested")
    slice_ = p.consumer.ensure(r.RESOURCE_SLICE, offloading.resource_slice(ctx, spec))
    conds = offloading.slice_conditions(slice_)
    if "Denied" in conds.values():
        raise ResourceSliceDenied(_denial(p, slice_))
    if conds.get("Authentication") != "Accepted" or conds.get("Resources") != "Accepted":
        return StageResult.waiting(
            STAGE, "WaitingForResourceSlice", f"waiting for the {p.provider.side} to accept the ResourceSlice"
        )
    if not spec.create_virtual_node:
        _delete_if_present(p, r.VIRTUAL_NODE, name, ns)
        return StageResult.ready(STAGE, "the ResourceSlice is accepted (no virtual node requested)")
    vnode = p.consumer.get(r.VIRTUAL_NODE, name, ns)
    if vnode is None:
        return StageResult.waiting(
            STAGE, "WaitingForVirtualNode", f"waiting for Liqo on the {p.consumer.side} to create the VirtualNode"
        )
    node = p.consumer.get(r.NODE, vnode["metadata"]["name"])
    pods = p.consumer.find(r.POD, ns, labels=offloading.virtual_kubelet_selector(name))
    usable, message = offloading.virtual_node_usable(node, pods, _node_ready_checks_network(p))
    if not usable:
        return StageResult.waiting(STAGE, "WaitingForVirtualNode", message)
    return StageResult.ready(STAGE, f"the ResourceSlice is accepted and {message}")


def _delete_if_present(p: PeeringRun, res: r.Resource, name: str, ns: str) -> None:
    """Delete only what exists and is not already going: a pass at rest writes nothing."""
    obj = p.consumer.get(res, name, ns)
    if obj is not None and not obj["metadata"].get("deletionTimestamp"):
        p.consumer.delete(res, name, ns)


def _node_ready_checks_network(p: PeeringRun) -> bool:
    """Liqo before v1.2 reports the virtual Node Ready before its network check: then look at the tunnel."""
    consumer = p.ctx.consumer.liqo_version
    networking = p.spec.networking.enabled
    if not networking or consumer.at_least(1, 2) is not False:
        return True
    selector = f"{naming.REMOTE_CLUSTER_ID}={p.provider_id}"
    conns = p.consumer.find(r.CONNECTION, p.ctx.consumer_tenant_ns, labels=selector)
    return offloading.node_ready_checks_network(consumer, networking, connection_state(conns) == "Connected")


def _denial(p: PeeringRun, slice_: dict[str, Any]) -> str:
    """Liqo's reasons for the denial, and the fix for each. The provider's Tenant for this consumer (read from
    the cache the authentication stage keeps) tells a cordoned or drained tenant from a lack of resources."""
    ctx = p.ctx
    tenant = p.provider.get(r.TENANT, ctx.consumer.cluster_id, ctx.provider_tenant_ns)
    where = offloading.Denial(
        namespace=ctx.consumer_tenant_ns,
        name=ctx.provider.cluster_id,
        provider=p.provider.side,
        consumer=p.consumer.side,
        consumer_id=ctx.consumer.cluster_id,
        field=p.offloading_field,
        tenant_condition=((tenant or {}).get("spec") or {}).get("tenantCondition"),
    )
    return offloading.denial_message(slice_, where) or "the ResourceSlice is Denied"
