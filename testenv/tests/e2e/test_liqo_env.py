"""Liqo's non-workload objects on the local clusters (liqo_env.install_liqo)."""

from __future__ import annotations

import ipaddress

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from testenv import kube as k
from testenv.liqo_env import read_cluster_id
from testenv.liqo_env.pytest_plugin import LIQO_SETTINGS, LiqoClusters

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("name", ["consumer", "provider"])
def test_crds_established(liqo_clusters: LiqoClusters, name: str) -> None:
    kc = liqo_clusters.kube(name)
    crds = {c["metadata"]["name"]: c for c in kc.list(k.CRD) if c["spec"]["group"].endswith(".liqo.io")}
    for needed in (
        "foreignclusters.core.liqo.io",
        "configurations.networking.liqo.io",
        "gatewayservers.networking.liqo.io",
        "gatewayclients.networking.liqo.io",
        "publickeies.networking.liqo.io",
        "connections.networking.liqo.io",
        "tenants.authentication.liqo.io",
        "identities.authentication.liqo.io",
        "resourceslices.authentication.liqo.io",
        "virtualnodes.offloading.liqo.io",
        "networks.ipam.liqo.io",
    ):
        conds = crds[needed]["status"]["conditions"]
        assert any(c["type"] == "Established" and c["status"] == "True" for c in conds), needed


@pytest.mark.parametrize("name", ["consumer", "provider"])
def test_cluster_id_and_templates(liqo_clusters: LiqoClusters, name: str) -> None:
    kc = liqo_clusters.kube(name)
    assert read_cluster_id(kc) == LIQO_SETTINGS[name][0] == liqo_clusters.ids[name]
    server = k.Res("networking.liqo.io", "v1beta1", "wggatewayservertemplates")
    client = k.Res("networking.liqo.io", "v1beta1", "wggatewayclienttemplates")
    assert kc.get(server, "wireguard-server", "liqo")
    assert kc.get(client, "wireguard-client", "liqo")
    assert kc.get(k.CLUSTERROLE, "liqo-remote-controlplane")
    # No workload was applied: nothing would run it.
    assert kc.list(k.DEPLOYMENT, "liqo") == []


@pytest.mark.parametrize("name", ["consumer", "provider"])
def test_networks_have_status_cidr(liqo_clusters: LiqoClusters, name: str) -> None:
    kc = liqo_clusters.kube(name)
    _, pod, external = LIQO_SETTINGS[name]
    pods = kc.list(k.NETWORK, "liqo", "ipam.liqo.io/network-type=pod-cidr")
    ext = kc.list(k.NETWORK, "liqo", "ipam.liqo.io/network-type=external-cidr")
    assert [n["status"]["cidr"] for n in pods] == [pod]
    assert [n["status"]["cidr"] for n in ext] == [external]


def test_cidrs_do_not_overlap() -> None:
    nets = [ipaddress.ip_network(c) for _, pod, ext in LIQO_SETTINGS.values() for c in (pod, ext)]
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])


@pytest.mark.parametrize("name", ["consumer", "provider"])
def test_authentication_keys_are_ed25519(liqo_clusters: LiqoClusters, name: str) -> None:
    sec = liqo_clusters.kube(name).get(k.SECRET, "authentication-keys", "liqo")
    assert sec is not None
    priv = serialization.load_pem_private_key(k.unb64(sec["data"]["privateKey"]), None)
    pub = serialization.load_pem_public_key(k.unb64(sec["data"]["publicKey"]))
    assert isinstance(priv, ed25519.Ed25519PrivateKey)
    assert isinstance(pub, ed25519.Ed25519PublicKey)
    raw = serialization.Encoding.Raw, serialization.PublicFormat.Raw
    assert priv.public_key().public_bytes(*raw) == pub.public_bytes(*raw)


def test_install_is_idempotent(liqo_clusters: LiqoClusters) -> None:
    before = liqo_clusters.kube("consumer").get(k.SECRET, "authentication-keys", "liqo")
    liqo_clusters.install("consumer")
    after = liqo_clusters.kube("consumer").get(k.SECRET, "authentication-keys", "liqo")
    assert before and after and before["data"] == after["data"]
