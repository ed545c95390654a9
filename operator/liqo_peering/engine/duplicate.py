"""The duplicate check: two LiqoPeerings of one provider would fight over the same Liqo objects; the one
created later does nothing while the earlier one exists."""

from __future__ import annotations

from typing import Any

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.informer import Scope, SharedInformers
from liqo_peering.errors import DuplicatePeering
from liqo_peering.liqo import resources as r

INDEX = "remoteClusterID"


def _remote_id(obj: dict[str, Any]) -> str | None:
    return (obj.get("status") or {}).get("remoteClusterID")


class DuplicateCheck:
    """No other LiqoPeering, in any namespace, made before this one peers with the same provider. Read from
    the shared informer of every LiqoPeering, by its index of remote cluster IDs, set up once here: a pass
    costs the same with 1 or 500 LiqoPeerings. Until it has listed (the first passes after a start), from a
    list."""

    def __init__(self, local: ClusterClient, informers: SharedInformers) -> None:
        self.local = local
        self.peerings = informers.of(local, Scope(r.LIQOPEERING))  # started by the CLI
        self.peerings.add_index(INDEX, _remote_id)

    def __call__(self, namespace: str, name: str, created: str, remote_id: str) -> None:
        mine = (created, namespace, name)
        synced = self.peerings.synced
        found = self.peerings.indexed(INDEX, remote_id) if synced else self.local.find(r.LIQOPEERING)
        for other in found:
            meta = other["metadata"]
            if (meta["namespace"], meta["name"]) == (namespace, name) or _remote_id(other) != remote_id:
                continue
            if (meta.get("creationTimestamp", ""), meta["namespace"], meta["name"]) < mine:
                raise DuplicatePeering(
                    f"LiqoPeering {meta['namespace']}/{meta['name']} already peers with provider {remote_id};"
                    f" delete one of the two (this one, {namespace}/{name}, does nothing meanwhile)"
                )
