"""The watch hub: one informer per (cluster, kind, scope), shared by every peering, with events routed
to the peerings they concern, as controller-runtime's shared informers and event handlers do.

A peering declares its routes after each pass (``peering_routes``): which informer, and which objects
of it concern the peering (by namespace, name or label). Every informer on the consumer lists and watches
with a label or field selector (none is ``unscoped``), so that what the operator holds follows its
peerings, not the size of the cluster. The hub starts an informer when its first route appears and stops
it when its last route goes. Every (re)list wakes every peering routed to it once; and a route that joins
an informer already running wakes its peering once, since the pass that declared it read the clusters
before the route existed (else a change in between would be a lost wake-up).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from liqo_peering.api.model import GatewayLocation
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.informer import Informer, Scope
from liqo_peering.liqo import certificates, naming
from liqo_peering.liqo import peeringuser as pu
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.context import PeeringContext

Wake = Callable[[Hashable, str], None]  # (peering key, kind of the object that changed)
# What a wake says when the kubeconfig Secret changed, or when an informer (re)listed (anything may have).
KUBECONFIG, RELISTED = "kubeconfig", "relisted"
# Liqo's cluster-ID ConfigMap changed on either cluster (such as its version label, on an upgrade of Liqo).
LIQO_IDENTITY = "liqo-identity"
HEALTH_CHANGED = "health"  # the provider went down or came back (the probe)
MEMBERS = "members"  # an object a LiqoPeeringSet selects (a Secret, a Cluster, a ClusterProfile) changed


@dataclass(frozen=True)
class Route:
    """One informer, and which of its objects concern one peering."""

    client: ClusterClient
    scope: Scope
    namespace: str | None = None  # the object's namespace
    name: str | None = None  # the object's name
    label: tuple[str, str] | None = None  # a label the object carries
    wake_as: str | None = None  # what the peering is told changed (default: the kind)

    def matches(self, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.name is not None and meta.get("name") != self.name:
            return False
        return self.label is None or (meta.get("labels") or {}).get(self.label[0]) == self.label[1]

    @property
    def informer_key(self) -> tuple[int, Scope]:
        return (id(self.client), self.scope)


def peering_routes(
    local: ClusterClient,
    remote: ClusterClient | None,
    ctx: PeeringContext | None,
    secret: tuple[str, str] | None,
    namespaced_tenant_reads: bool = False,
    minted_secret: str | None = None,
    mints: bool = True,
    reverse: bool = False,
    liqo_namespaces: tuple[str, str] | None = None,
    gateway_location: GatewayLocation = "Provider",
    profile: tuple[str, str] | None = None,
    restarts: bool = False,
) -> list[Route]:
    """What wakes a peering: its kubeconfig Secret or its ClusterProfile (``profile``), and the minted Secret; once
    its context is known, its stage objects on both clusters, the ForeignCluster, the nonce Secrets, the virtual
    Node and the virtual kubelet's Pods.

    On the consumer, Liqo's kinds are watched cluster-wide (one informer each for all peerings), narrowed
    by the label Liqo puts on all of them, and routed by tenant namespace. On a provider, the informers
    cover the one tenant namespace this consumer has there. ``namespaced_tenant_reads``: the operator
    may read Pods only inside tenant namespaces (watchNamespaces mode), so that informer is per namespace.
    ``reverse``: the reverse direction of a bidirectional peering is on (or being removed); its objects
    wake the peering too (reverse_routes). ``liqo_namespaces``: Liqo's namespace on the consumer and on the
    provider, from the spec, for a peering stopped before its context is known. ``gateway_location``: the
    cluster whose gateway serves (spec.networking.gatewayServer.location), which says which gateway kind each
    cluster holds. ``minted_secret``: the Secret the peering mints its credential into, a credential when it
    ``mints`` (spec.credentials.mint), else one left from when it did, which the pass revokes. ``restarts``:
    --restart-liqo-on-renewal, which waits for the kubeconfig Secrets Liqo writes.
    """
    routes = credential_routes(local, secret, profile, minted_secret, mints)
    if remote is not None:
        # The provider's health: a provider that goes down (or hangs) wakes its peerings, as does its return.
        routes.append(Route(remote, Scope(r.HEALTH), wake_as=HEALTH_CHANGED))
    if ctx is not None:
        liqo_namespaces = (ctx.consumer.liqo_namespace, ctx.provider.liqo_namespace)
    if remote is not None and liqo_namespaces is not None:
        # Which Liqo runs on each side: an upgrade of either is discovered again, also for a peering refused
        # for its Liqo versions (engine/discovery.check_versions).
        for client, liqo_ns in zip((local, remote), liqo_namespaces, strict=True):
            scope = Scope(r.CONFIGMAP, liqo_ns, labels=naming.CLUSTER_ID_CONFIGMAP_SELECTOR)
            routes.append(Route(client, scope, wake_as=LIQO_IDENTITY))
    if ctx is None or remote is None:
        return routes
    provider, tenant_ns = ctx.provider.cluster_id, ctx.consumer_tenant_ns
    local_gateway, remote_gateway = gateway_kinds(gateway_location)
    for res in (*LABELLED_KINDS, local_gateway):
        routes.append(Route(local, labelled_scope(res), namespace=tenant_ns))
    if restarts and certificates.loads_identity_once(ctx.consumer.liqo_version):
        # Liqo before v1.2 reads a renewed identity only when it starts: the kubeconfig Secrets it writes tell
        # when what read the old one may restart (engine/renewal.py).
        routes.append(
            Route(local, Scope(r.SECRET, tenant_ns, labels=naming.identity_secrets(provider)), namespace=tenant_ns)
        )
    routes += [
        Route(local, GATEWAY_DEPLOYMENTS, namespace=tenant_ns),
        Route(local, FOREIGN_CLUSTERS, name=provider),
        Route(local, SIGNED_NONCES, namespace=tenant_ns),
        Route(local, VIRTUAL_NODES, label=(naming.REMOTE_CLUSTER_ID, provider)),
        vk_pods_route(local, tenant_ns, namespaced_tenant_reads),
    ]
    remote_ns = ctx.provider_tenant_ns
    routes.append(
        Route(remote, Scope(r.SECRET, remote_ns, fields=f"metadata.name={naming.NONCE_SECRET}"), namespace=remote_ns)
    )
    for res in (r.CONFIGURATION, remote_gateway, r.CONNECTION, r.TENANT):
        routes.append(Route(remote, Scope(res, remote_ns), namespace=remote_ns))
    if remote_gateway == r.GATEWAY_CLIENT:
        # The client's Deployment, where the pass waits for it to be ready (the server's it does not read).
        gateways = Scope(r.DEPLOYMENT, remote_ns, labels=naming.GATEWAY_COMPONENT_SELECTOR)
        routes.append(Route(remote, gateways, namespace=remote_ns))
    if reverse:
        routes += reverse_routes(local, remote, ctx, restarts)
    return routes


# Liqo's kinds a peering's stages make or read on the consumer, beside the gateway the consumer holds.
LABELLED_KINDS = (r.CONFIGURATION, r.CONNECTION, r.IDENTITY, r.RESOURCE_SLICE, r.VIRTUAL_NODE, r.PUBLIC_KEY)


def labelled_scope(res: r.Resource) -> Scope:
    """Every object of one of Liqo's kinds on the consumer that concerns a peer: Liqo labels them all with the
    peer's cluster ID."""
    return Scope(res, labels=naming.REMOTE_CLUSTER_ID, whole=True)


