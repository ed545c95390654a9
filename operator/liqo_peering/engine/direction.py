"""One reconcile's view of a peering in one direction: the spec, the clients of that direction's consumer and
provider, and the discovered context.

The reverse direction of a bidirectional peering is the same stages on a run with the clusters swapped
(engine/reverse.py): its consumer is the provider cluster, its provider the cluster the operator runs in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from liqo_peering.api.model import LiqoPeeringSpec, OffloadingSpec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.liqo.context import PeeringContext


@dataclass(frozen=True)
class KeyGiven:
    """A gateway's public key, as a pass read it from the Secret Liqo generated and gave to the other side."""

    source: tuple[str, str]  # the gateway's uid and its key Secret's name (status.secretRef)
    key: str


@dataclass
class PassMemo:
    """What a pass read that the next one need not read again while nothing but Liqo's objects changed: it goes
    with the discovery the runner lets such a pass reuse (a full pass starts with an empty one)."""

    keys: dict[str, KeyGiven] = field(default_factory=dict)  # by gateway: "server", "client"


@dataclass
class PeeringRun:
    spec: LiqoPeeringSpec
    consumer: ClusterClient  # this direction's consumer (forward: where the operator runs)
    provider: ClusterClient  # this direction's provider (forward: through the Secret's kubeconfig)
    ctx: PeeringContext
    reverse: bool = False  # the reverse direction: its consumer is the provider cluster, and the other way round
    memo: PassMemo = field(default_factory=PassMemo)
    # --restart-liqo-on-renewal: restart what reads a renewed identity once on a consumer before Liqo v1.2.
    restart_liqo: bool = False

    @property
    def offloading(self) -> OffloadingSpec:
        """This direction's offloading: each direction asks a different cluster, so each has its own."""
        return self.spec.reverse.offloading if self.reverse else self.spec.offloading

    @property
    def offloading_field(self) -> str:
        """Where the spec sets this direction's offloading (messages name it)."""
        return "spec.reverse.offloading" if self.reverse else "spec.offloading"

    @property
    def consumer_id(self) -> str:
        return self.ctx.consumer.cluster_id

    @property
    def provider_id(self) -> str:
        return self.ctx.provider.cluster_id
