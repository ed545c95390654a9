"""The providers a LiqoPeeringSet's selector picks, whatever their kind (spec.source), as one shape (pure).

Each selected object becomes a Member: the name its LiqoPeering is named after, the reference that LiqoPeering's
spec carries to reach the provider, and why it cannot be peered with yet, if it cannot. Cluster API keeps a
Cluster's admin kubeconfig in Secret ``<cluster>-kubeconfig`` (key ``value``) and rewrites it as it rotates, so a
Cluster's LiqoPeering references that Secret and reads it on every pass, as any LiqoPeering reads its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from liqo_peering.api.peeringset import Source

Obj = dict[str, Any]
KUBECONFIG_KEY = "kubeconfig"
# Cluster API's kubeconfig Secret for a workload cluster: <cluster>-kubeconfig, key value.
CAPI_KUBECONFIG_SUFFIX = "-kubeconfig"
CAPI_KUBECONFIG_KEY = "value"
PROVISIONED = "Provisioned"
CONTROL_PLANE_HEALTHY = "ControlPlaneHealthy"
# A set's line for a member it does not peer with yet.
NOT_PROVISIONED, CONTROL_PLANE_UNHEALTHY = "NotProvisioned", "ControlPlaneUnhealthy"
# Phase and condition text quoted in a line's message are cut to this.
MAX_QUOTED = 64


@dataclass(frozen=True)
class Member:
    name: str  # the selected object's name
    ref: Obj  # the LiqoPeering spec fields that reach the provider
    secret: str | None  # the kubeconfig Secret it peers through, if one
    unavailable: str | None = None  # NOT_PROVISIONED or CONTROL_PLANE_UNHEALTHY: not peered with yet
    detail: str = ""  # why, in words


def controller(obj: Obj) -> Obj | None:
    """The ownerReference with controller: true, if any."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def _text(value: Any) -> str:
    return str(value)[:MAX_QUOTED]


def of_secret(secret: Obj) -> Member | None:
    """A kubeconfig Secret; none for the minted credentials a LiqoPeering owns (a peering's own, never a
    provider to peer with)."""
    if (controller(secret) or {}).get("kind") == "LiqoPeering":
        return None
    name = str(secret["metadata"]["name"])
    return Member(name, {"remoteKubeconfigSecretRef": {"name": name, "key": KUBECONFIG_KEY}}, name)


def of_cluster(cluster: Obj) -> Member:
    """A Cluster API Cluster: peered with once its phase is Provisioned (its control plane answers and its
    kubeconfig Secret exists)."""
    name = str(cluster["metadata"]["name"])
    secret = f"{name}{CAPI_KUBECONFIG_SUFFIX}"
    ref = {"remoteKubeconfigSecretRef": {"name": secret, "key": CAPI_KUBECONFIG_KEY}}
    status = cluster.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    if phase == PROVISIONED:
        return Member(name, ref, secret)
    shown = "no phase yet" if phase is None else f"phase {_text(phase)}"
    return Member(name, ref, secret, NOT_PROVISIONED, f"Cluster {name}: {shown}, not {PROVISIONED}")


def of_profile(profile: Obj) -> Member:
    """A ClusterProfile: peered with while its ControlPlaneHealthy condition is True."""
    name = str(profile["metadata"]["name"])
    ref = {"remoteClusterProfileRef": {"name": name}}
    status = profile.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    found = next(
        (
            c
            for c in conditions or []
            if isinstance(c, dict) and c.get("type") == CONTROL_PLANE_HEALTHY and isinstance(c.get("status"), str)
        ),
        None,
    )
    if found is not None and found["status"] == "True":
        return Member(name, ref, None)
    shown = "not reported" if found is None else f"{_text(found['status'])} ({_text(found.get('reason', ''))})"
    return Member(name, ref, None, CONTROL_PLANE_UNHEALTHY, f"ClusterProfile {name}: {CONTROL_PLANE_HEALTHY} {shown}")


def of(source: Source, obj: Obj) -> Member | None:
    if source == "Cluster":
        return of_cluster(obj)
    if source == "ClusterProfile":
        return of_profile(obj)
    return of_secret(obj)
