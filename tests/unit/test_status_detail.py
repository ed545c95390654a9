"""What `liqoctl info peer` shows, computed from Liqo-shaped objects (status/detail.py), the messages that quote
Liqo (a denied ResourceSlice, an unreachable gateway endpoint), and the status writer staying quiet at rest."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from liqo_peering.api.model import LiqoPeeringStatus
from liqo_peering.liqo import networking, offloading
from liqo_peering.stages import StageResult
from liqo_peering.status import compute as sc
from liqo_peering.status import detail

NOW = datetime(2026, 1, 1, tzinfo=UTC)
C_NS, P_NS = "liqo-tenant-provider-id", "liqo-tenant-consumer-id"


def configuration(pod: Any, external: Any, remapped: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Configuration as Liqo v1.2 stores it: the described cluster's CIDRs, and Liqo's remap once written."""
    conf: dict[str, Any] = {
        "metadata": {"name": "x", "namespace": C_NS, "generation": 1},
        "spec": {"remote": {"cidr": {"pod": pod, "external": external}}},
    }
    if remapped is not None:
        conf["status"] = {
            "conditions": [{"type": "NetworkCIDRsConfigured", "status": "True", "observedGeneration": 1}],
            "remote": {"cidr": remapped},
        }
    return conf


def resource_slice(name: str, conds: list[dict[str, Any]] | None, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": C_NS},
        "spec": {"class": "default", "providerClusterID": "provider-id", **extra.pop("spec", {})},
    }
    if conds is not None:
        obj["status"] = {"conditions": conds, **extra}
    return obj


def cond(ctype: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    out = {"type": ctype, "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


ACCEPTED = [
    cond("Authentication", "Accepted", "ResourceSliceAuthenticationAccepted", "ResourceSlice authentication accepted"),
    cond("Resources", "Accepted", "ResourceSliceResourcesAccepted", "ResourceSlice resources accepted"),
]


def vnode(name: str, hard: dict[str, str] | None = None, slice_name: str | None = None) -> dict[str, Any]:
    labels = {"liqo.io/remote-cluster-id": "provider-id"}
    if slice_name:
        labels[detail.RESOURCE_SLICE_NAME_LABEL] = slice_name
    spec: dict[str, Any] = {"clusterID": "provider-id"}
    if hard is not None:
        spec["resourceQuota"] = {"hard": hard}
    return {"metadata": {"name": name, "namespace": C_NS, "labels": labels}, "spec": spec}


def node(name: str, ready: str, message: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletNotReady", "message": message}]},
    }


# == network ==========================================================================================


def test_network_shows_each_clusters_cidrs_and_what_the_other_remaps_them_to() -> None:
    objects = detail.LiqoObjects(
        # On the consumer: the provider's CIDRs, remapped because they clash with the consumer's own.
        consumer_configuration=configuration(
            ["10.244.0.0/16"], ["10.70.0.0/16"], {"pod": ["10.71.0.0/16"], "external": ["10.72.0.0/16"]}
        ),
        # On the provider: the consumer's CIDRs; Liqo has not written its status yet.
        provider_configuration=configuration(["10.10.0.0/16"], ["10.80.0.0/16"]),
    )
    assert detail.network(objects) == {
        "provider": {
            "podCIDRs": ["10.244.0.0/16"],
            "externalCIDRs": ["10.70.0.0/16"],
            "remappedPodCIDRs": ["10.71.0.0/16"],
            "remappedExternalCIDRs": ["10.72.0.0/16"],
        },
        "consumer": {"podCIDRs": ["10.10.0.0/16"], "externalCIDRs": ["10.80.0.0/16"]},
    }


def test_network_reads_liqo_before_v1_cidr_strings_and_is_none_without_configurations() -> None:
    old = configuration("10.1.0.0/16", "10.2.0.0/16", {"pod": "10.3.0.0/16", "external": ""})
    assert detail.network(detail.LiqoObjects(consumer_configuration=old)) == {
        "provider": {"podCIDRs": ["10.1.0.0/16"], "externalCIDRs": ["10.2.0.0/16"], "remappedPodCIDRs": ["10.3.0.0/16"]}
    }
    assert detail.network(detail.LiqoObjects()) is None


# == gateway ==========================================================================================


def server(endpoint: dict[str, Any] | None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "consumer-id"}, "spec": {"endpoint": {"port": 51840}}}
    if endpoint is not None:
        obj["status"] = {"endpoint": endpoint}
    return obj


def client(endpoint: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "provider-id"}, "spec": {"endpoint": endpoint, "mtu": 1340}}


