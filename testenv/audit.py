"""The API servers' audit logs: who wrote what, read back as small dataclasses.

Every kube-apiserver that testenv.localk8s starts logs, as JSON lines in `LocalCluster.audit_log`, each
write (create, update, patch, delete, deletecollection, subresources such as status included) at level
Metadata, the start of each watch, and every request of a ServiceAccount, reads too (but those of
kube-system's and Liqo's namespace's): the chart's ServiceAccount's rights are proven from them
(testenv.rbacproof). Nothing else (see POLICY). The log is written in blocking mode, so a write's line is
in the file before its response is complete; but after the write is stored, so a reader (a GET, a watch) may
see the change before its line is there: `writes_through` waits for the line of the write a test saw.

    events = writes(cluster.audit_log, since=start, user_agent_prefix="liqo-peering-operator")
    count_by(events, "verb")       # Counter({"patch": 12, "create": 7})
    count_by(events, "resource")   # Counter({"liqopeerings/status": 9, "tenants": 1, ...})
    watches(cluster.audit_log, user_agent_prefix="liqo-peering-operator")[0].request_uri  # with its selectors
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from testenv.wait import wait_for

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
# Namespaces whose ServiceAccounts' reads are not logged: kube-system (the controller manager's) and Liqo's.
QUIET_SA_NAMESPACES = ("kube-system", "liqo")

# Writes at Metadata (no bodies: small lines, no Secret data in a test's temp dir), the start of each watch
# (its query: which selectors it carries) and the requests of ServiceAccounts; other reads and the
# background noise of every cluster (events, leases, token and access reviews) not at all.
POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    # One line per request: a write's at ResponseComplete (which carries the response code), a watch's at
    # ResponseStarted (as it begins: it completes only when it ends, minutes later).
    "omitStages": ["RequestReceived"],
    "rules": [
        # The reads of kube-controller-manager's controllers (--use-service-account-credentials) and of Liqo's
        # own; their writes and watches are logged as everyone's (the reaction checks read Liqo's writes).
        {
            "level": "None",
            "userGroups": [f"system:serviceaccounts:{ns}" for ns in QUIET_SA_NAMESPACES],
            "verbs": ["get", "list"],
        },
        {
            "level": "None",
            "resources": [
                {"group": "coordination.k8s.io", "resources": ["leases"]},
                {"group": "authentication.k8s.io", "resources": ["tokenreviews"]},
                {
                    "group": "authorization.k8s.io",
                    "resources": [
                        "subjectaccessreviews",
                        "selfsubjectaccessreviews",
                        "localsubjectaccessreviews",
                        "selfsubjectrulesreviews",
                    ],
                },
            ],
        },
        # Every request of the other ServiceAccounts (the chart's among them), reads and Events included; a
        # watch both as it starts and as it ends (or is refused: a 403 has no start).
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {
            "level": "None",
            "resources": [
                {"group": "", "resources": ["events"]},
                {"group": "events.k8s.io", "resources": ["events"]},
            ],
        },
        # No `resources`: matches every resource and subresource (status, token, approval, ...).
        {"level": "Metadata", "verbs": list(WRITE_VERBS), "omitStages": ["ResponseStarted"]},
        {"level": "Metadata", "verbs": ["watch"], "omitStages": ["ResponseComplete"]},
        {"level": "None"},
    ],
}


# Called with a cluster's workdir and audit log before the cluster's files are removed (testenv.rbacproof).
BEFORE_REMOVAL: list[Callable[[Path, Path], None]] = []


def before_removal(workdir: Path, log: Path) -> None:
    for hook in BEFORE_REMOVAL:
        hook(workdir, log)


# A cluster's API server restarts (its workdir -> (started, ready again) each). Until /readyz is ok its RBAC
# authorizer may not have loaded the bindings yet and refuses what they grant (testenv.rbacproof).
_restarts: dict[Path, list[tuple[datetime, datetime]]] = {}


def note_restart(workdir: Path, started: datetime, ready: datetime) -> None:
    _restarts.setdefault(workdir.resolve(), []).append((started, ready))


def restarting(workdir: Path, at: datetime) -> bool:
    """Whether the API server of the cluster in `workdir` was starting again (not yet ready) at `at`."""
    return any(started <= at <= ready for started, ready in _restarts.get(workdir.resolve(), []))


def write_policy(path: Path) -> Path:
    """The audit policy file for --audit-policy-file."""
    path.write_text(yaml.safe_dump(POLICY, sort_keys=False))
    return path


@dataclass(frozen=True)
class ObjectRef:
    resource: str
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    api_group: str = ""  # "" for the core group


@dataclass(frozen=True)
class AuditEvent:
    """One completed request, from a ResponseComplete line."""

    audit_id: str
    received: datetime  # requestReceivedTimestamp
    completed: datetime  # stageTimestamp
    verb: str
    username: str
    user_agent: str
    object_ref: ObjectRef | None
    code: int | None  # responseStatus.code
    # The Pod a service-account token was bound to (the kubelet's projected tokens are): which replica wrote.
    pod_name: str | None = None
    request_uri: str = ""  # path and query, e.g. /api/v1/secrets?watch=true&fieldSelector=...

    @property
    def resource(self) -> str | None:
        """The resource, e.g. liqopeerings, or liqopeerings/status for a subresource; None for a non-resource URL."""
        ref = self.object_ref
        if ref is None:
            return None
        return f"{ref.resource}/{ref.subresource}" if ref.subresource else ref.resource

    @property
    def namespace(self) -> str | None:
        return self.object_ref.namespace if self.object_ref else None

    @property
    def name(self) -> str | None:
        return self.object_ref.name if self.object_ref else None


def _timestamp(value: str) -> datetime:
    return datetime.fromisoformat(value)  # RFC 3339 with a Z: fine for fromisoformat since 3.11


def parse_line(line: str) -> AuditEvent | None:
    """The event on one JSON line; None for other stages and blank lines."""
    if not line.strip():
        return None
    raw = json.loads(line)
    stage, verb = raw.get("stage"), raw.get("verb")
    if stage != "ResponseComplete" and not (stage == "ResponseStarted" and verb == "watch"):
        return None
    code = (raw.get("responseStatus") or {}).get("code")
    if stage == "ResponseComplete" and verb == "watch" and (code or 0) < 400:
        return None  # a ServiceAccount's watch ending: its start is the line that counts
    ref = raw.get("objectRef")
    return AuditEvent(
        audit_id=raw.get("auditID", ""),
        received=_timestamp(raw["requestReceivedTimestamp"]),
        completed=_timestamp(raw["stageTimestamp"]),
        verb=raw["verb"],
        username=(raw.get("user") or {}).get("username", ""),
        user_agent=raw.get("userAgent", ""),
        object_ref=ObjectRef(
            resource=ref.get("resource", ""),
            subresource=ref.get("subresource"),
            namespace=ref.get("namespace"),
            name=ref.get("name"),
            api_group=ref.get("apiGroup", ""),
        )
        if ref
        else None,
        code=(raw.get("responseStatus") or {}).get("code"),
        pod_name=next(iter(((raw.get("user") or {}).get("extra") or {}).get(POD_NAME_EXTRA, [])), None),
        request_uri=raw.get("requestURI", ""),
    )


def read_events(path: Path) -> list[AuditEvent]:
    """Every completed request in the log, oldest first; [] when the file does not exist yet."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    # The API server may be writing the last line right now: keep only the complete ones.
    lines = text.split("\n")[:-1]
    return [event for event in map(parse_line, lines) if event is not None]


