"""LiqoPeeringSet's pure core: child names, the selector, the desired children, the plan (maxConcurrent,
adoption, overwritten edits, conflicts) and the set's status."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from liqo_peering.api.peeringset import LabelSelector
from liqo_peering.fleet import children as ch
from liqo_peering.fleet import status as fs
from liqo_peering.fleet.selector import matches
from liqo_peering.liqo import naming

UID = "set-uid"
SET = "edge"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SELECTOR = LabelSelector.model_validate({"matchLabels": {"fleet": "edge"}})
TEMPLATE: dict[str, Any] = {"timeout": "2m", "offloading": {"resources": {"cpu": "1"}}}


def secret(name: str, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"fleet": "edge"} if labels is None else labels, **meta}}


def set_body() -> dict[str, Any]:
    return {
        "apiVersion": "peering.liqo-operator.io/v1alpha1",
        "kind": "LiqoPeeringSet",
        "metadata": {"name": SET, "namespace": "ns", "uid": UID},
    }


def child(
    want: ch.Desired, peer_status: str | None = "ready", generation: int = 1, observed: int = 1, **meta: Any
) -> dict[str, Any]:
    obj = ch.child_object(set_body(), want)
    obj["metadata"].update(generation=generation, **meta)
    obj["status"] = {
        "observedGeneration": observed,
        "peerStatus": peer_status,
        "remoteClusterID": f"{want.secret}-id",
        "conditions": [
            {"type": "Ready", "status": "True" if peer_status == "ready" else "False", "reason": "R", "message": "m"}
        ],
    }
    return obj


def desired(*names: str, template: dict[str, Any] | None = None) -> dict[str, ch.Desired]:
    return ch.desired_children(SET, TEMPLATE if template is None else template, SELECTOR, [secret(n) for n in names])


# -- names -------------------------------------------------------------------------------------


def test_child_names_are_the_set_and_the_secret() -> None:
    assert ch.child_name("edge", "provider-a") == "edge-provider-a"


@given(
    st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,60}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,250}[a-z0-9])?", fullmatch=True),
)
def test_child_names_are_dns_labels(set_name: str, secret_name: str) -> None:
    name = ch.child_name(set_name, secret_name)
    assert len(name) <= 63 and DNS_LABEL.match(name), name


def test_long_or_dotted_names_get_a_hash_that_keeps_them_apart() -> None:
    long_a, long_b = "x" * 70 + "a", "x" * 70 + "b"
    assert ch.child_name(SET, long_a) != ch.child_name(SET, long_b)
    assert ch.child_name(SET, "a.b") != ch.child_name(SET, "a-b") == "edge-a-b"
    assert ch.child_name(SET, long_a) == ch.child_name(SET, long_a)  # stable


# -- the selector ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
        ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}, {"a": "1"}, False),
    ],
)
def test_selector(selector: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert matches(LabelSelector.model_validate(selector), labels) is expected


# -- desired children --------------------------------------------------------------------------


def test_one_child_per_selected_secret_not_being_deleted_nor_minted() -> None:
    secrets = [
        secret("a"),
        secret("b", labels={"fleet": "other"}),
        secret("c", deletionTimestamp="2026-01-01T00:00:00Z"),
        secret("d"),
    ]
    minted = secret("edge-a-provider-credentials")  # a LiqoPeering's minted credential, even if labelled
    minted["metadata"]["ownerReferences"] = [{"kind": "LiqoPeering", "name": "edge-a", "uid": "u", "controller": True}]
    got = ch.desired_children(SET, TEMPLATE, SELECTOR, [*secrets, minted])
    assert list(got) == ["edge-a", "edge-d"]
    assert got["edge-a"].spec == {"remoteKubeconfigSecretRef": {"name": "a", "key": "kubeconfig"}, **TEMPLATE}


def test_the_spec_hash_ignores_defaults_but_not_changes() -> None:
    want = desired("a")["edge-a"]
    defaulted = {**want.spec, "liqoNamespace": "liqo", "networking": {"enabled": True}}
    assert ch.spec_hash(defaulted) == want.spec_hash
    assert ch.spec_hash({**want.spec, "timeout": "3m"}) != want.spec_hash


# -- the plan ----------------------------------------------------------------------------------


def verbs(plan: ch.Plan) -> list[tuple[str, str, str]]:
    return [(a.verb, a.name, a.why) for a in plan.actions]


def test_missing_children_are_created_extra_ones_deleted_in_sync_ones_left_alone() -> None:
    want = desired("a", "b")
    gone = desired("old")["edge-old"]
    live = [child(want["edge-a"]), child(gone)]
    plan = ch.plan(UID, SET, want, live, None)
    assert verbs(plan) == [("delete", "edge-old", "Removed"), ("create", "edge-b", "Created")]
    assert plan.removing == ["edge-old"] and not plan.waiting and not plan.conflicts


def test_a_template_change_updates_every_child_and_an_edit_is_overwritten() -> None:
    before = desired("a", "b")
    after = desired("a", "b", template={**TEMPLATE, "timeout": "3m"})
    live = [child(before["edge-a"]), child(before["edge-b"])]
    assert verbs(ch.plan(UID, SET, after, live, None)) == [
        ("update", "edge-a", "TemplateChanged"),
        ("update", "edge-b", "TemplateChanged"),
    ]
    edited = child(before["edge-a"], generation=2, observed=2)
    edited["spec"]["timeout"] = "9m"
    assert verbs(ch.plan(UID, SET, before, [edited, child(before["edge-b"])], None)) == [
        ("update", "edge-a", "Overwritten")
    ]


def test_max_concurrent_counts_children_establishing() -> None:
    want = desired("a", "b", "c", "d")
    establishing = child(want["edge-a"], peer_status="establishing")
    failed = child(want["edge-b"], peer_status="error")  # a failed child holds no slot
    plan = ch.plan(UID, SET, want, [establishing, failed], 2)
    assert verbs(plan) == [("create", "edge-c", "Created")]
    assert plan.waiting == ["edge-d"]
    # A child whose spec changed and whose reconcile has not answered yet is establishing too.
    stale = child(want["edge-a"], generation=2, observed=1)
    assert ch.plan(UID, SET, want, [stale, failed], 1).waiting == ["edge-c", "edge-d"]
    assert not ch.plan(UID, SET, want, [], None).waiting


def test_updates_take_slots_before_creates_and_an_establishing_child_keeps_its_own() -> None:
    before = desired("a", "b")
    after = desired("a", "b", "c", template={**TEMPLATE, "timeout": "3m"})
    live = [child(before["edge-a"]), child(before["edge-b"], peer_status="establishing")]
    plan = ch.plan(UID, SET, after, live, 2)
    assert verbs(plan) == [("update", "edge-b", "TemplateChanged"), ("update", "edge-a", "TemplateChanged")]
    assert plan.waiting == ["edge-c"]


def test_orphans_are_adopted_and_children_of_others_are_conflicts() -> None:
    want = desired("a", "b")
    orphan = child(want["edge-a"])
    orphan["metadata"]["ownerReferences"] = []
    foreign = child(want["edge-b"])
    foreign["metadata"]["ownerReferences"] = [
        {"kind": "LiqoPeeringSet", "name": "other", "uid": "x", "controller": True}
    ]
    plan = ch.plan(UID, SET, want, [orphan, foreign], None)
    assert verbs(plan) == [("update", "edge-a", "Adopted")]
    assert plan.conflicts == {"edge-b": "LiqoPeering edge-b belongs to LiqoPeeringSet other"}
    # Not desired and not ours: never deleted.
    assert verbs(ch.plan(UID, SET, {}, [orphan, foreign], None)) == []


def test_a_desired_child_being_deleted_is_left_to_go_then_created_again() -> None:
    want = desired("a")
    going = child(want["edge-a"], deletionTimestamp="2026-01-01T00:00:00Z")
    plan = ch.plan(UID, SET, want, [going], None)
    assert verbs(plan) == [] and plan.removing == ["edge-a"]


def test_the_child_object_keeps_what_others_wrote_and_takes_the_set_s() -> None:
    want = desired("a")["edge-a"]
    live = child(want)
    live["metadata"]["finalizers"] = ["peering.liqo-operator.io/finalizer"]
    live["metadata"]["labels"]["team"] = "x"
    live["spec"]["timeout"] = "9m"
    obj = ch.child_object(set_body(), want, live)
    assert obj["spec"] == want.spec and "status" not in obj
    assert obj["metadata"]["finalizers"] == ["peering.liqo-operator.io/finalizer"]
    assert obj["metadata"]["labels"] == {"team": "x", naming.SET_LABEL: SET}
    assert obj["metadata"]["annotations"][naming.SET_SPEC_HASH] == want.spec_hash
    (ref,) = obj["metadata"]["ownerReferences"]
    assert ref == {
        "apiVersion": "peering.liqo-operator.io/v1alpha1",
        "kind": "LiqoPeeringSet",
        "name": SET,
        "uid": UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }


# -- status ------------------------------------------------------------------------------------


def observe(**kw: Any) -> fs.SetObservation:
    return fs.SetObservation(generation=3, now=NOW, **kw)


def cond(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


def test_ready_when_every_child_is_ready() -> None:
    want = desired("a", "b")
    kids = {n: child(w) for n, w in want.items()}
    status, events = fs.compute(None, observe(desired=want, children=kids))
    assert (status["desired"], status["ready"], status["establishing"], status["error"]) == (2, 2, 0, 0)
    assert status["observedGeneration"] == 3
    assert cond(status, "Ready")["status"] == "True" and cond(status, "Ready")["reason"] == "AllReady"
    assert cond(status, "Reconciling")["status"] == "False" and cond(status, "Stalled")["status"] == "False"
    assert status["peerings"][0] == {
        "name": "edge-a",
        "secret": "a",
        "remoteClusterID": "a-id",
        "peerStatus": "ready",
        "reason": "R",
    }
    assert [e.reason for e in events] == ["AllReady"]
    again, events = fs.compute(status, observe(desired=want, children=kids))
    assert again == status and events == []


def test_no_secret_selected_is_ready_with_a_reason_that_says_so() -> None:
    status, _ = fs.compute(None, observe())
    assert cond(status, "Ready")["reason"] == "NoSecretsSelected" and status["desired"] == 0


def test_progress_is_reconciling_and_counts_each_kind() -> None:
    want = desired("a", "b", "c", "d")
    kids = {"edge-a": child(want["edge-a"]), "edge-b": child(want["edge-b"], peer_status="establishing")}
    plan = ch.Plan(waiting=["edge-d"])
    status, events = fs.compute(None, observe(desired=want, children=kids, plan=plan, done={"edge-c": "Created"}))
    assert (status["ready"], status["establishing"], status["waiting"], status["error"]) == (1, 2, 1, 0)
    lines = {line["name"]: line for line in status["peerings"]}
    assert lines["edge-c"] == {"name": "edge-c", "secret": "c", "reason": "Created"}
    assert lines["edge-d"]["reason"] == "Waiting"
    assert cond(status, "Reconciling")["status"] == "True" and cond(status, "Ready")["status"] == "False"
    assert [e.reason for e in events] == ["Created"]


def test_a_failed_child_stalls_the_set_naming_it_and_its_reason() -> None:
    want = desired("a", "b")
    dup = child(want["edge-b"], peer_status="error")
    dup["status"]["conditions"][0].update(reason="DuplicatePeering", message="LiqoPeering ns/edge-a already peers")
    status, events = fs.compute(None, observe(desired=want, children={"edge-a": child(want["edge-a"]), "edge-b": dup}))
    assert status["error"] == 1 and status["ready"] == 1
    assert {line["name"]: line["reason"] for line in status["peerings"]}["edge-b"] == "DuplicatePeering"
    stalled = cond(status, "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "PeeringsFailed"
    assert "edge-b: DuplicatePeering (LiqoPeering ns/edge-a already peers)" in stalled["message"]
    assert cond(status, "Reconciling")["status"] == "False"
    assert [e.reason for e in events] == ["PeeringsFailed"]


def test_an_overwritten_edit_is_in_the_status_and_an_event() -> None:
    want = desired("a")
    kids = {"edge-a": child(want["edge-a"])}
    status, events = fs.compute(None, observe(desired=want, children=kids, done={"edge-a": "Overwritten"}))
    (line,) = status["peerings"]
    assert line["reason"] == "Overwritten" and line["overwrittenAt"] == "2026-01-01T00:00:00Z"
    assert [e.type for e in events] == ["Warning"] and "change the LiqoPeeringSet's template" in events[0].message
    later, _ = fs.compute(status, observe(desired=want, children=kids))
    assert later["peerings"][0]["overwrittenAt"] == "2026-01-01T00:00:00Z"  # kept while the child exists


def test_removed_children_have_a_line_until_gone_and_keep_the_set_from_ready() -> None:
    want = desired("a")
    old = child(desired("b")["edge-b"], deletionTimestamp="t")
    kids = {"edge-a": child(want["edge-a"]), "edge-b": old}
    status, _ = fs.compute(None, observe(desired=want, children=kids, plan=ch.Plan(removing=["edge-b"])))
    assert status["desired"] == 1 and status["ready"] == 1
    assert {line["name"]: line["reason"] for line in status["peerings"]} == {"edge-a": "R", "edge-b": "Removing"}
    assert cond(status, "Ready")["status"] == "False"


def test_a_name_conflict_and_an_invalid_spec() -> None:
    want = desired("a")
    status, events = fs.compute(None, observe(desired=want, conflicts={"edge-a": "LiqoPeering edge-a exists"}))
    assert status["error"] == 1 and status["peerings"][0]["reason"] == "NameConflict"
    assert {e.reason for e in events} == {"NameConflict", "PeeringsFailed"}
    bad, _ = fs.compute(None, observe(error_reason="InvalidSpec", error_message="bad", error_transient=False))
    assert cond(bad, "Stalled")["reason"] == "InvalidSpec" and cond(bad, "Ready")["status"] == "False"
    flaky, _ = fs.compute(None, observe(error_reason="ConsumerUnreachable", error_message="down"))
    assert cond(flaky, "Reconciling")["status"] == "True" and cond(flaky, "Stalled")["status"] == "False"
