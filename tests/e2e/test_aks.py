"""A LiqoPeering with spec.remoteCluster (provider azure): the operator reaches an AKS provider with its own
Microsoft Entra Workload ID, its tokens made by azure-identity in the process; no kubeconfig, no credential in
a Secret, no exec plugin.

The consumer is the session's (the chart's rights, the operator as a process with the variables AKS's
workload identity webhook sets in a Pod labelled azure.workload.identity/use=true). The provider is a light
API server whose JWT authenticator (--authentication-config) takes Entra ID's tokens for the AKS server
application, the identity's object ID as user name, as AKS with Microsoft Entra ID and Kubernetes RBAC does;
Liqo on it is the stand-in, as in test_peeringset.py. Entra ID is stood in by testenv.azure: the
ServiceAccount token checked by TokenReview on the consumer and against the identity's federated credential,
access tokens signed with the key the API server fetches from it.

In order: Ready through the identity's token, every write on the provider made by its object ID; the signing
key rotated under the live peering, the old token refused (401), a new one fetched, Ready still; a peering
made while the identity has no federated credential reports CloudIdentityFailed; unpeering leaves nothing;
no token in the operator's log.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kubernetes import client as k8s

from e2e.cloud_common import (
    LIQOPEERING,
    CloudCase,
    create,
    provider_writers,
    ready,
    status,
    tear_down,
    tenant,
    unpeer_leaving_nothing,
)
from e2e.test_peeringset import _start_standins
from testenv import chart_rbac
from testenv import kube as k
from testenv.azure import (
    SUBSCRIPTION,
    EntraId,
    FederatedCredential,
    Identity,
    sdk_environment,
    token_review_check,
    workload_identity_token,
)
from testenv.kube import Kube
from testenv.leakscan import LeakScan
from testenv.lightk8s import LightCluster, install_liqo_on_providers, render_provider_chart, start_light_providers
from testenv.localk8s.cluster import SA_ISSUER
from testenv.operator_support import OperatorEnv, OperatorProcess, wait_for
from testenv.spawned import Spawned

pytestmark = pytest.mark.standin  # stops the session's operator for its own, with Workload ID's variables

NS = "e2e-aks"
CLUSTER = "edge"  # the AKS cluster's name
RESOURCE_GROUP = "liqo-rg"
# The operator's user-assigned managed identity: its client ID (the ServiceAccount's annotation) and its
# object ID (the user name AKS gives its tokens, bound to rights on the provider).
CLIENT_ID = "5f2e9d3c-1a7b-4c8e-9f60-0a1b2c3d4e5f"
OBJECT_ID = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"


@dataclass
class Aks(CloudCase):
    namespace: ClassVar[str] = NS
    entra: EntraId
    identity: Identity
    operator: OperatorProcess

    def spec(self, cluster: str = CLUSTER) -> dict[str, Any]:
        ca = base64.b64encode(self.provider.pki.ca_cert.read_bytes()).decode()
        resource_id = (
            f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}"
            f"/providers/Microsoft.ContainerService/managedClusters/{cluster}"
        )
        return {
            "remoteCluster": {
                "provider": "azure",
                "cluster": resource_id,
                "address": self.provider.server,
                "certificateAuthorityData": ca,
            },
            "timeout": "2m",
        }


def whoami(provider: LightCluster, token: str) -> str | None:
    """The user the provider takes a bearer token for; None if it refuses it (401)."""
    config = k8s.Configuration(host=provider.server, ssl_ca_cert=str(provider.pki.ca_cert))
    config.api_key = {"authorization": f"Bearer {token}"}
    with k8s.ApiClient(config) as api:
        try:
            review: Any = k8s.AuthenticationV1Api(api).create_self_subject_review(
                k8s.V1SelfSubjectReview(api_version="authentication.k8s.io/v1", kind="SelfSubjectReview"),
                _request_timeout=10,
            )
        except k8s.ApiException as exc:
            if exc.status == 401:
                return None
            raise
    return str(review.status.user_info.username)


@pytest.fixture(scope="module")
def aks(operator_env: OperatorEnv, tmp_path_factory: pytest.TempPathFactory, leak_scan: LeakScan) -> Iterator[Aks]:
    work = tmp_path_factory.mktemp("aks")
    consumer = Kube.from_kubeconfig(str(operator_env.lc["consumer"].kubeconfig))
    chart = chart_rbac.ChartRelease(
        Path(operator_env.lc["consumer"].kubeconfig), chart_rbac.RELEASE, chart_rbac.NAMESPACE
    )
    subject = f"system:serviceaccount:{chart_rbac.NAMESPACE}:{chart.service_account()}"
    identity = Identity(CLIENT_ID, OBJECT_ID, [FederatedCredential(SA_ISSUER, subject)])
    entra = EntraId(work / "entra", token_review_check(consumer), {CLIENT_ID: identity})
    standins: Spawned | None = None
    operator: OperatorProcess | None = None
    stood_down = False
    authentication = entra.authentication_config(work / "authentication-config.yaml")
    providers = start_light_providers(
        1, work / "providers", garbage_collector=True, extra_flags=[f"--authentication-config={authentication}"]
    )
    (provider,) = providers.clusters
    try:
        provider_kube = Kube(provider.api_client())
        # The guide's Kubernetes RBAC for the identity's object ID (cluster-admin here, as EKS's test maps its
        # role to system:masters).
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "liqo-peering-operator"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OBJECT_ID}],
        }
        provider_kube.create(k.CLUSTERROLEBINDING, binding)
        # The API server fetches the issuer's discovery and keys in the background: a token works once it has.
        wait_for(
            "the provider to take Entra ID's tokens",
            lambda: whoami(provider, entra.issue(identity)) == OBJECT_ID,
            timeout=60,
        )
        ids = {provider.name: "aks-edge-id"}
        install_liqo_on_providers(providers.clusters, ids, render_provider_chart())
        standins = _start_standins(operator_env, providers, ids, work)
        consumer.apply(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, "e2e")
        token = workload_identity_token(
            consumer, chart_rbac.NAMESPACE, chart.service_account(), work / "azure-identity-token"
        )
        operator_env.operator.stop()  # one operator at a time on the consumer
        stood_down = True
        operator = chart.operator(work, env=sdk_environment(entra, CLIENT_ID, token)).start()
        leak_scan.add_log(operator.log_path)
        yield Aks(operator_env, consumer, provider, provider_kube, ids[provider.name], entra, identity, operator)
    finally:
        for number, handed in enumerate(entra.handed_out):
            leak_scan.needles[f"Entra ID access token {number}"] = handed
        tear_down(
            NS,
            consumer,
            leak_scan,
            {"consumer": operator_env.peerings.api, provider.name: provider.api_client()},
            [operator.stop if operator is not None else None, providers.stop, entra.stop],
            standins,
            "aks",
            operator_env.operator.start if stood_down else None,
        )


def test_the_api_server_takes_an_aks_resource_id_and_refuses_other_forms(aks: Aks) -> None:
    """The CRD's CEL rule for provider azure, in RE2 as the API server runs it (server-side dry runs)."""
    custom = k8s.CustomObjectsApi(aks.env.peerings.api)

    def dry_run(cluster: str) -> str | None:
        spec = aks.spec()
        spec["remoteCluster"]["cluster"] = cluster
        body = {
            "apiVersion": LIQOPEERING.api_version,
            "kind": "LiqoPeering",
            "metadata": {"name": "form"},
            "spec": spec,
        }
        try:
            custom.create_namespaced_custom_object(
                LIQOPEERING.group, LIQOPEERING.version, NS, LIQOPEERING.plural, body, dry_run="All"
            )
        except k8s.ApiException as exc:
            assert exc.status == 422, exc.body
            return str(json.loads(exc.body or "{}").get("message"))
        return None

    resource_id = aks.spec()["remoteCluster"]["cluster"]
    assert dry_run(resource_id) is None
    assert dry_run(resource_id.replace("/resourceGroups/", "/resourcegroups/")) is None  # as `az aks show` prints some
    for wrong in (
        "arn:aws:eks:us-east-1:111122223333:cluster/edge",
        resource_id.replace("managedClusters", "virtualMachines"),
        resource_id.replace(SUBSCRIPTION, "not-a-subscription"),
    ):
        refused = dry_run(wrong)
        assert refused is not None and "azure: /subscriptions/<id>/resourceGroups/<group>" in refused, wrong