# The consumer's cluster-wide scopes that peerings route to (peering_routes), beside labelled_scope's.
# The gateways' Deployments, by the label Liqo's gateway templates put on them all.
# Not whole: templates of one's own (spec.skipValidation) may leave the label out.
GATEWAY_DEPLOYMENTS = Scope(r.DEPLOYMENT, labels=naming.GATEWAY_COMPONENT_SELECTOR)
# Liqo finds a ForeignCluster by this label too (foreigncluster.GetForeignClusterByID).
FOREIGN_CLUSTERS = Scope(r.FOREIGN_CLUSTER, labels=naming.REMOTE_CLUSTER_ID, whole=True)
# RBAC lets the operator list Secrets of this one name in every tenant namespace.
SIGNED_NONCES = Scope(r.SECRET, fields=f"metadata.name={naming.SIGNED_NONCE_SECRET}")
VIRTUAL_NODES = Scope(r.NODE, labels=f"{naming.VIRTUAL_NODE_TYPE}={naming.VIRTUAL_NODE_TYPE_VALUE}", whole=True)
VK_PODS = Scope(r.POD, labels=f"{naming.VK_COMPONENT}={naming.VK_COMPONENT_VALUE}")


def vk_pods_route(local: ClusterClient, tenant_ns: str, namespaced_tenant_reads: bool) -> Route:
    """The virtual kubelets' Pods of a peering, from the informer every peering shares (one per tenant namespace
    when the operator may read only there)."""
    scope = Scope(r.POD, tenant_ns, VK_PODS.labels) if namespaced_tenant_reads else VK_PODS
    return Route(local, scope, namespace=tenant_ns)


