"""Objects of the consumer that no peering concerns, as a real cluster holds them: Deployments (of other
applications) and Secrets (Helm's releases, tokens, ...) beside the LiqoPeerings' kubeconfig Secrets.
The memory row peers with them present, against an empty consumer: what the operator holds and reads
must not grow with them."""

from __future__ import annotations

import base64
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kubernetes import client as k8s

from testenv import kube as k
from testenv.kube import Kube, Obj

NAMESPACE = "bench-apps"  # the Deployments'; the Secrets go where the LiqoPeerings are
SECRET_BYTES = 4096  # a small Helm release Secret (they are gzipped manifests, often 10 to 100 KiB)
WORKERS = 4


@dataclass(frozen=True)
class Clutter:
    deployments: int
    secrets: int

    @property
    def empty(self) -> bool:
        return not (self.deployments or self.secrets)


NONE = Clutter(0, 0)


def deployment(index: int) -> Obj:
    """Paused, with no replicas: the Deployment controller makes no ReplicaSet for it, and no Pod exists."""
    labels = {"app.kubernetes.io/name": f"app-{index}", "app.kubernetes.io/part-of": "bench"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"app-{index}", "labels": labels},
        "spec": {
            "replicas": 0,
            "paused": True,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
            },
        },
    }


def secret(index: int) -> Obj:
    """Shaped as Helm's release Secrets are: type helm.sh/release.v1, labelled owner=helm."""
    release = base64.b64encode(os.urandom(SECRET_BYTES)).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"sh.helm.release.v1.app-{index}.v1",
            "labels": {"owner": "helm", "name": f"app-{index}", "status": "deployed", "version": "1"},
        },
        "type": "helm.sh/release.v1",
        "data": {"release": base64.b64encode(release.encode()).decode()},
    }


def create(api: k8s.ApiClient, clutter: Clutter, secrets_namespace: str) -> None:
    """Create them all (a few requests at a time); the namespaces must exist, but for NAMESPACE."""
    kube = Kube(api)
    kube.create(k.NAMESPACE, {"metadata": {"name": NAMESPACE}})
    work = [(k.DEPLOYMENT, deployment, NAMESPACE, i) for i in range(clutter.deployments)]
    work += [(k.SECRET, secret, secrets_namespace, i) for i in range(clutter.secrets)]
    with ThreadPoolExecutor(WORKERS) as pool:
        for done in pool.map(lambda w: kube.create(w[0], w[1](w[3]), w[2]), work):
            del done
