"""The facts every builder needs about one peering, discovered once per reconcile."""

from __future__ import annotations

from dataclasses import dataclass, field

from liqo_peering.liqo import naming


@dataclass(frozen=True)
class ClusterInfo:
    """What Liqo says about one cluster: its ID and CIDRs."""

    cluster_id: str
    pod_cidrs: tuple[str, ...]
    external_cidr: str
    liqo_namespace: str = "liqo"


@dataclass(frozen=True)
class PeeringContext:
    """One peering between a consumer (local) and a provider (remote)."""

    peering_namespace: str
    peering_name: str
    consumer: ClusterInfo
    provider: ClusterInfo
    # Tenant namespaces: on the consumer for the provider, on the provider for the consumer.
    consumer_tenant_ns: str = ""
    provider_tenant_ns: str = ""
    extra_labels: dict[str, str] = field(default_factory=dict)

    @property
    def owner(self) -> dict[str, str]:
        return naming.owner_labels(self.peering_namespace, self.peering_name)

    def labels(self, remote_cluster_id: str, **extra: str) -> dict[str, str]:
        return {naming.REMOTE_CLUSTER_ID: remote_cluster_id, **self.owner, **extra}


def metadata(
    name: str, namespace: str | None, labels: dict[str, str], annotations: dict[str, str] | None = None
) -> dict:
    meta: dict = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = annotations
    return meta
