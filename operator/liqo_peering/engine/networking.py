"""Stage 1: networking (liqoctl network connect), one non-blocking pass."""

from __future__ import annotations

from typing import Any

from liqo_peering.clients import dns
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.engine.direction import KeyGiven, PeeringRun
from liqo_peering.engine.teardown import remove_networking
from liqo_peering.errors import GatewayUnreachable, LiqoNotReady
from liqo_peering.fields import dig
from liqo_peering.liqo import naming, networking
from liqo_peering.liqo import resources as r
from liqo_peering.stages import StageResult

STAGE = "networking"
MAX_LOOKUPS = 2  # hostnames of a gateway endpoint looked up when its tunnel fails
_UID, _SECRET_REF = ("metadata", "uid"), ("status", "secretRef", "name")


def _client(p: PeeringRun, side: str) -> ClusterClient:
    return p.consumer if side == "consumer" else p.provider


def _deployment(client: ClusterClient, gateway: str, namespace: str, labelled: bool = True) -> dict[str, Any] | None:
    """``labelled``: made from Liqo's own templates, which label every gateway Deployment (a gateway informer
    then knows one absent); templates of one's own (spec.skipValidation) may not."""
    carries = naming.GATEWAY_COMPONENT_SELECTOR if labelled else None
    return client.get(r.DEPLOYMENT, naming.gateway_deployment(gateway), namespace, carries=carries)


def _ready_replicas(dep: dict[str, Any] | None) -> int:
    return int(((dep or {}).get("status") or {}).get("readyReplicas") or 0)


def _deployment_ready(client: ClusterClient, gateway: str, namespace: str, labelled: bool = True) -> bool:
    return _ready_replicas(_deployment(client, gateway, namespace, labelled)) > 0


def _check_templates(p: PeeringRun, where: networking.Gateways, server: bool = True) -> None:
    """Liqo makes each gateway from its template: both are checked before anything is made (as liqoctl peer
    does), the client's again before the client is made (``server`` False)."""
    checks = (
        (_client(p, where.server_side), r.WG_SERVER_TEMPLATE, naming.SERVER_TEMPLATE, where.server_template_namespace),
        (_client(p, where.client_side), r.WG_CLIENT_TEMPLATE, naming.CLIENT_TEMPLATE, where.client_template_namespace),
    )
    for client, res, name, ns in checks[0 if server else 1 :]:
        if client.get(res, name, ns) is None:
            raise LiqoNotReady(
                f"{res.kind} {ns}/{name} is missing on the {client.side} cluster ({client.describe}); reinstall"
                f" Liqo there, or set spec.skipValidation to use your own gateway templates"
            )


