"""The duplicate check: two LiqoPeerings of one provider would fight over the same Liqo objects; the one
created later does nothing while the earlier one exists."""

from __future__ import annotations

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.errors import DuplicatePeering
from liqo_peering.liqo import resources as r


def check_duplicate(local: ClusterClient, namespace: str, name: str, created: str, remote_id: str) -> None:
    mine = (created, namespace, name)
    for other in local.find(r.LIQOPEERING):
        meta = other["metadata"]
        if (meta["namespace"], meta["name"]) == (namespace, name):
            continue
        if (other.get("status") or {}).get("remoteClusterID") != remote_id:
            continue
        if (meta.get("creationTimestamp", ""), meta["namespace"], meta["name"]) < mine:
            raise DuplicatePeering(
                f"LiqoPeering {meta['namespace']}/{meta['name']} already peers with provider {remote_id};"
                f" delete one of the two (this one, {namespace}/{name}, does nothing meanwhile)"
            )
