"""Tenant namespaces: one per peer on each cluster."""

from __future__ import annotations

from liqo_peering.liqo import naming
from liqo_peering.liqo.common import NONE, Common, decorate
from liqo_peering.liqo.context import metadata


def tenant_namespace(peer_cluster_id: str, name: str, owner: dict[str, str], common: Common = NONE) -> dict:
    labels = {
        naming.REMOTE_CLUSTER_ID: peer_cluster_id,
        naming.TENANT_NAMESPACE_LABEL: "true",
        **{f"pod-security.kubernetes.io/{mode}": "privileged" for mode in naming.POD_SECURITY},
        **owner,
    }
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": decorate(metadata(name, None, labels), common)}


def tenant_namespace_selector(peer_cluster_id: str) -> str:
    return f"{naming.REMOTE_CLUSTER_ID}={peer_cluster_id},{naming.TENANT_NAMESPACE_LABEL}=true"


TENANT_ACCESS_BINDING = "liqo-peering-operator-tenant-access"


def tenant_access_binding(
    namespace: str, cluster_role: str, sa_namespace: str, sa_name: str, owner: dict[str, str], common: Common = NONE
) -> dict:
    """RoleBinding giving the operator's ServiceAccount a ClusterRole (Secret access) in one tenant namespace.

    Tenant namespaces appear at run time, so a chart cannot name them in a Role: the operator, allowed
    to `bind` that one ClusterRole, grants it to itself where it needs it instead of reading Secrets
    cluster-wide.
    """
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": decorate(metadata(TENANT_ACCESS_BINDING, namespace, dict(owner)), common),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace}],
    }
