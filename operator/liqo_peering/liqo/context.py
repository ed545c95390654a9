"""The facts every builder needs about one peering, discovered once per reconcile."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from liqo_peering.liqo import naming
from liqo_peering.liqo.common import NONE, Common, decorate
from liqo_peering.liqo.versions import LiqoVersion


@dataclass(frozen=True)
class ClusterInfo:
    """What Liqo says about one cluster: its ID and CIDRs, and which Liqo and Kubernetes it runs."""

    cluster_id: str
    pod_cidrs: tuple[str, ...]
    external_cidr: str
    liqo_namespace: str = "liqo"
    liqo_version: LiqoVersion = field(default_factory=LiqoVersion)
    kubernetes_version: str | None = None
    # Liqo's cluster-ID ConfigMap as discovery read it (uid, resourceVersion): a later change is a new discovery.
    identity: tuple[str, str] = ("", "")


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
    common: Common = NONE  # spec.commonMetadata: on every object the peering makes

    @property
    def owner(self) -> dict[str, str]:
        return naming.owner_labels(self.peering_namespace, self.peering_name)

    def reversed(self) -> PeeringContext:
        """The same peering seen from the other direction: the provider as the consumer of the consumer's
        resources (a bidirectional peering's reverse direction). Each tenant namespace stays on its cluster:
        the consumer's, for the provider, is the reverse direction's provider tenant namespace."""
        return dataclasses.replace(
            self,
            consumer=self.provider,
            provider=self.consumer,
            consumer_tenant_ns=self.provider_tenant_ns,
            provider_tenant_ns=self.consumer_tenant_ns,
        )

    def labels(self, remote_cluster_id: str, **extra: str) -> dict[str, str]:
        return {naming.REMOTE_CLUSTER_ID: remote_cluster_id, **self.owner, **extra}

    def metadata(
        self, name: str, namespace: str | None, labels: dict[str, str], annotations: dict[str, str] | None = None
    ) -> dict:
        """An object's metadata with the peering's common labels and annotations under its own."""
        return decorate(metadata(name, namespace, labels, annotations), self.common)


def metadata(
    name: str, namespace: str | None, labels: dict[str, str], annotations: dict[str, str] | None = None
) -> dict:
    meta: dict = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = annotations
    return meta