def test_a_peering_through_the_operators_workload_identity(aks: Aks) -> None:
    started = datetime.now(UTC)
    create(aks, "edge", aks.spec())
    found = wait_for("the peering through Workload ID to be Ready", lambda: ready(aks, "edge"), timeout=120)
    assert found["remoteClusterID"] == aks.provider_id
    # Every write on the provider came from the identity's object ID; Entra ID answered that identity only.
    assert provider_writers(aks, started) == {OBJECT_ID}
    assert aks.entra.issued and all(claims["oid"] == OBJECT_ID for claims in aks.entra.issued)
    # No credential is kept anywhere on the consumer: no Secret in the peering's namespace.
    assert aks.consumer.list(k.SECRET, NS) == []


def test_a_token_refused_after_key_rotation_is_replaced_under_the_live_peering(aks: Aks) -> None:
    handed = len(aks.entra.issued)
    old = aks.entra.issue(aks.identity)  # signed with the key the operator's token was signed with
    aks.entra.rotate_key()
    rotated = datetime.now(UTC)

    def old_refused() -> bool:
        """A token with the new key's kid makes the API server fetch the keys again, which no longer hold the
        old one; its cache of verdicts keeps the old tokens for 10 s more."""
        assert whoami(aks.provider, aks.entra.issue(aks.identity)) == OBJECT_ID
        return whoami(aks.provider, old) is None

    wait_for("the provider to refuse tokens signed with the old key", old_refused, timeout=60, interval=2)
    ns = tenant(aks)
    assert ns is not None

    def provoke() -> bool:
        """A write the operator must make on the provider, done: its token is refused (401), and it asks
        Entra ID for a new one."""
        (conf,) = aks.provider_kube.list(k.CONFIGURATION, ns)
        label = next(key for key in conf["metadata"]["labels"] if key.startswith("peering.liqo-operator.io/"))
        aks.provider_kube.patch(k.CONFIGURATION, conf["metadata"]["name"], {"metadata": {"labels": {label: None}}}, ns)

        def restored() -> bool:
            (conf,) = aks.provider_kube.list(k.CONFIGURATION, ns)
            return label in conf["metadata"]["labels"]

        wait_for(f"the operator to put label {label} back", restored, timeout=90)
        return len(aks.entra.issued) > handed

    wait_for("the operator to write with a new token after the old one was refused", provoke, timeout=120, interval=2)
    assert provider_writers(aks, rotated) == {OBJECT_ID}
    wait_for("the peering to be Ready", lambda: ready(aks, "edge"), timeout=60)


