"""A LiqoPeeringSet whose members are Cluster API Clusters or ClusterProfiles (spec.source), one pass at a time
on a fake consumer: which LiqoPeerings it makes, what it reports for a provider not available yet, and the
refusals that name their fix."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from liqo_peering.clients.events import EventRecorder
from liqo_peering.engine.peeringset import Selection, SetService
from liqo_peering.engine.watches import set_routes
from liqo_peering.errors import ClusterForbidden, Request
from liqo_peering.fleet import members
from liqo_peering.liqo import resources as r
from unit.fakes import FakeClusterClient
from unit.test_peeringset_engine import Events, children, set_status, settle

NS, SET = "fleet", "edge"


def setup(source: str, not_served: set[str] | None = None) -> tuple[FakeClusterClient, SetService, Events]:
    local = FakeClusterClient("consumer", not_served=not_served)
    events = Events()
    service = SetService(local, cast(EventRecorder, events), now=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    body = {
        "metadata": {"name": SET, "namespace": NS, "uid": "set-uid", "generation": 1},
        "spec": {"source": source, "selector": {"matchLabels": {"fleet": "edge"}}, "template": {"timeout": "2m"}},
    }
    local.add(r.LIQOPEERINGSET, body)
    return local, service, events


def add_cluster(local: FakeClusterClient, name: str, phase: str | None) -> None:
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": NS, "labels": {"fleet": "edge"}}}
    local.add(r.CAPI_CLUSTER, body)
    if phase is not None:  # status is the cluster controller's, written through the status subresource
        local.obj(r.CAPI_CLUSTER, name, NS)["status"] = {"phase": phase}


def add_profile(local: FakeClusterClient, name: str, healthy: str | None) -> None:
    local.add(r.CLUSTER_PROFILE, {"metadata": {"name": name, "namespace": NS, "labels": {"fleet": "edge"}}})
    if healthy is not None:
        condition = {"type": "ControlPlaneHealthy", "status": healthy, "reason": "Probe", "message": ""}
        local.obj(r.CLUSTER_PROFILE, name, NS)["status"] = {"conditions": [condition]}


def ready(local: FakeClusterClient) -> dict[str, Any]:
    return next(c for c in set_status(local)["conditions"] if c["type"] == "Ready")


def line(local: FakeClusterClient, name: str) -> dict[str, Any]:
    return next(p for p in set_status(local)["peerings"] if p["name"] == name)


def test_a_provisioned_cluster_is_peered_through_its_kubeconfig_secret() -> None:
    local, service, events = setup("Cluster")
    add_cluster(local, "a", "Provisioned")
    outcome = service.reconcile(NS, SET)
    assert outcome.selection == Selection(r.CAPI_CLUSTER, "fleet=edge")  # Clusters wake it, not Secrets
    kid = children(local)["edge-a"]
    assert kid["spec"] == {"remoteKubeconfigSecretRef": {"name": "a-kubeconfig", "key": "value"}, "timeout": "2m"}
    assert line(local, "edge-a") | {"reason": "-"} == {
        "name": "edge-a",
        "secret": "a-kubeconfig",
        "cluster": "a",
        "reason": "-",
    }
    assert ("LiqoPeeringSet", "Normal", "Created", "created LiqoPeering edge-a for Cluster a") in events.sent


def test_a_cluster_not_provisioned_is_reported_and_peered_with_once_it_is() -> None:
    local, service, events = setup("Cluster")
    add_cluster(local, "a", "Provisioned")
    add_cluster(local, "b", "Provisioning")
    add_cluster(local, "c", None)
    service.reconcile(NS, SET)
    settle(local)
    service.reconcile(NS, SET)
    assert sorted(children(local)) == ["edge-a"]
    status = set_status(local)
    assert (status["desired"], status["ready"], status["unavailable"]) == (3, 1, 2)
    assert line(local, "edge-b") == {
        "name": "edge-b",
        "secret": "b-kubeconfig",
        "cluster": "b",
        "reason": "NotProvisioned",
    }
    assert line(local, "edge-c")["reason"] == "NotProvisioned"
    condition = ready(local)
    assert (condition["status"], condition["reason"]) == ("False", "ProvidersUnavailable")
    assert "Cluster b: phase Provisioning, not Provisioned" in condition["message"]
    assert "Cluster c: no phase yet" in condition["message"]
    reconciling = next(c for c in status["conditions"] if c["type"] == "Reconciling")
    assert reconciling["status"] == "True"  # waiting for Cluster API is progress, not a failure
    assert not any(type_ == "Warning" for _, type_, _, _ in events.sent)

    local.obj(r.CAPI_CLUSTER, "b", NS)["status"] = {"phase": "Provisioned"}
    service.reconcile(NS, SET)
    assert sorted(children(local)) == ["edge-a", "edge-b"]


def test_a_peered_cluster_that_leaves_provisioned_keeps_its_peering() -> None:
    local, service, _ = setup("Cluster")
    add_cluster(local, "a", "Provisioned")
    service.reconcile(NS, SET)
    settle(local)
    local.obj(r.CAPI_CLUSTER, "a", NS)["status"] = {"phase": "Failed"}
    service.reconcile(NS, SET)
    assert sorted(children(local)) == ["edge-a"]  # its own status says how the peering fares
    assert set_status(local)["unavailable"] == 0
    assert ready(local)["status"] == "True"


def test_a_cluster_being_deleted_unpeers() -> None:
    local, service, _ = setup("Cluster")
    add_cluster(local, "a", "Provisioned")
    service.reconcile(NS, SET)
    local.obj(r.CAPI_CLUSTER, "a", NS)["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    service.reconcile(NS, SET)
    assert local.deleted == [("liqopeerings", NS, "edge-a")]


def test_without_cluster_apis_crd_the_set_says_what_to_install() -> None:
    local, service, _ = setup("Cluster", not_served={"clusters"})
    outcome = service.reconcile(NS, SET)
    condition = ready(local)
    assert (condition["status"], condition["reason"]) == ("False", "KindNotServed")
    assert "clusters.cluster.x-k8s.io" in condition["message"]
    assert outcome.transient_error  # retried: installing the CRD needs no change to the set


def test_a_refused_read_of_clusters_names_the_chart_value(monkeypatch: pytest.MonkeyPatch) -> None:
    local, service, _ = setup("Cluster")
    asked = Request(server="https://consumer:6443", verb="list", resource="clusters", name=None)

    def refuse(res: r.Resource, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if res == r.CAPI_CLUSTER:
            raise ClusterForbidden(side="consumer", request=asked, server_reason="Forbidden")
        return []

    monkeypatch.setattr(local, "find", refuse)
    service.reconcile(NS, SET)
    condition = ready(local)
    assert condition["reason"] == "ConsumerForbidden"
    assert "clusterAPI.enabled=true" in condition["message"]


def test_a_healthy_cluster_profile_is_peered_through_its_reference() -> None:
    local, service, _ = setup("ClusterProfile")
    add_profile(local, "p", "True")
    add_profile(local, "q", "False")
    add_profile(local, "s", None)
    outcome = service.reconcile(NS, SET)
    assert outcome.selection == Selection(r.CLUSTER_PROFILE, "fleet=edge")
    assert sorted(children(local)) == ["edge-p"]
    assert children(local)["edge-p"]["spec"]["remoteClusterProfileRef"] == {"name": "p"}
    assert line(local, "edge-q") == {"name": "edge-q", "cluster": "q", "reason": "ControlPlaneUnhealthy"}
    assert "ClusterProfile q: ControlPlaneHealthy False (Probe)" in ready(local)["message"]
    assert "ClusterProfile s: ControlPlaneHealthy not reported" in ready(local)["message"]


def test_a_cluster_set_is_woken_by_its_clusters() -> None:
    local = FakeClusterClient("consumer")
    _, clusters = set_routes(local, NS, SET, (r.CAPI_CLUSTER, "fleet=edge"))
    assert clusters.scope.res == r.CAPI_CLUSTER
    assert clusters.scope.labels == "fleet=edge"


@pytest.mark.parametrize(
    "status",
    [None, "Provisioned", [], {"phase": ["Provisioned"]}, {"phase": "x" * 10_000}, {"conditions": "junk"}],
)
def test_any_status_an_author_writes_is_read_within_bounds(status: Any) -> None:
    """A Cluster's or ClusterProfile's status is whoever wrote it: any shape gives a member, never an error."""
    obj = {"metadata": {"name": "x"}, "status": status}
    cluster = members.of_cluster(obj)
    assert cluster.unavailable == members.NOT_PROVISIONED
    assert len(cluster.detail) < 200
    assert members.of_profile(obj).unavailable == members.CONTROL_PLANE_UNHEALTHY
    junk = {"metadata": {"name": "x"}, "status": {"conditions": [1, None, {"type": "ControlPlaneHealthy"}]}}
    assert members.of_profile(junk).unavailable == members.CONTROL_PLANE_UNHEALTHY
