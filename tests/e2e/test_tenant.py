"""A tenant who may only create, read, patch and delete LiqoPeerings and Secrets in one namespace, against the
operator running with exactly the chart's rights, the stand-in and real API servers.

The tenant is a ServiceAccount of that namespace with a Role of its own, and acts through a token of it. It
tries to crash or stall the operator (kubeconfigs built to explode, a Secret as big as the API server takes,
a server that never answers, many peerings at once), to make it read or write in another namespace (a
Secret elsewhere, labels and annotations for other namespaces' objects, names that collide with another
tenant's) and to make deletions hang (a shared Secret, a provider that hangs). Throughout, another tenant's
peering in another namespace stays Ready, the operator's process never exits or restarts, logs no
traceback and stays under 512 MiB, and every attempt ends in a refusal with its reason or a deleted object.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from liqo_peering.liqo import naming
from testenv import procstat
from testenv.operator_support import (
    GROUP,
    PLURAL,
    SECRET,
    VERSION,
    OperatorEnv,
    PeeringCase,
    Peerings,
    liqo_objects_left,
    tarpit_kubeconfig,
    tenant_ns,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.standin]  # the stand-in on control planes of its own

VICTIM = "provider"  # the other tenant's peering, in the case's namespace
RSS_LIMIT_MB = 512.0
TENANT_SA = "tenant"
HUNG = ("ProviderUnreachable", "ProviderAnswerTooSlow")  # a provider that accepts connections, answers nothing
MARK = "example.com/tenant"  # the tenant's commonMetadata label, looked for on every cluster afterwards
LIQO_KINDS = (
    ("authentication.liqo.io", "identities"),
    ("authentication.liqo.io", "tenants"),
    ("authentication.liqo.io", "resourceslices"),
    ("networking.liqo.io", "configurations"),
    ("networking.liqo.io", "gatewayclients"),
    ("networking.liqo.io", "gatewayservers"),
    ("networking.liqo.io", "publickeies"),
    ("offloading.liqo.io", "virtualnodes"),
)


@dataclass
class Tenant:
    """The tenant's namespace and its clients, which authenticate as the tenant's ServiceAccount."""

    namespace: str
    api: k8s.ApiClient
    peerings: Peerings = field(init=False)

    def __post_init__(self) -> None:
        self.peerings = Peerings(self.api)

    def secret(self, name: str, kubeconfig: bytes) -> None:
        self.peerings.put_kubeconfig_secret(self.namespace, name, kubeconfig)

    def peer(self, name: str, secret: str, **spec: Any) -> None:
        self.peerings.create(self.namespace, name, {"remoteKubeconfigSecretRef": {"name": secret}, **spec})

    def refused(self, body: dict[str, Any]) -> str:
        """The API server's refusal of a LiqoPeering with ``body`` (with strict field validation, an unknown
        field is refused rather than dropped): 400 or 422, and its message; the test fails if it is created."""
        with pytest.raises(ApiException) as refusal:
            self.peerings.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, body, field_validation="Strict"
            )
        assert refusal.value.status in (400, 422), refusal.value
        return str(json.loads(refusal.value.body or "{}").get("message"))

    def reason(self, name: str, reason: str, timeout: float = 90.0) -> str:
        """Ready's message once its reason is ``reason``."""
        return str(self.peerings.wait_reason(self.namespace, name, reason, timeout=timeout)["message"])

    def hung(self, name: str, where: str) -> None:
        """Ready says that the provider at ``where`` does not answer (it accepts connections, nothing more): no
        answer at all, or none within a request's total time."""

        def probe() -> str | None:
            ready = self.peerings.condition(self.namespace, name, "Ready") or {}
            return ready.get("reason") if ready.get("reason") in HUNG else None

        wait_for(f"LiqoPeering {self.namespace}/{name} Ready reason one of {HUNG}", probe)
        ready = self.peerings.condition(self.namespace, name, "Ready") or {}
        assert where in str(ready.get("message")), ready

    def force_delete(self, name: str) -> None:
        """Tell the operator to give up on the provider, then delete it, as the tenant: gone in the end."""
        try:
            self.peerings.patch(self.namespace, name, {"metadata": {"annotations": {naming.FORCE_DELETE: "true"}}})
        except ApiException as exc:
            if exc.status != 404:  # gone already
                raise
        self.peerings.delete(self.namespace, name)
        self.peerings.wait_gone(self.namespace, name, timeout=90)


