"""The sweep of kubeconfig Secret protection: the finalizer goes from every Secret no LiqoPeering needs any more.

The unpeering that ends releases its Secret (protection.Releases); the sweep covers what that cannot see:
peerings deleted together that each saw the others still there, an operator stopped between the last
unpeering and the release, a LiqoPeering switched to another Secret while the operator was down. It looks
at start and whenever a LiqoPeering goes (deleted, or its unpeering over while another's finalizer holds it)
or references other Secrets, deciding from the LiqoPeerings alone (protection.unused).

It holds the LiqoPeerings of the watched namespaces in shared informers (clients/informer.py: watching all
namespaces, the one the duplicate check reads), which the client's reads of LiqoPeerings are then served
from, and the Secrets to look at: those carrying the finalizer
at start (one list) and every Secret a LiqoPeering referenced since. A Secret found unused is looked at once,
then forgotten: at rest the sweep reads and writes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.informer import MAX_BACKOFF, Scope, SharedInformers
from liqo_peering.engine import protection
from liqo_peering.errors import PeeringError
from liqo_peering.liqo import resources as r

log = structlog.get_logger("liqo_peering.sweep")
Key = tuple[str, str]  # (namespace, name)


class ProtectionSweep:
    def __init__(
        self, local: ClusterClient, namespaces: Sequence[str] = (), informers: SharedInformers | None = None
    ) -> None:
        """``namespaces``: those the operator watches; none: all of them. ``informers``: shared with the
        operator's other readers of LiqoPeerings."""
        self.local = local
        self.namespaces: list[str | None] = list(namespaces) or [None]
        self._lock = threading.Lock()
        self._secrets: set[Key] = set()  # to look at: protected at start, or referenced since
        self._seen: dict[Key, tuple[frozenset[str], bool]] = {}  # per LiqoPeering: what it uses, unpeered
        self._due = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="protection-sweep")
        shared = informers if informers is not None else SharedInformers()
        self.informers = [shared.of(local, Scope(r.LIQOPEERING, namespace)) for namespace in self.namespaces]
        for informer, namespace in zip(self.informers, self.namespaces, strict=True):
            informer.subscribe(self._lister(namespace), self._changed)

    def start(self) -> ProtectionSweep:
        for informer in self.informers:
            informer.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._due.set()
        for informer in self.informers:
            informer.stop()

    def unsynced(self) -> list[str]:
        """Its informers whose store is not synced (readiness waits for them, as for the watch hub's)."""
        return [
            f"informer liqopeerings in {informer.scope.namespace or 'all namespaces'} has not synced"
            for informer in self.informers
            if not informer.synced
        ]

    # -- the informers' callbacks (their threads) --------------------------------------------------------
    def _lister(self, namespace: str | None) -> Callable[[list[dict[str, Any]]], None]:
        def listed(items: list[dict[str, Any]]) -> None:
            with self._lock:
                # What the list no longer holds went while the watch was down.
                for key in [k for k in self._seen if namespace is None or k[0] == namespace]:
                    del self._seen[key]
                for peering in items:
                    self._learn(peering)
            self._due.set()

        return listed

    def _changed(self, kind: str, peering: dict[str, Any]) -> None:
        with self._lock:
            changed = self._learn(peering, gone=kind == "DELETED")
        if changed:
            self._due.set()

    def _learn(self, peering: dict[str, Any], gone: bool = False) -> bool:
        """Record the Secrets ``peering`` uses (call with the lock held); whether what it needs changed: it
        went, its unpeering ended, or it references other Secrets."""
        meta = peering.get("metadata") or {}
        namespace, key = str(meta.get("namespace")), (str(meta.get("namespace")), str(meta.get("name")))
        uses = frozenset(protection.uses(peering))
        self._secrets.update((namespace, secret) for secret in uses)
        if gone:
            self._seen.pop(key, None)
            return True
        now = (uses, protection.unpeered(peering))
        before = self._seen.get(key)
        self._seen[key] = now
        return before is not None and before != now

    # -- the sweep (its own thread) ----------------------------------------------------------------------
    def _run(self) -> None:
        backoff = 1.0
        listed = False
        while not self._stop.is_set():
            try:
                if not listed:
                    self._list_protected()
                    listed = True
                self._due.wait()
                if self._stop.is_set():
                    return
                self._due.clear()
                self.sweep()
                backoff = 1.0
            except PeeringError as exc:
                log.warning(f"sweep of protected Secrets failed: {exc.message}; retrying", reason=exc.reason)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                self._due.set()
            except Exception as exc:  # a bug must not end the sweep for good
                log.error("sweep of protected Secrets failed", exc_info=exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                self._due.set()

    def _list_protected(self) -> None:
        """Once, at start: the Secrets carrying the finalizer, whoever uses them (an operator stopped before it
        released one has nothing else to find it by)."""
        found = {
            (str(meta.get("namespace")), str(meta.get("name")))
            for namespace in self.namespaces
            for secret in self.local.find(r.SECRET, namespace)
            if protection.FINALIZER in ((meta := secret.get("metadata") or {}).get("finalizers") or [])
        }
        with self._lock:
            self._secrets |= found

    def sweep(self) -> list[Key]:
        """Release every Secret to look at that no LiqoPeering needs, once the informers hold every
        LiqoPeering; returns those released."""
        if not all(informer.synced for informer in self.informers):
            return []  # their list wakes the sweep again
        peerings = [p for informer in self.informers for p in informer.cached_items()]
        with self._lock:
            candidates = set(self._secrets)
        released = []
        for namespace, name in protection.unused(peerings, candidates):
            edited: list[str] = []

            def remove(meta: dict[str, Any], edited: list[str] = edited) -> list[str] | None:
                finalizers = protection.removing(meta)
                if finalizers is not None:
                    edited.append(str(meta.get("name")))
                return finalizers

            self.local.edit_finalizers(r.SECRET, name, namespace, remove)
            if edited:
                released.append((namespace, name))
            with self._lock:
                self._secrets.discard((namespace, name))
        if released:
            log.info("released Secrets no LiqoPeering needs", secrets=[f"{ns}/{name}" for ns, name in released])
        return released
