"""Stage 1 builders: Configuration, GatewayServer, GatewayClient, PublicKey (liqoctl network)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Literal

from liqo_peering.api.model import GatewayLocation, NetworkingSpec
from liqo_peering.fields import endpoint_ports, lists_ports, mapping, mapping_at, mappings_at, strings, text_at
from liqo_peering.liqo import naming, resources
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from liqo_peering.liqo.versions import LiqoVersion

# Liqo's API server proxy listens here (its chart's proxy Service).
API_SERVER_PROXY_PORT = 8118


def configuration(ctx: PeeringContext, described: ClusterInfo, namespace: str) -> dict[str, Any]:
    """Configuration created on one cluster to describe the OTHER cluster's CIDRs."""
    return {
        "apiVersion": resources.CONFIGURATION.api_version,
        "kind": resources.CONFIGURATION.kind,
        "metadata": ctx.metadata(described.cluster_id, namespace, ctx.labels(described.cluster_id)),
        "spec": {"remote": {"cidr": {"pod": list(described.pod_cidrs), "external": [described.external_cidr]}}},
    }


def configuration_ready(obj: dict[str, Any], version: LiqoVersion | None = None) -> bool:
    """Whether Liqo accepted the Configuration, as the Liqo of its cluster judges it.

    v1.2+: NetworkCIDRsConfigured=True for the current generation. Up to v1.1: both the pod and the external
    CIDR remapped in status.remote (liqoctl's IsConfigurationStatusSet). A version nobody can tell: the
    condition when there is one, else the older rule.
    """
    conds = mappings_at(obj, "status", "conditions")
    cond = next((c for c in conds if c.get("type") == "NetworkCIDRsConfigured"), None)
    newer = version.at_least(1, 2) if version is not None else None
    if newer or (newer is None and cond is not None):
        return (
            cond is not None
            and cond.get("status") == "True"
            and cond.get("observedGeneration") == obj["metadata"].get("generation")
        )
    # A CIDR field is a list since Liqo v1.0, a string before.
    cidr = mapping_at(obj, "status", "remote", "cidr")
    return bool(strings(cidr.get("pod")) and strings(cidr.get("external")))


Side = Literal["consumer", "provider"]


@dataclass(frozen=True)
class Gateways:
    """Where a peering's two gateways live. As liqoctl names them, each is named after the OTHER cluster and lives
    in its own cluster's tenant namespace for that cluster, and the template it refers to is in its own cluster's
    Liqo namespace."""

    server_side: Side
    client_side: Side
    server_name: str
    server_namespace: str
    server_template_namespace: str
    client_name: str
    client_namespace: str
    client_template_namespace: str

    @property
    def location(self) -> GatewayLocation:
        """The server's cluster as spec.networking.gatewayServer.location and status.gateway.server say it."""
        return "Consumer" if self.server_side == "consumer" else "Provider"


def gateways(ctx: PeeringContext, location: GatewayLocation) -> Gateways:
    """The gateways' places for spec.networking.gatewayServer.location: liqoctl peer swaps the two clusters'
    roles in its network step when --gw-server-service-location is Consumer."""
    on_consumer = location == "Consumer"
    server, client = (ctx.consumer, ctx.provider) if on_consumer else (ctx.provider, ctx.consumer)
    tenant_ns = {"consumer": ctx.consumer_tenant_ns, "provider": ctx.provider_tenant_ns}
    sides: tuple[Side, Side] = ("consumer", "provider") if on_consumer else ("provider", "consumer")
    server_side, client_side = sides
    # Each gateway is named after the cluster at the other end, in its own cluster's tenant namespace.
    return Gateways(
        server_side=server_side,
        client_side=client_side,
        server_name=client.cluster_id,
        server_namespace=tenant_ns[server_side],
        server_template_namespace=server.liqo_namespace,
        client_name=server.cluster_id,
        client_namespace=tenant_ns[client_side],
        client_template_namespace=client.liqo_namespace,
    )