class Watchdog:
    """The operator's process and the other tenant's peering, checked at every step: the same pid, alive, no
    traceback logged since the test began, VmRSS under RSS_LIMIT_MB, and the other peering Ready."""

    def __init__(self, case: PeeringCase) -> None:
        self.case = case
        proc = case.env.operator.proc
        assert proc is not None and proc.poll() is None, "the operator is not running"
        self.pid = proc.pid
        self.log_from = len(case.env.operator.log())
        self.peak_mb = 0.0

    def check(self, step: str) -> None:
        proc = self.case.env.operator.proc
        assert proc is not None and proc.pid == self.pid, f"{step}: the operator was restarted"
        assert proc.poll() is None, f"{step}: the operator exited with {proc.returncode}"
        rss = procstat.sample(self.pid).rss_mb
        self.peak_mb = max(self.peak_mb, rss)
        assert rss < RSS_LIMIT_MB, f"{step}: the operator holds {rss:.0f} MiB"
        log = self.case.env.operator.log()[self.log_from :]
        assert "Traceback" not in log, f"{step}: the operator logged a traceback:\n{_around(log, 'Traceback')}"
        ready = self.case.peerings.condition(self.case.namespace, VICTIM, "Ready") or {}
        assert ready.get("status") == "True", f"{step}: the other tenant's peering is no longer Ready: {ready}"


def _around(text: str, word: str, width: int = 3000) -> str:
    at = text.find(word)
    return text[max(0, at - 200) : at + width]


@pytest.fixture
def watchdog(case: PeeringCase) -> Watchdog:
    """The other tenant's peering Ready in the case's namespace, and the watchdog started."""
    case.peerings.create(case.namespace, VICTIM, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "5m"})
    case.peerings.wait_status(case.namespace, VICTIM, "ready")
    return Watchdog(case)


@pytest.fixture
def tenant(case: PeeringCase) -> Iterator[Tenant]:
    """A namespace next to the case's, and a client for a ServiceAccount there whose only rights are a Role on
    LiqoPeerings (create, read, delete, and patch for the force-delete annotation) and Secrets (create, read,
    replace, delete) in that namespace. Whatever it left is force-deleted afterwards by an admin."""
    env = case.env
    namespace = f"{case.namespace[:50]}-t"
    admin = env.peerings
    admin.make_namespace(namespace)
    core, rbac = admin.core, k8s.RbacAuthorizationV1Api(admin.api)
    core.create_namespaced_service_account(namespace, cast(Any, {"metadata": {"name": TENANT_SA}}))
    rules = [
        {
            "apiGroups": [GROUP],
            "resources": [PLURAL],
            "verbs": ["get", "list", "watch", "create", "patch", "delete"],
        },
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "create", "update", "delete"]},
    ]
    rbac.create_namespaced_role(namespace, cast(Any, {"metadata": {"name": TENANT_SA}, "rules": rules}))
    binding = {
        "metadata": {"name": TENANT_SA},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TENANT_SA},
        "subjects": [{"kind": "ServiceAccount", "name": TENANT_SA, "namespace": namespace}],
    }
    rbac.create_namespaced_role_binding(namespace, cast(Any, binding))
    token = core.create_namespaced_service_account_token(
        TENANT_SA, namespace, cast(Any, {"spec": {"expirationSeconds": 3600}})
    )
    config = k8s.Configuration()
    config.host = admin.api.configuration.host
    config.ssl_ca_cert = admin.api.configuration.ssl_ca_cert
    config.api_key = {"authorization": f"Bearer {token.status.token}"}  # type: ignore[union-attr]
    api = k8s.ApiClient(config)
    try:
        yield Tenant(namespace, api)
    finally:
        api.close()
        _clean(admin, namespace)


