"""The STS stand-in (testenv.aws) against requests AWS's own SDK presigns: it vouches for a GetCallerIdentity
signed with keys it issued, for the cluster named in the signed header, and for nothing else."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from awscrt import auth, http

from testenv.aws import REGION, Sts

HOST = f"sts.{REGION}.amazonaws.com"
ROLE = "arn:aws:iam::111122223333:role/liqo-peering-operator"


def presigned(access_key: str, secret: str, session: str, cluster: str) -> str:
    """The path and query of a presigned GetCallerIdentity, as an EKS token carries it."""
    request = http.HttpRequest(
        "GET",
        "/?Action=GetCallerIdentity&Version=2011-06-15",
        http.HttpHeaders([("host", HOST), ("x-k8s-aws-id", cluster)]),
    )
    config = auth.AwsSigningConfig(
        algorithm=auth.AwsSigningAlgorithm.V4,
        signature_type=auth.AwsSignatureType.HTTP_REQUEST_QUERY_PARAMS,
        credentials_provider=auth.AwsCredentialsProvider.new_static(access_key, secret, session),
        region=REGION,
        service="sts",
        expiration_in_seconds=60,
    )
    return str(auth.aws_sign_request(request, config).result(10).path)


def test_a_request_signed_with_issued_keys_is_answered_with_the_assumed_role(tmp_path: Path) -> None:
    sts = Sts(tmp_path)
    try:
        creds = sts.issue(ROLE, "eks-session")
        target = presigned(creds.access_key_id, creds.secret_access_key, creds.session_token, "edge")
        status, body = sts.caller_identity(HOST, target, {"x-k8s-aws-id": "edge"})
        assert status == 200, body
        result = body["GetCallerIdentityResponse"]["GetCallerIdentityResult"]
        assert result["Arn"] == "arn:aws:sts::111122223333:assumed-role/liqo-peering-operator/eks-session"
        assert sts.answered == [result["Arn"]]
    finally:
        sts.stop()


def test_anything_else_is_refused_with_the_reason(tmp_path: Path) -> None:
    sts = Sts(tmp_path)
    try:
        creds = sts.issue(ROLE, "s")
        target = presigned(creds.access_key_id, creds.secret_access_key, creds.session_token, "edge")
        # Another cluster's header: the token was bound to edge.
        assert sts.caller_identity(HOST, target, {"x-k8s-aws-id": "other"})[0] == 403
        # A tampered query.
        tampered = target.replace("Version=2011-06-15", "Version=2011-06-16")
        assert sts.caller_identity(HOST, tampered, {"x-k8s-aws-id": "edge"})[0] == 403
        # The wrong secret.
        forged = presigned(creds.access_key_id, "not-the-secret", creds.session_token, "edge")
        assert sts.caller_identity(HOST, forged, {"x-k8s-aws-id": "edge"})[0] == 403
        # No cluster header signed.
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(target).query))
        assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"]
        # Revoked keys.
        sts.revoke(creds.access_key_id)
        assert sts.caller_identity(HOST, target, {"x-k8s-aws-id": "edge"})[0] == 403
        assert len(sts.refused) == 4 and sts.answered == []
        assert any("signature does not match" in why for why in sts.refused)
        assert "unknown or revoked access key" in sts.refused[-1]
    finally:
        sts.stop()
