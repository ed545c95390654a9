"""Stage 3: offloading (ResourceSlice and VirtualNode), one non-blocking pass."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.engine import renewal
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.errors import ResourceSliceDenied
from liqo_peering.fields import mapping_at
from liqo_peering.liqo import certificates, naming, offloading
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.context import PeeringContext
from liqo_peering.liqo.networking import connection_state
from liqo_peering.stages import IdentityCertificate, StageResult

STAGE = "offloading"


def reconcile(p: PeeringRun) -> StageResult:
    found: list[IdentityCertificate] = []
    result = _reconcile(p, found)
    return dataclasses.replace(result, certificates=tuple(found))


def _reconcile(p: PeeringRun, found: list[IdentityCertificate]) -> StageResult:
    """The stage; ``found``: the certificates of the slices' identities, as the provider issued them."""
    ctx = p.ctx
    wanted = offloading.requested_slices(p.offloading, ctx.provider.cluster_id)
    leaving = _remove_leftovers(p, {w.name for w in wanted})
    if not wanted:
        if leaving:
            return StageResult.waiting(STAGE, "RemovingResourceSlice", leaving)
        return StageResult.disabled(STAGE, "no ResourceSlice requested")
    denials: list[str] = []
    waits: list[tuple[str, str]] = []
    ready: list[str] = []
    for req in wanted:
        slice_ = p.consumer.ensure(r.RESOURCE_SLICE, offloading.resource_slice(ctx, req))
        cert = certificates.of_auth_params(mapping_at(slice_, "status", "authParams"), p.consumer.side, req.name)
        if cert is not None:
            found.append(cert)
            renewal.reissue_if_due(p, cert)
            slice_ = renewal.restart_if_renewed(p, cert, slice_, r.RESOURCE_SLICE)
        denial = _denial(p, slice_, req) if "Denied" in offloading.slice_conditions(slice_).values() else None
        if denial is not None:
            denials.append(denial)
            continue
        state = _slice_state(p, req, slice_)
        if isinstance(state, tuple):
            waits.append(state)
        else:
            ready.append(state)
    if denials:
        raise ResourceSliceDenied("; and ".join(denials))
    if waits:
        # The first slice still on its way decides the reason; every one of them is in the message.
        reason = waits[0][0]
        message = "; ".join(m for _, m in waits)
        return StageResult.waiting(STAGE, reason, message + (f"; {leaving}" if leaving else ""))
    if leaving:
        return StageResult.waiting(STAGE, "RemovingResourceSlice", leaving)
    return StageResult.ready(STAGE, "; ".join(ready))


def _slice_state(p: PeeringRun, req: offloading.SliceRequest, slice_: dict[str, Any]) -> tuple[str, str] | str:
    """One accepted-or-not slice and its virtual node: (reason, message) while waiting, else what is ready."""
    name, ns = req.name, p.ctx.consumer_tenant_ns
    several = p.offloading.resource_slices is not None
    which = f"the ResourceSlice {name}" if several else "the ResourceSlice"
    conds = offloading.slice_conditions(slice_)
    if conds.get("Authentication") != "Accepted" or conds.get("Resources") != "Accepted":
        return "WaitingForResourceSlice", f"waiting for the {p.provider.side} to accept {which}"
    if not req.create_virtual_node:
        _delete_if_present(p, r.VIRTUAL_NODE, name, ns)
        return f"{which} is accepted (no virtual node requested)"
    vnode = p.consumer.get(r.VIRTUAL_NODE, name, ns)
    if vnode is None:
        suffix = f" of ResourceSlice {name}" if several else ""
        return "WaitingForVirtualNode", f"waiting for Liqo on the {p.consumer.side} to create the VirtualNode{suffix}"
    node = p.consumer.get(r.NODE, vnode["metadata"]["name"])
    pods = p.consumer.find(r.POD, ns, labels=offloading.virtual_kubelet_selector(p.provider_id, name))
    restarting = certificates.restarting(slice_, datetime.now(UTC))
    usable, message = offloading.virtual_node_usable(node, pods, _node_ready_checks_network(p), restarting)
    if not usable:
        return "WaitingForVirtualNode", message
    return f"{which} is accepted and {message}"


def _remove_leftovers(p: PeeringRun, wanted: set[str]) -> str:
    """Delete this direction's slices the spec no longer asks for, and their virtual nodes (a ResourceSlice of
    the same name made by liqoctl or another peering is not ours to delete, as in teardown); say what of them
    is still going (empty when nothing is)."""
    ctx = p.ctx
    ns = ctx.consumer_tenant_ns
    slices, vnodes = slices_and_virtual_nodes(p.consumer, ctx)
    left = offloading.leftovers(slices, vnodes, wanted, ctx.owner, ctx.provider.cluster_id)
    going = []
    for res, names in ((r.RESOURCE_SLICE, left.slices), (r.VIRTUAL_NODE, left.virtual_nodes)):
        for name in names:
            _delete_if_present(p, res, name, ns)
            if p.consumer.get(res, name, ns) is not None:
                going.append(f"{res.kind} {name}")
    return f"removing {', '.join(going)}, no longer in {p.offloading_field}" if going else ""


def slices_and_virtual_nodes(
    consumer: ClusterClient, ctx: PeeringContext
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A direction's ResourceSlices and VirtualNodes on its consumer, by the provider's label (ours carry it,
    and so does every VirtualNode Liqo makes): from the informers' caches, no request at rest."""
    selector = f"{naming.REMOTE_CLUSTER_ID}={ctx.provider.cluster_id}"
    ns = ctx.consumer_tenant_ns
    return consumer.find(r.RESOURCE_SLICE, ns, labels=selector), consumer.find(r.VIRTUAL_NODE, ns, labels=selector)


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


def _denial(p: PeeringRun, slice_: dict[str, Any], req: offloading.SliceRequest) -> str:
    """Liqo's reasons for the denial, and the fix for each. The provider's Tenant for this consumer (read from
    the cache the authentication stage keeps) tells a cordoned or drained tenant from a lack of resources."""
    ctx = p.ctx
    tenant = p.provider.get(r.TENANT, ctx.consumer.cluster_id, ctx.provider_tenant_ns)
    where = offloading.Denial(
        namespace=ctx.consumer_tenant_ns,
        name=req.name,
        provider=p.provider.side,
        consumer=p.consumer.side,
        consumer_id=ctx.consumer.cluster_id,
        field=p.offloading_field + req.field,
        tenant_condition=((tenant or {}).get("spec") or {}).get("tenantCondition"),
        class_field="class" if req.field else "resourceSliceClass",
    )
    return offloading.denial_message(slice_, where) or f"the ResourceSlice {req.name} is Denied"
