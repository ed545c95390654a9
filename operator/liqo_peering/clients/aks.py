"""Bearer tokens for AKS clusters with Microsoft Entra ID, made in-process by azure-identity from the operator's
own Microsoft Entra Workload ID: no exec plugin (kubelogin) runs, and no credential sits in a Secret.

AKS's workload identity webhook puts AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_FEDERATED_TOKEN_FILE and
AZURE_AUTHORITY_HOST in a Pod labelled azure.workload.identity/use=true whose ServiceAccount names the identity
(annotation azure.workload.identity/client-id), and projects the ServiceAccount's token there. Entra ID takes
that token as a client assertion, checked against the identity's federated credential (the consumer cluster's
OIDC issuer, the ServiceAccount as subject), and answers an access token for the AKS Microsoft Entra server
application, as kubelogin asks for it. Every AKS cluster takes a token for that application: whom it lets do
what is its Kubernetes RBAC (or Azure RBAC) for the identity's object ID.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from azure.core.exceptions import AzureError
from azure.identity import WorkloadIdentityCredential

from liqo_peering.clients.execplugin import renewal
from liqo_peering.errors import CloudIdentityFailed
from liqo_peering.kubeconfig import CloudIdentity

# The AKS Microsoft Entra server application: the audience of every AKS cluster's tokens, the same in every
# tenant (kubelogin's --server-id).
AKS_SERVER_APP = "6dae42f8-4368-4678-94ff-3960e28e3630"
SCOPE = f"{AKS_SERVER_APP}/.default"
# Entra ID's token endpoint answers within seconds: a hung one is reported, not waited on. One retry at most:
# the next reconcile asks again.
SDK_OPTIONS: Mapping[str, Any] = MappingProxyType({"connection_timeout": 5, "read_timeout": 10, "retry_total": 1})
# Entra ID's error codes (AADSTS70021: no federated credential matches) say what is wrong, and carry nothing secret.
_ENTRA_CODE = re.compile(r"AADSTS\d{1,8}")

Credential = Callable[[], Any]  # makes an azure-identity TokenCredential


def workload_identity() -> WorkloadIdentityCredential:
    """The credential of the Pod's Workload ID, from the variables AKS's webhook injects."""
    return WorkloadIdentityCredential(**SDK_OPTIONS)


def aks_token(
    cloud: CloudIdentity,
    credential: Credential = workload_identity,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> tuple[str, datetime]:
    """A token for the AKS cluster, and when to make the next one (a few minutes before it expires).

    A credential is made for each token: its cache would hand back the token the provider has just refused
    (the maker runs only when ExecToken's token nears its expiry or got a 401), and ExecToken keeps each
    token meanwhile.
    """
    try:
        with credential() as made:
            access = made.get_token(SCOPE)
    except (AzureError, ValueError) as exc:
        # ValueError: the variables are missing (the Pod was not given Workload ID).
        found = _ENTRA_CODE.search(str(exc))
        why = type(exc).__name__ + (f", {found.group()}" if found else "")
        raise CloudIdentityFailed(
            f"no Microsoft Entra token for AKS cluster {cloud.cluster_name} ({why}): give the operator Microsoft"
            " Entra Workload ID, a managed identity or app registration with a federated credential for its"
            " ServiceAccount (the consumer cluster's OIDC issuer, audience api://AzureADTokenExchange), that"
            " ServiceAccount annotated azure.workload.identity/client-id and its Pod labelled"
            ' azure.workload.identity/use: "true" (the chart\'s serviceAccount.annotations and podLabels),'
            " with access to that cluster"
        ) from None
    # clients/execplugin.ExecToken keeps it until then.
    return str(access.token), renewal(datetime.fromtimestamp(access.expires_on, UTC), now())
