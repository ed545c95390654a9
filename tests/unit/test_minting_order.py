"""spec.credentials.mint: nothing is minted before discovery and the duplicate check, and teardown finds a
minted identity by the peering's name, whether or not its status holds the cluster IDs."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any, cast

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import ed25519

from liqo_peering.api.model import parse_spec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.engine import credentials, discovery
from liqo_peering.engine.discovery import KubeconfigPolicy, VersionCache
from liqo_peering.engine.reconcile import Reconciler
from liqo_peering.engine.unpeering import Unpeerer
from liqo_peering.errors import ClusterForbidden, PeeringError, Request
from liqo_peering.kubeconfig import RemoteKubeconfig
from liqo_peering.liqo import naming
from liqo_peering.liqo import peeringuser as pu
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.context import ClusterInfo
from liqo_peering.metrics import Metrics
from liqo_peering.status.conditions import get_condition
from unit.fakes import EventsClient, FakeClusterClient
from unit.test_stage_steps import liqo_installed

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NS = "team-a"
BOOTSTRAP = "provider-admin"
CONSUMER_ID, PROVIDER_ID = "consumer-id", "provider-id"
KUBECONFIG = yaml.safe_dump(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "p", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "admin", "user": {"token": "bootstrap-token"}}],
        "contexts": [{"name": "p", "context": {"cluster": "p", "user": "admin"}}],
        "current-context": "p",
    }
).encode()


class _Remotes:
    """Every provider kubeconfig reaches the one fake provider."""

    def __init__(self, provider: FakeClusterClient) -> None:
        self.provider = provider

    def get(self, key: Any, kubeconfig: RemoteKubeconfig) -> FakeClusterClient:
        return self.provider

    def release(self, key: Any) -> None:
        pass


def _peering(name: str, created: str, *, mint: bool, status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = {"remoteKubeconfigSecretRef": {"name": BOOTSTRAP}, "credentials": {"mint": mint}}
    meta = {"name": name, "namespace": NS, "uid": f"uid-{name}", "creationTimestamp": created, "generation": 1}
    return {"metadata": meta, "spec": spec, "status": status or {}}


def _clusters() -> tuple[FakeClusterClient, FakeClusterClient, Reconciler]:
    local, provider = FakeClusterClient("consumer"), FakeClusterClient("provider")
    liqo_installed(local, CONSUMER_ID, pod_cidrs=("10.0.0.0/16",), external="10.1.0.0/16")
    liqo_installed(provider, PROVIDER_ID, pod_cidrs=("10.2.0.0/16",), external="10.3.0.0/16")
    local.add(r.SECRET, {"metadata": {"name": BOOTSTRAP, "namespace": NS}, "data": {"kubeconfig": _b64(KUBECONFIG)}})
    svc = Reconciler(
        local,
        EventRecorder(cast(ClusterClient, EventsClient())),
        Metrics(),
        KubeconfigPolicy(),
        now=lambda: NOW,
        remotes=cast(Any, _Remotes(provider)),
    )
    return local, provider, svc


def _unpeerer(local: FakeClusterClient, provider: FakeClusterClient) -> Unpeerer:
    events = EventRecorder(cast(ClusterClient, EventsClient()))
    return Unpeerer(
        local, events, Metrics(), KubeconfigPolicy(), now=lambda: NOW, remotes=cast(Any, _Remotes(provider))
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The order of discovery's and the credential step's calls; the credential step ends the pass."""
    seen: list[str] = []
    cluster_info = discovery.cluster_info

    def discovering(client: ClusterClient, liqo_namespace: str, cache: VersionCache) -> ClusterInfo:
        seen.append(f"discover {client.side}")
        return cluster_info(client, liqo_namespace, cache)

    def minting(*_: Any, **__: Any) -> credentials.Credentials:
        seen.append("mint")
        raise PeeringError("stop here")

    monkeypatch.setattr(discovery, "cluster_info", discovering)
    monkeypatch.setattr(credentials, "provider_credentials", minting)
    return seen


def test_minting_comes_after_discovery_of_both_clusters(calls: list[str]) -> None:
    local, _, svc = _clusters()
    local.add(r.LIQOPEERING, _peering("first", "2026-01-01T00:00:00Z", mint=True))
    svc.reconcile(NS, "first")
    assert calls == ["discover consumer", "discover provider", "mint"]


