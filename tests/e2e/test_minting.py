"""Minting, renewing and revoking the provider credential (spec.credentials.mint) against real API servers.

The session's two clusters carry Liqo's chart objects (liqo_env), its peering-user Role and ClusterRole among
them, and their kube-controller-managers sign CSRs. The engine's credential step (engine.credentials) runs
here without the operator process, so that the clock can be moved to the renewal and a minting can be left
half done as a restart would find it. The whole peering on the minted credential, with Liqo itself, is
tests/e2e/test_real_liqo.py::test_minted_credentials_alone.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from liqo_peering.api.model import parse_spec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.connect import to_api_client
from liqo_peering.engine import credentials
from liqo_peering.engine.discovery import KubeconfigPolicy
from liqo_peering.kubeconfig import load_remote_kubeconfig
from liqo_peering.liqo import naming
from liqo_peering.liqo import peeringuser as pu
from liqo_peering.status.credentials import condition
from testenv import kube as k
from testenv.kube import Kube, KubeError
from testenv.leakscan import LeakScan
from testenv.liqo_env.pytest_plugin import LiqoClusters
from testenv.operator_support import install_crd
from testenv.wait import wait_for

pytestmark = pytest.mark.e2e

BOOTSTRAP = "provider-admin"
POLICY = KubeconfigPolicy()


@dataclass
class Minting:
    local: ClusterClient
    consumer: Kube
    provider: Kube
    owner: dict[str, Any]  # stands for the LiqoPeering: the minted Secret's owner
    consumer_id: str
    bootstrap: bytes
    namespace: str

    def spec(self, **credentials_: Any) -> Any:
        return parse_spec({"remoteKubeconfigSecretRef": {"name": BOOTSTRAP}, "credentials": credentials_})

    def mint(self, now: datetime | None = None, **credentials_: Any) -> credentials.Credentials:
        spec = self.spec(**({"mint": True} | credentials_))
        return credentials.provider_credentials(self.local, self.owner, spec, POLICY, now or datetime.now(UTC))

    def put_bootstrap(self) -> None:
        body = {"metadata": {"name": BOOTSTRAP}, "data": {"kubeconfig": k.b64(self.bootstrap)}}
        self.consumer.create(k.SECRET, body, self.namespace)

    def minted_secret(self) -> dict[str, Any] | None:
        return self.consumer.get(k.SECRET, naming.minted_secret("peering"), self.namespace)

    def user_objects(self) -> dict[str, list[tuple[str, list[str]]]]:
        """The peering user's objects on the provider, by kind: (name, bound users)."""
        selector = f"{pu.USER_LABEL}={pu.user_name(self.consumer_id)}"
        found = {
            res.plural: sorted(
                (i["metadata"]["name"], pu.bound_users(i)) for i in self.provider.list(res, None, selector)
            )
            for res in (k.ROLEBINDING, k.CLUSTERROLEBINDING, k.CLUSTERROLE)
        }
        csr = self.provider.get(k.CSR, pu.user_name(self.consumer_id))
        found["csrs"] = [(csr["metadata"]["name"], [])] if csr else []
        return found

    def refused(self, kubeconfig: bytes) -> int | None:
        """The provider's answer to the minted credential asking for what it was granted: None when allowed."""
        api = k8s_config.new_client_from_config_dict(yaml.safe_load(kubeconfig))
        try:
            k8s.CoreV1Api(api).read_namespace(naming.tenant_namespace(self.consumer_id))
        except ApiException as exc:
            return int(exc.status)
        finally:
            api.close()
        return None


def _kubeconfig_bytes(found: credentials.Credentials) -> bytes:
    return yaml.safe_dump(found.kubeconfig.config).encode()