def consumer_scopes(namespaced_tenant_reads: bool = False) -> list[Scope]:
    """The consumer's cluster-wide scopes that any peering routes to, whichever cluster runs its gateway
    server: started with the operator (WatchHub.pin), as controller-runtime starts a controller's informers,
    so that establishing a peering costs no list and watch of its own there. Label-scoped: with no peering
    they hold nothing."""
    kinds = (*LABELLED_KINDS, r.GATEWAY_CLIENT, r.GATEWAY_SERVER)
    pods = [] if namespaced_tenant_reads else [VK_PODS]
    return [*map(labelled_scope, kinds), GATEWAY_DEPLOYMENTS, FOREIGN_CLUSTERS, SIGNED_NONCES, VIRTUAL_NODES, *pods]


def secret_route(client: ClusterClient, namespace: str, name: str) -> Route:
    """The kubeconfig Secret the peering references, watched by its name alone: a Secret of a user carries no
    label of ours, and the namespace's other Secrets (Helm's releases, ...) are not the
    operator's to hold. A changed reference is a new route, whose informer lists (and wakes) at once."""
    return Route(client, Scope(r.SECRET, namespace, fields=name_field(name)), name=name, wake_as=KUBECONFIG)


def profile_route(client: ClusterClient, namespace: str, name: str) -> Route:
    """The ClusterProfile the peering reaches its provider through, watched by its name: a change of its status
    (its access providers, its health) or its deletion wakes the peering as a kubeconfig change does."""
    return Route(client, Scope(r.CLUSTER_PROFILE, namespace, fields=name_field(name)), name=name, wake_as=KUBECONFIG)


def minted_route(client: ClusterClient, namespace: str, name: str, mints: bool) -> Route:
    """The minted kubeconfig Secret, in the informer of every Secret the operator minted in the namespace (by
    its label), shared by the peerings there: one without spec.credentials.mint still reads there, each pass,
    whether one is left to revoke. Only a credential in use wakes its peering as a kubeconfig change does."""
    # Not whole: the namespace's other Secrets (the kubeconfig Secrets) carry no such label.
    scope = Scope(r.SECRET, namespace, labels=pu.MINTED_SELECTOR)
    return Route(client, scope, name=name, wake_as=KUBECONFIG if mints else None)


def name_field(name: str) -> str:
    return f"metadata.name={name}"


def unscoped(scope: Scope) -> bool:
    """An informer with no selector across all namespaces: it would hold every object of its kind in the
    cluster. No route makes one (a unit test and the audit of an end-to-end test check)."""
    return scope.namespace is None and scope.labels is None and scope.fields is None and scope.res != r.HEALTH


def gateway_kinds(location: GatewayLocation) -> tuple[r.Resource, r.Resource]:
    """The gateway kind on the consumer and on the provider: the server is on the cluster of ``location``."""
    if location == "Consumer":
        return r.GATEWAY_SERVER, r.GATEWAY_CLIENT
    return r.GATEWAY_CLIENT, r.GATEWAY_SERVER


def credential_routes(
    local: ClusterClient,
    secret: tuple[str, str] | None,
    profile: tuple[str, str] | None = None,
    minted_secret: str | None = None,
    mints: bool = True,
) -> list[Route]:
    """Where a peering's provider credential comes from: its kubeconfig Secret or its ClusterProfile, and the
    minted Secret (see peering_routes). Their informers serve each pass's reads of them."""
    routes = [secret_route(local, *secret)] if secret is not None else []
    if profile is not None:
        routes.append(profile_route(local, *profile))
    if minted_secret is not None and (source := secret or profile) is not None:
        routes.append(minted_route(local, source[0], minted_secret, mints))
    return routes


