"""Bearer tokens for managed provider clusters, made in-process with the cloud's own SDK from the operator's
own workload identity: no exec plugin runs, and no credential sits in a Secret.

EKS: a token is a presigned STS GetCallerIdentity URL, its `x-k8s-aws-id` header (the cluster's name) signed
with it, as `aws eks get-token` makes one; the cluster's aws-iam-authenticator asks STS who signed it. AWS's
Common Runtime (awscrt) finds the credentials as every AWS SDK does (EKS Pod Identity, IRSA's web identity
token, the environment) and signs. STS honours the URL for 15 minutes after it was signed: a token is made
again after 14, on the request that needs it (clients/execplugin.ExecToken keeps it meanwhile).

AKS: an access token for the AKS Microsoft Entra server application, from Microsoft Entra Workload ID
(clients/aks.py).
GKE: an access token of the operator's Google identity, made by google-auth (clients/gke.py).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from awscrt import auth, http
from awscrt.exceptions import AwsCrtError

from liqo_peering.clients.aks import aks_token
from liqo_peering.clients.gke import gke_token
from liqo_peering.errors import CloudIdentityFailed
from liqo_peering.kubeconfig import CloudIdentity

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
# STS honours a presigned GetCallerIdentity for 15 minutes: a token is made again after 14, as the AWS CLI's.
TOKEN_LIFETIME = timedelta(minutes=14)
# The SDK's own calls (the Pod Identity agent, STS for IRSA) are small: a hung one is reported, not waited on.
SDK_TIMEOUT_SECONDS = 10.0
# What `aws eks get-token` asks: the URL is signed for 60 s, which STS ignores for GetCallerIdentity.
PRESIGN_SECONDS = 60


def eks_token(
    cloud: CloudIdentity,
    credentials: Any = None,  # an awscrt AwsCredentialsProvider; None: the default chain
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> tuple[str, datetime]:
    """A token for the EKS cluster, and when to make the next one (as `aws eks get-token`, 14 minutes on)."""
    host = f"sts.{cloud.location}.amazonaws.com"
    signed_at = now()
    request = http.HttpRequest(
        "GET",
        "/?Action=GetCallerIdentity&Version=2011-06-15",
        http.HttpHeaders([("host", host), (CLUSTER_ID_HEADER, cloud.cluster_name)]),
    )
    config = auth.AwsSigningConfig(
        algorithm=auth.AwsSigningAlgorithm.V4,
        signature_type=auth.AwsSignatureType.HTTP_REQUEST_QUERY_PARAMS,
        credentials_provider=credentials or auth.AwsCredentialsProvider.new_default_chain(),
        region=cloud.location,
        service="sts",
        date=signed_at,
        expiration_in_seconds=PRESIGN_SECONDS,
    )
    try:
        signed = auth.aws_sign_request(request, config).result(SDK_TIMEOUT_SECONDS)
    except (AwsCrtError, TimeoutError) as exc:
        name = getattr(exc, "name", type(exc).__name__)
        raise CloudIdentityFailed(
            f"no AWS credentials to make a token for EKS cluster {cloud.cluster_name} ({name}): give the"
            " operator's ServiceAccount an EKS Pod Identity association or an IRSA role (the chart's"
            " serviceAccount.annotations), with access to that cluster"
        ) from None
    url = f"https://{host}{signed.path}"
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("="), signed_at + TOKEN_LIFETIME


# Each spec.remoteCluster.provider's token maker: a token for the cluster, and when to make the next one.
TOKEN_MAKERS: Mapping[str, Callable[[CloudIdentity], tuple[str, datetime]]] = MappingProxyType(
    {
        "aws": eks_token,
        "azure": aks_token,
        "gcp": gke_token,
    }
)


def cloud_token(cloud: CloudIdentity) -> tuple[str, datetime]:
    """A token for the managed cluster from the operator's own identity in its cloud."""
    return TOKEN_MAKERS[cloud.provider](cloud)
