"""Connect to the provider and learn both clusters' IDs and CIDRs (what every stage needs)."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from liqo_peering.api.model import LiqoPeeringSpec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.errors import ClusterForbidden, LiqoNotInstalled, LiqoNotReady, SecretKeyMissing, SecretNotFound
from liqo_peering.kubeconfig import RemoteKubeconfig, load_remote_kubeconfig
from liqo_peering.liqo import naming, resources
from liqo_peering.liqo.context import ClusterInfo
from liqo_peering.liqo.tenancy import tenant_access_binding, tenant_namespace, tenant_namespace_selector


@dataclass(frozen=True)
class KubeconfigPolicy:
    allow_exec: bool = False
    allow_insecure_tls: bool = False


@dataclass(frozen=True)
class TenantAccess:
    """Bind this ClusterRole to this ServiceAccount in every consumer tenant namespace (see tenancy.py)."""

    cluster_role: str
    sa_namespace: str
    sa_name: str


def read_remote_kubeconfig(
    local: ClusterClient, namespace: str, peering: str, spec: LiqoPeeringSpec, policy: KubeconfigPolicy
) -> RemoteKubeconfig:
    ref = spec.remote_kubeconfig_secret_ref
    secret = local.get(resources.SECRET, ref.name, namespace)
    if secret is None:
        raise SecretNotFound(
            f"LiqoPeering {namespace}/{peering}: Secret {namespace}/{ref.name} not found; create it with the"
            f" provider's kubeconfig under key {ref.key!r}"
        )
    value = (secret.get("data") or {}).get(ref.key)
    if not value:
        keys = ", ".join(sorted((secret.get("data") or {}).keys())) or "none"
        raise SecretKeyMissing(
            f"LiqoPeering {namespace}/{peering}: Secret {namespace}/{ref.name} has no key {ref.key!r} (keys: {keys});"
            f" add it or set spec.remoteKubeconfigSecretRef.key"
        )
    return load_remote_kubeconfig(
        base64.b64decode(value),
        context=spec.remote_context,
        allow_exec=policy.allow_exec,
        allow_insecure_tls=policy.allow_insecure_tls,
    )


def cluster_id(client: ClusterClient, liqo_namespace: str) -> str:
    """The cluster ID from Liqo's ConfigMap; a clear error when Liqo is absent."""
    maps = client.find(resources.CONFIGMAP, liqo_namespace, labels=naming.CLUSTER_ID_CONFIGMAP_SELECTOR)
    found = next((m.get("data", {}).get(naming.CLUSTER_ID_KEY) for m in maps if m.get("data")), None)
    if not found:
        field = "liqoNamespace" if client.side == "consumer" else "remoteLiqoNamespace"
        raise LiqoNotInstalled(
            f"no Liqo cluster-ID ConfigMap in namespace {liqo_namespace!r} of the {client.side} cluster"
            f" ({client.describe}); install Liqo there or fix spec.{field}"
        )
    return str(found)


def cluster_info(client: ClusterClient, liqo_namespace: str) -> ClusterInfo:
    """Cluster ID from Liqo's ConfigMap, CIDRs from Liqo's Networks; clear errors when Liqo is absent."""
    cluster_id_ = cluster_id(client, liqo_namespace)
    pods = client.find(resources.NETWORK, liqo_namespace, labels=f"{naming.NETWORK_TYPE}=pod-cidr")
    external = client.find(resources.NETWORK, liqo_namespace, labels=f"{naming.NETWORK_TYPE}=external-cidr")
    pod_cidrs = tuple(str(n["status"]["cidr"]) for n in pods if (n.get("status") or {}).get("cidr"))
    ext = [str(n["status"]["cidr"]) for n in external if (n.get("status") or {}).get("cidr")]
    if not pod_cidrs or len(ext) != 1:
        raise LiqoNotReady(
            f"Liqo on the {client.side} cluster ({client.describe}) has not published its pod and external CIDRs"
            f" (ipam.liqo.io Networks in {liqo_namespace!r} without status.cidr); wait for Liqo's IPAM to be ready"
        )
    return ClusterInfo(cluster_id=cluster_id_, pod_cidrs=pod_cidrs, external_cidr=ext[0], liqo_namespace=liqo_namespace)


def ensure_tenant_namespace(client: ClusterClient, peer_id: str, owner: dict[str, str]) -> str:
    """Find the tenant namespace for a peer by Liqo's labels, or create the default one."""
    found = find_tenant_namespace(client, peer_id)
    if found:
        return found
    name = naming.tenant_namespace(peer_id)
    client.create_if_absent(resources.NAMESPACE, tenant_namespace(peer_id, name, owner))
    return name


def find_tenant_namespace(client: ClusterClient, peer_id: str) -> str | None:
    try:
        found = client.find(resources.NAMESPACE, labels=tenant_namespace_selector(peer_id))
    except ClusterForbidden:
        # Liqo's peering-user may get only its own tenant namespace (which liqoctl generate peering-user
        # made, under Liqo's default name), not list namespaces.
        ns = client.get(resources.NAMESPACE, naming.tenant_namespace(peer_id))
        return str(ns["metadata"]["name"]) if ns is not None else None
    return str(sorted(ns["metadata"]["name"] for ns in found)[0]) if found else None


def ensure_tenant_access(client: ClusterClient, namespace: str, access: TenantAccess, owner: dict[str, str]) -> None:
    client.ensure(
        resources.ROLE_BINDING,
        tenant_access_binding(namespace, access.cluster_role, access.sa_namespace, access.sa_name, owner),
    )
