"""testenv.audit on hand-written audit lines: the stage filter, the fields, writes() and count_by()."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from testenv.audit import (
    POLICY,
    WRITE_VERBS,
    AuditEvent,
    ObjectRef,
    count_by,
    parse_line,
    read_events,
    status_of,
    watches,
    write_policy,
    writes,
    writes_through,
)
from testenv.tests.auditlines import AGENT, SA, line

OPERATOR = AGENT


def test_parse_line_reads_the_fields() -> None:
    event = parse_line(
        line(
            "patch",
            "liqopeerings",
            subresource="status",
            namespace="team-a",
            name="provider",
            apiGroup="peering.liqo-operator.io",
        )
    )
    assert event == AuditEvent(
        audit_id="id-patch-liqopeerings-2026-03-01T10:00:00.000001Z",
        received=datetime(2026, 3, 1, 10, 0, 0, 1, tzinfo=UTC),
        completed=datetime(2026, 3, 1, 10, 0, 0, 250000, tzinfo=UTC),
        verb="patch",
        username=SA,
        user_agent=OPERATOR,
        object_ref=ObjectRef("liqopeerings", "status", "team-a", "provider", "peering.liqo-operator.io"),
        code=200,
        request_uri="/whatever",
    )
    assert event.resource == "liqopeerings/status"
    assert (event.namespace, event.name) == ("team-a", "provider")


def test_parse_line_core_group_and_non_resource() -> None:
    core = parse_line(line("create", "namespaces", name="x"))
    assert core is not None and core.object_ref is not None
    assert core.object_ref.api_group == "" and core.resource == "namespaces" and core.namespace is None
    bare = parse_line(line("create", None))
    assert bare is not None and bare.resource is None and bare.name is None


def test_only_response_complete_counts() -> None:
    assert parse_line(line("create", "secrets", stage="RequestReceived")) is None
    assert parse_line(line("create", "secrets", stage="Panic")) is None
    assert parse_line(line("create", "secrets", stage="ResponseStarted")) is None
    assert parse_line("   ") is None


def test_a_watch_counts_as_it_starts(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(
        "\n".join(
            [
                line("watch", "secrets", stage="ResponseStarted", namespace="a"),
                line("watch", "deployments", stage="ResponseStarted", agent="kube-controller-manager/v1.35.0"),
                line("create", "secrets", namespace="a", name="s"),
            ]
        )
        + "\n"
    )
    (ours,) = watches(log, user_agent_prefix="liqo-peering-operator")
    assert (ours.verb, ours.resource, ours.namespace, ours.request_uri) == ("watch", "secrets", "a", "/whatever")
    assert len(watches(log)) == 2 and len(writes(log)) == 1


def test_writes_filters_verbs_time_and_agent(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(
        "\n".join(
            [
                line("create", "namespaces", at="2026-03-01T09:59:59.000000Z"),  # before `since`
                line("create", "tenants", namespace="liqo-tenant-x", name="t"),
                line("get", "tenants", namespace="liqo-tenant-x", name="t"),  # a read: not a write
                line("patch", "liqopeerings", subresource="status", namespace="a", name="p"),
                line("patch", "liqopeerings", subresource="status", namespace="a", name="p"),
                line("delete", "secrets", namespace="a", name="s", agent="kubectl/v1.35.0"),
                line("update", "foreignclusters", agent="liqo-controller-manager/v1.2.0"),
            ]
        )
        + "\n"
        + '{"stage": "ResponseComplete", "verb": "crea'  # a line the server is still writing
    )
    since = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    ops = writes(log, since=since, user_agent_prefix="liqo-peering-operator")
    assert [(e.verb, e.resource) for e in ops] == [
        ("create", "tenants"),
        ("patch", "liqopeerings/status"),
        ("patch", "liqopeerings/status"),
    ]
    assert count_by(ops, "verb") == {"create": 1, "patch": 2}
    assert count_by(ops, lambda e: (e.verb, e.resource)) == {
        ("create", "tenants"): 1,
        ("patch", "liqopeerings/status"): 2,
    }
    everyone = writes(log)
    assert len(everyone) == 6 and len(read_events(log)) == 7
    assert count_by(everyone, "user_agent")["kubectl/v1.35.0"] == 1
    # A naive `since` is UTC.
    assert writes(log, since=since.replace(tzinfo=None)) == writes(log, since=since)


def test_writes_through_waits_for_the_line_of_the_write_seen(tmp_path: Path) -> None:
    # The API server stores a write, then logs it: a reader can see the new status before the line exists.
    log = tmp_path / "audit.log"
    log.write_text(line("patch", "liqopeerings", namespace="a", name="p") + "\n")
    since = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    status = line("patch", "liqopeerings", subresource="status", namespace="a", name="p")
    late = threading.Timer(0.5, lambda: log.write_text(log.read_text() + status + "\n"))
    late.start()
    found = writes_through(log, since, status_of("liqopeerings", "p"), "liqo-peering-operator", timeout=10)
    late.join()
    assert [e.resource for e in found] == ["liqopeerings", "liqopeerings/status"]
    with pytest.raises(AssertionError, match="the write seen since"):
        writes_through(log, since, status_of("liqopeerings", "other"), timeout=0.5)


def test_missing_log_is_empty(tmp_path: Path) -> None:
    assert writes(tmp_path / "nope.log") == []


def test_policy_logs_writes_watches_and_service_accounts(tmp_path: Path) -> None:
    policy = yaml.safe_load(write_policy(tmp_path / "policy.yaml").read_text())
    assert policy == POLICY
    rules = policy["rules"]
    # The reads of the controller manager's and Liqo's ServiceAccounts first (their writes are logged: the
    # reaction checks read Liqo's), then the noise of every cluster.
    assert rules[0] == {
        "level": "None",
        "userGroups": ["system:serviceaccounts:kube-system", "system:serviceaccounts:liqo"],
        "verbs": ["get", "list"],
    }
    assert {"group": "coordination.k8s.io", "resources": ["leases"]} in rules[1]["resources"]
    # Every request of the other ServiceAccounts, watches' starts included (no omitStages of its own).
    assert rules[2] == {"level": "Metadata", "userGroups": ["system:serviceaccounts"]}
    assert policy["omitStages"] == ["RequestReceived"]
    # Others' Events dropped; writes on every resource and subresource (no `resources` key), one line each.
    assert rules[3]["level"] == "None" and {"group": "", "resources": ["events"]} in rules[3]["resources"]
    assert rules[4] == {"level": "Metadata", "verbs": list(WRITE_VERBS), "omitStages": ["ResponseStarted"]}
    # And each watch as it starts (a watch completes only when it ends).
    assert rules[5] == {"level": "Metadata", "verbs": ["watch"], "omitStages": ["ResponseComplete"]}
    assert rules[-1] == {"level": "None"}


def test_a_service_accounts_watch_counts_once_and_a_refused_one_too() -> None:
    """A ServiceAccount's watch is logged as it starts and as it ends: the end is not a second watch; a
    refused watch never starts, and its end is the line."""
    assert parse_line(line("watch", "secrets", stage="ResponseComplete")) is None
    refused = parse_line(line("watch", "secrets", stage="ResponseComplete", code=403))
    assert refused is not None and refused.code == 403
