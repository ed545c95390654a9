"""Admission stand-in: deliver Liqo's real webhook's mutation of VirtualNodes, after the fact.

Liqo's VirtualNodes are created bare (by the controller manager's virtualnode-creator, from a ResourceSlice);
Liqo's mutating webhook fills `spec.createNode`, `spec.disableNetworkCheck`, `spec.offloadingPatch` and the
whole virtual-kubelet Deployment `spec.template` from the VkOptionsTemplate (pkg/webhooks/virtualnode).
Without it the virtualnode controller panics on the nil `spec.createNode`
(virtualkubelet.go:47, "invalid memory address or nil pointer dereference") and no virtual kubelet starts.

The API server cannot call the webhook here (no Service routing, Endpoints refuse loopback addresses), so
the webhook configurations are not applied. Instead, this stand-in does the API server's part for the
kinds in POST_HOC: for each new object it sends the real webhook process (run by the ComponentRunner) the
AdmissionReview (operation CREATE) the API server would have sent, on the path the chart's
MutatingWebhookConfiguration gives, and applies the JSONPatch the webhook answers. The difference from
real admission: the object briefly exists unmutated (Liqo's controller retries until it is patched).
The webhook's serving certificate is not verified (loopback; see runner.FLAG_MAP about its cert dir).
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.request
import uuid
from typing import Any

from testenv import kube as k
from testenv.kube import Kube, KubeError, Obj

from .loop import SyncLoop
from .runner import ComponentRunner

# Kinds whose webhook mutation Liqo's control plane depends on and that are safe to mutate after
# creation (the mutation only fills unset fields): (group, version, plural, kind).
POST_HOC = {("offloading.liqo.io", "v1beta1", "virtualnodes", "VirtualNode")}
JSON_PATCH = "application/json-patch+json"


def webhook_paths(docs: list[Obj]) -> dict[str, str]:
    """plural -> the service path of the chart's mutating webhook whose rules cover it (CREATE)."""
    paths: dict[str, str] = {}
    for doc in docs:
        if doc.get("kind") != "MutatingWebhookConfiguration":
            continue
        for wh in doc.get("webhooks") or []:
            path = ((wh.get("clientConfig") or {}).get("service") or {}).get("path")
            if not isinstance(path, str):
                continue
            for rule in wh.get("rules") or []:
                ops = rule.get("operations") or []
                if "CREATE" in ops or "*" in ops:
                    for res in rule.get("resources") or []:
                        paths.setdefault(res, path)
    return paths


class AdmissionStandIn(SyncLoop):
    """Watches the POST_HOC kinds and has the real webhook mutate each new object once."""

    def __init__(self, name: str, kc: Kube, runner: ComponentRunner, paths: dict[str, str], interval: float = 5.0):
        super().__init__(name, interval)
        self.kc = kc
        self.runner = runner
        self.paths = paths
        self.done: set[str] = set()
        self._ssl = ssl.create_default_context()
        self._ssl.check_hostname = False
        self._ssl.verify_mode = ssl.CERT_NONE
        missing = [p for _, _, p, _ in POST_HOC if p not in paths]
        if missing:
            raise RuntimeError(f"no mutating webhook for {missing} in Liqo's chart")

    def watched(self) -> list[tuple[Kube, k.Res, str | None]]:
        return [(self.kc, k.Res(group, version, plural), None) for group, version, plural, _ in sorted(POST_HOC)]

    def sync(self) -> None:
        port = self.runner.flag("webhook", "--webhook-port")
        if not port:
            self.due_in(1.0)  # the webhook's process has not started yet
            return
        for group, version, plural, kind in sorted(POST_HOC):
            res = k.Res(group, version, plural)
            for obj in self.kc.list(res):
                uid = obj["metadata"]["uid"]
                if uid in self.done or obj["metadata"].get("deletionTimestamp"):
                    continue
                self._mutate(res, kind, obj, f"https://127.0.0.1:{port}{self.paths[plural]}")
                self.done.add(uid)

    def _mutate(self, res: k.Res, kind: str, obj: Obj, url: str) -> None:
        md = obj["metadata"]
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": res.group, "version": res.version, "kind": kind},
                "resource": {"group": res.group, "version": res.version, "resource": res.plural},
                "requestKind": {"group": res.group, "version": res.version, "kind": kind},
                "requestResource": {"group": res.group, "version": res.version, "resource": res.plural},
                "name": md["name"],
                "namespace": md.get("namespace"),
                "operation": "CREATE",
                "userInfo": {"username": "localk8s-admin", "groups": ["system:masters", "system:authenticated"]},
                "object": obj,
                "oldObject": None,
                "dryRun": False,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
            },
        }
        req = urllib.request.Request(
            url, data=json.dumps(review).encode(), headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(req, timeout=10, context=self._ssl) as resp:
            answer: dict[str, Any] = json.load(resp)
        response = answer.get("response") or {}
        if not response.get("allowed"):
            raise RuntimeError(f"webhook refused {kind} {md.get('namespace')}/{md['name']}: {response.get('status')}")
        if not response.get("patch"):
            return
        patch = json.loads(base64.b64decode(response["patch"]))
        try:
            self.kc._call("PATCH", res.path(md.get("namespace"), md["name"]), body=patch, content_type=JSON_PATCH)
        except KubeError as e:
            if e.status != 404:
                raise
