"""Unpeering, in liqoctl unpeer's order, one non-blocking pass at a time.

Order: ResourceSlice (wait gone) -> VirtualNode (wait gone) -> Identity (wait for Liqo's replicas of it on
the provider to go) -> Tenant and the nonce Secrets (wait for the Identity's kubeconfig Secret to go too).
Unless the peering is bidirectional, the network (gateways, PublicKeys and Configurations on both sides)
goes too: with the Identity when authentication is out of band, as nothing of the Identity's or the
Tenant's removal needs the tunnel then, and the Tenant does not wait for it; last, after the Tenant, when it
goes through the tunnel (in-band).
liqoctl removes the network last either way, waiting in between. Each call deletes what is next and
reports what still exists, so the delete handler can retry until everything is gone.

A bidirectional peering is two peerings, one per direction, over one network; unpeering one direction
keeps the network while the other remains (liqoctl unpeer: pkg/liqoctl/unpeer/handler.go). The reverse
direction's steps are the same with the clusters swapped (``reverse=True``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.engine import offloading as offloading_stage
from liqo_peering.engine.together import together
from liqo_peering.health import TrackedPool
from liqo_peering.liqo import certificates, naming, offloading, unpeering
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.context import PeeringContext

Step = tuple[str, r.Resource, str, str]  # side, kind, name, namespace


@dataclass
class Progress:
    """What the earlier passes of one unpeering found, so that a pass reads only what may still change: nothing
    re-creates what unpeering deleted (the peering's own passes have stopped)."""

    absent: set[Step] = field(default_factory=set)  # read as gone, or someone else's: not read again
    deleted: set[Step] = field(default_factory=set)  # deleted: a later phase that waits for it reads it then
    settled: set[Step] = field(default_factory=set)  # nothing of it left to wait for


@dataclass(frozen=True)
class _Outcome:
    left: list[str]  # what must still go before the next phase
    absent: bool
    deleted: bool


# The name of a step that deletes nothing: it waits until Liqo has removed every object of its kind that it
# holds for the peering (the Identity's ControlPlane kubeconfig Secrets; the CRD replicator's originals of
# what it copied to the provider, Renews and NamespaceMaps).
HELD_BY_LIQO = "*"


def plan(
    ctx: PeeringContext, *, bidirectional: bool, local_only: bool, in_band: bool = True, early_tenant: bool = True
) -> list[list[tuple[str, r.Resource, str, str]]]:
    """Phases of deletions; a phase starts only when the previous one is gone. A step that a later phase
    repeats starts early and is waited for there (out of band, the network: deleted with the Identity,
    gone by the end).

    ``early_tenant``: the Tenant goes as soon as Liqo's replicas on the provider are gone, and the Identity's
    kubeconfig Secret is waited for beside it; else (the operator may not read those replicas' originals:
    the reverse direction, whose consumer is the provider cluster) once that Secret is gone, which Liqo's
    CRD replicator releases only after them, on a retry of its own."""
    c_ns, p_ns = ctx.consumer_tenant_ns, ctx.provider_tenant_ns
    prov, cons = ctx.provider.cluster_id, ctx.consumer.cluster_id
    identity = [("consumer", r.IDENTITY, naming.identity_name(prov), c_ns)]
    network = [] if bidirectional else networking_objects(ctx)
    secrets = [("consumer", r.SECRET, HELD_BY_LIQO, c_ns)]
    identity += [("consumer", r.RENEW, HELD_BY_LIQO, c_ns)] if early_tenant else secrets
    phases: list[list[tuple[str, r.Resource, str, str]]] = [
        [("consumer", r.RESOURCE_SLICE, prov, c_ns)],
        [("consumer", r.VIRTUAL_NODE, prov, c_ns)],
        identity if in_band else identity + network,
        [
            ("provider", r.TENANT, cons, p_ns),
            ("consumer", r.SECRET, naming.SIGNED_NONCE_SECRET, c_ns),
            ("provider", r.SECRET, naming.NONCE_SECRET, p_ns),
            *(secrets if early_tenant else []),
            *([] if in_band else network),
        ],
    ]
    if in_band:
        phases.append(network)
    if local_only:
        phases = [[step for step in phase if step[0] == "consumer"] for phase in phases]
    return [phase for phase in phases if phase]


def networking_objects(ctx: PeeringContext) -> list[tuple[str, r.Resource, str, str]]:
    c_ns, p_ns = ctx.consumer_tenant_ns, ctx.provider_tenant_ns
    prov, cons = ctx.provider.cluster_id, ctx.consumer.cluster_id
    return [
        ("consumer", r.GATEWAY_CLIENT, prov, c_ns),
        ("provider", r.GATEWAY_CLIENT, cons, p_ns),
        ("consumer", r.GATEWAY_SERVER, prov, c_ns),
        ("provider", r.GATEWAY_SERVER, cons, p_ns),
        ("consumer", r.PUBLIC_KEY, prov, c_ns),
        ("provider", r.PUBLIC_KEY, cons, p_ns),
        ("consumer", r.CONFIGURATION, prov, c_ns),
        ("provider", r.CONFIGURATION, cons, p_ns),
    ]


# Deleted in the foreground, so that the next phase (and a re-peering) starts only once its dependents are
# gone: Liqo's tenant controller binds the consumer's permissions with RoleBindings owned by the Tenant, and a
# new Tenant of the same name adopts any that still exist (bindClusterRole takes AlreadyExists as done). If
# the garbage collector removes them after that, the new peering silently loses its rights: crd-replicator's
# create of the ResourceSlice is Forbidden, which it never retries.
#
# The Identity goes in the background, and the Tenant waits for its dependents by their own account: the
# Renew (and any NamespaceMap) that crd-replicator copies to the provider. crd-replicator can delete the
# provider's copy only while the Tenant's RoleBindings exist: deleting the Tenant while the Renew was still
# going left both stuck for good (seen in a real-Liqo run), and the next peering's ResourceSlice was never
# replicated. Its original here keeps crd-replicator's finalizer until the copy is gone, so the Tenant goes
# once no original is left. The ControlPlane kubeconfig Secret, which crd-replicator releases after that,
# is waited for beside the Tenant. Not in the foreground: an Identity kept while the garbage collector
# works is still reconciled by Liqo, which makes its Secret again, and the collector deletes it again, a
# round of each per second.
WITH_DEPENDENTS = frozenset({r.TENANT})


def _owned(obj: dict, ctx: PeeringContext) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in ctx.owner.items())