def _raw(key: ed25519.Ed25519PublicKey | Any) -> bytes:
    return bytes(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def _public_key(kubeconfig: bytes) -> bytes:
    user = yaml.safe_load(kubeconfig)["users"][0]["user"]
    return _raw(x509.load_pem_x509_certificate(base64.b64decode(user["client-certificate-data"])).public_key())


@pytest.fixture
def minting(liqo_clusters: LiqoClusters, leak_scan: LeakScan) -> Iterator[Minting]:
    consumer, provider = liqo_clusters.kube("consumer"), liqo_clusters.kube("provider")
    install_crd(consumer.api)  # the release of a Secret's protection asks which LiqoPeerings use it

    def served() -> bool:  # a CRD just replaced answers 429 for a moment (its storage is re-made)
        try:
            consumer.list(k.Res("peering.liqo-operator.io", "v1alpha1", "liqopeerings"))
        except KubeError:
            return False
        return True

    wait_for("LiqoPeerings to be served", served, timeout=30)
    namespace = f"e2e-minting-{secrets.token_hex(3)}"
    consumer.create(k.NAMESPACE, {"metadata": {"name": namespace}})
    owner_map = consumer.create(k.CONFIGMAP, {"metadata": {"name": "peering"}}, namespace)
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": owner_map["metadata"]}
    raw = Path(liqo_clusters["consumer"].kubeconfig).read_bytes()
    local = ClusterClient(
        to_api_client(load_remote_kubeconfig(raw, context=None, allow_exec=False, allow_insecure_tls=False)),
        "consumer",
        "the consumer",
    )
    consumer_id = liqo_clusters.ids["consumer"]
    env = Minting(
        local,
        consumer,
        provider,
        owner,
        consumer_id,
        Path(liqo_clusters["provider"].kubeconfig).read_bytes(),
        namespace,
    )
    env.put_bootstrap()
    try:
        yield env
    finally:
        leak_scan.collect({"consumer": consumer.api, "provider": provider.api})
        # Whatever a failure left: the revoke ClusterRole owns the bindings.
        for role in provider.list(k.CLUSTERROLE, None, f"{pu.USER_LABEL}={pu.user_name(consumer_id)}"):
            provider.delete(k.CLUSTERROLE, role["metadata"]["name"])
        provider.delete(k.CSR, pu.user_name(consumer_id))
        consumer.delete(k.NAMESPACE, namespace)
        local.close()


def test_a_minting_cut_short_is_finished_with_its_own_key_and_csr(minting: Minting) -> None:
    """As a restart finds it: the key and CN stored, the CSR created, not approved yet. The next pass approves
    that CSR and uses that key: one identity, one Secret, no CSR left; the pass after it writes nothing."""
    key = ed25519.Ed25519PrivateKey.generate()
    cn = pu.common_name(minting.consumer_id, secrets.token_hex(16))
    owner = naming.owner_labels(minting.namespace, "peering")
    secret = pu.secret(minting.namespace, naming.minted_secret("peering"), minting.owner, owner)
    begin = pu.begin_patch(cn, pu.private_key_pem(key))
    secret["metadata"]["annotations"] = begin["metadata"]["annotations"]
    secret["data"] = begin["data"]
    minting.consumer.create(k.SECRET, secret, minting.namespace)
    minting.provider.create(k.CSR, pu.csr(minting.consumer_id, pu.csr_request(key, cn), None, owner))

    found = minting.mint()
    assert found.observation is not None and found.observation.user == cn
    kubeconfig = _kubeconfig_bytes(found)
    assert _public_key(kubeconfig) == _raw(key.public_key())
    objects = minting.user_objects()
    assert objects == {
        "rolebindings": [
            (pu.reader_binding_name(minting.consumer_id), [cn]),
            (pu.writer_binding_name(minting.consumer_id), [cn]),
        ],
        "clusterrolebindings": [(pu.revoke_role_name(minting.consumer_id), [cn])],
        "clusterroles": [(pu.revoke_role_name(minting.consumer_id), [])],
        "csrs": [],  # deleted once issued: a record only
    }, objects
    # A binding just made reaches the API server's authorizer a moment later.
    wait_for("the minted credential to be allowed", lambda: minting.refused(kubeconfig) is None, timeout=10)
    stored = minting.minted_secret()
    assert stored is not None and set(stored["data"]) == {pu.KUBECONFIG_KEY}  # the pending key is gone
    assert stored["metadata"]["ownerReferences"][0]["uid"] == minting.owner["metadata"]["uid"]

    again = minting.mint()  # quiet: nothing rewritten
    assert again.observation == found.observation
    after = minting.minted_secret()
    assert after is not None and after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


def test_renewal_switch_off_and_self_revocation_without_the_bootstrap(minting: Minting) -> None:
    first = minting.mint(certificateLifetime="10m")
    assert first.observation is not None and first.observation.renew_at is not None
    # Kubeconfig Secret protection: the minted Secret is the one unpeering needs now; the bootstrap is let go.
    minted_secret, bootstrap = minting.minted_secret(), minting.consumer.get(k.SECRET, BOOTSTRAP, minting.namespace)
    assert minted_secret is not None and bootstrap is not None
    assert minted_secret["metadata"].get("finalizers") == [naming.KUBECONFIG_IN_USE]
    assert not bootstrap["metadata"].get("finalizers")
    old = _kubeconfig_bytes(first)
    # The provider honoured the lifetime: the signer backdates notBefore by 5 minutes, notAfter is 10 from now.
    assert first.observation.not_after is not None
    assert first.observation.not_after - datetime.now(UTC) <= timedelta(minutes=10, seconds=5)

    # Due for renewal: a new identity, bound instead of the old one, which the provider then refuses.
    renewed = minting.mint(now=first.observation.renew_at, certificateLifetime="10m")
    assert renewed.observation is not None and renewed.observation.user != first.observation.user
    new = _kubeconfig_bytes(renewed)
    bound = [users for _, users in minting.user_objects()["rolebindings"]]
    assert bound == [[renewed.observation.user]] * 2, bound
    assert wait_for("the old credential to be refused", lambda: minting.refused(old), timeout=10) == 403
    assert minting.refused(new) is None
    assert minting.user_objects()["csrs"] == []

    # Minting switched off: the bootstrap kubeconfig is the credential again, and the minted one is revoked.
    plain = credentials.provider_credentials(minting.local, minting.owner, minting.spec(), POLICY, datetime.now(UTC))
    assert plain.observation is None and plain.kubeconfig.server
    assert wait_for("the switched-off credential to be refused", lambda: minting.refused(new), timeout=10) == 403
    assert minting.minted_secret() is None
    assert all(not found for found in minting.user_objects().values())

    # On again, then the bootstrap Secret deleted (deleteBootstrapSecret): renewal due cannot happen, and says so.
    again = minting.mint(deleteBootstrapSecret=True)
    assert again.observation is not None and again.observation.bootstrap_present is False
    assert minting.consumer.get(k.SECRET, BOOTSTRAP, minting.namespace) is None
    assert again.observation.renew_at is not None and again.observation.not_after is not None
    due = again.observation.renew_at + timedelta(seconds=1)
    blocked = minting.mint(now=due, deleteBootstrapSecret=True)
    assert blocked.observation is not None and blocked.observation.user == again.observation.user
    assert condition(blocked.observation, due)[1] == "RenewalBlocked"

    # Unpeered: the identity revokes itself (no bootstrap), the garbage collector takes its bindings.
    last = _kubeconfig_bytes(blocked)
    spec = minting.spec(mint=True)
    wait_for(
        "the minted identity to be revoked",
        lambda: credentials.revoke(minting.local, minting.owner, spec, POLICY, minting.consumer_id) == [],
        timeout=30,
    )
    assert minting.refused(last) == 403
    assert minting.minted_secret() is None
    assert all(not found for found in minting.user_objects().values()), minting.user_objects()
