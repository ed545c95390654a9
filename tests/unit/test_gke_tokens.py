"""GKE tokens as the operator makes them with google-auth (clients/gke.py), from the GKE metadata server
stand-in (testenv.gcp) and checked by the verifier stand-in: the Google service account's token, renewed
before it expires and after a 401, and a missing or unbound identity reported with what to configure. And the
cluster's form (spec.remoteCluster, provider gcp), in the model and in the CRD's CEL rule."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import celpy
import pytest
from google.auth.compute_engine import _metadata
from pydantic import ValidationError

from hack import crdgen
from liqo_peering.api import model
from liqo_peering.clients import gke
from liqo_peering.clients.cloud import TOKEN_MAKERS
from liqo_peering.clients.execplugin import ExecToken
from liqo_peering.errors import CloudIdentityFailed
from liqo_peering.kubeconfig import CloudIdentity
from testenv.gcp import GKE_SCOPES, GoogleSts, MetadataServer, TokenVerifier

EDGE = CloudIdentity("gcp", "edge", "europe-west1")
KSA = "liqo-system/liqo-peering-operator"
GSA = "liqo-peering@edge-project.iam.gserviceaccount.com"
CLUSTER = "projects/edge-project/locations/europe-west1/clusters/edge"
POOL_PROVIDER = "//iam.googleapis.com/projects/123456789/locations/global/workloadIdentityPools/liqo/providers/consumer"
SUBJECT = "system:serviceaccount:liqo-system:liqo-peering-operator"


@pytest.fixture
def metadata(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[MetadataServer]:
    """The stand-in, where google-auth looks for the GKE metadata server; no other credential to find."""
    server = MetadataServer(KSA, {KSA: GSA})
    for name, value in server.environment.items():
        monkeypatch.setenv(name, value)
    # google-auth reads the host when first imported: the variable alone comes too late in this process.
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", server.environment["GCE_METADATA_HOST"])
    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", False)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # no gcloud user credentials either
    yield server
    server.stop()


@pytest.fixture
def verifier(metadata: MetadataServer, tmp_path: Path) -> Iterator[TokenVerifier]:
    found = TokenVerifier(tmp_path / "verifier", metadata)
    yield found
    found.stop()


@pytest.fixture
def federation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, metadata: MetadataServer) -> Iterator[GoogleSts]:
    """Outside GKE: a Workload Identity Federation credential configuration, its subject token the projected
    ServiceAccount token (here opaque, vouched for by the stand-in's review), Google's APIs stood in."""
    subject_token = secrets.token_urlsafe(32)
    token_file = tmp_path / "token"
    token_file.write_text(subject_token)
    google = GoogleSts(tmp_path / "google", metadata, POOL_PROVIDER, {subject_token: SUBJECT}.get, {SUBJECT: GSA})
    config = tmp_path / "credential-configuration.json"
    config.write_text(json.dumps(google.credential_config(token_file, GSA)))
    for name, value in google.environment(config).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", True)  # not on GKE: no metadata server asked
    yield google
    google.stop()


def review(verifier: TokenVerifier, token: str) -> dict[str, Any]:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    return dict(verifier.review(body)["status"])


def test_the_provider_is_registered() -> None:
    assert TOKEN_MAKERS["gcp"] is gke.gke_token


def test_a_token_of_the_bound_google_service_account(metadata: MetadataServer, verifier: TokenVerifier) -> None:
    token, renew_at = gke.gke_token(EDGE)
    issued = metadata.issued[token]
    assert issued.email == GSA and issued.scopes == GKE_SCOPES
    assert review(verifier, token) == {"authenticated": True, "user": {"username": GSA, "uid": GSA}}
    # Made again a few minutes before Google stops honouring it, as an aware UTC time.
    assert renew_at.tzinfo is not None
    assert issued.expiry - timedelta(minutes=6) < renew_at <= issued.expiry - timedelta(minutes=4)


def test_a_token_is_made_again_before_it_expires_and_after_a_401(metadata: MetadataServer) -> None:
    clock = [datetime.now(UTC)]
    made: list[str] = []

    def make() -> tuple[str, datetime | None]:
        token, expiry = gke.gke_token(EDGE, now=lambda: clock[0])
        made.append(token)
        return token, expiry

    holder = ExecToken(make, now=lambda: clock[0])
    first = holder.bearer()
    assert first == f"Bearer {made[0]}"
    clock[0] += timedelta(minutes=50)
    assert holder.bearer() == first and len(made) == 1
    clock[0] += timedelta(minutes=5)  # within five minutes of the token's hour
    assert holder.bearer() == f"Bearer {made[1]}" and made[1] != made[0]
    holder.expire()  # the provider answered 401
    assert holder.bearer() == f"Bearer {made[2]}"


def test_a_short_lived_token_is_renewed_half_way() -> None:
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

    class Short:
        token = "opaque"
        expiry = (now + timedelta(minutes=4)).replace(tzinfo=None)  # google-auth's naive UTC
        valid = False

        def refresh(self, request: Any) -> None:
            pass

    _, renew_at = gke.gke_token(EDGE, credentials=lambda request: Short(), now=lambda: now)
    assert renew_at == now + timedelta(minutes=2)


def test_a_serviceaccount_without_a_binding_is_reported(metadata: MetadataServer) -> None:
    metadata.unbind()
    with pytest.raises(CloudIdentityFailed) as raised:
        gke.gke_token(EDGE)
    assert raised.value.reason == "CloudIdentityFailed"
    assert "RefreshError" in raised.value.message and "GKE Workload Identity" in raised.value.message
    assert any("has no Google service account" in why for why in metadata.refused)


def test_without_credentials_the_error_says_what_to_configure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", True)  # no metadata server here: never asked
    with pytest.raises(CloudIdentityFailed) as raised:
        gke.gke_token(EDGE)
    message = raised.value.message
    assert "DefaultCredentialsError" in message and "GKE cluster edge" in message
    assert "iam.gke.io/gcp-service-account" in message and "GOOGLE_APPLICATION_CREDENTIALS" in message


def test_outside_gke_the_federated_identity_acts_as_the_google_service_account(
    federation: GoogleSts, metadata: MetadataServer, verifier: TokenVerifier
) -> None:
    token, renew_at = gke.gke_token(EDGE)
    issued = metadata.issued[token]
    assert issued.email == GSA and issued.scopes == GKE_SCOPES
    assert review(verifier, token)["user"]["username"] == GSA
    assert list(federation.federated.values()) == [SUBJECT]  # one exchange for one token
    assert renew_at <= issued.expiry - timedelta(minutes=4)


def test_outside_gke_a_subject_token_the_pool_refuses_is_reported(
    federation: GoogleSts, metadata: MetadataServer, tmp_path: Path
) -> None:
    (tmp_path / "token").write_text("not-the-serviceaccounts-token")
    with pytest.raises(CloudIdentityFailed) as raised:
        gke.gke_token(EDGE)
    assert "Workload Identity Federation credential config" in raised.value.message
    assert "the subject token is not valid for this provider" in federation.refused
    assert metadata.issued == {}


def test_outside_gke_a_principal_not_allowed_to_act_as_the_account_is_reported(
    federation: GoogleSts, metadata: MetadataServer
) -> None:
    federation.impersonation.clear()  # no roles/iam.workloadIdentityUser for the principal
    with pytest.raises(CloudIdentityFailed):
        gke.gke_token(EDGE)
    assert f"{SUBJECT} may not act as {GSA}" in federation.refused
    assert metadata.issued == {}


def test_every_call_google_auth_makes_is_bounded() -> None:
    asked: list[Any] = []

    class Session:
        def request(self, method: str, url: str, **kwargs: Any) -> Any:
            asked.append(kwargs["timeout"])
            raise gke.requests.ConnectionError("refused")

        def close(self) -> None:
            pass

    request = gke.BoundedRequest(session=Session())  # type: ignore[arg-type]
    for timeout in (120, None, 3):
        with pytest.raises(gke.google_exceptions.TransportError):
            request("https://sts.googleapis.com/v1/token", timeout=timeout)
    with pytest.raises(gke.google_exceptions.TransportError):
        request("https://sts.googleapis.com/v1/token")
    assert asked == [gke.SDK_TIMEOUT_SECONDS, gke.SDK_TIMEOUT_SECONDS, 3.0, gke.SDK_TIMEOUT_SECONDS]


def remote(cluster: str) -> dict[str, Any]:
    return {
        "provider": "gcp",
        "cluster": cluster,
        "address": "https://203.0.113.10",
        "certificateAuthorityData": "QQ==",
    }


GOOD = [CLUSTER, "projects/p-123456/locations/us-central1-a/clusters/a"]
BAD = [
    "arn:aws:eks:us-east-1:111122223333:cluster/edge",
    "projects/edge-project/zones/europe-west1-b/clusters/edge",
    "projects/Edge/locations/europe-west1/clusters/edge",
    "projects/edge-project/locations/europe-west1/clusters/Edge_1",
    "projects/edge-project/locations/europe-west1/clusters/edge/nodePools/a",
]


def test_the_cluster_form_in_the_model() -> None:
    spec = model.RemoteClusterSpec.model_validate(remote(CLUSTER))
    assert (spec.cluster_name, spec.location) == ("edge", "europe-west1")
    for cluster in BAD:
        with pytest.raises(ValidationError):
            model.RemoteClusterSpec.model_validate(remote(cluster))


def test_the_cluster_form_in_the_crds_cel_rule() -> None:
    crd = crdgen.render_crd()
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    (rule,) = [r for r in schema["remoteCluster"]["x-kubernetes-validations"] if r["fieldPath"] == ".cluster"]
    env = celpy.Environment()
    program = env.program(env.compile(rule["rule"]))
    for cluster, holds in [(c, True) for c in GOOD] + [(c, False) for c in BAD]:
        assert bool(program.evaluate({"self": celpy.json_to_cel(remote(cluster))})) is holds, cluster
