"""The chart's rights as an attacker holding the operator's ServiceAccount would use them: no rule that leads
to more rights (tokens, Pods, bindings, webhooks, CSR approval, impersonation), no aggregation into the
built-in roles, and the Secret policy that bounds what RBAC cannot name. Each rendered by `helm template`;
tests/e2e/test_escalation.py tries the same paths on a real API server."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from unit.chart import FULLNAME, NAMESPACE, find, helm, render, template_args
from unit.test_chart_options import CLUSTER_PROFILES

CONFIGURATIONS = (
    (),
    ("credentialsMinting=true",),
    ("watchNamespaces={team-a,team-b}", "credentialsMinting=true", "clusterAPI.enabled=true"),
    ("watchNamespaces={team-a}", "ha.enabled=true", "replicaCount=2"),
    ("ha.enabled=true", "replicaCount=2", "kubeconfigSecretProtection=false"),
    ("watchNamespaces={team-a}", *CLUSTER_PROFILES),
)
SECRETS_POLICY = f"{FULLNAME}-secrets"
TENANT_ACCESS_ROLE = f"{FULLNAME}-tenant-access"
# Kinds whose writes (or any access) turn into more rights than the operator's.
NEVER = {
    "pods/exec",
    "pods/attach",
    "pods/portforward",
    "nodes/proxy",
    "serviceaccounts",
    "serviceaccounts/token",
    "clusterrolebindings",
    "clusterroles",
    "roles",
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "certificatesigningrequests",
    "certificatesigningrequests/approval",
    "certificatesigningrequests/status",
    "signers",
    "users",
    "groups",
    "userextras",
    "uids",
    "customresourcedefinitions/status",
    "persistentvolumes",
}
WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every rule of the ClusterRoles and Roles the chart binds to the operator's ServiceAccount."""
    return [r for kind in ("ClusterRole", "Role") for d in find(docs, kind) for r in d.get("rules") or []]


@pytest.mark.parametrize("sets", CONFIGURATIONS, ids=lambda s: ",".join(s) or "default")
def test_no_role_is_aggregated_into_a_built_in_one(sets: tuple[str, ...]) -> None:
    # A LiqoPeering adds a node and a tunnel to the cluster: an administrator's right, never admin/edit/view's.
    docs = render(*sets)
    for doc in find(docs, "ClusterRole") + find(docs, "Role"):
        labels = doc["metadata"].get("labels") or {}
        assert not [k for k in labels if k.startswith("rbac.authorization.k8s.io/aggregate-to-")], doc["metadata"]
        assert "aggregationRule" not in doc, doc["metadata"]["name"]


@pytest.mark.parametrize("sets", CONFIGURATIONS, ids=lambda s: ",".join(s) or "default")
def test_no_rule_leads_to_more_rights(sets: tuple[str, ...]) -> None:
    for rule in rules(render(*sets)):
        verbs, resources = set(rule["verbs"]), set(rule["resources"])
        assert "*" not in verbs and "*" not in resources and "*" not in rule["apiGroups"], rule
        assert not verbs & {"impersonate", "escalate", "approve", "sign"}, rule
        assert not (resources & NEVER and (verbs & WRITES or "clusterroles" not in resources)), rule
        if "pods" in resources:
            assert verbs <= {"list", "watch"}, rule  # the virtual kubelet's Pods: never created
        if "bind" in verbs:  # only the one tenant-access role, with watchNamespaces
            assert resources == {"clusterroles"} and rule["resourceNames"] == [TENANT_ACCESS_ROLE], rule
        if "rolebindings" in resources:  # only the tenant-access binding, by name
            assert rule["resourceNames"] == ["liqo-peering-operator-tenant-access"], rule
        if "clusterroles" in resources:
            assert verbs == {"bind"}, rule


def test_liqo_namespace_secrets_are_read_by_name_only() -> None:
    (role,) = find(render(), "Role", f"{FULLNAME}-liqo")
    (secrets,) = [r for r in role["rules"] if r["resources"] == ["secrets"]]
    assert secrets == {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": ["authentication-keys"],
        "verbs": ["get"],
    }


def secret_policy(*sets: str) -> dict[str, Any]:
    docs = render(*sets)
    (policy,) = find(docs, "ValidatingAdmissionPolicy", SECRETS_POLICY)
    (binding,) = find(docs, "ValidatingAdmissionPolicyBinding", SECRETS_POLICY)
    assert binding["spec"] == {"policyName": SECRETS_POLICY, "validationActions": ["Deny"]}
    return policy


@pytest.mark.parametrize("sets", CONFIGURATIONS, ids=lambda s: ",".join(s) or "default")
def test_secret_writes_are_bounded_by_a_policy_whenever_rbac_grants_them(sets: tuple[str, ...]) -> None:
    # RBAC grants Secret create cluster-wide (tenant namespaces appear at run time): the policy is always there.
    assert any("create" in r["verbs"] and "secrets" in r["resources"] for r in rules(render(*sets)))
    spec = secret_policy(*sets)["spec"]
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["secrets"] and set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    (condition,) = spec["matchConditions"]
    assert condition["expression"] == f'request.userInfo.username == "system:serviceaccount:{NAMESPACE}:{FULLNAME}"'
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    watched = [s.split("=", 1)[1].strip("{}").split(",") for s in sets if s.startswith("watchNamespaces=")]
    if watched:
        assert yaml.safe_load(variables["watched"].split(" in ", 1)[1]) == watched[0]
    else:
        assert variables["watched"] == "true"
    minting = "credentialsMinting=true" in sets
    for name in ("mintedBefore", "mintedAfter", "ownedByPeering", "bootstrap"):
        assert (variables[name] != "false") is minting, name
    first = spec["validations"][0]
    assert first["expression"] == "request.operation != 'CREATE' || object.type == 'Opaque'"


def test_secret_policy_can_be_left_out_and_needs_kubernetes_1_30() -> None:
    assert not find(render("rbac.secretPolicy=false"), "ValidatingAdmissionPolicy", SECRETS_POLICY)
    assert not find(render("rbac.create=false"), "ValidatingAdmissionPolicy", SECRETS_POLICY)
    for version, rendered in (("1.29.15", False), ("1.30.0", True)):
        out = helm(*template_args(), "--kube-version", version)
        docs = [d for d in yaml.safe_load_all(out) if d]
        assert bool(find(docs, "ValidatingAdmissionPolicy", SECRETS_POLICY)) is rendered, version