def test_an_identity_without_its_federated_credential_reports_cloud_identity_failed(aks: Aks) -> None:
    federated = list(aks.identity.federated)
    aks.identity.federated.clear()  # the federated credential deleted in Entra ID
    try:
        create(aks, "elsewhere", aks.spec(cluster="elsewhere"))

        def failed() -> dict[str, Any] | None:
            cond: dict[str, Any] = next(
                (c for c in status(aks, "elsewhere").get("conditions") or [] if c["type"] == "Ready"), {}
            )
            return cond if cond.get("reason") == "CloudIdentityFailed" else None

        cond = wait_for("the peering to report CloudIdentityFailed", failed, timeout=90)
    finally:
        aks.identity.federated.extend(federated)
    assert "AADSTS70021" in cond["message"] and "azure.workload.identity/client-id" in cond["message"]
    assert "AADSTS70021" in aks.entra.refused[-1]
    assert not any(handed in cond["message"] for handed in aks.entra.handed_out)  # no token is ever shown
    aks.consumer.delete(LIQOPEERING, "elsewhere", NS)
    wait_for("elsewhere to go", lambda: aks.consumer.get(LIQOPEERING, "elsewhere", NS) is None, timeout=90)
    assert ready(aks, "edge") is not None  # the live peering kept its token


def test_unpeering_leaves_nothing(aks: Aks) -> None:
    unpeer_leaving_nothing(aks, "edge")


def test_no_token_in_the_operators_log(aks: Aks) -> None:
    log = aks.operator.log_path.read_text(errors="replace")
    assert aks.entra.handed_out and not any(handed in log for handed in aks.entra.handed_out)
    assert aks.entra.handed_out[0].split(".")[0] not in log  # not even the JWT's header
    # azure-core's log of every request is left out; azure-identity's failures stay, with Entra ID's code.
    assert "http_logging_policy" not in log and "AADSTS70021" in log
