"""The Microsoft Entra ID stand-in (testenv.azure) against azure-identity's own WorkloadIdentityCredential,
with its defaults: reached through the proxy as login.microsoftonline.com, it answers a token for a
ServiceAccount token its federated credential names, signed with the key it publishes, and refuses
anything else with Entra ID's error code."""

from __future__ import annotations

import datetime
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.identity import WorkloadIdentityCredential
from cryptography.hazmat.primitives.asymmetric import rsa

from testenv.azure import (
    AKS_SERVER_APP,
    EXCHANGE_AUDIENCE,
    ISSUER,
    TENANT,
    EntraId,
    FederatedCredential,
    Identity,
    sdk_environment,
    sign_jwt,
    verify_jwt,
)

CONSUMER_ISSUER = "https://kubernetes.default.svc.cluster.local"
SUBJECT = "system:serviceaccount:liqo-peering-operator:liqo-peering-operator"
IDENTITY = Identity(
    "5f2e9d3c-1a7b-4c8e-9f60-0a1b2c3d4e5f",
    "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
    [FederatedCredential(CONSUMER_ISSUER, SUBJECT)],
)
SCOPE = f"{AKS_SERVER_APP}/.default"


class Consumer:
    """A ServiceAccount token issuer, as the consumer's API server is one."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def token(self, subject: str = SUBJECT, audience: str = EXCHANGE_AUDIENCE) -> str:
        now = int(datetime.datetime.now(datetime.UTC).timestamp())
        claims = {"iss": CONSUMER_ISSUER, "sub": subject, "aud": [audience], "iat": now, "nbf": now, "exp": now + 600}
        return sign_jwt(self.key, "sa", claims)

    def check(self, token: str) -> dict[str, object] | None:
        return verify_jwt(token, {"sa": self.key.public_key()})


@pytest.fixture
def consumer() -> Consumer:
    return Consumer()


@pytest.fixture
def entra(tmp_path: Path, consumer: Consumer, monkeypatch: pytest.MonkeyPatch) -> Iterator[EntraId]:
    stand_in = EntraId(tmp_path / "entra", consumer.check, {IDENTITY.client_id: IDENTITY})
    token_file = tmp_path / "azure-identity-token"
    token_file.write_text(consumer.token())
    for name, value in sdk_environment(stand_in, IDENTITY.client_id, token_file).items():
        monkeypatch.setenv(name, value)
    yield stand_in
    stand_in.stop()


def test_workload_identity_gets_a_token_for_the_aks_server_application(entra: EntraId) -> None:
    with WorkloadIdentityCredential() as credential:
        access = credential.get_token(SCOPE)
    claims = verify_jwt(access.token, entra.public_keys())
    assert claims is not None
    assert (claims["iss"], claims["aud"], claims["tid"]) == (ISSUER, AKS_SERVER_APP, TENANT)
    assert (claims["oid"], claims["appid"]) == (IDENTITY.object_id, IDENTITY.client_id)
    # MSAL adds expires_in to its own clock, the stand-in to its own: a second may pass between the two.
    assert abs(access.expires_on - claims["exp"]) <= 5
    assert entra.issued == [claims] and entra.refused == []


def test_a_rotated_key_no_longer_verifies_the_old_tokens(entra: EntraId) -> None:
    old = entra.issue(IDENTITY)
    entra.rotate_key()
    assert verify_jwt(old, entra.public_keys()) is None
    assert verify_jwt(entra.issue(IDENTITY), entra.public_keys()) is not None


def test_an_assertion_no_federated_credential_names_is_refused(
    entra: EntraId, consumer: Consumer, tmp_path: Path
) -> None:
    (tmp_path / "azure-identity-token").write_text(consumer.token(subject="system:serviceaccount:other:other"))
    with WorkloadIdentityCredential() as credential, pytest.raises(ClientAuthenticationError) as raised:
        credential.get_token(SCOPE)
    assert "AADSTS70021" in str(raised.value)
    # Another audience, and a token the consumer did not sign.
    (tmp_path / "azure-identity-token").write_text(consumer.token(audience="pods.eks.amazonaws.com"))
    with WorkloadIdentityCredential() as credential, pytest.raises(ClientAuthenticationError):
        credential.get_token(SCOPE)
    (tmp_path / "azure-identity-token").write_text(Consumer().token())
    with WorkloadIdentityCredential() as credential, pytest.raises(ClientAuthenticationError) as raised:
        credential.get_token(SCOPE)
    assert "AADSTS700024" in str(raised.value)
    # Another scope, and an unknown client.
    status, body = entra.token(TENANT, {"scope": "https://graph.microsoft.com/.default"})
    assert status == 400 and body["error_codes"] == [900144]
    form = {
        "grant_type": "client_credentials",
        "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        "scope": "https://graph.microsoft.com/.default",
    }
    assert entra.token(TENANT, form)[1]["error_codes"] == [500011]
    assert entra.token(TENANT, {**form, "scope": SCOPE, "client_id": "nobody"})[1]["error_codes"] == [700016]
    assert entra.issued == []


def test_the_proxy_tunnels_to_entra_id_only(entra: EntraId) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"https": entra.proxy_url}))
    with pytest.raises(OSError, match="403"):
        opener.open("https://example.com/", timeout=10)
