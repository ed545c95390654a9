"""A 403 is read before it is named: each API server answer becomes the error that says its own fix.

The Status bodies are what kube-apiserver 1.35 answers (the e2e tests in tests/e2e/test_refusals.py get the
same from real API servers): RBAC, a full ResourceQuota, a webhook's and an admission policy's denial, a
create in a namespace being deleted, another admission plugin's refusal.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from liqo_peering.clients import answers
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.errors import (
    CONSUMER_FIX,
    PEERING_USER_FIX,
    AdmissionDenied,
    ApiError,
    ConsumerForbidden,
    NamespaceTerminating,
    ProviderForbidden,
    ProviderUnauthorized,
    QuotaExceeded,
    Unauthorized,
)
from liqo_peering.liqo import naming
from liqo_peering.liqo import resources as r

SERVER = "https://198.18.0.2:6443"
NS = "liqo-tenant-c1"
TENANTS = f"/apis/authentication.liqo.io/v1beta1/namespaces/{NS}/tenants"
DETAILS = {"name": "c1", "group": "authentication.liqo.io", "kind": "tenants"}


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> str:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return json.dumps(body)


RBAC = status(
    403,
    "Forbidden",
    'tenants.authentication.liqo.io "c1" is forbidden: User "peer" cannot patch resource "tenants" in API group'
    f' "authentication.liqo.io" in the namespace "{NS}"',
    DETAILS,
)
QUOTA = status(
    403,
    "Forbidden",
    'tenants.authentication.liqo.io "c1" is forbidden: exceeded quota: no-tenants, requested:'
    " count/tenants.authentication.liqo.io=1, used: count/tenants.authentication.liqo.io=0, limited:"
    " count/tenants.authentication.liqo.io=0",
    DETAILS,
)
GATEKEEPER = status(
    403,
    "Forbidden",
    'admission webhook "validation.gatekeeper.sh" denied the request: [tenants-need-approval] Tenant c1 is not'
    " approved",
)
WEBHOOK_WITHOUT_CODE = status(
    400, "", 'admission webhook "policy.example.com" denied the request: tenants must carry an owner label'
)
WEBHOOK_WITHOUT_EXPLANATION = status(
    400, "", 'admission webhook "policy.example.com" denied the request without explanation'
)
POLICY_DENIAL = (
    "ValidatingAdmissionPolicy 'no-tenants' with binding 'no-tenants-binding' denied request: failed expression:"
    " object.spec.clusterID != 'c1'"
)
POLICY = status(
    422,
    "Invalid",
    f'tenants.authentication.liqo.io "c1" is forbidden: {POLICY_DENIAL}',
    {**DETAILS, "causes": [{"message": POLICY_DENIAL}]},
)
MUTATING_POLICY = status(
    403,
    "Forbidden",
    "tenants.authentication.liqo.io \"c1\" is forbidden: policy 'stamp' with binding 'stamp-all' denied request:"
    " no tenants today",
    DETAILS,
)
TERMINATING = status(
    403,
    "Forbidden",
    f'tenants.authentication.liqo.io "c1" is forbidden: unable to create new content in namespace {NS} because it'
    " is being terminated",
    {
        **DETAILS,
        "causes": [
            {
                "reason": "NamespaceTerminating",
                "message": f"namespace {NS} is being terminated",
                "field": "metadata.namespace",
            }
        ],
    },
)
POD_SECURITY = status(
    403,
    "Forbidden",
    'pods "p" is forbidden: violates PodSecurity "restricted:latest": privileged (container "c" must not set'
    " securityContext.privileged=true)",
    {"name": "p", "kind": "pods"},
)


def read(text: str, code: int, method: str = "PATCH", path: str = f"{TENANTS}/c1", side: str = "provider") -> ApiError:
    created = "c1" if method == "POST" else None  # what the client sent names it
    return answers.read(side, answers.request_of(SERVER, method, path, created), code, "Forbidden", text)


def test_an_rbac_refusal_names_the_verb_the_resource_and_the_fix() -> None:
    error = read(RBAC, 403)
    assert type(error) is ProviderForbidden and error.reason == "ProviderForbidden" and error.transient
    assert (error.side, error.status, error.verb, error.group, error.resource) == (
        "provider",
        403,
        "patch",
        "authentication.liqo.io",
        "tenants",
    )
    assert (error.namespace, error.name, error.server_reason) == (NS, "c1", "Forbidden")
    assert error.message == (
        f"the provider cluster at {SERVER} does not let the kubeconfig's identity patch"
        f" tenants.authentication.liqo.io {NS}/c1 (403 Forbidden); {PEERING_USER_FIX}"
    )


def test_an_rbac_refusal_of_a_create_names_the_collection_as_a_role_does() -> None:
    error = read(RBAC, 403, method="POST", path=TENANTS)
    assert type(error) is ProviderForbidden and error.name == "c1"  # the object sent, as data
    assert f"does not let the kubeconfig's identity create tenants.authentication.liqo.io in namespace {NS} (" in (
        error.message
    )


def test_the_consumers_rbac_refusal_is_consumer_forbidden_and_asks_for_the_operators_rights() -> None:
    error = read(RBAC, 403, side="consumer")
    assert type(error) is ConsumerForbidden and error.reason == "ConsumerForbidden"
    assert error.message.endswith(CONSUMER_FIX) and "the operator patch" in error.message


def test_a_full_quota_names_the_quota_and_what_it_limits() -> None:
    error = read(QUOTA, 403)
    assert type(error) is QuotaExceeded and error.reason == "QuotaExceeded" and error.transient
    assert (error.quota, error.limited) == ("no-tenants", "count/tenants.authentication.liqo.io=0")
    assert f"ResourceQuota {NS}/no-tenants does not allow it (limited: count/tenants.authentication.liqo.io=0)" in (
        error.message
    )
    assert "exceeded quota: no-tenants, requested:" in error.message  # the server's own words
    assert "peering-user" not in error.message and "grant" not in error.message  # no rights are missing


def test_a_quota_not_counted_yet_is_a_quota_too() -> None:
    text = status(
        403,
        "Forbidden",
        'tenants.authentication.liqo.io "c1" is forbidden: status unknown for quota: no-tenants, resources:'
        " count/tenants.authentication.liqo.io",
        DETAILS,
    )
    error = read(text, 403)
    assert type(error) is QuotaExceeded and (error.quota, error.limited) == ("no-tenants", "")
    assert "status unknown for quota" in error.message


@pytest.mark.parametrize(
    ("text", "code", "admission", "denial"),
    [
        (GATEKEEPER, 403, 'admission webhook "validation.gatekeeper.sh"', "[tenants-need-approval] Tenant c1 is"),
        (WEBHOOK_WITHOUT_CODE, 400, 'admission webhook "policy.example.com"', "tenants must carry an owner label"),
        (WEBHOOK_WITHOUT_EXPLANATION, 400, 'admission webhook "policy.example.com"', "without explanation"),
        (POLICY, 422, 'ValidatingAdmissionPolicy "no-tenants" (binding "no-tenants-binding")', "failed expression"),
        (MUTATING_POLICY, 403, 'admission policy "stamp" (binding "stamp-all")', "no tenants today"),
        (POD_SECURITY, 403, "an admission plugin", 'violates PodSecurity "restricted:latest"'),
    ],
)
def test_a_webhook_or_policy_denial_is_admission_denied_whatever_its_code(
    text: str, code: int, admission: str, denial: str
) -> None:
    error = read(text, code)
    assert type(error) is AdmissionDenied and error.reason == "AdmissionDenied"
    assert error.transient  # fixed on the cluster, not in the spec: retried
    assert (error.admission, error.status) == (admission, code)
    assert f"({code}): " in error.message and denial in error.message  # the server's words, quoted
    assert f"make {admission} on the provider cluster allow it" in error.message
    assert "peering-user" not in error.message


def test_a_create_in_a_namespace_being_deleted_says_so() -> None:
    error = read(TERMINATING, 403, method="POST", path=TENANTS)
    assert type(error) is NamespaceTerminating and error.reason == "NamespaceTerminating" and error.transient
    assert (error.namespace, error.name, error.verb) == (NS, "c1", "create")
    assert error.message.startswith(
        f"the provider cluster at {SERVER} refused to create tenants.authentication.liqo.io {NS}/c1:"
    )
    assert f"namespace {NS} is being deleted" in error.message
    assert f"kubectl get namespace {NS} -o yaml" in error.message


def test_a_401_asks_for_valid_credentials() -> None:
    error = read(status(401, "Unauthorized", "Unauthorized"), 401, method="GET", path=f"/api/v1/namespaces/{NS}")
    assert type(error) is ProviderUnauthorized and error.reason == "ProviderUnauthorized"
    assert "does not accept the kubeconfig's credentials (401 Unauthorized)" in error.message


def test_a_server_message_is_redacted_once_and_for_all() -> None:
    token = "abcdef0123456789abcdef0123456789"
    error = read(status(403, "Forbidden", f'admission webhook "w" denied the request: token: {token}'), 403)
    assert token not in error.server_message and token not in error.message


def test_in_reverse_only_the_fix_changes() -> None:
    forward = read(RBAC, 403)
    rev = forward.in_reverse("liqo-system")
    assert type(rev) is ProviderForbidden and rev.reverse and not forward.reverse
    assert (rev.side, rev.request, rev.reason) == (forward.side, forward.request, forward.reason)
    assert PEERING_USER_FIX not in rev.message and f"Secret liqo-system/{naming.AUTH_KEYS_SECRET}" in rev.message
    assert rev.message.startswith(forward.message.split(";")[0])
    quota = read(QUOTA, 403)
    assert quota.in_reverse("liqo").message == quota.message  # nothing in it depends on the direction


# -- server-side apply falls back to create and update on RBAC refusing patch only ---------------------------


class Answering(ClusterClient):
    """A client whose server answers each request with the next of ``answers`` (its code and Status text), or
    with the object sent (a GET: the Tenant)."""

    def __init__(self, *answers_: tuple[int, str] | None) -> None:
        super().__init__(cast(Any, None), "provider", SERVER)
        self.answers = list(answers_)
        self.sent: list[tuple[str, str | None]] = []

    def _call(
        self, method: str, path: str, *, body: Any = None, query: Any = None, content_type: Any = None, **_: Any
    ) -> Any:
        self.sent.append((method, content_type))
        answer = self.answers.pop(0) if self.answers else None
        if answer is not None:
            raise self._translate(method, path, answer[0], "", answer[1])
        return body if body is not None else json.loads(json.dumps(TENANT))  # a GET finds it


TENANT = {"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant", "metadata": {"name": "c1", "namespace": NS}}
NOT_FOUND = (404, status(404, "NotFound", 'tenants.authentication.liqo.io "c1" not found', DETAILS))


def test_apply_falls_back_from_patch_when_rbac_refuses_patch() -> None:
    client = Answering((403, RBAC), NOT_FOUND)  # patch refused; the GET finds nothing; create
    client.apply(r.TENANT, TENANT)
    assert client.sent == [("PATCH", "application/apply-patch+yaml"), ("GET", None), ("POST", None)]
    client.sent.clear()
    client.apply(r.TENANT, TENANT)  # remembered: no refused patch per pass
    assert [m for m, _ in client.sent] == ["GET", "PUT"]


@pytest.mark.parametrize(
    ("code", "text", "kind"),
    [
        (403, QUOTA, QuotaExceeded),
        (403, GATEKEEPER, AdmissionDenied),
        (422, POLICY, AdmissionDenied),
        (403, TERMINATING, NamespaceTerminating),
        (401, status(401, "Unauthorized", "Unauthorized"), Unauthorized),
    ],
)
def test_apply_keeps_server_side_apply_on_any_other_refusal(code: int, text: str, kind: type) -> None:
    client = Answering((code, text))
    with pytest.raises(kind):
        client.apply(r.TENANT, TENANT)
    client.apply(r.TENANT, TENANT)  # the cause removed: server-side apply again
    assert client.sent == [("PATCH", "application/apply-patch+yaml")] * 2


def test_merge_patch_keeps_patching_on_a_refusal_other_than_rbac() -> None:
    client = Answering((403, GATEKEEPER))
    with pytest.raises(AdmissionDenied):
        client.merge_patch(r.TENANT, "c1", NS, {"metadata": {"labels": {"a": "b"}}})
    client.merge_patch(r.TENANT, "c1", NS, {"metadata": {"labels": {"a": "b"}}})
    assert client.sent == [("PATCH", "application/merge-patch+json")] * 2


def _owned_tenant(record: str | None) -> dict[str, Any]:
    owner = naming.owner_labels("team-a", "to-provider")
    notes = {naming.COMMON_METADATA: record} if record else {}
    meta = cast(dict[str, Any], TENANT["metadata"])
    return {**TENANT, "metadata": {**meta, "labels": {**owner, "team": "a"}, "annotations": notes}}


def test_relabel_gives_up_on_a_kind_the_credential_may_not_update() -> None:
    """Liqo's peering-user may neither patch nor update the provider's tenant namespace or nonce Secret: the
    object keeps the labels it was created with, and the refusal is met once per kind, not once per pass."""
    owner = naming.owner_labels("team-a", "to-provider")
    live = _owned_tenant('{"annotations": [], "labels": ["team"]}')
    want = _owned_tenant('{"annotations": [], "labels": ["team"]}')
    want["metadata"]["labels"]["team"] = "b"
    client = Answering((403, RBAC), None, (403, RBAC))  # the patch refused; the GET; the update refused
    assert client.relabel(r.TENANT, live, want, owner) is live
    assert [m for m, _ in client.sent] == ["PATCH", "GET", "PUT"]
    client.sent.clear()
    assert client.relabel(r.TENANT, live, want, owner) is live
    assert client.sent == []


def test_relabel_leaves_what_is_not_the_peerings_alone() -> None:
    live = {**TENANT, "metadata": {**cast(dict[str, Any], TENANT["metadata"]), "labels": {"team": "a"}}}  # liqoctl's
    want = _owned_tenant('{"annotations": [], "labels": ["team"]}')
    client = Answering()
    assert client.relabel(r.TENANT, live, want, naming.owner_labels("team-a", "to-provider")) is live
    assert client.sent == []
