"""A Pod offloaded through Liqo's virtual node on a pair with real nodes (Liqo's chart, testenv.liqo_chart),
checked end to end on both clusters; shared by the chart tests of every Liqo version."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from testenv import kube as k
from testenv.kube import Kube
from testenv.localk8s.images import pause_image
from testenv.operator_support import wait_for

NAMESPACEOFFLOADING = k.Res("offloading.liqo.io", "v1beta1", "namespaceoffloadings")
SHADOWPODS = k.Res("offloading.liqo.io", "v1beta1", "shadowpods")


def ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def offload_a_pod(
    consumer: Kube, provider: Kube, provider_id: str, namespace: str, diagnostics: Callable[[], str] = str
) -> None:
    """A Deployment in `namespace` offloaded with podOffloadingStrategy Remote: Liqo's webhook gives its Pod
    the virtual node's affinity and toleration, kube-scheduler puts it on the virtual node, the virtual
    kubelet reflects it to the provider, where kube-scheduler and the kubelet run it on the provider's node,
    and its Running status comes back to the consumer's Pod. Everything is removed again afterwards."""
    with offloaded_pods(consumer, provider, provider_id, namespace, diagnostics):
        pass


@dataclass
class Offloaded:
    """Offloaded Pods of Deployment `pause` in `namespace` on the consumer, reflected into `remote_namespace`."""

    consumer: Kube
    provider: Kube
    provider_id: str
    namespace: str
    remote_namespace: str
    diagnostics: Callable[[], str]

    def running(self, replicas: int = 1) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Wait for `replicas` Pods Running and Ready on the virtual node, each reflected Running on the
        provider's node with the same address; (consumer's, provider's) for each, by name."""

        def pods(kc: Kube, ns: str) -> dict[str, dict[str, Any]] | None:
            found = {p["metadata"]["name"]: p for p in kc.list(k.POD, ns, selector="app=pause")}
            up = {n: p for n, p in found.items() if (p.get("status") or {}).get("phase") == "Running" and ready(p)}
            return up if len(found) == replicas and len(up) == replicas else None

        def reflected() -> dict[str, dict[str, Any]] | None:
            there = pods(self.provider, self.remote_namespace)
            return there if there is not None and set(there) == set(local) else None

        try:
            local = wait_for(
                f"{replicas} Pod(s) Running on the consumer", lambda: pods(self.consumer, self.namespace), 180
            )
            remote = wait_for("their reflections Running on the provider", reflected, 60)
        except AssertionError as exc:
            found = {
                "consumer": self.consumer.list(k.POD, self.namespace),
                "provider": self.provider.list(k.POD, self.remote_namespace),
            }
            raise AssertionError(f"{exc}\n{found}\n{self.diagnostics()}") from None
        pairs = [(local[name], remote[name]) for name in sorted(local)]
        for here, there in pairs:
            # Scheduled by kube-scheduler (no Binding here) onto the virtual node, run by the provider's kubelet.
            assert here["spec"]["nodeName"] == self.provider_id, here["spec"]
            # ... and run there by the kubelet of a node of its own, not reflected further.
            node = self.provider.get(k.NODE, there["spec"].get("nodeName") or "")
            assert node and node["metadata"].get("labels", {}).get("liqo.io/type") != "virtual-node", there["spec"]
            # The consumer's Pod shows the address the provider's Pod has (the clusters' Pod CIDRs do not
            # overlap, so Liqo remaps nothing).
            assert here["status"]["podIP"] == there["status"]["podIP"], (here["status"], there["status"])
        return pairs

    def scale(self, replicas: int) -> None:
        self.consumer.patch(k.DEPLOYMENT, "pause", {"spec": {"replicas": replicas}}, self.namespace)


@contextlib.contextmanager
def offloaded_pods(
    consumer: Kube, provider: Kube, provider_id: str, namespace: str, diagnostics: Callable[[], str] = str
) -> Iterator[Offloaded]:
    """offload_a_pod's Deployment, kept while the block runs, then removed with its namespace."""
    image = pause_image().ref  # every node's containerd has it (its sandbox image)
    consumer.create(k.NAMESPACE, {"metadata": {"name": namespace}})
    try:
        consumer.create(
            NAMESPACEOFFLOADING,
            {
                "apiVersion": "offloading.liqo.io/v1beta1",
                "kind": "NamespaceOffloading",
                "metadata": {"name": "offloading"},
                "spec": {
                    "namespaceMappingStrategy": "DefaultName",
                    "podOffloadingStrategy": "Remote",
                    "clusterSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}
                                ]
                            }
                        ]
                    },
                },
            },
            namespace,
        )

        def offloaded() -> str | None:
            no = consumer.get(NAMESPACEOFFLOADING, "offloading", namespace) or {}
            st = no.get("status") or {}
            return st.get("remoteNamespaceName") if st.get("offloadingPhase") == "Ready" else None

        # Ready before the Deployment: the webhook adds the virtual node's affinity only to Pods created in
        # a namespace Liqo already offloads.
        remote_ns = wait_for("the NamespaceOffloading to be Ready", offloaded, timeout=120)
        labels = {"app": "pause"}
        consumer.create(
            k.DEPLOYMENT,
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "pause"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "pause", "image": image, "imagePullPolicy": "Never"}]},
                    },
                },
            },
            namespace,
        )

        pods = Offloaded(consumer, provider, provider_id, namespace, remote_ns, diagnostics)
        ((local, remote),) = pods.running()
        assert remote["spec"]["containers"][0]["image"] == image
        shadows = provider.list(SHADOWPODS, remote_ns)
        assert [s["metadata"]["name"] for s in shadows] == [local["metadata"]["name"]]
        yield pods
    finally:
        with contextlib.suppress(k.KubeError):
            consumer.delete(k.DEPLOYMENT, "pause", namespace)
        with contextlib.suppress(k.KubeError):
            consumer.delete(NAMESPACEOFFLOADING, "offloading", namespace)
            wait_for(
                "the NamespaceOffloading to be gone",
                lambda: consumer.get(NAMESPACEOFFLOADING, "offloading", namespace) is None,
                timeout=90,
            )
        consumer.delete(k.NAMESPACE, namespace)