def test_gateway_is_the_endpoint_the_client_dials_else_what_the_server_publishes() -> None:
    published = {"addresses": ["172.18.0.3"], "port": 31234, "protocol": "UDP"}
    only_server = detail.LiqoObjects(gateway_server=server(published))
    assert detail.gateway(only_server) == {
        "server": "Provider",
        "addresses": ["172.18.0.3"],
        "port": 31234,
        "protocol": "UDP",
    }
    # The client's spec wins: it holds spec.networking.gatewayClient's override when there is one.
    dialed = {"addresses": ["203.0.113.7"], "port": 4000, "protocol": "UDP"}
    both = detail.LiqoObjects(gateway_server=server(published), gateway_client=client(dialed))
    assert detail.gateway(both) == {"server": "Provider", "addresses": ["203.0.113.7"], "port": 4000, "protocol": "UDP"}


def test_gateway_without_a_published_endpoint_names_only_the_serving_side() -> None:
    assert detail.gateway(detail.LiqoObjects(gateway_server=server(None))) == {"server": "Provider"}
    on_consumer = detail.LiqoObjects(gateway_server=server({"addresses": [""], "port": 0}), server_side="Consumer")
    assert detail.gateway(on_consumer) == {"server": "Consumer"}
    assert detail.gateway(detail.LiqoObjects()) is None


# == resource slices ==================================================================================


def test_resource_slices_show_requested_granted_and_acceptance_with_liqos_reasons() -> None:
    granted = {"cpu": "2", "memory": "4Gi", "pods": "110", "ephemeral-storage": "20Gi"}
    accepted = resource_slice(
        "provider-id", ACCEPTED, spec={"resources": {"cpu": "2", "memory": "4Gi"}}, resources=granted
    )
    pending = resource_slice("second", None, spec={"class": "gpu"})
    providing = resource_slice(
        "consumer-id", [cond("Authentication", "Accepted"), cond("Resources", "Denied", "X", "no")]
    )
    objects = detail.LiqoObjects(
        resource_slices=(("Consuming", pending), ("Providing", providing), ("Consuming", accepted))
    )
    assert detail.resource_slices(objects) == [
        {
            "name": "provider-id",
            "action": "Consuming",
            "accepted": True,
            "class": "default",
            "requested": {"cpu": "2", "memory": "4Gi"},
            "granted": granted,
            "conditions": [
                {
                    "type": "Authentication",
                    "status": "Accepted",
                    "reason": "ResourceSliceAuthenticationAccepted",
                    "message": "ResourceSlice authentication accepted",
                },
                {
                    "type": "Resources",
                    "status": "Accepted",
                    "reason": "ResourceSliceResourcesAccepted",
                    "message": "ResourceSlice resources accepted",
                },
            ],
        },
        # Not accepted until Liqo has written conditions (liqoctl's rule).
        {"name": "second", "action": "Consuming", "accepted": False, "class": "gpu"},
        {
            "name": "consumer-id",
            "action": "Providing",
            "accepted": False,
            "class": "default",
            "conditions": [
                {"type": "Authentication", "status": "Accepted"},
                {"type": "Resources", "status": "Denied", "reason": "X", "message": "no"},
            ],
        },
    ]
    assert detail.resource_slices(detail.LiqoObjects()) is None


# == virtual nodes ====================================================================================


def test_virtual_nodes_show_name_slice_readiness_and_resources() -> None:
    hard = {"cpu": "2", "memory": "4Gi", "pods": "110"}
    objects = detail.LiqoObjects(
        virtual_nodes=(vnode("provider-id", hard, "provider-id"), vnode("b-unregistered"), vnode("a-not-ready")),
        nodes={
            "provider-id": node("provider-id", "True"),
            "a-not-ready": node("a-not-ready", "False", "the remote cluster is not reachable"),
        },
    )
    assert detail.virtual_nodes(objects) == [
        {"name": "a-not-ready", "ready": False, "message": "the remote cluster is not reachable"},
        {"name": "b-unregistered", "ready": False, "message": "the virtual kubelet has not registered the Node yet"},
        {"name": "provider-id", "ready": True, "resourceSlice": "provider-id", "resources": hard},
    ]
    assert detail.virtual_nodes(detail.LiqoObjects()) is None


