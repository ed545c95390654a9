"""liqo_real's pure pieces: $(VAR) expansion, the flag mapping table, env resolution, gateway flags."""

from __future__ import annotations

from typing import Any

import pytest

from testenv.liqo_real.dataplane import gateway_flags
from testenv.liqo_real.install import container_binary
from testenv.liqo_real.runner import UnmappedFlagError, expand, resolve_env, rewrite_args


def values(kind: str) -> str:
    return {"listen": "127.0.0.1:1111", "port": "2222", "ipam-port": "3333", "ipam-addr": "127.0.0.1:3333"}[kind]


def test_expand_follows_kubernetes_rules() -> None:
    env = {"A": "x", "B": "y"}
    assert expand("--id=$(A)-$(B)", env) == "--id=x-y"
    assert expand("$(MISSING) $$(A) $$", env) == "$(MISSING) $(A) $"


def test_controller_manager_flags_are_mapped_and_listeners_added() -> None:
    args = ["--cluster-id=c", "--ipam-server=liqo-ipam.liqo:6000", "--webhook-port=9443", "--geneve-port=6091"]
    out = rewrite_args("liqo-controller-manager", args, values)
    assert out[:4] == ["--cluster-id=c", "--ipam-server=127.0.0.1:3333", "--webhook-port=2222", "--geneve-port=6091"]
    assert "--metrics-address=127.0.0.1:1111" in out and "--health-probe-address=127.0.0.1:1111" in out


def test_ipam_port_and_separate_value_form() -> None:
    assert rewrite_args("ipam", ["--port", "6000", "--pod-name=p"], values) == ["--port=3333", "--pod-name=p"]


def test_unknown_listener_flag_fails_loudly() -> None:
    with pytest.raises(UnmappedFlagError, match="--debug-port"):
        rewrite_args("crd-replicator", ["--debug-port=1"], values)


class FakeKube:
    def get(self, res: Any, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        if name == "liqo-clusterid-configmap":
            return {"data": {"CLUSTER_ID": "my-id"}}
        return None


def test_env_resolution() -> None:
    pod = {"metadata": {"name": "p-1", "namespace": "liqo", "uid": "u"}, "spec": {"serviceAccountName": "sa"}}
    container = {
        "env": [
            {
                "name": "CLUSTER_ID",
                "valueFrom": {"configMapKeyRef": {"name": "liqo-clusterid-configmap", "key": "CLUSTER_ID"}},
            },
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NAME", "value": "vk-$(POD_NAME)"},
        ]
    }
    env = resolve_env(FakeKube(), pod, container)  # type: ignore[arg-type]
    assert env == {"CLUSTER_ID": "my-id", "POD_NAME": "p-1", "POD_IP": "127.0.0.1", "NAME": "vk-p-1"}


def test_gateway_flags_and_container_binary() -> None:
    dep = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "gateway",
                            "args": ["--name=n", "--mode=server", "--gateway-uid=u", "--remote-cluster-id=r"],
                        },
                        {"name": "wireguard", "args": ["--mode=server"]},
                    ]
                }
            }
        }
    }
    assert gateway_flags(dep) == {"name": "n", "mode": "server", "gateway-uid": "u", "remote-cluster-id": "r"}
    assert container_binary(dep) is None  # several containers, no command: not run as a process
    one = {"spec": {"template": {"spec": {"containers": [{"command": ["/usr/bin/ipam"]}]}}}}
    assert container_binary(one) == "ipam"
