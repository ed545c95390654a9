"""AKS tokens as the operator makes them with azure-identity (clients/aks.py), from the Microsoft Entra ID
stand-in (testenv.azure), which checks the ServiceAccount token against the identity's federated credential:
a token for the AKS server application, made again before it expires and after the provider refused it, and
an unusable identity reported with what to configure, never with a token."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa

from liqo_peering.api.model import RemoteClusterSpec
from liqo_peering.clients.aks import AKS_SERVER_APP, aks_token
from liqo_peering.clients.cloud import TOKEN_MAKERS
from liqo_peering.clients.execplugin import ExecToken
from liqo_peering.errors import CloudIdentityFailed
from liqo_peering.kubeconfig import CloudIdentity
from testenv.azure import (
    EXCHANGE_AUDIENCE,
    SUBSCRIPTION,
    EntraId,
    FederatedCredential,
    Identity,
    sdk_environment,
    sign_jwt,
    verify_jwt,
)
from unit.chart import find, helm, template_args

EDGE = CloudIdentity("azure", "edge", "liqo-rg")
CONSUMER_ISSUER = "https://kubernetes.default.svc.cluster.local"
SUBJECT = "system:serviceaccount:liqo-peering-operator:liqo-peering-operator"
IDENTITY = Identity(
    "5f2e9d3c-1a7b-4c8e-9f60-0a1b2c3d4e5f",
    "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
    [FederatedCredential(CONSUMER_ISSUER, SUBJECT)],
)
RESOURCE_ID = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/liqo-rg/providers/Microsoft.ContainerService/managedClusters/edge"
)


@pytest.fixture
def entra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EntraId]:
    """The stand-in, and the variables AKS's webhook injects, for a ServiceAccount token it accepts."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(datetime.datetime.now(datetime.UTC).timestamp())
    assertion = sign_jwt(
        key, "sa", {"iss": CONSUMER_ISSUER, "sub": SUBJECT, "aud": [EXCHANGE_AUDIENCE], "nbf": now, "exp": now + 600}
    )
    stand_in = EntraId(
        tmp_path / "entra", lambda token: verify_jwt(token, {"sa": key.public_key()}), {IDENTITY.client_id: IDENTITY}
    )
    token_file = tmp_path / "azure-identity-token"
    token_file.write_text(assertion)
    for name, value in sdk_environment(stand_in, IDENTITY.client_id, token_file).items():
        monkeypatch.setenv(name, value)
    yield stand_in
    stand_in.stop()


def test_provider_azure_takes_an_aks_resource_id_and_its_resource_group() -> None:
    spec = RemoteClusterSpec.model_validate(
        {
            "provider": "azure",
            "cluster": RESOURCE_ID,
            "address": "https://edge.hcp.example",
            "certificateAuthorityData": "QQ==",
        }
    )
    assert (spec.cluster_name, spec.location) == ("edge", "liqo-rg")
    lower = RESOURCE_ID.replace("resourceGroups", "resourcegroups")  # as `az aks show` prints some
    assert RemoteClusterSpec.model_validate({**spec.model_dump(by_alias=True), "cluster": lower}).location == "liqo-rg"
    for wrong in ("arn:aws:eks:us-east-1:111122223333:cluster/edge", RESOURCE_ID.replace("managedClusters", "vms")):
        with pytest.raises(ValueError, match="azure: /subscriptions/<id>/resourceGroups/<group>"):
            RemoteClusterSpec.model_validate({**spec.model_dump(by_alias=True), "cluster": wrong})
    assert TOKEN_MAKERS["azure"] is aks_token


def test_a_token_for_the_aks_server_application_renewed_before_it_expires(entra: EntraId) -> None:
    token, renew = aks_token(EDGE)
    claims = verify_jwt(token, entra.public_keys())
    assert claims is not None
    assert (claims["aud"], claims["oid"]) == (AKS_SERVER_APP, IDENTITY.object_id)
    expires = datetime.datetime.fromtimestamp(claims["exp"], datetime.UTC)
    # azure-identity dates the expiry from expires_in and the whole second before its request
    # (client_credential_base), Entra stamps exp once it has the request: at most a second earlier, never later.
    due = expires - datetime.timedelta(minutes=5)
    assert due - datetime.timedelta(seconds=1) <= renew <= due


def test_a_short_lived_token_is_renewed_at_half_its_life(entra: EntraId) -> None:
    entra.lifetime = datetime.timedelta(minutes=4)
    clock = datetime.datetime.now(datetime.UTC)
    token, renew = aks_token(EDGE, now=lambda: clock)
    expires = datetime.datetime.fromtimestamp(verify_jwt(token, entra.public_keys())["exp"], datetime.UTC)  # type: ignore[index]
    assert clock < renew < expires and renew == expires - (expires - clock) / 2


def test_a_refused_token_is_replaced_by_a_new_one(entra: EntraId) -> None:
    holder = ExecToken(lambda: aks_token(EDGE))
    first = holder.bearer()
    assert holder.bearer() == first and len(entra.issued) == 1  # kept until it nears expiry
    holder.expire()  # the provider answered 401
    second = holder.bearer()
    assert second != first and len(entra.issued) == 2  # Entra ID asked again, not a cache


def test_without_workload_identity_the_error_says_what_to_configure(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_FEDERATED_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(CloudIdentityFailed) as raised:
        aks_token(EDGE)
    assert raised.value.reason == "CloudIdentityFailed"
    assert "azure.workload.identity/client-id" in raised.value.message
    assert 'azure.workload.identity/use: "true"' in raised.value.message


def test_a_missing_federated_credential_is_reported_with_entra_ids_code(entra: EntraId) -> None:
    IDENTITY.federated.clear()
    try:
        with pytest.raises(CloudIdentityFailed) as raised:
            aks_token(EDGE)
    finally:
        IDENTITY.federated.append(FederatedCredential(CONSUMER_ISSUER, SUBJECT))
    assert "AADSTS70021" in raised.value.message and "federated credential" in raised.value.message
    assert entra.issued == []


def test_an_unreachable_entra_id_is_reported_not_waited_on(entra: EntraId, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens: refused at once
    with pytest.raises(CloudIdentityFailed) as raised:
        aks_token(EDGE)
    assert "edge" in raised.value.message and "eyJ" not in raised.value.message


def test_the_chart_gives_the_pod_what_the_workload_identity_webhook_reads(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "serviceAccount": {"annotations": {"azure.workload.identity/client-id": IDENTITY.client_id}},
                "podLabels": {"azure.workload.identity/use": "true"},
            }
        )
    )
    docs = [d for d in yaml.safe_load_all(helm(*template_args(), "--values", str(values))) if d]
    (account,) = find(docs, "ServiceAccount")
    assert account["metadata"]["annotations"]["azure.workload.identity/client-id"] == IDENTITY.client_id
    (deployment,) = find(docs, "Deployment")
    assert deployment["spec"]["template"]["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
