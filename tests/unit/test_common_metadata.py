"""spec.commonMetadata: on every object the builders make, under the operator's and Liqo's own keys, and the
changes that bring an existing object to the current set without re-creating it (liqo_peering.liqo.common)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import ValidationError

from liqo_peering.api.model import CommonMetadata, NetworkingSpec, OffloadingSpec, parse_spec, reserved_key
from liqo_peering.liqo import authentication as auth
from liqo_peering.liqo import naming, networking, offloading, peeringuser, tenancy
from liqo_peering.liqo.common import RECORD, Common, decorate, dress, dropped, metadata_patch, over
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from liqo_peering.liqo.stored import covers, overlay

CONSUMER = ClusterInfo("consumer-id", ("10.100.0.0/16",), "10.110.0.0/16")
PROVIDER = ClusterInfo("provider-id", ("10.200.0.0/16",), "10.210.0.0/16")
COMMON = Common({"example.com/team": "a", "cost-centre": "cc1"}, {"example.com/owner": "ops"})
OWNER = naming.owner_labels("team-a", "to-provider")


@pytest.fixture
def ctx() -> PeeringContext:
    return PeeringContext(
        "team-a",
        "to-provider",
        CONSUMER,
        PROVIDER,
        consumer_tenant_ns="liqo-tenant-provider-id",
        provider_tenant_ns="liqo-tenant-consumer-id",
        common=COMMON,
    )


def built(ctx: PeeringContext) -> dict[str, dict[str, Any]]:
    """Every object a peering builds, by a name for the failure message."""
    endpoint = {"addresses": ["192.0.2.1"], "port": 51840, "protocol": "UDP"}
    tenant_status = {"authParams": {"apiServer": "https://p"}, "tenantNamespace": "t"}
    return {
        "configuration": networking.configuration(ctx, ctx.provider, ctx.consumer_tenant_ns),
        "gateway server": networking.gateway_server(ctx, NetworkingSpec()),
        "gateway client": networking.gateway_client(ctx, NetworkingSpec(), endpoint),
        "public key": networking.public_key(ctx, "provider-id", ctx.consumer_tenant_ns, "a2V5"),
        "nonce": auth.nonce_secret(ctx),
        "signed nonce": auth.signed_nonce_secret(ctx, "bm9uY2U="),
        "identity": auth.identity(ctx, tenant_status),
        "tenant metadata": auth.tenant_metadata(ctx),
        "resource slice": offloading.resource_slice(
            ctx, offloading.requested_slices(OffloadingSpec(resources={"cpu": "2"}), ctx.provider.cluster_id)[0]
        ),
        "tenant namespace": tenancy.tenant_namespace("provider-id", "liqo-tenant-provider-id", OWNER, ctx.common),
        "tenant access": tenancy.tenant_access_binding("ns", "role", "sa-ns", "sa", OWNER, ctx.common),
        "revoke role": dress(peeringuser.revoke_role("consumer-id", OWNER), ctx.common),
    }


def test_every_builder_puts_the_common_labels_and_annotations_on(ctx: PeeringContext) -> None:
    for what, obj in built(ctx).items():
        meta = obj["metadata"]
        for key, value in COMMON.labels.items():
            assert meta["labels"][key] == value, what
        for key, value in COMMON.annotations.items():
            assert meta["annotations"][key] == value, what
        assert json.loads(meta["annotations"][RECORD]) == {
            "labels": ["cost-centre", "example.com/team"],
            "annotations": ["example.com/owner"],
        }, what
        for key, value in OWNER.items():
            assert meta["labels"][key] == value, what


def test_without_common_metadata_the_builders_make_what_they_always_made(ctx: PeeringContext) -> None:
    plain = dataclasses.replace(ctx, common=Common())
    for what, obj in built(plain).items():
        meta = obj["metadata"]
        assert RECORD not in (meta.get("annotations") or {}), what
        assert "example.com/team" not in meta["labels"], what


def test_the_builders_own_keys_win() -> None:
    meta = {
        "name": "x",
        "labels": {"liqo.io/remote-cluster-id": "p"},
        "annotations": {"liqo.io/create-virtual-node": "true"},
    }
    clash = Common({"liqo.io/remote-cluster-id": "mine"}, {"liqo.io/create-virtual-node": "false"})
    out = decorate(meta, clash)
    assert out["labels"]["liqo.io/remote-cluster-id"] == "p"
    assert out["annotations"]["liqo.io/create-virtual-node"] == "true"


def test_an_applied_object_is_not_covered_once_a_key_was_dropped(ctx: PeeringContext) -> None:
    before = networking.configuration(ctx, ctx.provider, ctx.consumer_tenant_ns)
    live = {**before, "metadata": {**before["metadata"], "uid": "u1"}}
    assert covers(live, before)
    fewer = dataclasses.replace(ctx, common=Common({"cost-centre": "cc1"}, {}))
    assert not covers(live, networking.configuration(fewer, fewer.provider, fewer.consumer_tenant_ns))
    none = dataclasses.replace(ctx, common=Common())
    assert not covers(live, networking.configuration(none, none.provider, none.consumer_tenant_ns))
    changed = dataclasses.replace(ctx, common=Common({**COMMON.labels, "cost-centre": "cc2"}, COMMON.annotations))
    assert not covers(live, networking.configuration(changed, changed.provider, changed.consumer_tenant_ns))


def test_an_update_without_patch_removes_the_dropped_keys_only(ctx: PeeringContext) -> None:
    before = networking.configuration(ctx, ctx.provider, ctx.consumer_tenant_ns)
    live = {**before, "metadata": {**before["metadata"], "labels": {**before["metadata"]["labels"], "theirs": "x"}}}
    fewer = dataclasses.replace(ctx, common=Common({"cost-centre": "cc1"}, {}))
    want = networking.configuration(fewer, fewer.provider, fewer.consumer_tenant_ns)
    after = overlay(live, over(live, want))
    labels, notes = after["metadata"]["labels"], after["metadata"]["annotations"]
    assert "example.com/team" not in labels and "example.com/owner" not in notes
    assert labels["cost-centre"] == "cc1" and labels["theirs"] == "x"
    assert json.loads(notes[RECORD]) == {"labels": ["cost-centre"], "annotations": []}
    none = dataclasses.replace(ctx, common=Common())
    bare = overlay(live, over(live, networking.configuration(none, none.provider, none.consumer_tenant_ns)))
    assert RECORD not in bare["metadata"]["annotations"] and "cost-centre" not in bare["metadata"]["labels"]


def test_metadata_patch_for_objects_created_once(ctx: PeeringContext) -> None:
    live = auth.nonce_secret(ctx)
    assert metadata_patch(live, auth.nonce_secret(ctx)) is None  # at rest: nothing to write
    changed = dataclasses.replace(ctx, common=Common({"cost-centre": "cc2"}, {"example.com/note": "n"}))
    patch = metadata_patch(live, auth.nonce_secret(changed))
    assert patch == {
        "metadata": {
            "labels": {"cost-centre": "cc2", "example.com/team": None},
            "annotations": {
                "example.com/note": "n",
                RECORD: json.dumps({"annotations": ["example.com/note"], "labels": ["cost-centre"]}, sort_keys=True),
                "example.com/owner": None,
            },
        }
    }
    gone = metadata_patch(live, auth.nonce_secret(dataclasses.replace(ctx, common=Common())))
    assert gone == {
        "metadata": {
            "labels": {"cost-centre": None, "example.com/team": None},
            "annotations": {"example.com/owner": None, RECORD: None},
        }
    }
    # An object made before the spec had common metadata gets it.
    plain = auth.nonce_secret(dataclasses.replace(ctx, common=Common()))
    first = metadata_patch(plain, auth.nonce_secret(ctx))
    assert first is not None and first["metadata"]["labels"] == COMMON.labels


def test_a_key_someone_else_set_is_never_removed() -> None:
    live = {"metadata": {"labels": {"theirs": "x"}, "annotations": {}}}
    assert dropped(live, {"metadata": {}}) == {}


def test_an_unreadable_record_removes_nothing() -> None:
    live = {"metadata": {"labels": {"a": "b"}, "annotations": {RECORD: "not json"}}}
    assert dropped(live, {"metadata": {"annotations": {RECORD: "{}"}}}) == {}


@pytest.mark.parametrize(
    ("key", "reserved"),
    [
        ("liqo.io/remote-cluster-id", True),
        ("networking.liqo.io/x", True),
        ("peering.liqo-operator.io/peering-name", True),
        ("app.kubernetes.io/managed-by", True),
        ("example.com/liqo.io", False),
        ("liqo.iox/a", False),
        ("team", False),
        ("app.kubernetes.io/part-of", False),
    ],
)
def test_reserved_keys(key: str, reserved: bool) -> None:
    assert reserved_key(key) is reserved
    spec = {"remoteKubeconfigSecretRef": {"name": "k"}}
    for field in ("labels", "annotations"):
        value = {key: "v"}
        if reserved:
            with pytest.raises(ValidationError, match=f"{field} in Liqo's and the operator's own domains"):
                parse_spec({**spec, "commonMetadata": {field: value}})
        else:
            assert getattr(parse_spec({**spec, "commonMetadata": {field: value}}).common_metadata, field) == value


def test_label_values_are_checked_as_kubernetes_does() -> None:
    with pytest.raises(ValidationError):
        CommonMetadata.model_validate({"labels": {"team": "not a label value"}})
    with pytest.raises(ValidationError):
        CommonMetadata.model_validate({"labels": {"team": "x" * 64}})
    assert CommonMetadata.model_validate({"annotations": {"note": "any text at all"}}).annotations
