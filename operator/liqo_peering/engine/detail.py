"""Read the Liqo objects the status describes (what `liqoctl info peer` shows) for status/detail.py.

Every read is of an object the stages already read or watch, so it is served from the informers' caches: a
pass at rest costs no request for it.
"""

from __future__ import annotations

from typing import Any

from liqo_peering.engine.direction import PeeringRun
from liqo_peering.liqo import naming, networking
from liqo_peering.liqo import resources as r
from liqo_peering.status import detail

# On a ResourceSlice that Liqo's crd-replicator copied in from the other cluster (the original is elsewhere).
REPLICATED = naming.REPLICATED


def _own_slices(run: PeeringRun) -> list[dict[str, Any]]:
    """The ResourceSlices this direction's consumer made to ask its provider for resources (not the copies
    Liqo replicated in from the other cluster)."""
    found = run.consumer.find(
        r.RESOURCE_SLICE,
        run.ctx.consumer_tenant_ns,
        labels=f"{naming.REMOTE_CLUSTER_ID}={run.provider_id}",
    )
    return [s for s in found if ((s.get("metadata") or {}).get("labels") or {}).get(REPLICATED) != "true"]


def observe(run: PeeringRun, reverse: PeeringRun | None) -> dict[str, Any]:
    """The status fields of status/detail.py, from the forward run's objects (``reverse``: the reverse
    direction's run, when it is on, for the slices the provider asks this cluster for)."""
    ctx, consumer, provider = run.ctx, run.consumer, run.provider
    objects: dict[str, Any] = {}
    if run.spec.networking.enabled:
        where = networking.gateways(ctx, run.spec.networking.gateway_server.location)
        serving, dialing = (consumer, provider) if where.server_side == "consumer" else (provider, consumer)
        objects.update(
            consumer_configuration=consumer.get(r.CONFIGURATION, ctx.provider.cluster_id, ctx.consumer_tenant_ns),
            provider_configuration=provider.get(r.CONFIGURATION, ctx.consumer.cluster_id, ctx.provider_tenant_ns),
            gateway_server=serving.get(r.GATEWAY_SERVER, where.server_name, where.server_namespace),
            gateway_client=dialing.get(r.GATEWAY_CLIENT, where.client_name, where.client_namespace),
            server_side=where.location,
        )
    slices: list[tuple[detail.Action, dict[str, Any]]] = [("Consuming", s) for s in _own_slices(run)]
    if reverse is not None:
        slices += [("Providing", s) for s in _own_slices(reverse)]
    vnodes = consumer.find(
        r.VIRTUAL_NODE, ctx.consumer_tenant_ns, labels=f"{naming.REMOTE_CLUSTER_ID}={ctx.provider.cluster_id}"
    )
    nodes = {}
    for vnode in vnodes:
        node = consumer.get(r.NODE, vnode["metadata"]["name"])
        if node is not None:
            nodes[vnode["metadata"]["name"]] = node
    identity = consumer.get(r.IDENTITY, naming.identity_name(ctx.provider.cluster_id), ctx.consumer_tenant_ns)
    return detail.detail(
        detail.LiqoObjects(
            resource_slices=tuple(slices),
            virtual_nodes=tuple(vnodes),
            nodes=nodes,
            identity=identity,
            **objects,
        )
    )
