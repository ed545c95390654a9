"""EKS tokens as the operator makes them with AWS's SDK (clients/cloud.py), checked by the STS stand-in
(testenv.aws), which verifies their SigV4 signature as STS does: bound to the cluster's name, renewed before
STS stops honouring them, and a missing identity reported with what to configure."""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from awscrt import auth

from liqo_peering.clients.cloud import TOKEN_PREFIX, eks_token
from liqo_peering.clients.execplugin import ExecToken
from liqo_peering.errors import CloudIdentityFailed
from liqo_peering.kubeconfig import CloudIdentity
from testenv.aws import REGION, Sts

EDGE = CloudIdentity("aws", "edge", REGION)
ROLE = "arn:aws:iam::111122223333:role/liqo-peering-operator"


def presigned(token: str) -> tuple[str, str]:
    """(host, path and query) of the URL a token carries."""
    assert token.startswith(TOKEN_PREFIX)
    encoded = token.removeprefix(TOKEN_PREFIX)
    url = urllib.parse.urlsplit(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode())
    assert (url.scheme, url.path) == ("https", "/")
    return str(url.hostname), f"{url.path}?{url.query}"


@pytest.fixture
def sts(tmp_path: Path) -> Iterator[Sts]:
    stand_in = Sts(tmp_path)
    yield stand_in
    stand_in.stop()


def static(sts: Sts) -> auth.AwsCredentialsProvider:
    creds = sts.issue(ROLE, "operator")
    return auth.AwsCredentialsProvider.new_static(creds.access_key_id, creds.secret_access_key, creds.session_token)


def test_a_token_is_a_presigned_get_caller_identity_bound_to_the_cluster(sts: Sts) -> None:
    token, _ = eks_token(EDGE, static(sts))
    host, target = presigned(token)
    assert host == f"sts.{REGION}.amazonaws.com"
    status, body = sts.caller_identity(host, target, {"x-k8s-aws-id": "edge"})
    assert status == 200, body
    assert body["GetCallerIdentityResponse"]["GetCallerIdentityResult"]["Arn"].endswith(
        "/liqo-peering-operator/operator"
    )
    assert sts.caller_identity(host, target, {"x-k8s-aws-id": "another-cluster"})[0] == 403


def test_a_token_is_made_again_before_sts_stops_honouring_it(sts: Sts) -> None:
    provider = static(sts)
    clock = [datetime(2026, 12, 2, 12, 0, tzinfo=UTC)]
    made: list[str] = []

    def make() -> tuple[str, datetime | None]:
        token, expiry = eks_token(EDGE, provider, now=lambda: clock[0])
        made.append(token)
        return token, expiry

    holder = ExecToken(make, now=lambda: clock[0])
    first = holder.bearer()
    assert first == f"Bearer {made[0]}"
    clock[0] += timedelta(minutes=13, seconds=49)
    assert holder.bearer() == first and len(made) == 1
    clock[0] += timedelta(seconds=2)  # within the margin of its 14 minutes, a minute before STS's 15
    assert holder.bearer() == f"Bearer {made[1]}" and made[1] != made[0]
    holder.expire()  # the provider answered 401
    assert holder.bearer() == f"Bearer {made[2]}"


def test_without_credentials_the_error_says_what_to_configure(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata here: never asked
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    with pytest.raises(CloudIdentityFailed) as raised:
        eks_token(EDGE)
    assert raised.value.reason == "CloudIdentityFailed"
    assert "EKS Pod Identity association or an IRSA role" in raised.value.message
