"""What the e2e tests of spec.remoteCluster share (test_eks, test_gke, test_aks): a consumer with the
operator, a light provider whose verifier is the cloud's or its stand-in, and the LiqoPeerings of one namespace."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from e2e.test_peeringset import PROVIDER_KINDS
from testenv import audit
from testenv import kube as k
from testenv.kube import Kube
from testenv.leakscan import LeakScan
from testenv.lightk8s import LightCluster
from testenv.operator_support import OperatorEnv, wait_for
from testenv.reactions import OPERATOR_AGENT

LIQOPEERING = k.Res("peering.liqo-operator.io", "v1alpha1", "liqopeerings")


@dataclass
class CloudCase:
    env: OperatorEnv
    consumer: Kube
    provider: LightCluster
    provider_kube: Kube
    provider_id: str
    namespace: ClassVar[str]  # the module's LiqoPeerings'


def clean_up(consumer: Kube, namespace: str) -> None:
    """The namespace's LiqoPeerings unpeered (their finalizers released if that hangs), then the namespace."""
    for obj in consumer.list(LIQOPEERING, namespace):
        consumer.delete(LIQOPEERING, obj["metadata"]["name"], namespace)
    try:
        wait_for(
            f"the LiqoPeerings in {namespace} to go", lambda: not consumer.list(LIQOPEERING, namespace), timeout=90
        )
    finally:
        for obj in consumer.list(LIQOPEERING, namespace):
            consumer.patch(LIQOPEERING, obj["metadata"]["name"], {"metadata": {"finalizers": None}}, namespace)
        consumer.delete(k.NAMESPACE, namespace)


def tear_down(
    namespace: str,
    consumer: Kube,
    leak_scan: LeakScan,
    apis: dict[str, Any],
    stops: Iterable[Callable[[], object] | None],
    standins: Any = None,
    cloud: str = "",
    restart: Callable[[], object] | None = None,
) -> None:
    """A cloud module's end: its clusters scanned for leaked credentials, its LiqoPeerings and namespace removed,
    then, even when that fails, every process it started stopped (``stops`` in order, then the stand-ins) and the
    suite's operator, stood down for it, started again (``restart``)."""
    try:
        leak_scan.collect(apis)
    finally:
        try:
            clean_up(consumer, namespace)
        finally:
            for stop in stops:
                if stop is not None:
                    stop()
            if standins is not None:
                standins.stop()
                sys.stderr.write(f"\n--- {cloud} stand-in log: {standins.log_path}\n")
            if restart is not None:
                restart()


def create(case: CloudCase, name: str, spec: dict[str, Any]) -> None:
    body = {"apiVersion": LIQOPEERING.api_version, "kind": "LiqoPeering", "metadata": {"name": name}, "spec": spec}
    case.consumer.create(LIQOPEERING, body, case.namespace)


def status(case: CloudCase, name: str) -> dict[str, Any]:
    return dict((case.consumer.get(LIQOPEERING, name, case.namespace) or {}).get("status") or {})


def ready(case: CloudCase, name: str) -> dict[str, Any] | None:
    found = status(case, name)
    cond: dict[str, Any] = next((c for c in found.get("conditions") or [] if c["type"] == "Ready"), {})
    return found if found.get("peerStatus") == "ready" and cond.get("status") == "True" else None


def provider_writers(case: CloudCase, since: datetime) -> set[str]:
    """Who made the operator's writes on the provider since then (its audit log)."""
    return {e.username for e in audit.writes(case.provider.audit_log, since=since, user_agent_prefix=OPERATOR_AGENT)}


def tenant(case: CloudCase) -> str | None:
    """The consumer's tenant namespace on the provider."""
    selector = f"liqo.io/remote-cluster-id={case.env.consumer_id},liqo.io/tenant-namespace=true"
    found = case.provider_kube.list(k.NAMESPACE, selector=selector)
    return found[0]["metadata"]["name"] if found else None


def unpeer_leaving_nothing(case: CloudCase, name: str) -> None:
    """Delete the LiqoPeering: it goes, and no Liqo object of it is left on either cluster."""
    case.consumer.delete(LIQOPEERING, name, case.namespace)
    wait_for(f"{name} to go", lambda: case.consumer.get(LIQOPEERING, name, case.namespace) is None, timeout=120)

    def nothing_left() -> bool:
        ns = tenant(case)
        provider = [] if ns is None else [o for res in PROVIDER_KINDS for o in case.provider_kube.list(res, ns)]
        slices = case.consumer.list(k.RESOURCESLICE, selector=f"liqo.io/remote-cluster-id={case.provider_id}")
        return not provider and not slices

    wait_for("no Liqo object of the peering left on either cluster", nothing_left, timeout=60)