def test_a_duplicate_never_mints_nor_writes_to_the_provider(calls: list[str]) -> None:
    local, provider, svc = _clusters()
    first = _peering("first", "2026-01-01T00:00:00Z", mint=True, status={"remoteClusterID": PROVIDER_ID})
    local.add(r.LIQOPEERING, first)
    local.add(r.LIQOPEERING, _peering("second", "2026-01-02T00:00:00Z", mint=True))
    provider.writes.clear()

    outcome = svc.reconcile(NS, "second")

    assert outcome.error is not None and outcome.error.reason == "DuplicatePeering"
    assert calls == ["discover consumer", "discover provider"]
    assert provider.writes == []
    # On the consumer: the duplicate's own status (and its bootstrap Secret's protection), nothing of the first's.
    touched = {(plural, name) for _, (plural, _, name) in local.writes}
    assert touched <= {("liqopeerings", "second"), ("secrets", BOOTSTRAP)}, touched
    assert local.get(r.SECRET, naming.minted_secret("second"), NS) is None
    status = local.obj(r.LIQOPEERING, "second", NS)["status"]
    ready = get_condition(status["conditions"], "Ready")
    assert ready is not None and ready["reason"] == "DuplicatePeering"


class _Refusing(FakeClusterClient):
    """The provider as a credential without rights sees it."""

    def get(
        self, res: r.Resource, name: str, namespace: str | None = None, carries: str | None = None
    ) -> dict[str, Any] | None:
        raise ClusterForbidden("may not get", side="provider")


def _identity(provider: FakeClusterClient, peering: str) -> None:
    """The minted user's revoke ClusterRole and CSR on the provider, labelled as ``peering``'s."""
    owner = naming.owner_labels(NS, peering)
    provider.add(r.CLUSTER_ROLE, pu.revoke_role(CONSUMER_ID, owner))
    key = ed25519.Ed25519PrivateKey.generate()
    cn = pu.common_name(CONSUMER_ID, "0" * 32)
    provider.add(r.CSR, pu.csr(CONSUMER_ID, pu.csr_request(key, cn), None, owner))


def _minting_begun(local: FakeClusterClient, body: dict[str, Any]) -> str:
    """The minted Secret as a minting cut short leaves it (key and CN stored), protected; returns the CN."""
    name = naming.minted_secret(body["metadata"]["name"])
    secret = pu.secret(NS, name, body, naming.owner_labels(NS, body["metadata"]["name"]))
    cn = pu.common_name(CONSUMER_ID, "0" * 32)
    patch = pu.begin_patch(cn, pu.private_key_pem(ed25519.Ed25519PrivateKey.generate()))
    secret["metadata"]["annotations"] = patch["metadata"]["annotations"]
    secret["metadata"]["finalizers"] = [naming.KUBECONFIG_IN_USE]
    secret["data"] = patch["data"]
    local.add(r.SECRET, secret)
    return cn


@pytest.mark.parametrize("status", [{}, {"localClusterID": CONSUMER_ID}], ids=["no-ids", "consumer-id-only"])
def test_teardown_without_cluster_ids_revokes_the_minted_identity_and_releases_its_secret(
    monkeypatch: pytest.MonkeyPatch, status: dict[str, Any]
) -> None:
    """Deleted after minting but before a pass wrote the cluster IDs: the identity goes from the provider and
    the minted Secret is released (not left Terminating on its finalizer)."""
    local, provider, _ = _clusters()
    body = local.add(r.LIQOPEERING, _peering("first", "2026-01-01T00:00:00Z", mint=True, status=status))
    _minting_begun(local, body)
    _identity(provider, "first")
    revoke = credentials.revoke

    def revoking(
        local: ClusterClient, peering: dict[str, Any], spec: Any, policy: KubeconfigPolicy, consumer_id: str | None
    ) -> list[str]:  # the provider reached through the fake
        return revoke(local, peering, spec, policy, consumer_id, connect=lambda _: provider)

    monkeypatch.setattr(credentials, "revoke", revoking)

    assert _unpeerer(local, provider).unpeer(body).remaining == ()

    assert provider.get(r.CLUSTER_ROLE, pu.revoke_role_name(CONSUMER_ID)) is None
    assert provider.get(r.CSR, pu.user_name(CONSUMER_ID)) is None
    assert local.get(r.SECRET, naming.minted_secret("first"), NS) is None


def test_teardown_of_a_peering_that_never_minted_touches_nothing() -> None:
    local, provider, _ = _clusters()
    body = local.add(r.LIQOPEERING, _peering("second", "2026-01-02T00:00:00Z", mint=True))
    local.writes.clear()
    provider.writes.clear()
    assert _unpeerer(local, provider).unpeer(body).remaining == ()
    assert local.writes == [] and provider.writes == []


