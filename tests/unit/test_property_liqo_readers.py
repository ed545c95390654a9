"""Property: the readers of Liqo's objects are total. Whatever a Configuration, gateway, Connection,
ResourceSlice, VirtualNode, Node, Pod, Identity, Tenant, ForeignCluster or Secret holds under its metadata
(missing keys, wrong types at any depth, lists of junk, odd strings), reading it never raises anything but the
project's typed errors: it returns a value, a safe default when the field makes no sense. And the status
fields built from them fit the CRD, so the status write never fails on what Liqo wrote.

``metadata`` is drawn as the API server guarantees it for every object (a string name, string labels and
annotations); everything else is drawn as anything at all, next to what Liqo writes.
"""

from __future__ import annotations

import contextlib
import string
from typing import Any

import jsonschema
from hypothesis import example, given, settings
from hypothesis import strategies as st

from liqo_peering.api import model
from liqo_peering.errors import PeeringError
from liqo_peering.fields import dig
from liqo_peering.liqo import authentication, common, naming, networking, offloading, stored, unpeering, versions
from liqo_peering.liqo import peeringuser as pu
from liqo_peering.status import detail as status_detail
from unit.strategies import STATUS_SCHEMA, anything, field

SETTINGS = settings(max_examples=50, deadline=None)


def shaped(template: Any) -> st.SearchStrategy[Any]:
    """Values shaped like ``template`` (a mapping of optional keys, a one-item list of items, or a strategy for
    a leaf), where any level may be anything instead."""
    if isinstance(template, dict):
        return field(st.fixed_dictionaries({}, optional={k: shaped(v) for k, v in template.items()}))
    if isinstance(template, list):
        return field(st.lists(shaped(template[0]), max_size=3))
    return field(template)


names = st.text(string.ascii_lowercase + string.digits + "-", min_size=1, max_size=10)
label_text = st.text(max_size=10)
metadata = st.fixed_dictionaries(
    {"name": names},
    optional={
        "namespace": names,
        "uid": names,
        "generation": st.integers(0, 5),
        "labels": st.dictionaries(
            st.sampled_from([naming.RESOURCE_SLICE_NAME, naming.REPLICATED, "x"]) | label_text, label_text, max_size=3
        ),
        "annotations": st.dictionaries(
            st.sampled_from([naming.PERMANENTLY_UNREACHABLE, naming.COMMON_METADATA, pu.USER_ANNOTATION]) | label_text,
            st.sampled_from(["true", "", "{}", '{"labels": ["a"]}', "[" * 5000]) | label_text,
            max_size=3,
        ),
    },
)


def liqo_object(spec: Any = None, status: Any = None, **extra: Any) -> st.SearchStrategy[dict[str, Any]]:
    optional = {k: shaped(v) for k, v in (("spec", spec), ("status", status)) if v is not None}
    optional.update({k: shaped(v) for k, v in extra.items()})
    return st.fixed_dictionaries({"metadata": metadata}, optional=optional)


text = st.text(max_size=12)
cidrs = st.sampled_from(["10.0.0.0/16", "10.70.0.0/16", "192.168.0.0/24", "fd00::/64", "", "not-a-cidr", "1.2.3.4/99"])
cidr_field: Any = field(st.lists(cidrs, max_size=2) | cidrs)
condition = {
    "type": st.sampled_from(["Ready", "NetworkCIDRsConfigured", "Authentication", "Resources", ""]) | text,
    "status": st.sampled_from(["True", "False", "Accepted", "Denied", "Unknown"]) | text,
    "reason": st.sampled_from([offloading.DEFAULT_CLASS_DISABLED, ""]) | text,
    "message": text,
    "observedGeneration": st.integers(0, 5),
}
endpoint = {
    "addresses": [st.sampled_from(["10.0.0.1", "fd00::1", "gw.example", ""]) | text],
    "port": st.integers(-1, 70000),
    "protocol": st.sampled_from(["UDP", ""]) | text,
}
quantities = st.dictionaries(text, st.sampled_from(["1", "2Gi", "500m", ""]) | st.integers(), max_size=3)