def reverse_routes(
    local: ClusterClient, remote: ClusterClient, ctx: PeeringContext, restarts: bool = False
) -> list[Route]:
    """The reverse direction's objects: on the provider, what its consumer side holds (signed nonce, Identity
    and its kubeconfig Secret, ResourceSlice, VirtualNode, the virtual kubelet's Pods, all in its tenant
    namespace for this cluster, and the virtual Node); here, the nonce and the Tenant in the tenant namespace
    for the provider. Informers the forward direction already has are shared (the hub keys them by cluster
    and scope). ``restarts``: as for peering_routes, the provider's Liqo restarted on renewal, which waits for
    the ResourceSlices' kubeconfig Secrets too."""
    consumer, tenant_ns, remote_ns = ctx.consumer.cluster_id, ctx.consumer_tenant_ns, ctx.provider_tenant_ns
    kubeconfigs = naming.control_plane_secrets(consumer)
    if restarts and certificates.loads_identity_once(ctx.provider.liqo_version):
        kubeconfigs = naming.identity_secrets(consumer)
    routes = [
        Route(local, labelled_scope(r.TENANT), namespace=tenant_ns),
        Route(local, Scope(r.SECRET, fields=f"metadata.name={naming.NONCE_SECRET}"), namespace=tenant_ns),
        Route(
            remote,
            Scope(r.SECRET, remote_ns, fields=f"metadata.name={naming.SIGNED_NONCE_SECRET}"),
            namespace=remote_ns,
        ),
        # The ControlPlane kubeconfig Liqo makes for the Identity: removing the direction waits for it to go; and
        # with restarts each identity's, written once renewed (engine/renewal.py).
        Route(remote, Scope(r.SECRET, remote_ns, labels=kubeconfigs), namespace=remote_ns),
        Route(
            remote,
            Scope(r.NODE, labels=f"{naming.VIRTUAL_NODE_TYPE}={naming.VIRTUAL_NODE_TYPE_VALUE}"),
            label=(naming.REMOTE_CLUSTER_ID, consumer),
        ),
        Route(
            remote,
            Scope(r.POD, remote_ns, labels=f"{naming.VK_COMPONENT}={naming.VK_COMPONENT_VALUE}"),
            namespace=remote_ns,
        ),
    ]
    for res in (r.IDENTITY, r.RESOURCE_SLICE, r.VIRTUAL_NODE):
        routes.append(Route(remote, Scope(res, remote_ns), namespace=remote_ns))
    return routes


