"""Which installation of Liqo the real-Liqo suite (marker `realliqo`) and the demo run on.

- `chart` (the default): Liqo as users install it, `helm install liqo` of its own chart on clusters with a
  real node each, its images built here, real gateways (testenv.liqo_chart);
- `processes`: the faster tier, Liqo's controllers as local processes on clusters without nodes, the data
  plane and the scheduler stood in (testenv.liqo_real).

Both are a `LiqoInstall`; `LIQO_INSTALL=processes` picks the second.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from testenv.kube import Kube
from testenv.localk8s import LocalCluster

INSTALLS = ("chart", "processes")


class LiqoInstall(Protocol):
    clusters: dict[str, LocalCluster]
    keep_logs: Path | None
    # What a LiqoPeering's spec.networking needs on this installation (a NodePort gateway server on chart).
    peering_networking: dict[str, object]
    liqoctl_peer_args: list[str]  # the same choice for `liqoctl peer`
    # Whether kube-scheduler places Pods (else a test binds them itself).
    schedules_pods: bool

    def __getitem__(self, side: str) -> LocalCluster: ...

    @property
    def ids(self) -> dict[str, str]: ...

    def kube(self, side: str) -> Kube: ...

    def set_connection_fault(self, value: str | None) -> None:
        """Keep Liqo's Connections from turning Connected (any value), or let them (None)."""

    def virtual_kubelets(self) -> int:
        """How many virtual kubelets run for the consumer."""
        ...

    def diagnostics(self) -> list[str]: ...

    def stop(self) -> None: ...


def install_kind() -> str:
    kind = os.environ.get("LIQO_INSTALL", "chart")
    if kind not in INSTALLS:
        raise ValueError(f"LIQO_INSTALL={kind!r}: use one of {', '.join(INSTALLS)}")
    return kind
