"""A local cluster's audit log (LocalCluster.audit_log) holds every write, read back by testenv.audit."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from kubernetes import client as k8s

from testenv import kube as k
from testenv.audit import count_by, read_events, writes
from testenv.kube import Kube
from testenv.localk8s import LocalCluster


def test_writes_show_up_with_verb_resource_and_user_agent(local_clusters: dict[str, LocalCluster]) -> None:
    cluster = local_clusters["consumer"]
    agent = f"testenv-audit-selftest/{uuid.uuid4().hex[:8]}"
    kc = Kube(cluster.api_client(), user_agent=agent)
    name = f"audit-{uuid.uuid4().hex[:8]}"
    since = datetime.now(UTC)

    kc.create(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    kc.create(k.CONFIGMAP, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}, name)
    kc.patch(k.CONFIGMAP, "cm", {"data": {"a": "b"}}, name)
    kc.patch(k.NAMESPACE, name, {"metadata": {"labels": {"audited": "yes"}}}, sub="status")
    assert kc.get(k.CONFIGMAP, "cm", name) is not None  # a read: not logged
    kc.delete(k.CONFIGMAP, "cm", name)
    kc.delete(k.NAMESPACE, name)

    # No polling: the log is written in blocking mode, before each response completes.
    ours = writes(cluster.audit_log, since=since, user_agent_prefix=agent)
    # (The API server puts a Namespace's own name in objectRef.namespace once the URL names it.)
    assert [(e.verb, e.resource, e.namespace, e.name, e.code) for e in ours] == [
        ("create", "namespaces", None, name, 201),
        ("create", "configmaps", name, "cm", 201),
        ("patch", "configmaps", name, "cm", 200),
        ("patch", "namespaces/status", name, name, 200),
        ("delete", "configmaps", name, "cm", 200),
        ("delete", "namespaces", name, name, 200),
    ]
    assert {e.username for e in ours} == {"localk8s-admin"}
    assert all(since <= e.received <= e.completed for e in ours)
    assert count_by(ours, "verb") == {"create": 2, "patch": 2, "delete": 2}
    # Reads and the background noise (leases, events) are not logged, but for the start of a watch and
    # ServiceAccounts' requests (below).
    logged = {
        (e.verb, e.resource)
        for e in read_events(cluster.audit_log)
        if not e.username.startswith("system:serviceaccount:")
    }
    assert not {verb for verb, _ in logged} & {"get", "list"}
    assert not {res for _, res in logged} & {"leases", "events"}
    # Each cluster has its own log.
    assert not writes(local_clusters["provider"].audit_log, user_agent_prefix=agent)


def test_a_service_accounts_reads_and_refusals_are_logged(local_clusters: dict[str, LocalCluster]) -> None:
    """What testenv.rbacproof reads: every request of a ServiceAccount, a refused read too."""
    cluster = local_clusters["consumer"]
    name = f"audit-{uuid.uuid4().hex[:8]}"
    with cluster.api_client() as admin:
        core = k8s.CoreV1Api(admin)
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
        core.create_namespaced_service_account(name, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="reader")))
        issued = core.create_namespaced_service_account_token(
            "reader", name, k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[]))
        )
    assert issued.status is not None and issued.status.token
    token: str = issued.status.token
    cfg = k8s.Configuration(host=cluster.server, ssl_ca_cert=str(cluster.ca_cert))
    cfg.api_key = {"BearerToken": token}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    with k8s.ApiClient(cfg) as client, pytest.raises(k8s.ApiException) as refused:
        k8s.CoreV1Api(client).list_namespaced_config_map(name)
    assert refused.value.status == 403
    user = f"system:serviceaccount:{name}:reader"
    mine = [(e.verb, e.resource, e.namespace, e.code) for e in read_events(cluster.audit_log) if e.username == user]
    assert mine == [("list", "configmaps", name, 403)]
    with cluster.api_client() as admin:
        k8s.CoreV1Api(admin).delete_namespace(name)