# == API server =======================================================================================


def identity(**params: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "controlplane-provider-id"},
        "spec": {"type": "ControlPlane", "authParams": {"ca": "Q0E=", "signedCRT": "Q1JU", **params}},
    }


def test_api_server_is_the_identitys_address_and_proxy_and_never_its_credentials() -> None:
    found = detail.api_server(detail.LiqoObjects(identity=identity(apiServer="https://172.18.0.2:6443")))
    assert found == {"address": "https://172.18.0.2:6443"}
    proxied = identity(apiServer="https://172.18.0.2:6443", proxyURL="http://10.72.0.5:8118")
    assert detail.api_server(detail.LiqoObjects(identity=proxied)) == {
        "address": "https://172.18.0.2:6443",
        "proxyURL": "http://10.72.0.5:8118",
    }
    assert detail.api_server(detail.LiqoObjects()) is None


# == the status: schema and quiet at rest =============================================================


def full_objects() -> detail.LiqoObjects:
    return detail.LiqoObjects(
        consumer_configuration=configuration(["10.244.0.0/16"], ["10.70.0.0/16"], {"pod": ["10.71.0.0/16"]}),
        provider_configuration=configuration(["10.10.0.0/16"], ["10.80.0.0/16"], {"pod": ["10.10.0.0/16"]}),
        gateway_server=server({"addresses": ["172.18.0.3"], "port": 31234, "protocol": "UDP"}),
        gateway_client=client({"addresses": ["172.18.0.3"], "port": 31234, "protocol": "UDP"}),
        resource_slices=(("Consuming", resource_slice("provider-id", ACCEPTED, resources={"cpu": "4"})),),
        virtual_nodes=(vnode("provider-id", {"cpu": "4"}, "provider-id"),),
        nodes={"provider-id": node("provider-id", "True")},
        identity=identity(apiServer="https://172.18.0.2:6443"),
    )


def obs(found: dict[str, Any] | None, **kw: Any) -> sc.Observation:
    stages = {s: StageResult.ready(s, "ok") for s in ("networking", "authentication", "offloading")}
    return sc.Observation(
        generation=1, now=NOW, timeout_seconds=300, stages=stages, liqo_checked=frozenset(), detail=found, **kw
    )


def test_the_detail_fits_the_status_schema() -> None:
    status, _ = sc.compute(None, obs(detail.detail(full_objects())))
    parsed = LiqoPeeringStatus.model_validate(status).model_dump(by_alias=True, exclude_defaults=True)
    for name in detail.FIELDS:
        assert parsed[name] == status[name], name


def test_the_status_is_written_once_then_nothing_changes_at_rest() -> None:
    first, _ = sc.compute(None, obs(detail.detail(full_objects())))
    again, _ = sc.compute(first, obs(detail.detail(full_objects())))
    assert not [k for k, v in again.items() if first.get(k) != v]


def test_a_pass_that_did_not_read_liqo_keeps_the_detail_and_a_field_with_nothing_left_is_removed() -> None:
    first, _ = sc.compute(None, obs(detail.detail(full_objects())))
    kept, _ = sc.compute(first, obs(None))
    assert all(name not in kept for name in detail.FIELDS)  # a merge patch leaves them as they are
    without_network = detail.detail(
        detail.LiqoObjects(resource_slices=full_objects().resource_slices, identity=full_objects().identity)
    )
    changed, _ = sc.compute(first, obs(without_network))
    assert changed["network"] is None and changed["gateway"] is None  # removed by the merge patch
    assert changed["resourceSlices"] == first["resourceSlices"]
    # Once gone, a None is not written again.
    gone = {k: v for k, v in changed.items() if v is not None}
    quiet, _ = sc.compute(gone, obs(without_network))
    assert "network" not in quiet and "gateway" not in quiet


# == messages that quote Liqo =========================================================================


def test_a_connection_error_names_the_endpoint_dialed() -> None:
    assert networking.endpoint_text({"addresses": ["172.18.0.3"], "port": 31234, "protocol": "UDP"}) == (
        "172.18.0.3:31234/UDP"
    )
    assert networking.endpoint_text({"addresses": ["a.example", "fd00::1"], "port": 51840}) == (
        "a.example:51840, [fd00::1]:51840"
    )
    assert networking.endpoint_text(None) == "<no address>"