def run(
    local: ClusterClient,
    remote: ClusterClient | None,
    ctx: PeeringContext,
    *,
    bidirectional: bool,
    local_only: bool,
    reverse: bool = False,
    in_band: bool = True,
    done: Progress | None = None,
    calls: TrackedPool | None = None,
) -> list[str]:
    """Delete the next phase; return what still exists (empty when unpeering is complete).

    ``done``: what the earlier passes of the same unpeering found, added to as this one goes. The objects of a
    phase are each read and deleted side by side (in ``calls``, the pool of sub-calls; without it, one after
    another), so that one slow read holds none of the others up.

    Only objects labelled as this peering's are deleted (plus the VirtualNode Liqo derives from our
    ResourceSlice): a refused duplicate LiqoPeering, or one that never got that far, removes nothing
    that another peering or liqoctl owns. ``reverse``: unpeer the reverse direction of a bidirectional
    peering (the provider as the consumer); ``local_only`` then too spares the provider cluster.
    """
    if reverse:
        ctx = ctx.reversed()
    reachable = remote if not local_only else None
    roles = {"consumer": remote, "provider": local} if reverse else {"consumer": local, "provider": remote}
    clients = {role: client if client is local else reachable for role, client in roles.items()}
    # Force-delete keeps the old gate: with the provider gone, the replicas' originals may never be released.
    early = not reverse and not local_only
    phases = plan(ctx, bidirectional=bidirectional, local_only=False, in_band=in_band, early_tenant=early)
    done = Progress() if done is None else done
    for index, phase in enumerate(phases):
        # What this pass can act on (not a side force-delete spares, nor a namespace not found yet).
        steps = [(step, client) for step in phase if (client := clients[step[0]]) is not None and step[3]]
        later = {step for next_phase in phases[index + 1 :] for step in next_phase}
        todo = [
            (step, client)
            for step, client in steps
            if step not in done.settled and not (step in later and step in done.deleted)
        ]
        outcomes = together(calls, *(partial(_step, client, ctx, step, step in done.absent) for step, client in todo))
        remaining: list[str] = []
        for (step, _), outcome in zip(todo, outcomes, strict=True):
            if outcome.absent:
                done.absent.add(step)
            if outcome.deleted:
                done.deleted.add(step)
            if not outcome.left:
                done.settled.add(step)
            remaining += [] if step in later else outcome.left
        if remaining:
            return remaining
    return []


