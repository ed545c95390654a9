"""What a rendering of the chart grants its ServiceAccount, one (verb, group, resource, name) at a time, and
which request each grant allowed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from testenv.rbacproof.requests import Request

CLUSTER = "cluster"  # bound by a ClusterRoleBinding: every namespace and cluster-scoped resources
BOUND_AT_RUN_TIME = "*"  # a ClusterRole the chart does not bind: the operator binds it in tenant namespaces


@dataclass(frozen=True, order=True)
class Grant:
    role: str  # "ClusterRole {fullname}", "Role {fullname}-liqo": the same across releases
    verb: str
    api_group: str
    resource: str  # "liqopeerings/status" for a subresource
    name: str | None  # one of the rule's resourceNames
    scope: str  # CLUSTER, BOUND_AT_RUN_TIME, or the namespace of a RoleBinding
    fullname: str = field(default="", compare=False)  # the release's, in names

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """The grant whatever the release's name and the namespaces it watches."""
        name = self.name.replace(self.fullname, "{fullname}", 1) if self.name and self.fullname else self.name
        return (self.role, self.verb, self.api_group, self.resource, name or "")

    def allows(self, request: Request) -> bool:
        if not request.resource or (request.namespace is None and self.scope != CLUSTER):
            return False
        if self.scope not in (CLUSTER, BOUND_AT_RUN_TIME) and request.namespace != self.scope:
            return False
        resource = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
        if self.api_group not in ("*", request.api_group) or self.resource not in ("*", resource):
            return False
        return any(
            self.verb in ("*", verb) and (self.name is None or self.name == name)
            for verb, name in request.authorized_as()
        )


def describe(key: tuple[str, str, str, str, str]) -> str:
    role, verb, group, resource, name = key
    return f"{role}: {verb} {group or 'core'}/{resource}" + (f" {name}" if name else "")


def service_account(docs: Iterable[dict[str, Any]]) -> str | None:
    """The user name of the ServiceAccount the chart's ClusterRoleBinding binds."""
    for doc in docs:
        if doc.get("kind") == "ClusterRoleBinding":
            for subject in doc.get("subjects") or []:
                if subject.get("kind") == "ServiceAccount":
                    return f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
    return None


def _expand(role: str, rules: list[dict[str, Any]], scope: str, fullname: str) -> set[Grant]:
    return {
        Grant(role, verb, group, resource, name, scope, fullname)
        for rule in rules
        for group in rule.get("apiGroups") or [""]
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
        for name in rule.get("resourceNames") or [None]
    }


def grants_of(docs: list[dict[str, Any]], username: str) -> set[Grant]:
    """Every grant of the rendered Roles and ClusterRoles to `username` (system:serviceaccount:<ns>:<name>)."""
    _, _, sa_ns, sa_name = username.split(":", 3)
    fullname = next((d["metadata"]["name"] for d in docs if d.get("kind") == "ClusterRoleBinding"), "")

    def label(kind: str, name: str) -> str:
        return f"{kind} {name.replace(fullname, '{fullname}', 1) if fullname else name}"

    def binds(doc: dict[str, Any]) -> bool:
        return any(
            s.get("kind") == "ServiceAccount" and s.get("name") == sa_name and s.get("namespace") == sa_ns
            for s in doc.get("subjects") or []
        )

    roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs if d.get("kind") == "Role"
    }
    cluster_roles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ClusterRole"}
    found: set[Grant] = set()
    bound: set[str] = set()
    for doc in docs:
        kind = doc.get("kind")
        if kind not in ("ClusterRoleBinding", "RoleBinding") or not binds(doc):
            continue
        ref = doc["roleRef"]
        namespace = doc["metadata"].get("namespace")
        if ref["kind"] == "ClusterRole" and ref["name"] in cluster_roles:
            bound.add(ref["name"])
            rules = cluster_roles[ref["name"]].get("rules") or []
            scope = CLUSTER if kind == "ClusterRoleBinding" else namespace
            found |= _expand(label("ClusterRole", ref["name"]), rules, scope, fullname)
        elif ref["kind"] == "Role" and ("Role", namespace, ref["name"]) in roles:
            rules = roles["Role", namespace, ref["name"]].get("rules") or []
            found |= _expand(label("Role", ref["name"]), rules, namespace, fullname)
    for name, doc in cluster_roles.items():
        if name not in bound:
            found |= _expand(label("ClusterRole", name), doc.get("rules") or [], BOUND_AT_RUN_TIME, fullname)
    return found