def writes(path: Path, since: datetime | None = None, user_agent_prefix: str | None = None) -> list[AuditEvent]:
    """The writes in the log received at or after `since` (naive means UTC), from user agents that start
    with `user_agent_prefix` (the operator's: "liqo-peering-operator"). Events are left out: only
    ServiceAccounts' are logged."""
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return [
        event
        for event in read_events(path)
        if event.verb in WRITE_VERBS
        and event.resource != "events"
        and (since is None or event.received >= since)
        and (user_agent_prefix is None or event.user_agent.startswith(user_agent_prefix))
    ]


def writes_through(
    path: Path,
    since: datetime,
    seen: Callable[[AuditEvent], bool],
    user_agent_prefix: str | None = None,
    timeout: float = 30.0,
) -> list[AuditEvent]:
    """`writes(path, since, user_agent_prefix)` once one of them is the write a test has seen take effect
    (`seen`): the API server stores a write before it logs it."""

    def logged() -> list[AuditEvent] | None:
        found = writes(path, since, user_agent_prefix)
        return found if any(map(seen, found)) else None

    return wait_for(f"the write seen since {since.isoformat()} in {path}", logged, timeout=timeout)


def status_of(resource: str, name: str) -> Callable[[AuditEvent], bool]:
    """For `writes_through`: a write of the named object's status."""
    return lambda event: event.resource == f"{resource}/status" and event.name == name


def count_by(events: Iterable[AuditEvent], key: str | Callable[[AuditEvent], Hashable]) -> Counter[Hashable]:
    """How many events per value of `key`: an attribute name ("verb", "resource", "user_agent", ...) or a
    function of the event, e.g. `lambda e: (e.verb, e.resource)`."""
    if isinstance(key, str):
        return Counter(getattr(event, key) for event in events)
    return Counter(key(event) for event in events)


def watches(path: Path, since: datetime | None = None, user_agent_prefix: str | None = None) -> list[AuditEvent]:
    """The watches in the log begun at or after `since`, from user agents that start with `user_agent_prefix`;
    each one's `request_uri` holds its query (labelSelector, fieldSelector)."""
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return [
        event
        for event in read_events(path)
        if event.verb == "watch"
        and (since is None or event.received >= since)
        and (user_agent_prefix is None or event.user_agent.startswith(user_agent_prefix))
    ]