def test_revoking_leaves_another_peerings_identity_of_the_same_names() -> None:
    """The minted names on the provider are the consumer's: only objects labelled as this peering's go."""
    local, provider, _ = _clusters()
    body = local.add(r.LIQOPEERING, _peering("second", "2026-01-02T00:00:00Z", mint=True))
    _minting_begun(local, body)
    _identity(provider, "first")
    spec = parse_spec(body["spec"])

    assert credentials.revoke(local, body, spec, KubeconfigPolicy(), CONSUMER_ID, connect=lambda _: provider) == []

    role = provider.get(r.CLUSTER_ROLE, pu.revoke_role_name(CONSUMER_ID))
    assert role is not None and role["metadata"]["labels"][naming.PEERING_NAME] == "first"
    assert provider.get(r.CSR, pu.user_name(CONSUMER_ID)) is not None
    assert local.get(r.SECRET, naming.minted_secret("second"), NS) is None


def test_the_minted_identity_may_delete_its_revoke_role_without_reading_it() -> None:
    """Without the bootstrap Secret, the minted credential revokes itself: it may delete, not get."""
    provider = _Refusing("provider")
    _identity(provider, "first")
    kubeconfig = RemoteKubeconfig(config={}, context_name="c", server="https://127.0.0.1:6443")
    credentials._delete_identity(lambda _: provider, kubeconfig, CONSUMER_ID, naming.owner_labels(NS, "first"))
    assert (r.CLUSTER_ROLE.plural, None, pu.revoke_role_name(CONSUMER_ID)) in provider.deleted


def test_the_consumer_id_is_read_back_from_the_minted_user() -> None:
    assert pu.consumer_of(pu.common_name("a-b-c", "f" * 32)) == "a-b-c"
    assert pu.consumer_of("someone-else") is None
    assert pu.consumer_of(pu.user_name("")) is None


class _MayNotList(FakeClusterClient):
    """A bootstrap credential that may not read the provider's Deployments."""

    def find(self, res: r.Resource, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        raise ClusterForbidden("may not list deployments", side="provider")


@pytest.mark.parametrize(
    ("setting", "flag", "algorithm"),
    [
        ("Auto", "--tls-compatibility-mode=true", "RSA"),
        ("Auto", "--tls-compatibility-mode=false", "Ed25519"),
        ("Auto", None, "Ed25519"),  # no liqo-controller-manager found
        ("Ed25519", "--tls-compatibility-mode=true", "Ed25519"),
        ("RSA", None, "RSA"),
    ],
)
def test_the_key_algorithm_follows_the_spec_or_the_providers_liqo(
    setting: str, flag: str | None, algorithm: str
) -> None:
    provider = FakeClusterClient("provider")
    if flag is not None:
        labels = dict(kv.split("=") for kv in pu.CONTROLLER_MANAGER_SELECTOR.split(","))
        container = {"name": "controller-manager", "args": ["--cluster-id=provider-id", flag]}
        provider.add(
            r.DEPLOYMENT,
            {
                "metadata": {"name": "liqo-controller-manager", "namespace": "liqo", "labels": labels},
                "spec": {"template": {"spec": {"containers": [container]}}},
            },
        )
    spec = parse_spec(
        {"remoteKubeconfigSecretRef": {"name": BOOTSTRAP}, "credentials": {"mint": True, "keyAlgorithm": setting}}
    )
    assert credentials._key_algorithm(provider, spec) == algorithm


def test_auto_takes_ed25519_when_the_bootstrap_may_not_read_liqos_deployment() -> None:
    spec = parse_spec({"remoteKubeconfigSecretRef": {"name": BOOTSTRAP}, "credentials": {"mint": True}})
    assert spec.credentials.key_algorithm == "Auto"
    assert credentials._key_algorithm(_MayNotList("provider"), spec) == "Ed25519"


class _NoSecretWrites(FakeClusterClient):
    """The consumer of a chart installed without credentialsMinting: its RBAC lets the operator write no Secret."""

    def create_if_absent(self, res: r.Resource, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        if res == r.SECRET:
            request = Request(server="https://consumer", verb="create", resource="secrets", namespace=NS)
            raise ClusterForbidden(side="consumer", request=request)
        return super().create_if_absent(res, body)


def test_minting_refused_by_this_cluster_names_the_chart_value_and_not_the_kubeconfig() -> None:
    local, provider = _NoSecretWrites("consumer"), FakeClusterClient("provider")
    body = _peering("first", "2026-01-01T00:00:00Z", mint=True)
    spec = parse_spec(body["spec"])
    bootstrap = cast(RemoteKubeconfig, object())
    with pytest.raises(ClusterForbidden) as refused:
        credentials._mint(local, body, spec, bootstrap, pu.MintState(), NOW, lambda _: provider, CONSUMER_ID)
    error = refused.value
    assert error.reason == "ConsumerForbidden"
    assert "credentialsMinting=true" in error.message
    assert "bootstrap kubeconfig" not in error.message and BOOTSTRAP not in error.message
    assert error.transient  # the chart's new RBAC takes effect without a change to the LiqoPeering
