"""Gateway endpoints as Liqo's development branch after v1.2.0 writes them (commit 557c199cf, "multiple
interfaces"): GatewayServer and GatewayClient `spec.endpoint.ports[]` and `nodePorts[]`, and the server's
`status.endpoint.ports[]`, with `port` and `nodePort` deprecated and mutually exclusive with the lists. No
release has them yet and the Go module proxy serves no version of that branch, so these objects are shaped by
hand after its types (apis/networking/v1beta1/gatewayserver_types.go there): the operator reads both forms,
and writes the client's endpoint in the form the server publishes, which every Liqo accepts."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_peering.api.model import GatewayClientSpec, GatewayStatus, NetworkingSpec
from liqo_peering.fields import endpoint_ports
from liqo_peering.liqo import networking
from liqo_peering.liqo.context import PeeringContext
from liqo_peering.status import detail
from unit.test_liqo_builders import ctx  # noqa: F401 - the fixture

RELEASED = {"addresses": ["198.18.0.20"], "port": 30392, "protocol": "UDP"}  # v1.0 to v1.2.0
LISTED = {"addresses": ["198.18.0.20"], "ports": [30392, 30393], "protocol": "UDP"}  # after v1.2.0
CLIENT_RULES = (  # the CEL rules of the branch's EndpointStatus, which a GatewayClient's spec.endpoint is
    lambda e: not ("port" in e and "ports" in e),  # port and ports are mutually exclusive
    lambda e: "port" in e or bool(e.get("ports")),  # at least one of port or ports must be set
    lambda e: len(set(e.get("ports") or [])) == len(e.get("ports") or []),  # ports must not contain duplicates
)


def admitted(endpoint: dict[str, Any]) -> bool:
    return all(rule(endpoint) for rule in CLIENT_RULES)


@pytest.mark.parametrize(
    ("endpoint", "ports"),
    [
        (RELEASED, [30392]),
        (LISTED, [30392, 30393]),
        ({"ports": [1, 0, 70000, "2", True, 3]}, [1, 3]),  # what no CRD lets through is left out
        ({"ports": [], "port": 5}, [5]),
        ({"ports": list(range(1, 200))}, list(range(1, 65))),  # at most the CRD's MaxItems
        ({}, []),
        ("not a mapping", []),
    ],
)
def test_both_forms_are_read(endpoint: Any, ports: list[int]) -> None:
    assert endpoint_ports(endpoint) == ports


def test_a_client_dials_a_released_server_with_its_port(ctx: PeeringContext) -> None:  # noqa: F811
    endpoint = networking.gateway_client(ctx, NetworkingSpec(), RELEASED)["spec"]["endpoint"]
    assert endpoint == {"addresses": ["198.18.0.20"], "port": 30392, "protocol": "UDP"}
    assert admitted(endpoint)


def test_a_client_dials_a_listing_server_with_every_port_in_the_list_form(ctx: PeeringContext) -> None:  # noqa: F811
    endpoint = networking.gateway_client(ctx, NetworkingSpec(), LISTED)["spec"]["endpoint"]
    assert endpoint == {"addresses": ["198.18.0.20"], "ports": [30392, 30393], "protocol": "UDP"}
    assert "port" not in endpoint and admitted(endpoint)  # no port: null, which the branch's CRD refuses


def test_an_overridden_port_keeps_the_servers_form(ctx: PeeringContext) -> None:  # noqa: F811
    spec = NetworkingSpec(gateway_client=GatewayClientSpec(address="203.0.113.9", port=4000))
    endpoint = networking.gateway_client(ctx, spec, LISTED)["spec"]["endpoint"]
    assert endpoint == {"addresses": ["203.0.113.9"], "ports": [4000], "protocol": "UDP"}
    assert admitted(endpoint)


def test_a_live_client_in_the_list_form_matches_what_the_operator_wants(ctx: PeeringContext) -> None:  # noqa: F811
    desired = networking.gateway_client(ctx, NetworkingSpec(), LISTED)
    live = {"spec": {**desired["spec"], "endpoint": {**desired["spec"]["endpoint"], "serviceType": "ClusterIP"}}}
    assert networking.gateway_spec_matches(live, desired)  # nothing re-created on every pass
    moved = {"spec": {**desired["spec"], "endpoint": {**desired["spec"]["endpoint"], "ports": [30392]}}}
    assert not networking.gateway_spec_matches(moved, desired)


def test_the_status_and_messages_name_every_port() -> None:
    objects = detail.LiqoObjects(gateway_server={"status": {"endpoint": LISTED}})
    shown = detail.gateway(objects)
    assert shown == {
        "server": "Provider",
        "addresses": ["198.18.0.20"],
        "port": 30392,
        "ports": [30392, 30393],
        "protocol": "UDP",
    }
    GatewayStatus.model_validate(shown)  # the CRD's status schema takes it
    assert networking.endpoint_text(LISTED) == "198.18.0.20:30392, 198.18.0.20:30393/UDP"
    assert networking.endpoint_text(RELEASED) == "198.18.0.20:30392/UDP"