def gateway_server(ctx: PeeringContext, spec: NetworkingSpec) -> dict[str, Any]:
    """GatewayServer on the cluster of spec.networking.gatewayServer.location, named after the other cluster."""
    server = spec.gateway_server
    where = gateways(ctx, server.location)
    endpoint: dict[str, Any] = {"port": server.port, "serviceType": server.service_type}
    if server.node_port is not None:
        endpoint["nodePort"] = server.node_port
    if server.load_balancer_ip is not None:
        endpoint["loadBalancerIP"] = server.load_balancer_ip
    return {
        "apiVersion": resources.GATEWAY_SERVER.api_version,
        "kind": resources.GATEWAY_SERVER.kind,
        "metadata": ctx.metadata(where.server_name, where.server_namespace, ctx.labels(where.server_name)),
        "spec": {
            "mtu": spec.mtu,
            "endpoint": endpoint,
            "serverTemplateRef": {
                "apiVersion": resources.WG_SERVER_TEMPLATE.api_version,
                "kind": resources.WG_SERVER_TEMPLATE.kind,
                "name": naming.SERVER_TEMPLATE,
                "namespace": where.server_template_namespace,
            },
        },
    }


def server_endpoint(server: dict[str, Any]) -> dict[str, Any] | None:
    """The server's published endpoint, once Liqo has set an address on it. For a NodePort server whose
    gateway Pod's node is not Ready, Liqo publishes the address "" (forgeEndpointStatusNodePort): no endpoint."""
    endpoint = mapping_at(server, "status", "endpoint")
    addresses = strings(endpoint.get("addresses"))
    return {**endpoint, "addresses": addresses} if addresses else None


def gateway_client(ctx: PeeringContext, spec: NetworkingSpec, endpoint: dict[str, Any]) -> dict[str, Any]:
    """GatewayClient on the cluster that does not serve, named after the serving one, dialing the server's
    endpoint (or spec.networking.gatewayClient's override), its port or ports in the form the server publishes."""
    override = spec.gateway_client
    where = gateways(ctx, spec.gateway_server.location)
    # In the server's form: the CRD of a Liqo that publishes the list form knows it, an older Liqo never sees it.
    ports = [override.port] if override.port else endpoint_ports(endpoint)
    dialed: dict[str, Any] = (
        {"ports": ports} if lists_ports(endpoint) else {"port": ports[0] if ports else endpoint.get("port")}
    )
    return {
        "apiVersion": resources.GATEWAY_CLIENT.api_version,
        "kind": resources.GATEWAY_CLIENT.kind,
        "metadata": ctx.metadata(where.client_name, where.client_namespace, ctx.labels(where.client_name)),
        "spec": {
            "mtu": spec.mtu,
            "endpoint": {
                "addresses": [override.address] if override.address else list(endpoint.get("addresses") or []),
                **dialed,
                "protocol": endpoint.get("protocol") or "UDP",
            },
            "clientTemplateRef": {
                "apiVersion": resources.WG_CLIENT_TEMPLATE.api_version,
                "kind": resources.WG_CLIENT_TEMPLATE.kind,
                "name": naming.CLIENT_TEMPLATE,
                "namespace": where.client_template_namespace,
            },
        },
    }


def gateway_spec_matches(actual: dict[str, Any], desired: dict[str, Any]) -> bool:
    """Whether a live gateway already has the desired parameters (else it is re-created)."""
    live = mapping_at(actual, "spec")
    want = desired["spec"]
    if live.get("mtu") != want["mtu"]:
        return False
    live_ep, want_ep = mapping(live.get("endpoint")), want["endpoint"]
    return all(live_ep.get(k) == v for k, v in want_ep.items())


