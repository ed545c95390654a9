"""The duplicate check: two LiqoPeerings of one provider would fight over the same Liqo objects; the one
created later does nothing while the earlier one exists."""

from __future__ import annotations

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.informer import Scope, SharedInformers
from liqo_peering.errors import DuplicatePeering
from liqo_peering.liqo import resources as r

INDEX = "remoteClusterID"


def check_duplicate(
    local: ClusterClient, informers: SharedInformers, namespace: str, name: str, created: str, remote_id: str
) -> None:
    """No other LiqoPeering, in any namespace, made before this one peers with the same provider. Read from
    the shared informer of every LiqoPeering, by its index of remote cluster IDs: a pass costs the same with
    1 or 500 LiqoPeerings. Until it has listed (the first passes after a start), from a list."""
    mine = (created, namespace, name)
    peerings = informers.of(local, Scope(r.LIQOPEERING))  # started by the CLI
    peerings.add_index(INDEX, lambda obj: (obj.get("status") or {}).get("remoteClusterID"))
    found = peerings.indexed(INDEX, remote_id) if peerings.synced else local.find(r.LIQOPEERING)
    for other in found:
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