def reconcile(p: PeeringRun) -> StageResult:
    spec = p.spec.networking
    if not spec.enabled:
        gone = remove_networking(p.consumer, p.provider, p.ctx, owned_only=True)
        return StageResult.disabled(STAGE, "networking is disabled" + ("" if gone else "; removing its objects"))
    ctx = p.ctx
    where = networking.gateways(ctx, spec.gateway_server.location)
    serving, dialing = _client(p, where.server_side), _client(p, where.client_side)
    validate = not p.spec.skip_validation

    # The gateway server on the cluster of spec.networking.gatewayServer.location; re-created when its parameters
    # changed.
    want_server = networking.gateway_server(ctx, spec)
    server = serving.get(r.GATEWAY_SERVER, where.server_name, where.server_namespace)
    if server is None and validate:
        _check_templates(p, where)
    if server is not None and not networking.gateway_spec_matches(server, want_server):
        serving.delete(r.GATEWAY_SERVER, where.server_name, where.server_namespace)
        dialing.delete(r.GATEWAY_CLIENT, where.client_name, where.client_namespace)
        return StageResult.waiting(STAGE, "RecreatingGateways", "gateway parameters changed: re-creating the gateways")
    # The server is made first, not once Liqo accepts the Configurations (liqoctl's order): Liqo makes its gateway
    # from the template alone, and its Pod starting is the longest wait of the stage. The client still waits for
    # the Configurations, as liqoctl's does.
    server = serving.ensure(r.GATEWAY_SERVER, want_server)
    consumer_conf = p.consumer.ensure(
        r.CONFIGURATION, networking.configuration(ctx, ctx.provider, ctx.consumer_tenant_ns)
    )
    provider_conf = p.provider.ensure(
        r.CONFIGURATION, networking.configuration(ctx, ctx.consumer, ctx.provider_tenant_ns)
    )
    pending = [
        c.side
        for c, conf, info in ((p.consumer, consumer_conf, ctx.consumer), (p.provider, provider_conf, ctx.provider))
        if not networking.configuration_ready(conf, info.liqo_version)
    ]
    if pending:
        return StageResult.waiting(
            STAGE,
            "WaitingForConfiguration",
            f"waiting for Liqo to accept the network Configuration on the {' and '.join(pending)}",
        )
    endpoint = networking.server_endpoint(server)
    client = dialing.get(r.GATEWAY_CLIENT, where.client_name, where.client_namespace)
    # A server that withdrew its address keeps its client: Liqo withdraws it while the gateway's node is not
    # Ready (as after an outage of the serving cluster's API server) and may not publish it again until something
    # else about the gateway changes; re-creating the client toward no address would cut a tunnel that is up. The
    # Connections below say whether it is.
    # The client is made as soon as the server has an address, not once its Pod is Ready too (liqoctl's order):
    # Liqo gives a NodePort server the address of its running Pod's node, and the client's Pod takes longer to
    # start than the server's to be Ready; the handshake starts with the client's first ping.
    if endpoint is not None or client is None:
        if endpoint is None:
            return StageResult.waiting(
                STAGE,
                "WaitingForGatewayServer",
                f"waiting for the gateway server on the {serving.side} to expose an endpoint",
            )
        want_client = networking.gateway_client(ctx, spec, endpoint)
        if client is not None and not networking.gateway_spec_matches(client, want_client):
            dialing.delete(r.GATEWAY_CLIENT, where.client_name, where.client_namespace)
            return StageResult.waiting(STAGE, "RecreatingGateways", "gateway client parameters changed: re-creating it")
        if client is None and validate:
            _check_templates(p, where, server=False)
        client = dialing.ensure(r.GATEWAY_CLIENT, want_client)
    # Each gateway's key goes to the other cluster as soon as Liqo points the gateway at it (status.secretRef, once
    # the gateway's Pod is active), not once the client's Deployment is Ready too: the client's gateway configures
    # the tunnel as it starts, and Liqo's connection check (its first ping one interval later) finds the server
    # holding the client's key.
    server_given = _give_key(
        p, "server", (serving, server, where.server_namespace), (dialing, where.client_name, where.client_namespace)
    )
    client_given = _give_key(
        p, "client", (dialing, client, where.client_namespace), (serving, where.server_name, where.server_namespace)
    )
    if not _deployment_ready(dialing, where.client_name, where.client_namespace, validate):
        return StageResult.waiting(
            STAGE, "WaitingForGatewayClient", f"waiting for the gateway client on the {dialing.side}"
        )
    if not server_given or not client_given:
        return StageResult.waiting(STAGE, "WaitingForGatewayKeys", "waiting for Liqo to generate the gateways' keys")

    states = {
        "consumer": networking.connection_state(
            p.consumer.find(
                r.CONNECTION, ctx.consumer_tenant_ns, labels=f"{naming.REMOTE_CLUSTER_ID}={ctx.provider.cluster_id}"
            )
        ),
        "provider": networking.connection_state(
            p.provider.find(
                r.CONNECTION, ctx.provider_tenant_ns, labels=f"{naming.REMOTE_CLUSTER_ID}={ctx.consumer.cluster_id}"
            )
        ),
    }
    failed = [side for side, state in states.items() if state == "Error"]
    if failed:
        raise _unreachable(dialing, serving, client, where, failed, validate)
    if all(state == "Connected" for state in states.values()):
        return StageResult.ready(STAGE, "the tunnel is Connected on both clusters")
    waiting = ", ".join(f"{side} {state or 'absent'}" for side, state in states.items())
    return StageResult.waiting(STAGE, "WaitingForConnection", f"waiting for the tunnel to connect ({waiting})")


