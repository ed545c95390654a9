"""Unit tests for the LiqoPeering v1alpha1 pydantic model (liqo_peering.api.model)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from liqo_peering.api.model import (
    LiqoPeeringStatus,
    OffloadingSpec,
    parse_duration,
    parse_spec,
)

MINIMAL: dict[str, Any] = {"remoteKubeconfigSecretRef": {"name": "provider-kubeconfig"}}


def spec_with(**overrides: Any) -> dict[str, Any]:
    return {**MINIMAL, **overrides}


# -- defaults --------------------------------------------------------------------------------


def test_defaults_of_a_minimal_spec() -> None:
    spec = parse_spec(MINIMAL)
    assert spec.secret_ref.name == "provider-kubeconfig"
    assert spec.secret_ref.key == "kubeconfig"
    assert spec.remote_context is None
    assert spec.timeout == "5m"
    assert spec.timeout_seconds == 300
    assert spec.liqo_namespace == "liqo"
    assert spec.remote_liqo_namespace == "liqo"
    assert spec.skip_validation is False
    net = spec.networking
    assert net.enabled is True
    assert net.mtu == 1340
    assert net.gateway_server.service_type == "LoadBalancer"
    assert net.gateway_server.port == 51840
    assert net.gateway_server.node_port is None
    assert net.gateway_server.load_balancer_ip is None
    assert net.gateway_client.address is None
    assert net.gateway_client.port is None
    assert spec.authentication.in_band is False
    assert spec.authentication.proxy_url is None
    off = spec.offloading
    assert off.create_resource_slice is True
    assert off.resource_slice_class == "default"
    assert off.create_virtual_node is True
    assert off.resources == {}
    assert spec.credentials.mint is False
    assert spec.credentials.delete_bootstrap_secret is False
    assert spec.credentials.lifetime_seconds is None
    assert spec.bidirectional is False
    assert spec.allow_liqo_version_skew is False
    assert spec.reverse.offloading.model_dump() == off.model_dump()  # the same defaults, set apart
    assert isinstance(spec.reverse.offloading, OffloadingSpec)  # the engine reads either direction alike
    assert spec.common_metadata.labels == {} and spec.common_metadata.annotations == {}
    assert spec.deletion.delete_tenant_namespaces is False


def test_defaults_dump_by_alias_is_the_camel_case_manifest() -> None:
    dumped = parse_spec(MINIMAL).model_dump(by_alias=True, exclude_none=True)
    assert dumped == {
        "remoteKubeconfigSecretRef": {"name": "provider-kubeconfig", "key": "kubeconfig"},
        "timeout": "5m",
        "liqoNamespace": "liqo",
        "remoteLiqoNamespace": "liqo",
        "skipValidation": False,
        "allowLiqoVersionSkew": False,
        "networking": {
            "enabled": True,
            "mtu": 1340,
            "gatewayServer": {"location": "Provider", "serviceType": "LoadBalancer", "port": 51840},
            "gatewayClient": {},
        },
        "authentication": {"inBand": False},
        "offloading": {
            "createResourceSlice": True,
            "resourceSliceClass": "default",
            "createVirtualNode": True,
            "resources": {},
        },
        "credentials": {"mint": False, "deleteBootstrapSecret": False, "keyAlgorithm": "Auto"},
        "bidirectional": False,
        "reverse": {
            "offloading": {
                "createResourceSlice": True,
                "resourceSliceClass": "default",
                "createVirtualNode": True,
                "resources": {},
            }
        },
        "commonMetadata": {"labels": {}, "annotations": {}},
        "deletion": {"deleteTenantNamespaces": False},
    }


def test_camel_case_aliases_are_read_from_a_manifest() -> None:
    spec = parse_spec(
        spec_with(
            remoteContext="kind-provider",
            timeout="90s",
            liqoNamespace="liqo-system",
            remoteLiqoNamespace="liqo-remote",
            skipValidation=True,
            networking={
                "mtu": 1400,
                "gatewayServer": {"serviceType": "NodePort", "port": 5000, "nodePort": 30000},
                "gatewayClient": {"address": "1.2.3.4", "port": 31000},
            },
            authentication={"inBand": True, "proxyURL": "http://proxy:8118"},
            offloading={"createVirtualNode": False, "resourceSliceClass": "gold"},
        )
    )
    assert spec.remote_context == "kind-provider"
    assert spec.timeout_seconds == 90
    assert (spec.liqo_namespace, spec.remote_liqo_namespace) == ("liqo-system", "liqo-remote")
    assert spec.skip_validation is True
    assert spec.networking.mtu == 1400
    assert spec.networking.gateway_server.service_type == "NodePort"
    assert spec.networking.gateway_server.node_port == 30000
    assert spec.networking.gateway_client.address == "1.2.3.4"
    assert spec.networking.gateway_client.port == 31000
    assert spec.authentication.in_band is True
    assert spec.authentication.proxy_url == "http://proxy:8118"
    assert spec.offloading.create_virtual_node is False
    assert spec.offloading.resource_slice_class == "gold"


def test_load_balancer_ip_alias_keeps_ip_upper_case() -> None:
    spec = parse_spec(spec_with(networking={"gatewayServer": {"loadBalancerIP": "10.0.0.9"}}))
    assert spec.networking.gateway_server.load_balancer_ip == "10.0.0.9"
    dumped = spec.model_dump(by_alias=True, exclude_none=True)
    assert dumped["networking"]["gatewayServer"]["loadBalancerIP"] == "10.0.0.9"


def test_spec_is_frozen() -> None:
    spec = parse_spec(MINIMAL)
    with pytest.raises(ValidationError):
        spec.timeout = "1h"  # type: ignore[misc]


# -- durations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("1h", 3600),
        ("1h30m", 5400),
        ("1m30s", 90),
        ("1.5h", 5400),
        ("500ms", 0.5),
        ("2h0m5s", 7205),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "m", "5 m", "five minutes", "1d", "-5m", "10M", "1h 30m", "PT5M"])
def test_parse_duration_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_timeout_seconds_uses_the_spec_timeout() -> None:
    assert parse_spec(spec_with(timeout="1h30m")).timeout_seconds == 5400


@pytest.mark.parametrize("bad", ["5", "forever", "5 m", "1d", ""])
def test_bad_timeout_is_rejected(bad: str) -> None:
    with pytest.raises(ValidationError, match="timeout"):
        parse_spec(spec_with(timeout=bad))


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize("port", [0, 70000, -1, 65536])
def test_gateway_server_port_out_of_range_is_rejected(port: int) -> None:
    with pytest.raises(ValidationError, match="port"):
        parse_spec(spec_with(networking={"gatewayServer": {"port": port}}))


@pytest.mark.parametrize("port", [0, 70000])
def test_node_port_and_client_port_out_of_range_are_rejected(port: int) -> None:
    with pytest.raises(ValidationError, match="nodePort"):
        parse_spec(spec_with(networking={"gatewayServer": {"serviceType": "NodePort", "nodePort": port}}))
    with pytest.raises(ValidationError, match="port"):
        parse_spec(spec_with(networking={"gatewayClient": {"port": port}}))


@pytest.mark.parametrize("port", [1, 65535])
def test_port_bounds_are_inclusive(port: int) -> None:
    assert parse_spec(spec_with(networking={"gatewayServer": {"port": port}})).networking.gateway_server.port == port


@pytest.mark.parametrize("mtu", [575, 9001])
def test_mtu_out_of_range_is_rejected(mtu: int) -> None:
    with pytest.raises(ValidationError, match="mtu"):
        parse_spec(spec_with(networking={"mtu": mtu}))


def test_unknown_service_type_is_rejected() -> None:
    with pytest.raises(ValidationError, match="serviceType"):
        parse_spec(spec_with(networking={"gatewayServer": {"serviceType": "ExternalName"}}))


@pytest.mark.parametrize(
    "manifest",
    [
        spec_with(bogus=1),
        spec_with(networking={"tunnel": "wg"}),
        spec_with(networking={"gatewayServer": {"address": "x"}}),
        spec_with(authentication={"proxyUrl": "http://p:8118"}),  # wrong case: the alias is proxyURL
        spec_with(offloading={"class": "default"}),
        {"remoteKubeconfigSecretRef": {"name": "k", "namespace": "other"}},
    ],
)
def test_unknown_fields_are_rejected(manifest: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        parse_spec(manifest)


def test_secret_ref_is_required() -> None:
    with pytest.raises(ValidationError, match="remoteKubeconfigSecretRef"):
        parse_spec({})


@pytest.mark.parametrize("name", ["", "Upper", "has_underscore", "-leading", "x" * 254])
def test_bad_secret_names_are_rejected(name: str) -> None:
    with pytest.raises(ValidationError):
        parse_spec({"remoteKubeconfigSecretRef": {"name": name}})


@pytest.mark.parametrize("ns", ["Liqo", "liqo_ns", "-liqo", "x" * 64])
def test_bad_liqo_namespaces_are_rejected(ns: str) -> None:
    with pytest.raises(ValidationError, match="liqoNamespace"):
        parse_spec(spec_with(liqoNamespace=ns))
    with pytest.raises(ValidationError, match="remoteLiqoNamespace"):
        parse_spec(spec_with(remoteLiqoNamespace=ns))


# -- quantities ------------------------------------------------------------------------------


def test_quantities_accept_ints_and_kubernetes_strings() -> None:
    resources = {"cpu": 4, "memory": "8Gi", "ephemeral-storage": "500m", "nvidia.com/gpu": 1, "pods": "110"}
    spec = parse_spec(spec_with(offloading={"resources": resources}))
    assert spec.offloading.resources == resources
    assert isinstance(spec.offloading.resources["cpu"], int)
    assert isinstance(spec.offloading.resources["memory"], str)


@pytest.mark.parametrize("qty", ["1.5", "2e3", "100M", "+1", ".5", "1Ki", "3Ei"])
def test_more_valid_quantity_spellings(qty: str) -> None:
    assert OffloadingSpec.model_validate({"resources": {"cpu": qty}}).resources["cpu"] == qty


@pytest.mark.parametrize("qty", ["8 Gi", "8GB", "lots", "", "1.2.3", "8gi", "Gi", "1Z"])
def test_bad_quantities_are_rejected(qty: str) -> None:
    with pytest.raises(ValidationError, match="resources"):
        parse_spec(spec_with(offloading={"resources": {"memory": qty}}))


def test_quantity_must_not_be_a_list_or_map() -> None:
    with pytest.raises(ValidationError):
        OffloadingSpec.model_validate({"resources": {"cpu": [1]}})
    with pytest.raises(ValidationError):
        OffloadingSpec.model_validate({"resources": {"cpu": {"value": 1}}})


def test_empty_resource_slice_class_is_rejected() -> None:
    with pytest.raises(ValidationError, match="resourceSliceClass"):
        parse_spec(spec_with(offloading={"resourceSliceClass": ""}))


# -- status ----------------------------------------------------------------------------------


def test_status_reads_its_own_camel_case_output() -> None:
    status = {
        "peerStatus": "ready",
        "observedGeneration": 3,
        "localClusterID": "consumer-id",
        "remoteClusterID": "provider-id",
        "startedAt": "2026-01-01T00:00:00Z",
        "readyAt": "2026-01-01T00:01:00Z",
        "stage": "ready",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 3,
                "lastTransitionTime": "2026-01-01T00:01:00Z",
                "reason": "PeeringEstablished",
                "message": "",
            }
        ],
        "foreignCluster": {
            "role": "Provider",
            "apiServerUrl": "https://p:6443",
            "modules": {"networking": {"enabled": True, "health": "Healthy", "conditions": []}},
        },
    }
    parsed = LiqoPeeringStatus.model_validate(status)
    assert parsed.remote_cluster_id == "provider-id"
    assert parsed.foreign_cluster is not None
    assert parsed.foreign_cluster.api_server_url == "https://p:6443"
    assert parsed.model_dump(by_alias=True, exclude_none=True)["foreignCluster"]["modules"]["networking"] == {
        "enabled": True,
        "health": "Healthy",
        "conditions": [],
    }


@pytest.mark.parametrize("peer_status", ["Ready", "pending", "unknown"])
def test_status_rejects_unknown_peer_status(peer_status: str) -> None:
    with pytest.raises(ValidationError, match="peerStatus"):
        LiqoPeeringStatus.model_validate({"peerStatus": peer_status})


def test_status_condition_status_is_true_false_unknown() -> None:
    cond = {"type": "Ready", "status": "Established", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "R"}
    with pytest.raises(ValidationError, match="status"):
        LiqoPeeringStatus.model_validate({"conditions": [cond]})


def test_liqo_condition_keeps_extra_fields() -> None:
    cond = {"type": "NetworkConnectionStatus", "status": "Established", "latency": "3ms"}
    mirror = {"role": "Provider", "conditions": [cond]}
    parsed = LiqoPeeringStatus.model_validate({"foreignCluster": mirror})
    assert parsed.model_dump(by_alias=True, exclude_none=True)["foreignCluster"]["conditions"] == [cond]
