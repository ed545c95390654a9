"""Short-lived Pods on clusters with nodes: run a Python script in the base image, read what it printed.

The tests use them to look at a cluster from inside, as a workload does: Services through kube-proxy, names
through cluster DNS, and (for the operator suite) its metrics through its Service.
"""

from __future__ import annotations

from typing import Any

from testenv import kube as k
from testenv.kube import Kube, Obj
from testenv.wait import wait_for

# What a Pod of the tests may do: the restricted Pod Security profile.
RESTRICTED: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def python_pod(name: str, image: str, script: str, labels: dict[str, str] | None = None, restart: str = "Never") -> Obj:
    """A Pod running `python3 -c script` in `image` (present on the nodes: never pulled)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "restartPolicy": restart,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-u", "-c", script],
                    "securityContext": RESTRICTED,
                }
            ],
        },
    }


def wait_running(kc: Kube, namespace: str, name: str, timeout: float = 90) -> Obj:
    def running() -> Obj | None:
        pod = kc.get(k.POD, name, namespace) or {}
        conditions = (pod.get("status") or {}).get("conditions") or []
        return pod if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None

    return wait_for(f"Pod {namespace}/{name} to be ready", running, timeout=timeout)


def run_to_completion(kc: Kube, namespace: str, pod: Obj, timeout: float = 120) -> str:
    """Create the Pod, wait until it has succeeded, return its log (the kubelet's, through the API server)."""
    name = pod["metadata"]["name"]
    kc.create(k.POD, pod, namespace)

    def finished() -> str | None:
        phase = ((kc.get(k.POD, name, namespace) or {}).get("status") or {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = wait_for(f"Pod {namespace}/{name} to finish", finished, timeout=timeout)
    log = logs(kc, namespace, name)
    assert phase == "Succeeded", f"Pod {namespace}/{name} {phase}:\n{log}"
    return log


def logs(kc: Kube, namespace: str, name: str) -> str:
    return kc.get_text(f"/api/v1/namespaces/{namespace}/pods/{name}/log")
