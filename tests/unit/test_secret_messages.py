"""Messages that name a Secret keep its name all the way to the status, the Events and the logs.

redact() once took "Secret" after a name ending in "-secret" or "-token" for a credential key, and
`kubectl get lp -o wide` showed "[REDACTED] ns/name not found".
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any, cast

import pytest
import structlog

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.engine.discovery import KubeconfigPolicy
from liqo_peering.engine.reconcile import Reconciler
from liqo_peering.liqo import resources as r
from liqo_peering.metrics import Metrics
from liqo_peering.status.conditions import get_condition
from unit.fakes import EventsClient, FakeClusterClient

NOW = datetime(2025, 1, 1, tzinfo=UTC)
# (namespace, peering, Secret): names that end like credential keys.
NAMES = [
    ("team-a", "x-token", "provider-password"),
    ("default", "my-secret", "kc-secret"),
    ("token", "password", "secret"),
    ("ns", "p", "client-key-data"),
]


def _reconcile(local: FakeClusterClient, namespace: str, peering: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """One pass; the status written, the Events' messages and the logged lines."""
    client = EventsClient()
    events = EventRecorder(cast(ClusterClient, client))
    svc = Reconciler(local, events, Metrics(), KubeconfigPolicy(), now=lambda: NOW)
    with structlog.testing.capture_logs() as logged:
        svc.reconcile(namespace, peering)
    status = local.obj(r.LIQOPEERING, peering, namespace)["status"]
    return status, [e["message"] for e in client.events], [str(line["event"]) for line in logged]


def _peering(local: FakeClusterClient, namespace: str, peering: str, secret: str) -> None:
    local.add(
        r.LIQOPEERING,
        {
            "metadata": {"name": peering, "namespace": namespace},
            "spec": {"remoteKubeconfigSecretRef": {"name": secret}},
        },
    )


@pytest.mark.parametrize(("namespace", "peering", "secret"), NAMES)
def test_secret_not_found_names_the_secret_everywhere(namespace: str, peering: str, secret: str) -> None:
    local = FakeClusterClient("consumer")
    _peering(local, namespace, peering, secret)
    status, events, logged = _reconcile(local, namespace, peering)
    expected = f"LiqoPeering {namespace}/{peering}: Secret {namespace}/{secret} not found"
    for kind in ("Ready", "Stalled"):
        cond = get_condition(status["conditions"], kind)
        assert cond is not None and cond["reason"] == "SecretNotFound"
        assert cond["message"].startswith(expected), cond["message"]
    assert status["stage"] == "discovery: error"  # the Stage column; the message is in the conditions
    assert any(e.startswith(expected) for e in events), events
    assert any(line.startswith(expected) for line in logged), logged
    assert not any("REDACTED" in text for text in [*events, *logged, str(status)])


@pytest.mark.parametrize(("namespace", "peering", "secret"), NAMES)
def test_secret_key_missing_names_the_secret_and_its_keys(namespace: str, peering: str, secret: str) -> None:
    local = FakeClusterClient("consumer")
    _peering(local, namespace, peering, secret)
    value = base64.b64encode(b"s3cr3t-T0ken-0123456789").decode()
    data = {"token": value, "ca.crt": value}
    local.add(r.SECRET, {"metadata": {"name": secret, "namespace": namespace}, "data": data})
    status, events, _ = _reconcile(local, namespace, peering)
    ready = get_condition(status["conditions"], "Ready")
    assert ready is not None and ready["reason"] == "SecretKeyMissing"
    assert f"Secret {namespace}/{secret} has no key 'kubeconfig' (keys: ca.crt, token)" in ready["message"]
    assert any(f"Secret {namespace}/{secret} has no key" in e for e in events)
    assert value not in str(status) and value not in str(events)


def test_an_unusable_kubeconfig_names_the_peering() -> None:
    local = FakeClusterClient("consumer")
    _peering(local, "team-a", "x-token", "kc-secret")
    local.add(r.SECRET, {"metadata": {"name": "kc-secret", "namespace": "team-a"}, "data": {"kubeconfig": "IA=="}})
    status, _, _ = _reconcile(local, "team-a", "x-token")
    ready = get_condition(status["conditions"], "Ready")
    assert ready is not None and ready["reason"] == "KubeconfigInvalid"
    assert ready["message"].startswith("LiqoPeering team-a/x-token: the kubeconfig is empty")