def public_key(ctx: PeeringContext, peer_cluster_id: str, namespace: str, key_b64: str) -> dict[str, Any]:
    """PublicKey of the peer's gateway, created on this side; key_b64 is the Secret's base64 value."""
    labels = ctx.labels(peer_cluster_id, **{naming.GATEWAY_RESOURCE: "true"})
    return {
        "apiVersion": resources.PUBLIC_KEY.api_version,
        "kind": resources.PUBLIC_KEY.kind,
        "metadata": ctx.metadata(peer_cluster_id, namespace, labels),
        "spec": {"publicKey": key_b64},
    }


def gateway_secret_name(gateway: dict[str, Any]) -> str | None:
    return text_at(gateway, "status", "secretRef", "name")


def connection_state(connections: list[dict[str, Any]]) -> str | None:
    """Connected | Connecting | Error of the peer's Connection, or None when there is none yet."""
    for conn in connections:
        value = text_at(conn, "status", "value")
        if value:
            return value
    return "Connecting" if connections else None


def remap_address(configuration: dict[str, Any], address: str) -> str:
    """`address` (in the remote cluster's own pod or external CIDR) as this cluster reaches it.

    Liqo records in the Configuration's status the CIDRs it remapped the remote's to, when they clash with
    local ones. As Liqo's ipam MapAddressWithConfiguration does, the network part is swapped for the
    remapped one and the host part kept; an address outside both CIDRs, or not remapped, is unchanged.
    """
    spec_cidr = mapping_at(configuration, "spec", "remote", "cidr")
    status_cidr = mapping_at(configuration, "status", "remote", "cidr")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    for kind in ("pod", "external"):
        original, remapped = _primary(spec_cidr.get(kind)), _primary(status_cidr.get(kind))
        if original is None or remapped is None or original == remapped or original.version != remapped.version:
            continue
        if ip not in original:
            continue
        host = int(ip) & int(remapped.hostmask)
        return str(ipaddress.ip_address(int(remapped.network_address) | host))
    return address


def in_band_proxy_url(configuration: dict[str, Any], proxy_ip: str) -> str:
    """Tenant proxyURL for in-band authentication: the provider's API server proxy through the tunnel."""
    return f"http://{remap_address(configuration, proxy_ip)}:{API_SERVER_PROXY_PORT}"


def _primary(cidrs: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The first CIDR of a Configuration field (a list since Liqo v1.0, a string before)."""
    first = cidrs[0] if isinstance(cidrs, list) and cidrs else cidrs
    if not isinstance(first, str) or not first:
        return None
    try:
        return ipaddress.ip_network(first, strict=False)
    except ValueError:
        return None


def endpoint_addresses(endpoint: dict[str, Any] | None) -> list[str]:
    return strings(mapping(endpoint).get("addresses"))


def endpoint_urls(endpoint: dict[str, Any] | None) -> str:
    """A gateway endpoint as a firewall rule names it, ``udp://198.18.0.20:30392`` (Liqo's tunnel is UDP unless
    the endpoint says otherwise), several addresses or ports joined."""
    endpoint = mapping(endpoint)
    scheme = str(endpoint.get("protocol") or "UDP").lower()
    hosts = [f"[{a}]" if ":" in a else a for a in endpoint_addresses(endpoint)] or ["<no address>"]
    ports = endpoint_ports(endpoint)
    return ", ".join(f"{scheme}://{h}:{port}" for h in hosts for port in ports) if ports else ", ".join(hosts)


def endpoint_text(endpoint: dict[str, Any] | None) -> str:
    """A gateway endpoint as people write it, ``address:port/protocol``, several addresses or ports joined."""
    endpoint = mapping(endpoint)
    addresses = strings(endpoint.get("addresses")) or ["<no address>"]
    ports, protocol = endpoint_ports(endpoint), endpoint.get("protocol")
    hosts = [f"[{a}]" if ":" in a else a for a in addresses]  # an IPv6 address before its port
    text = ", ".join(f"{h}:{port}" for h in hosts for port in ports) if ports else ", ".join(hosts)
    return f"{text}/{protocol}" if protocol else text
