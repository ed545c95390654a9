"""The GKE stand-ins (testenv.gcp) against google-auth's own metadata-server client: the metadata server answers
only Google's flavour of request, gives the bound Google service account's token, and none without a binding;
the verifier, over HTTPS as the API server asks it, vouches for live tokens it issued and for nothing else."""

from __future__ import annotations

import datetime
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from google.auth import compute_engine
from google.auth import exceptions as google_exceptions
from google.auth.compute_engine import _metadata
from google.auth.transport.requests import Request

from testenv.gcp import (
    ACCESS_TOKEN_TYPE,
    GKE_SCOPES,
    JWT_TOKEN_TYPE,
    PROJECT,
    TOKEN_EXCHANGE,
    GoogleSts,
    MetadataServer,
    TokenVerifier,
)

KSA = "liqo-system/liqo-peering-operator"
GSA = "liqo-peering@edge-project.iam.gserviceaccount.com"


@pytest.fixture
def metadata(monkeypatch: pytest.MonkeyPatch) -> Iterator[MetadataServer]:
    server = MetadataServer(KSA, {KSA: GSA})
    for name, value in server.environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", server.environment["GCE_METADATA_HOST"])
    yield server
    server.stop()


def get(metadata: MetadataServer, path: str, headers: dict[str, str]) -> tuple[int, str, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{metadata.port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers.get("Metadata-Flavor", ""), answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("Metadata-Flavor", ""), refused.read().decode()


def test_google_auth_finds_it_and_gets_the_bound_accounts_token(metadata: MetadataServer) -> None:
    request = Request()
    assert _metadata.is_on_gce(request)
    assert _metadata.get_project_id(request) == PROJECT
    credentials = compute_engine.Credentials(scopes=sorted(GKE_SCOPES))
    credentials.refresh(request)
    assert credentials.service_account_email == GSA
    token = str(credentials.token)
    issued = metadata.issued[token]
    assert issued.email == GSA and issued.scopes == GKE_SCOPES
    assert metadata.lookup(token) == issued


def test_only_googles_flavour_of_request_is_answered(metadata: MetadataServer) -> None:
    path = "/computeMetadata/v1/instance/service-accounts/default/token"
    assert get(metadata, path, {})[0] == 403
    assert get(metadata, path, {"Metadata-Flavor": "Other"})[0] == 403
    status, flavour, body = get(metadata, path, {"Metadata-Flavor": "Google"})
    assert (status, flavour) == (200, "Google") and json.loads(body)["token_type"] == "Bearer"
    assert get(metadata, "/computeMetadata/v1/instance/attributes/kube-env", {"Metadata-Flavor": "Google"})[0] == 404


def test_no_token_without_a_binding(metadata: MetadataServer) -> None:
    metadata.unbind()
    with pytest.raises(google_exceptions.RefreshError):
        compute_engine.Credentials().refresh(Request())
    assert metadata.issued == {}
    assert "has no Google service account" in metadata.refused[-1]


def review(verifier: TokenVerifier, token: str) -> dict[str, Any]:
    """A TokenReview POSTed as kube-apiserver does, from the webhook kubeconfig it is given."""
    config = yaml.safe_load(verifier.webhook_kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    tls = ssl.create_default_context(cafile=cluster["certificate-authority"])
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    url = cluster["server"] + "?timeout=30s"  # with the query the API server adds
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10, context=tls) as answer:
        found: dict[str, Any] = json.load(answer)
    assert found["apiVersion"] == "authentication.k8s.io/v1" and found["kind"] == "TokenReview"
    return dict(found["status"])


def test_the_verifier_vouches_for_live_issued_tokens_only(metadata: MetadataServer, tmp_path: Path) -> None:
    verifier = TokenVerifier(tmp_path, metadata)
    try:
        token = metadata.issue(GKE_SCOPES)
        assert token is not None
        assert review(verifier, token.token) == {"authenticated": True, "user": {"username": GSA, "uid": GSA}}
        assert review(verifier, "ya29.not-issued")["authenticated"] is False
        narrow = metadata.issue(frozenset({"https://www.googleapis.com/auth/devstorage.read_only"}))
        assert narrow is not None and review(verifier, narrow.token)["authenticated"] is False
        metadata.lifetime = datetime.timedelta(0)
        expired = metadata.issue(GKE_SCOPES)
        assert expired is not None and review(verifier, expired.token)["authenticated"] is False
        assert metadata.revoke_all()
        assert review(verifier, token.token)["authenticated"] is False
        assert verifier.verified == [GSA]
        assert verifier.refused == [
            "the token is unknown, revoked or expired",
            "the token has no scope GKE takes",
            "the token is unknown, revoked or expired",
            "the token is unknown, revoked or expired",
        ]
    finally:
        verifier.stop()


def test_the_google_apis_stand_in_exchanges_and_impersonates_for_the_pool_only(
    metadata: MetadataServer, tmp_path: Path
) -> None:
    subject = "system:serviceaccount:liqo-system:liqo-peering-operator"
    audience = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/c"
    google = GoogleSts(tmp_path, metadata, audience, {"projected": subject}.get, {subject: GSA})
    proxies, verify = {"https": f"http://127.0.0.1:{google.port}"}, str(google.ca_file)

    def post(url: str, **kwargs: Any) -> requests.Response:
        return requests.post(url, proxies=proxies, verify=verify, timeout=10, **kwargs)

    try:
        with pytest.raises(requests.exceptions.ProxyError):
            requests.get("https://example.com/", proxies=proxies, verify=verify, timeout=10)
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "subject_token_type": JWT_TOKEN_TYPE,
            "audience": audience,
            "subject_token": "projected",
        }
        sts = "https://sts.googleapis.com/v1/token"
        federated = post(sts, data=form).json()["access_token"]
        assert post(sts, data={**form, "subject_token": "other"}).status_code == 400
        assert post(sts, data={**form, "audience": "//elsewhere"}).status_code == 400
        iam = "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/{}:generateAccessToken"
        headers = {"Authorization": f"Bearer {federated}"}
        body = {"scope": sorted(GKE_SCOPES)}
        answer = post(iam.format(GSA), json=body, headers=headers)
        issued = metadata.lookup(answer.json()["accessToken"])
        assert issued is not None and issued.email == GSA and issued.scopes == GKE_SCOPES
        other = "other@edge-project.iam.gserviceaccount.com"
        assert post(iam.format(other), json=body, headers=headers).status_code == 403
        assert post(iam.format(GSA), json=body).status_code == 401
        assert google.federated == {federated: subject}
    finally:
        google.stop()
