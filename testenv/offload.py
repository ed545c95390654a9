"""A Pod offloaded through Liqo's virtual node on a pair with real nodes (Liqo's chart, testenv.liqo_chart),
checked end to end on both clusters; shared by the chart tests of every Liqo version."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
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

        def running(kc: Kube, ns: str) -> dict[str, Any] | None:
            pods = kc.list(k.POD, ns, selector="app=pause")
            return pods[0] if len(pods) == 1 and (pods[0].get("status") or {}).get("phase") == "Running" else None

        try:
            local = wait_for("the Pod Running on the consumer", lambda: running(consumer, namespace), 180)
            remote = wait_for("its reflection Running on the provider", lambda: running(provider, remote_ns), 60)
        except AssertionError as exc:
            pods = {"consumer": consumer.list(k.POD, namespace), "provider": provider.list(k.POD, remote_ns)}
            raise AssertionError(f"{exc}\n{pods}\n{diagnostics()}") from None
        # Scheduled by kube-scheduler (no Binding here) onto the virtual node, run by the provider's kubelet.
        assert local["spec"]["nodeName"] == provider_id, local["spec"]
        assert remote["spec"]["nodeName"] == "provider-node-0", remote["spec"]
        assert remote["metadata"]["name"] == local["metadata"]["name"]
        assert remote["spec"]["containers"][0]["image"] == image
        assert ready(remote) and ready(local)
        # The consumer's Pod shows the address the provider's Pod has (the clusters' Pod CIDRs do not
        # overlap, so Liqo remaps nothing).
        assert local["status"]["podIP"] == remote["status"]["podIP"], (local["status"], remote["status"])
        shadows = provider.list(SHADOWPODS, remote_ns)
        assert [s["metadata"]["name"] for s in shadows] == [local["metadata"]["name"]]
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