def _clean(admin: Peerings, namespace: str) -> None:
    """Force-delete whatever the tenant left (as an admin), release what still holds it, drop the namespace."""
    for item in admin.in_namespace(namespace):
        name = item["metadata"]["name"]
        with contextlib.suppress(ApiException):
            admin.patch(namespace, name, {"metadata": {"annotations": {naming.FORCE_DELETE: "true"}}})
        admin.delete(namespace, name)
    for item in admin.in_namespace(namespace):
        name = item["metadata"]["name"]
        try:
            admin.wait_gone(namespace, name, timeout=60)
        except AssertionError:
            admin.patch(namespace, name, {"metadata": {"finalizers": None}})
    for secret in admin.core.list_namespaced_secret(namespace).items:
        meta: Any = secret.metadata
        if meta.finalizers:
            admin.core.patch_namespaced_secret(meta.name, namespace, cast(Any, {"metadata": {"finalizers": None}}))
    admin.core.delete_namespace(namespace)


def alias_bomb(server: str) -> bytes:
    """A kubeconfig whose user holds YAML aliases nested seven deep: a few hundred bytes that stand for 10^7
    strings once anything walks them."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * 10)}]"]
    for i in range(1, 7):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    config = _config(server)
    config["users"][0]["user"]["extensions"] = "BOMB"
    text = yaml.safe_dump(config).replace("BOMB", "*l6")
    return ("\n".join(lines) + "\n" + text).encode()


def deep_nesting(depth: int = 100_000) -> bytes:
    """A kubeconfig nesting one flow sequence ``depth`` deep."""
    return b"apiVersion: v1\nkind: Config\npreferences: " + b"[" * depth + b"]" * depth + b"\n"


def one_mebibyte() -> bytes:
    """Just under what the API server keeps in a Secret (1 MiB of data): a mapping of many long keys."""
    row = "k{:07d}: " + "x" * 110 + "\n"
    return "".join(row.format(i) for i in range(8_600)).encode()


def _config(server: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": "Y2E="}}],
        "users": [{"name": "u", "user": {"token": "not-a-token"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


@contextlib.contextmanager
def hung_provider(env: OperatorEnv) -> Iterator[tuple[bytes, str]]:
    """A kubeconfig of the provider whose server accepts connections and never answers (on loopback)."""
    with tarpit_kubeconfig(env.provider_kubeconfig()) as (kubeconfig, where):
        yield kubeconfig, where


def test_kubeconfigs_built_to_explode_are_refused(case: PeeringCase, watchdog: Watchdog, tenant: Tenant) -> None:
    with hung_provider(case.env) as (_, where):
        tenant.secret("bomb", alias_bomb(f"https://{where}"))
        tenant.secret("deep", deep_nesting())
        tenant.peer("bomb", "bomb")
        tenant.peer("deep", "deep")
        message = tenant.reason("bomb", "KubeconfigInvalid")
        assert "alias" in message.lower(), message
        watchdog.check("the alias bomb")
        message = tenant.reason("deep", "KubeconfigInvalid")
        assert re.search(r"depth|nest", message, re.IGNORECASE), message
        watchdog.check("the deep nesting")
        for name in ("bomb", "deep"):
            tenant.force_delete(name)
        watchdog.check("both deleted")
    print(f"the operator's peak VmRSS: {watchdog.peak_mb:.0f} MiB")


def test_a_tenant_cannot_stall_the_operator(case: PeeringCase, watchdog: Watchdog, tenant: Tenant) -> None:
    with hung_provider(case.env) as (hung, where):
        tenant.secret("hung", hung)
        tenant.secret("huge", one_mebibyte())
        tenant.peer("huge", "huge")
        many = [f"hung-{i:02d}" for i in range(25)]  # at once, on a provider that never answers
        for name in many:
            tenant.peer(name, "hung")
        watchdog.check("every peering created")
        tenant.reason("huge", "KubeconfigInvalid")
        watchdog.check("the 1 MiB Secret")
        for name in many:
            tenant.hung(name, where)
        watchdog.check("a provider that never answers, for 25 peerings")

        # The other tenant's peering still follows a change while all of these are refused or waiting.
        case.peerings.patch(case.namespace, VICTIM, {"spec": {"timeout": "6m"}})
        generation = case.peerings.get(case.namespace, VICTIM)["metadata"]["generation"]  # type: ignore[index]
        wait_for(
            "the other tenant's peering to observe its change",
            lambda: case.peerings.status(case.namespace, VICTIM).get("observedGeneration") == generation,
        )
        watchdog.check("the other tenant's change")

        # Their provider hangs, so their unpeering cannot reach it: the tenant gives up on it (force-delete).
        for name in ["huge", *many]:
            tenant.force_delete(name)
        watchdog.check("every peering deleted")
    print(f"the operator's peak VmRSS: {watchdog.peak_mb:.0f} MiB")


def test_a_tenant_cannot_reach_into_another_namespace(case: PeeringCase, watchdog: Watchdog, tenant: Tenant) -> None:
    env, other = case.env, case.namespace
    ref = {"remoteKubeconfigSecretRef": {"name": SECRET, "namespace": other}}

    def body(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LiqoPeering", "metadata": {"name": name}, "spec": spec}

    # The reference to the Secret has no namespace: refused by strict validation, dropped otherwise.
    assert 'unknown field "spec.remoteKubeconfigSecretRef.namespace"' in tenant.refused(body("elsewhere", ref))
    tenant.peerings.create(tenant.namespace, "elsewhere", ref)
    assert "namespace" not in tenant.peerings.get(tenant.namespace, "elsewhere")["spec"]["remoteKubeconfigSecretRef"]  # type: ignore[index]
    message = tenant.reason("elsewhere", "SecretNotFound")
    assert f"Secret {tenant.namespace}/{SECRET} not found" in message and f"{other}/" not in message, message
    # Nor can its name lead elsewhere.
    assert "remoteKubeconfigSecretRef.name" in tenant.refused(
        body("slash", {"remoteKubeconfigSecretRef": {"name": f"{other}/{SECRET}"}})
    )
    # commonMetadata: no namespace of its own, and no label or annotation in Liqo's or the operator's domains,
    # which would let the objects a peering makes pass for other ones (a tenant namespace, a force-delete).
    for metadata in (
        {"namespace": other},
        {"labels": {"liqo.io/tenant-namespace": "true"}},
        {"labels": {"liqo.io/remote-cluster-id": env.provider_id}},
        {"annotations": {naming.FORCE_DELETE: "true"}},
        {"labels": {"app.kubernetes.io/managed-by": "liqo-peering-operator"}},
    ):
        spec = {"remoteKubeconfigSecretRef": {"name": SECRET}, "commonMetadata": metadata}
        tenant.refused(body("metadata", spec))
    watchdog.check("the refused specs")

    # Names that collide with the other tenant's: the same LiqoPeering and Secret names, a Secret named as
    # the nonces the operator may write anywhere, and the same provider (the tenant holds its kubeconfig too).
    tenant.secret(SECRET, env.provider_kubeconfig())
    tenant.secret("liqo-signed-nonce", b"the tenant's own")
    nonce = tenant.peerings.core.read_namespaced_secret("liqo-signed-nonce", tenant.namespace)
    tenant.peer(VICTIM, SECRET, commonMetadata={"labels": {MARK: "b"}, "annotations": {MARK: "b"}})
    message = tenant.reason(VICTIM, "DuplicatePeering")
    assert f"{other}/{VICTIM}" in message, message
    watchdog.check("the colliding peering")
    consumer_tenant_ns = tenant_ns(env.peerings.api, env.provider_id)
    provider_tenant_ns = tenant_ns(env.provider_api, env.consumer_id)
    before = sorted(liqo_objects_left(env, consumer_tenant_ns, provider_tenant_ns))
    assert before, "the other tenant's peering has no Liqo objects"

    # Force-deleted by the tenant: the other tenant's peering, its objects, its tenant namespace and
    # ForeignCluster are left alone.
    tenant.force_delete(VICTIM)
    watchdog.check("the colliding peering force-deleted")
    assert sorted(liqo_objects_left(env, consumer_tenant_ns, provider_tenant_ns)) == before
    assert tenant_ns(env.peerings.api, env.provider_id) == consumer_tenant_ns
    for fc in _list(env.peerings.api, "core.liqo.io", "foreignclusters"):
        annotations = fc["metadata"].get("annotations") or {}
        assert naming.PERMANENTLY_UNREACHABLE not in annotations, fc["metadata"]
    # Nothing on either cluster carries the tenant's label or annotation.
    for api in (env.peerings.api, env.provider_api):
        core = k8s.CoreV1Api(api)
        assert not core.list_namespace(label_selector=MARK).items
        assert not core.list_secret_for_all_namespaces(label_selector=MARK).items
        for group, plural in LIQO_KINDS:
            found = [o for o in _list(api, group, plural) if _marked(o)]
            assert not found, [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in found]
    # The tenant's Secret that bears a nonce's name was neither written nor deleted.
    again = tenant.peerings.core.read_namespaced_secret("liqo-signed-nonce", tenant.namespace)
    assert again.metadata.resource_version == nonce.metadata.resource_version  # type: ignore[union-attr]
    tenant.force_delete("elsewhere")
    watchdog.check("the end")


def test_a_shared_secret_goes_with_its_last_peering(case: PeeringCase, watchdog: Watchdog, tenant: Tenant) -> None:
    core = tenant.peerings.core
    with hung_provider(case.env) as (hung, where):
        # Two peerings share one Secret, whose provider never answers.
        tenant.secret("shared", hung)
        tenant.peer("first", "shared")
        tenant.peer("second", "shared")
        for name in ("first", "second"):
            tenant.hung(name, where)
        wait_for(
            "the shared Secret kept while the peerings use it",
            lambda: naming.KUBECONFIG_IN_USE in _meta(core, "shared", tenant.namespace).finalizers,
        )
        # The tenant deletes everything at once, as `kubectl delete -f` does. Neither peering got past its
        # provider's discovery, so neither has anything to undo there: both go, and the Secret with the last.
        core.delete_namespaced_secret("shared", tenant.namespace)
        tenant.peerings.delete(tenant.namespace, "first")
        tenant.peerings.delete(tenant.namespace, "second")
        watchdog.check("the deletions asked")
        for name in ("first", "second"):
            tenant.peerings.wait_gone(tenant.namespace, name, timeout=90)
        wait_for("the shared Secret released with the last peering", lambda: _gone(core, "shared", tenant.namespace))
        watchdog.check("every deletion done")


def _meta(core: k8s.CoreV1Api, name: str, namespace: str) -> Any:
    """A Secret's metadata (finalizers a list, even when it has none)."""
    meta: Any = core.read_namespaced_secret(name, namespace).metadata
    meta.finalizers = meta.finalizers or []
    return meta


def _gone(core: k8s.CoreV1Api, name: str, namespace: str) -> bool:
    try:
        core.read_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


def _list(api: k8s.ApiClient, group: str, plural: str) -> list[dict[str, Any]]:
    """Every object of a Liqo kind on the cluster; none where the cluster does not serve the kind."""
    try:
        result: Any = k8s.CustomObjectsApi(api).list_cluster_custom_object(group, "v1beta1", plural)
    except ApiException as exc:
        if exc.status == 404:
            return []
        raise
    return list(result["items"])


def _marked(obj: dict[str, Any]) -> bool:
    meta = obj.get("metadata") or {}
    return MARK in (meta.get("labels") or {}) or MARK in (meta.get("annotations") or {})
