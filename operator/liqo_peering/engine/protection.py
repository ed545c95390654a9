"""Kubeconfig Secret protection: a finalizer keeps the Secret a LiqoPeering uses until no LiqoPeering uses it,
as Kubernetes' pvc-protection keeps a PersistentVolumeClaim while a Pod mounts it.

Unpeering needs the provider's kubeconfig. Whatever deletes the Secret together with the LiqoPeering
(`kubectl delete -f`, deleting the namespace, Flux pruning a Kustomization) would otherwise leave the
unpeering with no way to reach the provider. With the finalizer the Secret stays, Terminating, until
the unpeering is over; then the operator removes it and the deletion completes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.errors import ClusterForbidden, PeeringError
from liqo_peering.liqo import naming
from liqo_peering.liqo import resources as r

FINALIZER = naming.KUBECONFIG_IN_USE
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
    """The kubeconfig Secret a LiqoPeering uses (in its own namespace)."""
    ref = (peering.get("spec") or {}).get("remoteKubeconfigSecretRef") or {}
    name = ref.get("name")
    return str(name) if name else None


def users(peerings: Iterable[dict[str, Any]], namespace: str, secret: str, exclude: str | None = None) -> list[str]:
    """The LiqoPeerings of ``namespace`` that use ``secret``, those being deleted included (their unpeering
    needs it), but for ``exclude`` (the one whose unpeering just ended)."""
    found = []
    for peering in peerings:
        meta = peering.get("metadata") or {}
        if meta.get("namespace") != namespace or meta.get("name") == exclude:
            continue
        if secret_of(peering) == secret:
            found.append(str(meta.get("name")))
    return sorted(found)


def protect(local: ClusterClient, namespace: str, secret: str) -> None:
    """Put the finalizer on the Secret (read from the cache first: a pass that finds it there costs nothing)."""
    cached = local.get(r.SECRET, secret, namespace)
    if cached is None or adding(cached.get("metadata") or {}) is None:
        return  # absent: reading it reports that; going: nothing may stop it any more
    try:
        local.edit_finalizers(r.SECRET, secret, namespace, adding)
    except ClusterForbidden as exc:
        raise PeeringError(
            f"cannot protect Secret {namespace}/{secret} from deletion while in use: {exc.message}; or run the"
            f" operator with {OPT_OUT}",
            reason=exc.reason,
            transient=exc.transient,
        ) from None


def release(local: ClusterClient, namespace: str, secret: str, exclude: str | None = None) -> list[str]:
    """Remove the finalizer unless another LiqoPeering still uses the Secret; returns those that do."""
    still = users(local.find(r.LIQOPEERING, namespace), namespace, secret, exclude)
    if not still:
        local.edit_finalizers(r.SECRET, secret, namespace, removing)
    return still