def teardown_routes(
    local: ClusterClient,
    remote: ClusterClient | None,
    ctx: PeeringContext,
    *,
    reverse: bool = False,
    namespaces: tuple[tuple[str, str], ...] = (),
    gateway_location: GatewayLocation = "Provider",
    namespaced_tenant_reads: bool = False,
    credentials: Sequence[Route] = (),
) -> list[Route]:
    """What wakes an unpeering: the objects it deletes and waits for, in the informers a peering uses (shared
    with any peering still running), so that each phase follows the last one's deletion as it happens.
    ``remote`` is None when only this cluster is cleaned (force-delete). Liqo's ControlPlane kubeconfig Secret
    of the Identity is watched too: unpeering ends only once Liqo has released it; and so are the Renews and
    NamespaceMaps Liqo copies to the provider, which the Tenant waits for. ``credentials``: the peering's
    credential_routes, whose informers (kept from its peering) serve each pass's reads of them, as do those of
    the Tenants here, which say whether the provider consumes this cluster too: a pass then asks the API
    servers for nothing it read before."""
    provider, tenant_ns = ctx.provider.cluster_id, ctx.consumer_tenant_ns
    if not tenant_ns:
        return list(credentials)  # no tenant namespace here: nothing of the peering was made, nothing to wait for
    local_gateway, remote_gateway = gateway_kinds(gateway_location)
    # The tenant namespaces unpeering deletes (spec.deletion.deleteTenantNamespaces, force-delete), each by name.
    clients = {"consumer": local, "provider": remote}
    gone = [
        Route(client, Scope(r.NAMESPACE, fields=f"metadata.name={name}"), name=name)
        for side, name in namespaces
        if (client := clients[side]) is not None
    ]
    kinds = (r.RESOURCE_SLICE, r.VIRTUAL_NODE, r.IDENTITY, local_gateway, r.PUBLIC_KEY, r.CONFIGURATION)
    routes = [*credentials, *gone, *(Route(local, labelled_scope(res), namespace=tenant_ns) for res in kinds)]
    if not reverse:  # else reverse_routes has it
        routes.append(Route(local, labelled_scope(r.TENANT), namespace=tenant_ns))
    routes += [
        Route(local, SIGNED_NONCES, namespace=tenant_ns),
        # A ResourceSlice waits for its virtual kubelet restarted for a renewed certificate (engine/teardown.py).
        vk_pods_route(local, tenant_ns, namespaced_tenant_reads),
        Route(local, Scope(r.SECRET, tenant_ns, labels=naming.control_plane_secrets(provider)), namespace=tenant_ns),
        # The originals of what Liqo's CRD replicator copied to the provider: the Tenant waits for them.
        *(Route(local, Scope(res, labels=naming.REMOTE_ID), namespace=tenant_ns) for res in (r.RENEW, r.NAMESPACE_MAP)),
    ]
    if remote is None or not ctx.provider_tenant_ns:
        return routes
    remote_ns = ctx.provider_tenant_ns
    routes.append(
        Route(remote, Scope(r.SECRET, remote_ns, fields=f"metadata.name={naming.NONCE_SECRET}"), namespace=remote_ns)
    )
    for res in (r.CONFIGURATION, remote_gateway, r.TENANT):
        routes.append(Route(remote, Scope(res, remote_ns), namespace=remote_ns))
    if reverse:
        routes += reverse_routes(local, remote, ctx)
    return routes


def set_routes(
    local: ClusterClient, namespace: str, name: str, members: tuple[r.Resource, str] | None = None
) -> list[Route]:
    """What wakes a LiqoPeeringSet: the objects of its namespace it selects (``members``: their kind and
    fleet.selector's query; None while its spec is unreadable), and its LiqoPeerings (their status, their
    deletion). A label change that starts or ends a match reaches the watch too: the API server sends an
    object that leaves a watch's selector as DELETED, and one that enters it as ADDED. The LiqoPeering
    informer is one per namespace, shared by every set there (narrowed to LiqoPeerings of some set)."""
    routes = [Route(local, Scope(r.LIQOPEERING, namespace, labels=naming.SET_LABEL), label=(naming.SET_LABEL, name))]
    if members is not None:
        resource, selector = members
        routes.append(Route(local, Scope(resource, namespace, labels=selector), wake_as=MEMBERS))
    return routes