def _step(client: ClusterClient, ctx: PeeringContext, step: Step, absent: bool) -> _Outcome:
    """Read one object (unless an earlier pass found it gone) and delete it if it is ours."""
    _, res, name, ns = step
    if name == HELD_BY_LIQO:
        left = _identity_secrets_left(client, ctx) if res == r.SECRET else _replicas_left(client, ctx)
        return _Outcome(left, absent=False, deleted=False)
    if res in (r.RESOURCE_SLICE, r.VIRTUAL_NODE):
        left = _offloading_step(client, ctx, res, ns)
        return _Outcome(left, absent=not left, deleted=True)
    obj = None if absent else client.get(res, name, ns)
    if obj is not None:
        if not _owned(obj, ctx):
            return _Outcome([], absent=True, deleted=False)
        # Deleted once only: a second foreground delete puts the garbage collector's finalizer back on an
        # object it has released already (a Tenant still held by Liqo's finalizer then waits another round).
        still = obj if _terminating(obj) else client.delete(res, name, ns, with_dependents=res in WITH_DEPENDENTS)
        if still is not None:
            held = [f"{res.kind} {ns}/{name} on the {client.side}{_held_by(still, client.side)}"]
            return _Outcome(held, absent=False, deleted=True)
    return _Outcome([], absent=True, deleted=obj is not None)


FOREGROUND = "foregroundDeletion"  # the API server's finalizer of an object deleted in the foreground