configurations = liqo_object(
    spec={"remote": {"cidr": {"pod": cidr_field, "external": cidr_field}}},
    status={"remote": {"cidr": {"pod": cidr_field, "external": cidr_field}}, "conditions": [condition]},
)
gateway_servers = liqo_object(
    spec={"mtu": st.integers(0, 9000), "endpoint": endpoint},
    status={"endpoint": endpoint, "secretRef": {"name": text}},
)
gateway_clients = liqo_object(spec={"mtu": st.integers(0, 9000), "endpoint": endpoint})
connections = liqo_object(status={"value": st.sampled_from(["Connected", "Connecting", "Error", ""]) | text})
resource_slices = liqo_object(
    spec={"class": st.sampled_from(["default", ""]) | text, "resources": quantities},
    status={"resources": quantities, "conditions": [condition]},
)
virtual_nodes = liqo_object(spec={"resourceQuota": {"hard": quantities}})
nodes = liqo_object(status={"conditions": [condition]})
identities = liqo_object(
    spec={"authParams": {"apiServer": text, "proxyURL": text}}, status={"kubeconfigSecretRef": {"name": text}}
)
tenants = liqo_object(status={"authParams": anything, "tenantNamespace": text})
secrets = liqo_object(
    data={
        pu.KUBECONFIG_KEY: st.sampled_from(["", "!!", "YTogJmEgMQ=="]) | text,
        pu.PENDING_KEY: text,
        "privateKey": st.sampled_from(["", "!!", "bm90IGEga2V5"]) | text,
        "publicKey": text,
        "k": text,
    }
)


@SETTINGS
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "consumer_configuration": configurations,
            "provider_configuration": configurations,
            "gateway_server": gateway_servers,
            "gateway_client": gateway_clients,
            "server_side": st.sampled_from(["Provider", "Consumer"]),
            "resource_slices": st.lists(
                st.tuples(st.sampled_from(["Consuming", "Providing"]), resource_slices), max_size=2
            ).map(tuple),
            "virtual_nodes": st.lists(virtual_nodes, max_size=2).map(tuple),
            "nodes": st.dictionaries(names, nodes, max_size=2),
            "identity": identities,
        },
    )
)
@example({"consumer_configuration": {"metadata": {"name": "c"}, "spec": {"remote": {"cidr": "10.0.0.0/8"}}}})
@example({"gateway_client": {"metadata": {"name": "g"}, "spec": {"endpoint": ["x"]}}})
@example({"nodes": {"n": {"metadata": {"name": "n"}, "status": {"conditions": "Ready"}}}})
@example({"resource_slices": (("Consuming", {"metadata": {"name": "0"}, "status": {"conditions": [{"type": "R"}]}}),)})
def test_the_status_detail_of_any_liqo_objects_fits_the_crd(objects: dict[str, Any]) -> None:
    found = status_detail.detail(status_detail.LiqoObjects(**objects))
    status = {k: v for k, v in found.items() if v is not None}
    model.LiqoPeeringStatus.model_validate(status)
    jsonschema.Draft4Validator(STATUS_SCHEMA).validate(status)


@SETTINGS
@given(configurations, st.sampled_from([None, versions.from_label("v1.1.0"), versions.from_label("v1.2.0")]))
@example({"metadata": {"name": "c"}, "status": {"conditions": ["x"]}}, None)
@example({"metadata": {"name": "c"}, "status": {"remote": {"cidr": {"pod": 1}}}}, None)
def test_configuration_readers(conf: dict[str, Any], version: versions.LiqoVersion | None) -> None:
    assert isinstance(networking.configuration_ready(conf, version), bool)
    for address in ("10.0.0.1", "10.70.1.2", "fd00::1", "not an address"):
        assert isinstance(networking.remap_address(conf, address), str)
    assert networking.in_band_proxy_url(conf, "10.0.0.1").startswith("http://")


@SETTINGS
@given(gateway_servers, gateway_clients, st.lists(connections, max_size=3))
@example({"metadata": {"name": "g"}, "status": {"endpoint": {"addresses": 1}}}, {"metadata": {"name": "c"}}, [])
@example({"metadata": {"name": "g"}, "spec": "x"}, {"metadata": {"name": "c"}}, [{"metadata": {"name": "c"}}])
def test_gateway_and_connection_readers(
    server: dict[str, Any], client: dict[str, Any], conns: list[dict[str, Any]]
) -> None:
    desired = {"spec": {"mtu": 1340, "endpoint": {"addresses": ["10.0.0.1"], "port": 51840, "protocol": "UDP"}}}
    for gateway in (server, client):
        assert isinstance(networking.gateway_spec_matches(gateway, desired), bool)
        assert networking.gateway_secret_name(gateway) is None or isinstance(
            networking.gateway_secret_name(gateway), str
        )
    published = networking.server_endpoint(server)
    assert published is None or published["addresses"]
    assert isinstance(networking.endpoint_text(published), str)
    assert isinstance(networking.endpoint_text(dig(client, "spec", "endpoint")), str)
    assert networking.connection_state(conns) in (None, *{str(v) for v in _connection_values(conns)}, "Connecting")


