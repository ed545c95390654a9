"""One reconcile's view of a peering: the spec, both clients and the discovered context."""

from __future__ import annotations

from dataclasses import dataclass

from liqo_peering.api.model import LiqoPeeringSpec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.liqo.context import PeeringContext


@dataclass
class PeeringRun:
    spec: LiqoPeeringSpec
    local: ClusterClient  # the consumer, where the operator runs
    remote: ClusterClient  # the provider, through the Secret's kubeconfig
    ctx: PeeringContext

    @property
    def consumer_id(self) -> str:
        return self.ctx.consumer.cluster_id

    @property
    def provider_id(self) -> str:
        return self.ctx.provider.cluster_id
