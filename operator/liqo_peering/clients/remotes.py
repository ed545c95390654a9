"""The provider clients, one per distinct kubeconfig, shared by the peerings that use it.

A peering holds one client at a time. When its kubeconfig changes (a rotated Secret) or the peering
goes, it lets go of the old one, and a client no peering holds any more is closed, with its
connections (its informers stop when their last route goes, in the watch hub).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Hashable

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.connect import exec_token, to_api_client
from liqo_peering.kubeconfig import RemoteKubeconfig

# A provider's calls are small (one tenant namespace): a shorter timeout than the consumer's, so that a pass
# caught by a hung provider reports it within seconds (the health probe fails later passes at once).
PROVIDER_TIMEOUT = (3.0, 5.0)


def connect_remote(kubeconfig: RemoteKubeconfig) -> ClusterClient:
    token = exec_token(kubeconfig)
    return ClusterClient(
        to_api_client(kubeconfig, token),
        "provider",
        kubeconfig.server,
        request_timeout=PROVIDER_TIMEOUT,
        on_unauthorized=token.expire if token is not None else None,
    )


class RemoteClients:
    def __init__(
        self,
        connect: Callable[[RemoteKubeconfig], ClusterClient] = connect_remote,
        on_close: Callable[[ClusterClient], None] = lambda client: None,
    ) -> None:
        self._connect = connect
        self.on_close = on_close  # told of every client closed here (the watch hub stops its informers)
        self._lock = threading.Lock()
        self._clients: dict[str, ClusterClient] = {}
        self._held: dict[Hashable, str] = {}  # holder (a peering) -> the kubeconfig digest it uses

    def get(self, holder: Hashable, kubeconfig: RemoteKubeconfig) -> ClusterClient:
        digest = hashlib.sha256(json.dumps(kubeconfig.config, sort_keys=True, default=str).encode()).hexdigest()
        fresh: ClusterClient | None = None
        while True:
            with self._lock:
                client = self._clients.get(digest)
                if client is None and fresh is not None:
                    client, fresh = fresh, None
                    self._clients[digest] = client
                if client is not None:
                    previous = self._held.get(holder)
                    self._held[holder] = digest
                    stale = self._unused(previous) if previous not in (None, digest) else None
                    break
            # Outside the lock: connecting may run an access provider's plugin for seconds, which must hold up
            # no other peering's pass.
            fresh = self._connect(kubeconfig)
        if fresh is not None:  # another pass connected first
            fresh.close()
        if stale is not None:
            self._close(stale)
        return client

    def release(self, holder: Hashable) -> None:
        with self._lock:
            stale = self._unused(self._held.pop(holder, None))
        if stale is not None:
            self._close(stale)

    def _close(self, client: ClusterClient) -> None:
        self.on_close(client)
        client.close()

    def __len__(self) -> int:
        return len(self._clients)

    def _unused(self, digest: str | None) -> ClusterClient | None:
        """Forget the client of ``digest`` when nobody holds it any more (call with the lock held)."""
        if digest is None or digest in self._held.values():
            return None
        return self._clients.pop(digest, None)
