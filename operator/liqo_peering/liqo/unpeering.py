"""What unpeering does besides deleting the peering's objects (pure): liqoctl unpeer --delete-namespaces, and
liqoctl force unpeer's mark on the ForeignCluster (pkg/liqoctl/force/unpeer in Liqo v1.1+)."""

from __future__ import annotations

from typing import Any

from liqo_peering.liqo import naming


def unreachable_patch(foreign_cluster: dict[str, Any] | None) -> dict[str, Any] | None:
    """The merge patch marking the provider's ForeignCluster permanently unreachable, as liqoctl force unpeer
    does; None when there is no ForeignCluster or it carries the mark already. Liqo's CRD replicator then stops
    waiting for the provider before it releases what it replicated there, and the virtual node's drain deletes
    its Pods instead of evicting them (foreigncluster.IsDead: once the API server is not Established)."""
    if foreign_cluster is None:
        return None
    notes = (foreign_cluster.get("metadata") or {}).get("annotations") or {}
    if notes.get(naming.PERMANENTLY_UNREACHABLE) == "true":
        return None
    return {"metadata": {"annotations": {naming.PERMANENTLY_UNREACHABLE: "true"}}}


def namespaces_to_delete(
    tenant_namespaces: dict[str, str], *, delete_namespaces: bool, force: bool, other_direction: bool
) -> list[tuple[str, str]]:
    """(side, namespace) of the tenant namespaces unpeering deletes once Liqo's objects in them are gone.

    ``tenant_namespaces``: each side's found one ("" when none). spec.deletion.deleteTenantNamespaces deletes
    both, as liqoctl unpeer --delete-namespaces does; force-delete the consumer's only, as liqoctl force unpeer
    does, the provider being out of reach. Both stay while ``other_direction`` (the provider consumes this
    cluster too, through a peering that is not this one): its objects live in the same namespaces.
    """
    if other_direction:
        return []
    sides = ["consumer"] if force else ["consumer", "provider"] if delete_namespaces else []
    return [(side, tenant_namespaces[side]) for side in sides if tenant_namespaces.get(side)]
