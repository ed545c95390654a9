"""Kubernetes Events on LiqoPeerings and LiqoPeeringSets, so `kubectl describe` tells each one's story."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import structlog

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.liqo import resources as r
from liqo_peering.redact import redact

COMPONENT = "liqo-peering-operator"
log = structlog.get_logger("liqo_peering.events")


class EventRecorder:
    def __init__(self, client: ClusterClient) -> None:
        self.client = client

    def emit(self, body: dict[str, Any], type_: str, reason: str, message: str) -> None:
        meta = body["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": body.get("apiVersion", r.LIQOPEERING.api_version),
                "kind": body.get("kind", r.LIQOPEERING.kind),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
            },
            "type": type_,
            "reason": reason,
            "message": redact(message)[:1024],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.client.create(r.EVENT, event, meta["namespace"])
        except Exception as exc:  # an Event is best effort: never fail a reconcile over it
            log.warning("could not post Event", reason=reason, error=redact(str(exc))[:200])
