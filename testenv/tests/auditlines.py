"""Hand-written audit log lines, as the API servers' JSON log backend writes them (audit.k8s.io/v1 Events),
for the tests of testenv.audit and testenv.rbacproof."""

from __future__ import annotations

import json
from typing import Any

SA = "system:serviceaccount:lpo-system:lpo-liqo-peering-operator"
AGENT = "liqo-peering-operator/0.1.0 (kopf)"


def line(
    verb: str,
    resource: str | None,
    *,
    user: str = SA,
    agent: str = AGENT,
    at: str = "2026-03-01T10:00:00.000001Z",
    stage: str = "ResponseComplete",
    code: int = 200,
    uri: str = "/whatever",
    pod: str | None = None,
    annotations: dict[str, str] | None = None,
    **ref: str,
) -> str:
    """One Event; `ref` is its objectRef (namespace, name, apiGroup, subresource), none without `resource`."""
    event: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": f"id-{verb}-{resource}-{at}",
        "stage": stage,
        "requestURI": uri,
        "verb": verb,
        "user": {"username": user, "groups": ["system:authenticated"]},
        "sourceIPs": ["127.0.0.1"],
        "userAgent": agent,
        "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": at,
        "stageTimestamp": at.replace("00.000001Z", "00.250000Z"),
    }
    if resource is not None:
        event["objectRef"] = {"resource": resource, "apiVersion": "v1", **ref}
    if pod is not None:
        event["user"]["extra"] = {"authentication.kubernetes.io/pod-name": [pod]}
    if annotations is not None:
        event["annotations"] = annotations
    return json.dumps(event)
