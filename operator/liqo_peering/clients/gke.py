"""GKE bearer tokens: a Google OAuth 2.0 access token of the operator's own Google identity, as
`gke-gcloud-auth-plugin` hands one to kubectl; GKE's API server asks Google whose token it is and maps that
principal (a Google service account's email) to a Kubernetes user.

google-auth's Application Default Credentials find the identity: in GKE with Workload Identity, the GKE
metadata server gives the token of the Google service account the operator's Kubernetes ServiceAccount is
bound to; elsewhere, an `external_account` config (GOOGLE_APPLICATION_CREDENTIALS) exchanges the
ServiceAccount's projected token at Google's STS (Workload Identity Federation). An access token lives about
an hour: the next one is made a few minutes before it expires, on the request that needs it
(clients/execplugin.ExecToken keeps it meanwhile, and drops it after a 401).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import google.auth
import requests
from google.auth import exceptions as google_exceptions
from google.auth.transport.requests import Request

from liqo_peering.clients.execplugin import renewal
from liqo_peering.errors import CloudIdentityFailed
from liqo_peering.kubeconfig import CloudIdentity

# What gke-gcloud-auth-plugin asks for: GKE takes a token with either scope.
SCOPES = (
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/userinfo.email",
)
# Each call google-auth makes (the metadata server, STS, the IAM credentials API) is small: a hung one is
# reported, not waited on (google-auth's own default is 120 s for all but the metadata server).
SDK_TIMEOUT_SECONDS = 10.0
# When google-auth gives no expiry: Google's access tokens live an hour.
DEFAULT_LIFETIME = timedelta(minutes=55)


class BoundedRequest(Request):
    """google-auth's requests transport, with every call's timeout capped."""

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: Any = None,
        headers: Any = None,
        timeout: Any = SDK_TIMEOUT_SECONDS,
        **kwargs: Any,
    ) -> Any:
        bounded = SDK_TIMEOUT_SECONDS if timeout is None else min(float(timeout), SDK_TIMEOUT_SECONDS)
        return super().__call__(url, method=method, body=body, headers=headers, timeout=bounded, **kwargs)


def _default_credentials(request: Request) -> Any:
    credentials, _ = google.auth.default(scopes=list(SCOPES), request=request)
    return credentials


def gke_token(
    cloud: CloudIdentity,
    credentials: Callable[[Request], Any] = _default_credentials,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> tuple[str, datetime]:
    """An access token of the operator's Google identity for the GKE cluster, and when to make the next one."""
    request = BoundedRequest()
    try:
        found = credentials(request)
        # google.auth.default() may have refreshed them already (an external_account's project lookup does).
        if not found.valid:
            found.refresh(request)
        token = found.token
    except (google_exceptions.GoogleAuthError, requests.RequestException, OSError, ValueError) as exc:
        # The exception's own text may quote a response; only its kind is shown.
        raise CloudIdentityFailed(
            f"no Google credentials to make a token for GKE cluster {cloud.cluster_name} ({type(exc).__name__}):"
            " enable GKE Workload Identity and bind the operator's ServiceAccount to a Google service account"
            " (roles/iam.workloadIdentityUser, the chart's serviceAccount.annotations"
            " iam.gke.io/gcp-service-account), or outside GKE give it a Workload Identity Federation credential"
            " config through GOOGLE_APPLICATION_CREDENTIALS; that identity needs access to the cluster"
        ) from None
    finally:
        request.session.close()
    if not isinstance(token, str) or not token:
        raise CloudIdentityFailed(f"Google's credentials gave no access token for GKE cluster {cloud.cluster_name}")
    expiry = found.expiry  # naive UTC, as google-auth keeps it
    expires = expiry.replace(tzinfo=UTC) if isinstance(expiry, datetime) else now() + DEFAULT_LIFETIME
    return token, renewal(expires, now())
