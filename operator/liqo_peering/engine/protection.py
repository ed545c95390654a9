"""Kubeconfig Secret protection: a finalizer keeps the Secret a LiqoPeering uses until no LiqoPeering uses it,
as Kubernetes' pvc-protection keeps a PersistentVolumeClaim while a Pod mounts it.

Unpeering needs the provider's kubeconfig. Whatever deletes the Secret together with the LiqoPeering
(`kubectl delete -f`, deleting the namespace, Flux pruning a Kustomization) would otherwise leave the
unpeering with no way to reach the provider. With the finalizer the Secret stays, Terminating, until
the unpeering is over; then the operator removes it and the deletion completes.

Whether the finalizer stays is a function of the LiqoPeerings alone (``users``): it stays while a LiqoPeering
whose unpeering is not over references the Secret. The unpeering that ends removes it unless another still
needs it; the sweep (engine/sweep.py) looks again whenever a LiqoPeering goes, and at start, so that
peerings deleted together, or an operator stopped in between, leave no finalizer behind.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from typing import Any

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.errors import AccessRefused
from liqo_peering.liqo import naming
from liqo_peering.liqo import resources as r

FINALIZER = naming.KUBECONFIG_IN_USE
UNPEERING = naming.OPERATOR_FINALIZER  # on a LiqoPeering until its unpeering is over
OPT_OUT = "--no-kubeconfig-secret-protection (chart: kubeconfigSecretProtection=false)"


def adding(meta: dict[str, Any]) -> list[str] | None:
    """The finalizers with ours added; None when it is there, or the Secret is going (none may be added)."""
    finalizers = list(meta.get("finalizers") or [])
    if FINALIZER in finalizers or meta.get("deletionTimestamp"):
        return None
    return [*finalizers, FINALIZER]


def removing(meta: dict[str, Any]) -> list[str] | None:
    """The finalizers without ours; None when it is not there."""
    finalizers = list(meta.get("finalizers") or [])
    if FINALIZER not in finalizers:
        return None
    return [f for f in finalizers if f != FINALIZER]


def secret_of(peering: dict[str, Any]) -> str | None:
    """The Secret a LiqoPeering's provider source reads (in its own namespace): its kubeconfig Secret, or the
    Secret with a managed cluster's endpoint and CA (spec.remoteCluster.secretRef)."""
    spec = peering.get("spec") or {}
    ref = spec.get("remoteKubeconfigSecretRef") or (spec.get("remoteCluster") or {}).get("secretRef") or {}
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else None


def uses(peering: dict[str, Any]) -> set[str]:
    """The Secrets of its namespace a LiqoPeering may need to unpeer: its kubeconfig Secret, and the Secret it
    mints its credential into (or one left from when it did)."""
    name = (peering.get("metadata") or {}).get("name")
    found = {naming.minted_secret(str(name))} if name else set()
    secret = secret_of(peering)
    return found | {secret} if secret else found


def unpeered(peering: dict[str, Any], done: Collection[str] = ()) -> bool:
    """Whether a LiqoPeering's unpeering is over: its uid is in ``done`` (its teardown ended here, the
    finalizer goes next: a cache may not show its deletion yet), or it is being deleted and the operator's
    finalizer is gone (only another's holds it)."""
    meta = peering.get("metadata") or {}
    if meta.get("uid") in done:
        return True
    return bool(meta.get("deletionTimestamp")) and UNPEERING not in (meta.get("finalizers") or [])


def users(
    peerings: Iterable[dict[str, Any]],
    namespace: str,
    secret: str,
    exclude: str | None = None,
    done: Collection[str] = (),
) -> list[str]:
    """The LiqoPeerings of ``namespace`` that still need ``secret``: those being deleted included until
    their unpeering is over (``unpeered``), but for ``exclude``."""
    found = []
    for peering in peerings:
        meta = peering.get("metadata") or {}
        if meta.get("namespace") != namespace or meta.get("name") == exclude or unpeered(peering, done):
            continue
        if secret in uses(peering):
            found.append(str(meta.get("name")))
    return sorted(found)


def unused(
    peerings: Iterable[dict[str, Any]], secrets: Iterable[tuple[str, str]], done: Collection[str] = ()
) -> list[tuple[str, str]]:
    """Which of ``secrets`` ((namespace, name) pairs) no LiqoPeering needs any more: their finalizer may go."""
    needed = {
        (str((p.get("metadata") or {}).get("namespace")), secret)
        for p in peerings
        if not unpeered(p, done)
        for secret in uses(p)
    }
    return sorted(set(secrets) - needed)


def protect(local: ClusterClient, namespace: str, secret: str) -> None:
    """Put the finalizer on the Secret (read from the cache first: a pass that finds it there costs nothing)."""
    cached = local.get(r.SECRET, secret, namespace)
    if cached is None or adding(cached.get("metadata") or {}) is None:
        return  # absent: reading it reports that; going: nothing may stop it any more
    try:
        local.edit_finalizers(r.SECRET, secret, namespace, adding, known=cached)
    except AccessRefused as exc:
        raise exc.restated(
            f"cannot protect Secret {namespace}/{secret} from deletion while in use: {exc.message}; or run the"
            f" operator with {OPT_OUT}"
        ) from None


def release(local: ClusterClient, namespace: str, secret: str, exclude: str | None = None) -> list[str]:
    """Remove the finalizer unless another LiqoPeering still needs the Secret; returns those that do."""
    still = users(local.find(r.LIQOPEERING, namespace), namespace, secret, exclude)
    if not still:
        local.edit_finalizers(r.SECRET, secret, namespace, removing)
    return still


class Releases:
    """The releases that follow unpeerings, one at a time, and the uids of the LiqoPeerings whose unpeering
    ended here (until they are gone). Of peerings that end together, each counts those that ended before it
    as done, whatever their finalizers show yet: the last one releases the Secret."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[str, str] = {}  # uid -> namespace

    def after_unpeering(self, local: ClusterClient, peering: dict[str, Any]) -> list[str]:
        """``peering``'s unpeering is over: remove the finalizer of its Secret unless another LiqoPeering still
        needs it; returns those that do."""
        meta = peering.get("metadata") or {}
        namespace, uid = str(meta.get("namespace")), meta.get("uid")
        with self._lock:
            if uid:
                self._done[str(uid)] = namespace
            peerings = local.find(r.LIQOPEERING, namespace)
            present = {(p.get("metadata") or {}).get("uid") for p in peerings}
            for known, where in list(self._done.items()):
                if where == namespace and known not in present:
                    del self._done[known]  # gone: its finalizers say nothing any more
            secret = secret_of(peering)
            if not secret:
                return []
            still = users(peerings, namespace, secret, str(meta.get("name")), set(self._done))
            if not still:
                local.edit_finalizers(r.SECRET, secret, namespace, removing)
            return still
