"""Which Liqo each side runs: the operator reads it from the chart's label on the cluster-ID ConfigMap, refuses
what cannot work and carries a working peering through a skew. The tests set that label on the stand-in tier."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from kubernetes import client as k8s

from testenv.operator_support import PeeringCase, get, operator_writes, tenant_ns, wait_for

NAME = "provider"
SECRET = "provider-kubeconfig"
VERSION_LABEL = "app.kubernetes.io/version"
CLUSTER_ID_SELECTOR = "app.kubernetes.io/name=clusterid-configmap"
LIQO_RULE = "net of patch releases, is currently not supported"


def spec(**overrides: Any) -> dict[str, Any]:
    return {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m", **overrides}


@contextmanager
def liqo_version_label(api: k8s.ApiClient, version: str) -> Iterator[None]:
    """Make the cluster-ID ConfigMap of Liqo on this cluster say ``version``; put the old label back after."""
    core = k8s.CoreV1Api(api)
    (cm,) = core.list_namespaced_config_map("liqo", label_selector=CLUSTER_ID_SELECTOR).items
    assert cm.metadata is not None and cm.metadata.name is not None
    name, old = cm.metadata.name, (cm.metadata.labels or {}).get(VERSION_LABEL)
    core.patch_namespaced_config_map(name, "liqo", {"metadata": {"labels": {VERSION_LABEL: version}}})
    try:
        yield
    finally:
        core.patch_namespaced_config_map(name, "liqo", {"metadata": {"labels": {VERSION_LABEL: old}}})


def condition(case: PeeringCase, type_: str) -> dict[str, Any] | None:
    return case.peerings.condition(case.namespace, NAME, type_)


def test_status_shows_liqo_and_kubernetes_versions_of_both_sides(case: PeeringCase) -> None:
    case.peerings.create(case.namespace, NAME, spec())
    status = case.peerings.wait_status(case.namespace, NAME, "ready")
    versions = status["versions"]
    for side in ("consumer", "provider"):
        assert versions[side]["liqo"].startswith("v1.2."), versions
        assert versions[side]["kubernetes"].startswith("v1."), versions
    assert condition(case, "LiqoVersionSkew") is None and condition(case, "LiqoVersionUntested") is None


def test_skew_is_refused_then_allowed_by_the_spec_field(case: PeeringCase) -> None:
    ns, peerings = case.namespace, case.peerings
    with liqo_version_label(case.env.provider_api, "v1.1.2"):
        created = datetime.now().astimezone()
        peerings.create(ns, NAME, spec())
        ready = peerings.wait_reason(ns, NAME, "LiqoVersionSkew")
        assert ready["status"] == "False" and LIQO_RULE in ready["message"]
        assert "consumer v1.2.0, provider v1.1.2" in ready["message"]
        skew = condition(case, "LiqoVersionSkew")
        assert skew is not None and (skew["status"], skew["reason"]) == ("True", "Refused")
        assert peerings.status(ns, NAME)["versions"]["provider"]["liqo"] == "v1.1.2"
        wait_for(
            "a Warning Event LiqoVersionSkew quoting Liqo's rule",
            lambda: any(
                e.type == "Warning" and e.reason == "LiqoVersionSkew" and LIQO_RULE in (e.message or "")
                for e in peerings.events(ns, NAME)
            ),
        )
        # Refused before anything is made on either cluster (tenant namespaces included); on the consumer the
        # operator only protects the kubeconfig Secret, as for every peering.
        assert operator_writes(case.env.lc["provider"].audit_log, created) == []
        consumer_writes = operator_writes(case.env.lc["consumer"].audit_log, created)
        assert [w for w in consumer_writes if w[1] != "secrets"] == [], consumer_writes

        peerings.patch(ns, NAME, {"spec": {"allowLiqoVersionSkew": True}})
        peerings.wait_status(ns, NAME, "ready")
        skew = condition(case, "LiqoVersionSkew")
        assert skew is not None and skew["reason"] == "Allowed"


def test_liqo_before_1_0_is_refused_naming_the_cluster_and_version(case: PeeringCase) -> None:
    ns, peerings = case.namespace, case.peerings
    with liqo_version_label(case.env.provider_api, "v0.10.3"):
        peerings.create(ns, NAME, spec())
        ready = peerings.wait_reason(ns, NAME, "LiqoVersionUnsupported")
        assert ready["status"] == "False"
        for words in ("provider cluster", "v0.10.3", "v1.0.x to v1.2.x"):
            assert words in ready["message"], ready["message"]
        assert "not installed" not in ready["message"]
        assert peerings.status(ns, NAME)["stage"] == "discovery: error"
    # Liqo upgraded there (the label back to the chart's): the peering goes on by itself.
    status = peerings.wait_status(ns, NAME, "ready")
    assert status["versions"]["provider"]["liqo"].startswith("v1.2.")


def test_skew_appearing_on_a_ready_peering_keeps_it_ready_with_the_condition(case: PeeringCase) -> None:
    ns, peerings, env = case.namespace, case.peerings, case.env
    peerings.create(ns, NAME, spec())
    peerings.wait_status(ns, NAME, "ready")
    p_ns = tenant_ns(env.provider_api, env.consumer_id)
    server = get(env.provider_api, "networking.liqo.io", "gatewayservers", p_ns, env.consumer_id)
    assert server is not None
    # The consumer's Liqo is upgraded first.
    with liqo_version_label(env.peerings.api, "v1.3.0"):
        skew = wait_for("the LiqoVersionSkew condition", lambda: condition(case, "LiqoVersionSkew"))
        assert (skew["status"], skew["reason"]) == ("True", "AppearedWhileReady")
        assert LIQO_RULE in skew["message"]
        untested = condition(case, "LiqoVersionUntested")
        assert untested is not None and untested["reason"] == "NewerThanTested"
        status = peerings.status(ns, NAME)
        assert status["peerStatus"] == "ready" and status["versions"]["consumer"]["liqo"] == "v1.3.0"
        ready = condition(case, "Ready")
        assert ready is not None and ready["status"] == "True"
        # Carried on, not re-created.
        again = get(env.provider_api, "networking.liqo.io", "gatewayservers", p_ns, env.consumer_id)
        assert again is not None and again["metadata"]["uid"] == server["metadata"]["uid"]
        wait_for(
            "a Warning Event LiqoVersionSkew",
            lambda: any(e.type == "Warning" and e.reason == "LiqoVersionSkew" for e in peerings.events(ns, NAME)),
        )
    # Back on the same minor: the conditions go.
    wait_for("the LiqoVersionSkew condition to go", lambda: condition(case, "LiqoVersionSkew") is None)
    assert peerings.status(ns, NAME)["peerStatus"] == "ready"