def _unreachable(
    dialing: ClusterClient,
    serving: ClusterClient,
    client: dict[str, Any],
    where: networking.Gateways,
    failed: list[str],
    labelled: bool,
) -> GatewayUnreachable:
    """What to open, from where (Liqo's Connection does not say): the endpoint the gateway client dials, as a
    URL; a hostname in it that does not resolve; the client's Deployment as its cluster reports it."""
    endpoint = dig(client, "spec", "endpoint")
    dialed = networking.endpoint_urls(endpoint)
    # The provider publishes the addresses: a few looked up, each within its bound, so a list of them cannot
    # hold the pass.
    hosts = networking.endpoint_addresses(endpoint)[:MAX_LOOKUPS]
    unresolved = [f"{host} {why}" for host in hosts if (why := dns.unresolved(host))]
    dep = _deployment(dialing, where.client_name, where.client_namespace, labelled)
    wanted = int(((dep or {}).get("spec") or {}).get("replicas") or 1)
    deployment = (
        f"its Deployment {where.client_namespace}/{naming.gateway_deployment(where.client_name)} has"
        f" {_ready_replicas(dep)} of {wanted} replicas ready"
        if dep is not None
        else "its Deployment is missing"
    )
    names = f"; from the operator's Pod, {', '.join(unresolved)}" if unresolved else ""
    return GatewayUnreachable(
        f"the gateway client on the {dialing.side} cannot reach the gateway server on the {serving.side} at"
        f" {dialed}: Liqo's Connection is in Error on the {' and '.join(failed)} ({deployment}){names}. Open"
        f" {dialed} from the {dialing.side}'s gateway to the {serving.side}, or set the endpoint to dial:"
        f" spec.networking.gatewayServer (location, Service type, port) and spec.networking.gatewayClient"
        f" (address, port, when the server's published address is not the one to dial)"
    )


def _give_key(
    p: PeeringRun,
    which: str,
    source: tuple[ClusterClient, dict[str, Any], str],
    to: tuple[ClusterClient, str, str],
) -> bool:
    """Give one gateway's public key to the other cluster: a PublicKey named after the gateway's cluster, from the
    Secret Liqo generated for the gateway (``source``: its cluster, the gateway, its namespace). Whether it is
    given. Liqo makes a new key only with a new gateway or Secret: while the gateway and its Secret's name stay,
    passes woken by Liqo's objects (the tunnel coming up) take the key the last pass gave, and ensure its
    PublicKey again only where an informer serves it."""
    client, gateway, namespace = source
    to_client, name, to_namespace = to
    origin = (str(dig(gateway, *_UID) or ""), str(dig(gateway, *_SECRET_REF) or ""))
    known = p.memo.keys.get(which)
    if known is not None and known.source == origin:
        if to_client.cached(r.PUBLIC_KEY, name, to_namespace):
            to_client.ensure(r.PUBLIC_KEY, networking.public_key(p.ctx, name, to_namespace, known.key))
        return True
    key = _gateway_public_key(client, gateway, namespace)
    if not key:
        return False
    to_client.ensure(r.PUBLIC_KEY, networking.public_key(p.ctx, name, to_namespace, key))
    p.memo.keys[which] = KeyGiven(origin, key)
    return True


def _gateway_public_key(client: ClusterClient, gateway: dict[str, Any], namespace: str) -> str | None:
    """The base64 public key in the Secret Liqo generated for a gateway (status.secretRef)."""
    name = networking.gateway_secret_name(gateway)
    if not name:
        return None
    secret = client.get(r.SECRET, name, namespace)
    value = ((secret or {}).get("data") or {}).get("publicKey")
    return str(value) if value else None