def _connection_values(conns: list[dict[str, Any]]) -> list[Any]:
    return [status.get("value") for c in conns if isinstance(status := c.get("status"), dict)]


@SETTINGS
@given(
    st.lists(resource_slices, max_size=3),
    st.lists(virtual_nodes, max_size=3),
    st.lists(nodes, max_size=2),
    st.one_of(st.none(), nodes),
    st.booleans(),
)
@example([{"metadata": {"name": "s"}, "status": {"conditions": [1]}}], [], [], None, True)
@example([], [], [{"metadata": {"name": "p"}, "status": {"conditions": {"type": "Ready"}}}], None, True)
def test_offloading_readers(
    slices: list[dict[str, Any]],
    vnodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    node: dict[str, Any] | None,
    network_checked: bool,
) -> None:
    owner = naming.owner_labels("ns", "peering")
    left = offloading.leftovers(slices, vnodes, {"a"}, owner, "provider-id")
    assert all(isinstance(n, str) for n in (*left.slices, *left.virtual_nodes))
    for vnode in vnodes:
        assert isinstance(offloading.made_from(vnode), str)
    denial = offloading.Denial("ns", "s", "provider", "consumer", "cid", "spec.offloading", "Cordoned")
    for s in slices:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in offloading.slice_conditions(s).items())
        message = offloading.denial_message(s, denial)
        assert message is None or isinstance(message, str)
    usable, why = offloading.virtual_node_usable(node, pods, network_checked)
    assert isinstance(usable, bool) and isinstance(why, str)


@SETTINGS
@given(identities, tenants, secrets, st.one_of(st.none(), liqo_object(spec=anything)))
@example({"metadata": {"name": "i"}, "status": {"kubeconfigSecretRef": "x"}}, {"metadata": {"name": "t"}}, {}, None)
@example({"metadata": {"name": "i"}}, {"metadata": {"name": "t"}, "status": [1]}, {"data": ["x"]}, None)
def test_authentication_and_unpeering_readers(
    identity: dict[str, Any], tenant: dict[str, Any], secret: dict[str, Any], foreign_cluster: dict[str, Any] | None
) -> None:
    assert isinstance(authentication.identity_ready(identity), bool)
    assert isinstance(authentication.tenant_ready(tenant), bool)
    assert isinstance(authentication.has_labels(identity, {"a": "b"}), bool)
    value = authentication.secret_field(secret, "k")
    assert value is None or isinstance(value, str)
    with contextlib.suppress(PeeringError):
        authentication.load_cluster_keys(secret)
    patch = unpeering.unreachable_patch(foreign_cluster)
    assert patch is None or patch["metadata"]["annotations"][naming.PERMANENTLY_UNREACHABLE] == "true"
    try:
        state = pu.MintState.of(secret)
    except PeeringError:
        return
    assert state.user is None or isinstance(state.user, str)


@SETTINGS
@given(liqo_object(spec=anything, status=anything), st.text(max_size=20))
@example({"metadata": {"name": "x", "annotations": {naming.COMMON_METADATA: "[" * 100_000}}}, "")
@example({"metadata": {"name": "x", "annotations": {naming.COMMON_METADATA: '{"labels": 1}'}}}, "")
def test_stored_and_common_metadata_readers(live: dict[str, Any], label: str) -> None:
    desired = {
        "metadata": {"name": "x", "labels": {"a": "b"}, "annotations": {naming.COMMON_METADATA: '{"labels": ["a"]}'}},
        "spec": {"a": {"b": [1, {"c": ""}]}, "d": 0},
    }
    assert isinstance(stored.covers(live, desired), bool)
    labels, annotations = common.recorded(live)
    assert all(isinstance(k, str) for k in labels | annotations)
    assert isinstance(common.dropped(live, desired), dict)
    common.metadata_patch(live, desired)
    assert isinstance(versions.from_label(label).describe(), str)
