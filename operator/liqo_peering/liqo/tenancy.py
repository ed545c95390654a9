"""Tenant namespaces: one per peer on each cluster."""

from __future__ import annotations

from liqo_peering.liqo import naming
from liqo_peering.liqo.context import metadata


def tenant_namespace(peer_cluster_id: str, name: str, owner: dict[str, str]) -> dict:
    labels = {
        naming.REMOTE_CLUSTER_ID: peer_cluster_id,
        naming.TENANT_NAMESPACE_LABEL: "true",
        **{f"pod-security.kubernetes.io/{mode}": "privileged" for mode in naming.POD_SECURITY},
        **owner,
    }
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(name, None, labels)}


def tenant_namespace_selector(peer_cluster_id: str) -> str:
    return f"{naming.REMOTE_CLUSTER_ID}={peer_cluster_id},{naming.TENANT_NAMESPACE_LABEL}=true"