def _terminating(obj: dict[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _held_by(obj: dict, side: str) -> str:
    """For an object deleted in the foreground and still there: whose move it is.

    The garbage collector of its cluster removes the foregroundDeletion finalizer once the object's
    dependents are gone, and it may lag: after that API server was down, the controller manager's
    informers may still be backing off (a Tenant then held unpeering up to a minute in the e2e tests).
    """
    meta = obj.get("metadata") or {}
    if not meta.get("deletionTimestamp") or FOREGROUND not in (meta.get("finalizers") or []):
        return ""
    return f" (held by finalizer {FOREGROUND}: the {side}'s garbage collector removes what it owns first)"


def _identity_secrets_left(consumer: ClusterClient, ctx: PeeringContext) -> list[str]:
    """Liqo's ControlPlane kubeconfig Secret of the deleted Identity, until the garbage collector has deleted
    it and Liqo's CRD replicator has released it.

    The replicator holds it (finalizer crdreplicator.liqo.io/operator) until the objects it replicated for the
    provider are gone on both sides. A new Identity for the same provider created in the meantime re-uses
    that terminating Secret and its Renew keeps the replicator from ever releasing it: the new peering's
    ResourceSlice is then never replicated. So unpeering goes on only once it is gone. The Identity is gone
    here, so any such Secret it owns is one the collector has still to delete. One owned by nothing (made
    by hand) would never go, and does not hold unpeering up.
    """
    selector = naming.control_plane_secrets(ctx.provider.cluster_id)
    return [
        f"Secret {ctx.consumer_tenant_ns}/{s['metadata']['name']} on the {consumer.side}"
        + (" (Liqo is still releasing it)" if s["metadata"].get("deletionTimestamp") else " (the Identity's)")
        for s in consumer.find(r.SECRET, ctx.consumer_tenant_ns, labels=selector)
        if s["metadata"].get("deletionTimestamp")
        or any(o.get("kind") == r.IDENTITY.kind for o in s["metadata"].get("ownerReferences") or [])
    ]


def _replicas_left(consumer: ClusterClient, ctx: PeeringContext) -> list[str]:
    """What Liqo's CRD replicator copied to the provider for this peering (the Identity's Renew, a
    NamespaceMap), until its original here is gone: the replicator removes the original's finalizer once the
    copy is gone there, which it deletes with the rights the Tenant gives it."""
    selector = naming.replicated_to(ctx.provider.cluster_id)
    return [
        f"{res.kind} {ctx.consumer_tenant_ns}/{obj['metadata']['name']} on the {consumer.side} (Liqo is removing"
        " its copy on the provider)"
        for res in (r.RENEW, r.NAMESPACE_MAP)
        for obj in consumer.find(res, ctx.consumer_tenant_ns, labels=selector)
    ]


def _offloading_step(client: ClusterClient, ctx: PeeringContext, res: r.Resource, ns: str) -> list[str]:
    """Every ResourceSlice of this peering's direction (it may ask for several), or every VirtualNode made
    from one of them: delete them, and say which are still there. Both are on this direction's consumer."""
    slices, vnodes = offloading_stage.slices_and_virtual_nodes(client, ctx)
    left = offloading.leftovers(slices, vnodes, set(), ctx.owner, ctx.provider.cluster_id)
    remaining = []
    for name in left.slices if res == r.RESOURCE_SLICE else left.virtual_nodes:
        obj = client.get(res, name, ns)
        if obj is None:
            continue
        if res == r.RESOURCE_SLICE and _kubelet_restarting(client, ctx, obj):
            remaining.append(
                f"{res.kind} {ns}/{name} on the {client.side} (its virtual kubelet restarts to read a renewed"
                " certificate: the slice goes once it runs)"
            )
            continue
        if (obj if _terminating(obj) else client.delete(res, name, ns)) is not None:
            remaining.append(f"{res.kind} {ns}/{name} on the {client.side}")
    return remaining


def _kubelet_restarting(client: ClusterClient, ctx: PeeringContext, slice_: dict[str, Any]) -> bool:
    """Whether the operator restarted this slice's virtual kubelet for a renewed certificate (engine/renewal.py)
    and it does not run yet. Deleting the slice deletes the kubeconfig Secret that virtual kubelet starts
    from: Liqo before v1.2 can then never drain the virtual node. Within the restart's grace only, so a
    virtual kubelet that never comes back holds no unpeering for good."""
    if not certificates.restarting(slice_, datetime.now(UTC)):
        return False
    selector = offloading.virtual_kubelet_selector(ctx.provider.cluster_id, slice_["metadata"]["name"])
    return not offloading.kubelet_started(client.find(r.POD, ctx.consumer_tenant_ns, labels=selector))


def remove_networking(local: ClusterClient, remote: ClusterClient, ctx: PeeringContext, *, owned_only: bool) -> bool:
    """Remove the networking objects (networking switched off). True when none is left."""
    clients = {"consumer": local, "provider": remote}
    left = False
    for side, res, name, ns in networking_objects(ctx):
        client = clients[side]
        obj = client.get(res, name, ns)
        if obj is None or (owned_only and not _owned(obj, ctx)):
            continue
        client.delete(res, name, ns)
        left = True
    return not left


def reverse_peered(local: ClusterClient, provider_id: str) -> bool:
    """Whether the provider consumes this cluster too (a reverse direction, whoever made it): then unpeering
    the forward direction keeps the network. liqoctl unpeer reads the ForeignCluster's role
    (ConsumerAndProvider), which Liqo's ForeignCluster controller derives from exactly this: a Tenant for
    the peer makes it a consumer (status.go, handleAuthenticationModuleStatus). It is read at its source
    because the role lags behind, and turns from ConsumerAndProvider to Consumer as soon as this
    unpeering deletes the forward Identity, before the network's turn comes."""
    tenants = local.find(r.TENANT, labels=f"{naming.REMOTE_CLUSTER_ID}={provider_id}")
    return any(not t["metadata"].get("deletionTimestamp") for t in tenants)


def mark_unreachable(consumer: ClusterClient, provider_id: str) -> None:
    """Annotate the provider's ForeignCluster permanently unreachable (liqoctl force unpeer), once."""
    patch = unpeering.unreachable_patch(consumer.get(r.FOREIGN_CLUSTER, provider_id))
    if patch is not None:
        consumer.merge_patch(r.FOREIGN_CLUSTER, provider_id, None, patch)


def delete_namespaces(clients: dict[str, ClusterClient | None], doomed: list[tuple[str, str]]) -> list[str]:
    """Delete these tenant namespaces (side, name); what is still there, until the namespace controller has
    emptied and removed them."""
    left = []
    for side, name in doomed:
        client = clients[side]
        if client is None:
            continue
        found = client.get(r.NAMESPACE, name)
        if found is None:
            continue
        if not found["metadata"].get("deletionTimestamp"):
            client.delete(r.NAMESPACE, name)
        left.append(f"Namespace {name} on the {client.side} (its contents are being deleted)")
    return left