WHERE = offloading.Denial(
    namespace=C_NS,
    name="provider-id",
    provider="provider",
    consumer="consumer",
    consumer_id="consumer-id",
    field="spec.offloading",
)


def denied(reason: str, message: str, ctype: str = "Resources", cls: str = "default") -> dict[str, Any]:
    other = "Authentication" if ctype == "Resources" else "Resources"
    return resource_slice(
        "provider-id", [cond(other, "Accepted"), cond(ctype, "Denied", reason, message)], spec={"class": cls}
    )


@pytest.mark.parametrize(
    ("slice_", "where", "says"),
    [
        # Liqo master: the provider turned its built-in default class off.
        (
            denied(
                offloading.DEFAULT_CLASS_DISABLED, "the default ResourceSlice class has been administratively disabled"
            ),
            WHERE,
            "the provider's Liqo has its built-in `default` ResourceSlice class turned off: set"
            " spec.offloading.resourceSliceClass to a class the provider serves",
        ),
        # The built-in class denies resources to a cordoned or drained tenant.
        (
            denied(offloading.RESOURCES_DENIED, "ResourceSlice resources denied"),
            offloading.Denial(**{**WHERE.__dict__, "tenant_condition": "Cordoned"}),
            "the provider has cordoned this consumer's Tenant, so it grants nothing new: set the Tenant's"
            " spec.tenantCondition back to Active on the provider (`liqoctl uncordon tenant consumer-id` there",
        ),
        (
            denied(offloading.RESOURCES_DENIED, "ResourceSlice resources denied"),
            offloading.Denial(**{**WHERE.__dict__, "tenant_condition": "Drained"}),
            "the provider has drained this consumer's Tenant",
        ),
        # Not enough resources: ask for fewer, or free some; a plugin's class is named.
        (
            denied("NotEnoughResources", "only 2 CPUs free", cls="gpu"),
            WHERE,
            "ask for fewer resources in spec.offloading.resources, or free some on the provider; the provider's"
            " Liqo resource plugin for class 'gpu' decides",
        ),
        (
            denied(offloading.AUTHENTICATION_DENIED, "ResourceSlice authentication denied", "Authentication"),
            WHERE,
            "the provider refused the slice's certificate request, or could not issue its credentials",
        ),
    ],
)
def test_a_denied_resource_slice_quotes_liqo_and_gives_the_matching_fix(
    slice_: dict[str, Any], where: offloading.Denial, says: str
) -> None:
    message = offloading.denial_message(slice_, where)
    assert message is not None and says in message
    assert message.startswith(f"the provider Denied ResourceSlice {C_NS}/provider-id on the consumer (")
    denied_cond = next(c for c in slice_["status"]["conditions"] if c["status"] == "Denied")
    assert f"({denied_cond['reason']}: {denied_cond['message']})" in message  # Liqo's own words


def test_both_conditions_denied_give_both_fixes_and_an_accepted_slice_none() -> None:
    both = resource_slice(
        "provider-id",
        [
            cond("Authentication", "Denied", offloading.AUTHENTICATION_DENIED, "ResourceSlice authentication denied"),
            cond("Resources", "Denied", offloading.DEFAULT_CLASS_DISABLED, "disabled"),
        ],
    )
    message = offloading.denial_message(both, WHERE)
    assert message is not None and "(Authentication and Resources)" in message
    assert "certificate request" in message and "resourceSliceClass" in message
    assert offloading.denial_message(resource_slice("provider-id", ACCEPTED), WHERE) is None
    no_reason = resource_slice("provider-id", [{"type": "Resources", "status": "Denied"}])
    assert "Resources Denied (no reason given): ask for fewer resources" in (
        offloading.denial_message(no_reason, WHERE) or ""
    )


def test_a_slice_condition_without_a_status_says_unknown_and_is_not_accepted() -> None:
    obj = {"metadata": {"name": "p"}, "status": {"conditions": [{"type": "Resources"}]}}
    (shown,) = detail.resource_slices(detail.LiqoObjects(resource_slices=(("Consuming", obj),))) or []
    assert shown["conditions"] == [{"type": "Resources", "status": "Unknown"}] and shown["accepted"] is False