class WatchHub:
    def __init__(self, wake: Wake) -> None:
        self._wake = wake
        self._lock = threading.Lock()
        self._informers: dict[tuple[int, Scope], Informer] = {}
        self._routes: dict[tuple[int, Scope], dict[Hashable, list[Route]]] = {}
        self._by_peering: dict[Hashable, set[Route]] = {}
        self._pinned: set[tuple[int, Scope]] = set()  # run whether or not a route uses them (pin)

    def pin(self, client: ClusterClient, scopes: list[Scope]) -> None:
        """Start informers of ``scopes`` on ``client`` now and keep them running without routes: the peerings
        that route to them later find them listed (see consumer_scopes)."""
        to_start = []
        with self._lock:
            for scope in scopes:
                route = Route(client, scope)
                self._pinned.add(route.informer_key)
                if route.informer_key not in self._informers:
                    informer = self._informers[route.informer_key] = self._new_informer(route)
                    to_start.append(informer)
        for informer in to_start:
            informer.start()

    def set_routes(self, key: Hashable, routes: list[Route]) -> None:
        """Make ``routes`` the peering's routes: informers start and stop as needed."""
        wanted = set(routes)
        wake_now = False
        to_start: list[Informer] = []
        with self._lock:
            old = self._by_peering.get(key, set())
            for route in old - wanted:
                self._unroute(key, route)
            for route in wanted - old:
                ikey = route.informer_key
                self._routes.setdefault(ikey, {}).setdefault(key, []).append(route)
                informer = self._informers.get(ikey)
                if informer is None:
                    informer = self._informers[ikey] = self._new_informer(route)
                    to_start.append(informer)
                elif informer.lists:
                    wake_now = True  # it listed before this route joined: what it saw is unknown here
            self._by_peering[key] = wanted
            stopped = self._sweep()
        for informer in stopped:
            informer.stop()
        for informer in to_start:
            informer.start()
        if wake_now:
            self._wake(key, RELISTED)

    def drop(self, key: Hashable) -> None:
        """Forget the peering's routes, in one step: a pass of the peering setting routes at the same time
        must not slip between unrouting and forgetting, or its routes (and informers) would be orphaned."""
        with self._lock:
            for route in self._by_peering.pop(key, set()):
                self._unroute(key, route)
            stopped = self._sweep()
        for informer in stopped:
            informer.stop()

    def forget_client(self, client: ClusterClient) -> None:
        """A closed client: no informer of it may outlive it, whatever routes still name it (a safety net:
        informers left running by a peering that is gone keep threads and connections open for good)."""
        with self._lock:
            for key, routes in list(self._by_peering.items()):
                self._by_peering[key] = {route for route in routes if route.client is not client}
            for ikey in [ikey for ikey in self._routes if ikey[0] == id(client)]:
                self._routes.pop(ikey)
            stopped = self._sweep()
        for informer in stopped:
            informer.stop()

    def stop(self) -> None:
        with self._lock:
            informers = list(self._informers.values())
            self._informers.clear()
            self._routes.clear()
            self._by_peering.clear()
            self._pinned.clear()
        for informer in informers:
            informer.stop()

    def unsynced(self, side: str) -> list[str]:
        """The informers on one side (the local cluster: "consumer") whose store is not synced: readiness
        waits for them (health.py). The provider side is left out: a provider that is down is one
        peering's error, not the operator's; so are pinned informers no peering uses yet (Liqo may not be
        installed: no peering can go on, but the operator serves)."""
        with self._lock:
            informers = [i for ikey, i in self._informers.items() if self._routes.get(ikey)]
        return [
            f"informer {i.scope.res.plural} in {i.scope.namespace or 'all namespaces'} has not synced"
            for i in informers
            if i.client.side == side and not i.synced
        ]

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"informers": len(self._informers), "peerings": len(self._by_peering)}

    # -- internals ---------------------------------------------------------------------------------
    def _new_informer(self, route: Route) -> Informer:
        ikey = route.informer_key
        kind = route.scope.res.kind

        def on_list(_items: list[dict[str, Any]]) -> None:
            with self._lock:
                routed = list(self._routes.get(ikey, {}).items())
            for peering, routes in routed:
                # A relisted kubeconfig Secret may have changed: say so (the next pass discovers again).
                self._wake(peering, next((r.wake_as for r in routes if r.wake_as), RELISTED))

        def on_event(_type: str, obj: dict[str, Any]) -> None:
            with self._lock:
                routed = list(self._routes.get(ikey, {}).items())
            for peering, routes in routed:
                matched = next((route for route in routes if route.matches(obj)), None)
                if matched is not None:
                    self._wake(peering, matched.wake_as or kind)

        return Informer(route.client, route.scope, on_list, on_event)

    def _peerings_of(self, ikey: tuple[int, Scope]) -> list[Hashable]:
        with self._lock:
            return list(self._routes.get(ikey, {}))

    def _unroute(self, key: Hashable, route: Route) -> None:
        routes = self._routes.get(route.informer_key, {})
        mine = [x for x in routes.get(key, []) if x != route]
        if mine:
            routes[key] = mine
        else:
            routes.pop(key, None)

    def _sweep(self) -> list[Informer]:
        """Informers no route uses any more (call with the lock held)."""
        idle = [ikey for ikey in self._informers if not self._routes.get(ikey) and ikey not in self._pinned]
        for ikey in idle:
            self._routes.pop(ikey, None)
        return [self._informers.pop(ikey) for ikey in idle]
