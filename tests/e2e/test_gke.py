"""A LiqoPeering with spec.remoteCluster (provider gcp): the operator reaches a GKE provider with its own Google
identity, through GKE Workload Identity, its tokens made by google-auth in the process; no kubeconfig, no
credential in a Secret, no exec plugin.

The consumer is the session's (the chart's rights, the operator as a process whose google-auth finds the GKE
metadata server where GCE_METADATA_HOST points). The provider is a light API server whose webhook token
authenticator is the GKE verifier stand-in, mapping the Google service account's tokens to its email as the
user, as GKE does; RBAC on the provider binds that user. Liqo on it is the stand-in, as in test_peeringset.py.
Google is stood in by testenv.gcp: the metadata server (the service account bound to the operator's
ServiceAccount, its tokens random and remembered) and the verifier, which takes only those tokens, unexpired.

In order: Ready through the Google service account's token, every write on the provider made by its user; the
token revoked under the live peering, a new one fetched after the provider's 401, Ready still; with the
ServiceAccount's binding removed, a new peering reports CloudIdentityFailed; unpeering leaves nothing; then the
operator as outside GKE, through Workload Identity Federation (Google's STS and IAM credentials API stood in,
the projected ServiceAccount token checked by TokenReview), Ready again as the same user; no token in the
operator's logs.
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
from testenv.gcp import GoogleSts, MetadataServer, TokenVerifier, pool_audience, projected_token, token_review
from testenv.kube import Kube
from testenv.leakscan import LeakScan
from testenv.lightk8s import install_liqo_on_providers, render_provider_chart, start_light_providers
from testenv.operator_support import OperatorEnv, OperatorProcess, wait_for
from testenv.spawned import Spawned

pytestmark = pytest.mark.standin  # stops the session's operator for its own, pointed at the metadata server

NS = "e2e-gke"
GSA = "liqo-peering-operator@edge-project.iam.gserviceaccount.com"  # GKE's user for its tokens: its email
POOL_PROVIDER = "//iam.googleapis.com/projects/123456789/locations/global/workloadIdentityPools/liqo/providers/consumer"


@dataclass
class Gke(CloudCase):
    namespace: ClassVar[str] = NS
    metadata: MetadataServer
    verifier: TokenVerifier
    operator: OperatorProcess
    chart: chart_rbac.ChartRelease
    work: Path
    leak_scan: LeakScan
    logs: list[Path]  # every operator log of the module

    def spec(self, cluster: str = "edge") -> dict[str, Any]:
        ca = base64.b64encode(self.provider.pki.ca_cert.read_bytes()).decode()
        return {
            "remoteCluster": {
                "provider": "gcp",
                "cluster": f"projects/edge-project/locations/europe-west1/clusters/{cluster}",
                "address": self.provider.server,
                "certificateAuthorityData": ca,
            },
            "timeout": "2m",
        }


@pytest.fixture(scope="module")
def gke(operator_env: OperatorEnv, tmp_path_factory: pytest.TempPathFactory, leak_scan: LeakScan) -> Iterator[Gke]:
    work = tmp_path_factory.mktemp("gke")
    consumer = Kube.from_kubeconfig(str(operator_env.lc["consumer"].kubeconfig))
    chart = chart_rbac.ChartRelease(
        Path(operator_env.lc["consumer"].kubeconfig), chart_rbac.RELEASE, chart_rbac.NAMESPACE
    )
    account = f"{chart_rbac.NAMESPACE}/{chart.service_account()}"
    metadata = MetadataServer(account, {account: GSA})
    verifier = TokenVerifier(work / "verifier", metadata)
    standins: Spawned | None = None
    operator: OperatorProcess | None = None
    state: Gke | None = None
    stood_down = False
    webhook = [
        f"--authentication-token-webhook-config-file={verifier.webhook_kubeconfig}",
        "--authentication-token-webhook-version=v1",
        # The API server keeps the webhook's verdict on a token for 2 minutes by default, and any token's for
        # 10 s more: here a revoked token is refused after those 10 s.
        "--authentication-token-webhook-cache-ttl=1s",
    ]
    providers = start_light_providers(1, work / "providers", garbage_collector=True, extra_flags=webhook)
    (provider,) = providers.clusters
    try:
        provider_kube = Kube(provider.api_client())
        # GKE's IAM lets the account in (roles/container.clusterViewer); Kubernetes RBAC gives it its rights.
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "liqo-peering-operator-gke"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": GSA}],
        }
        provider_kube.apply(k.CLUSTERROLEBINDING, binding, "e2e")
        ids = {provider.name: "gke-edge-id"}
        install_liqo_on_providers(providers.clusters, ids, render_provider_chart())
        standins = _start_standins(operator_env, providers, ids, work)
        consumer.apply(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, "e2e")
        operator_env.operator.stop()  # one operator at a time on the consumer
        stood_down = True
        environment = {
            **metadata.environment,
            "GOOGLE_APPLICATION_CREDENTIALS": "",  # none: the metadata server is the identity
            "CLOUDSDK_CONFIG": str(work / "gcloud"),  # no gcloud user credentials either
        }
        operator = chart.operator(work, env=environment).start()
        leak_scan.add_log(operator.log_path)
        state = Gke(
            operator_env,
            consumer,
            provider,
            provider_kube,
            ids[provider.name],
            metadata,
            verifier,
            operator,
            chart,
            work,
            leak_scan,
            [operator.log_path],
        )
        yield state
    finally:
        for number, issued in enumerate(metadata.handed_out):
            leak_scan.needles[issued.token] = f"GKE access token {number}"
        tear_down(
            NS,
            consumer,
            leak_scan,
            {"consumer": operator_env.peerings.api, provider.name: provider.api_client()},
            [
                state.operator.stop if state is not None else operator.stop if operator is not None else None,
                providers.stop,
                verifier.stop,
                metadata.stop,
            ],
            standins,
            "gke",
            operator_env.operator.start if stood_down else None,
        )


def test_a_peering_through_the_operators_google_identity(gke: Gke) -> None:
    started = datetime.now(UTC)
    create(gke, "edge", gke.spec())
    found = wait_for("the peering through GKE Workload Identity to be Ready", lambda: ready(gke, "edge"), timeout=120)
    assert found["remoteClusterID"] == gke.provider_id
    # Every write on the provider came from the Google service account's user; the verifier vouched for it alone.
    assert provider_writers(gke, started) == {GSA}
    assert gke.metadata.handed_out and set(gke.verifier.verified) == {GSA}
    # No credential is kept anywhere on the consumer: no Secret in the peering's namespace.
    assert gke.consumer.list(k.SECRET, NS) == []


def test_a_revoked_token_is_replaced_under_the_live_peering(gke: Gke) -> None:
    handed = len(gke.metadata.handed_out)
    assert gke.metadata.revoke_all()
    revoked = datetime.now(UTC)
    ns = tenant(gke)
    assert ns is not None

    def provoke() -> bool:
        """A write the operator must make on the provider, done: once the API server no longer takes the old
        token (its cache of verdicts), that write is refused (401), and the operator fetches a new token."""
        (conf,) = gke.provider_kube.list(k.CONFIGURATION, ns)
        label = next(key for key in conf["metadata"]["labels"] if key.startswith("peering.liqo-operator.io/"))
        gke.provider_kube.patch(k.CONFIGURATION, conf["metadata"]["name"], {"metadata": {"labels": {label: None}}}, ns)

        def restored() -> bool:
            (conf,) = gke.provider_kube.list(k.CONFIGURATION, ns)
            return label in conf["metadata"]["labels"]

        wait_for(f"the operator to put label {label} back", restored, timeout=90)
        return len(gke.metadata.handed_out) > handed

    wait_for("the operator to write with a new token after the old one was refused", provoke, timeout=120, interval=2)
    assert "the token is unknown, revoked or expired" in gke.verifier.refused
    assert provider_writers(gke, revoked) == {GSA}
    wait_for("the peering to be Ready", lambda: ready(gke, "edge"), timeout=60)


def test_without_a_usable_identity_the_peering_says_what_to_configure(gke: Gke) -> None:
    gke.metadata.unbind()  # the ServiceAccount's Workload Identity binding removed
    try:
        # Another cluster: a client of its own, with no token yet (edge's client keeps the one it holds).
        create(gke, "unbound", gke.spec(cluster="other"))

        def failed() -> dict[str, Any] | None:
            cond: dict[str, Any] = next(
                (c for c in status(gke, "unbound").get("conditions") or [] if c["type"] == "Ready"), {}
            )
            return cond if cond.get("reason") == "CloudIdentityFailed" else None

        cond = wait_for("the peering to report CloudIdentityFailed", failed, timeout=90)
        assert "GKE Workload Identity" in cond["message"] and "GOOGLE_APPLICATION_CREDENTIALS" in cond["message"]
        assert any("has no Google service account" in why for why in gke.metadata.refused)
    finally:
        gke.metadata.bind(GSA)
    gke.consumer.delete(LIQOPEERING, "unbound", NS)
    wait_for("unbound to go", lambda: gke.consumer.get(LIQOPEERING, "unbound", NS) is None, timeout=90)


def test_unpeering_leaves_nothing(gke: Gke) -> None:
    unpeer_leaving_nothing(gke, "edge")


def test_outside_gke_through_workload_identity_federation(gke: Gke) -> None:
    """The operator elsewhere: google-auth exchanges the ServiceAccount's projected token at Google's STS and
    acts as the Google service account; the metadata server is not there to ask."""
    work = gke.work / "federated"
    work.mkdir()
    account = gke.chart.service_account()
    subject = f"system:serviceaccount:{chart_rbac.NAMESPACE}:{account}"
    audience = pool_audience(POOL_PROVIDER)
    token_file = projected_token(gke.consumer, chart_rbac.NAMESPACE, account, audience, work / "token")
    google = GoogleSts(
        work / "google", gke.metadata, POOL_PROVIDER, token_review(gke.consumer, audience), {subject: GSA}
    )
    try:
        config = work / "credential-configuration.json"
        config.write_text(json.dumps(google.credential_config(token_file, GSA)))
        gke.operator.stop()
        environment = {**google.environment(config), "CLOUDSDK_CONFIG": str(work / "gcloud")}
        gke.operator = gke.chart.operator(work, env=environment).start()
        gke.logs.append(gke.operator.log_path)
        gke.leak_scan.add_log(gke.operator.log_path)
        handed = len(gke.metadata.handed_out)
        started = datetime.now(UTC)
        create(gke, "federated", gke.spec())
        wait_for(
            "the peering through Workload Identity Federation to be Ready", lambda: ready(gke, "federated"), timeout=120
        )
        assert provider_writers(gke, started) == {GSA}
        assert set(google.federated.values()) == {subject}
        assert len(gke.metadata.handed_out) > handed  # the IAM credentials API's, through the stand-in
        gke.consumer.delete(LIQOPEERING, "federated", NS)
        wait_for("federated to go", lambda: gke.consumer.get(LIQOPEERING, "federated", NS) is None, timeout=120)
    finally:
        for federated in google.federated:
            gke.leak_scan.needles[federated] = "a federated access token"
        gke.leak_scan.needles[token_file.read_text()] = "the ServiceAccount's projected token"
        google.stop()


def test_no_token_in_the_operators_log(gke: Gke) -> None:
    log = "".join(path.read_text(errors="replace") for path in gke.logs)
    assert gke.metadata.handed_out
    assert not [n for n, issued in enumerate(gke.metadata.handed_out) if issued.token in log]
    assert "ya29." not in log
