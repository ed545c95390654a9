"""testenv.rbacproof's pure parts: audit lines to requests, rules to grants, which grant allowed which request,
helm's arguments to installs, and the check over hand-written parts."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from testenv import audit
from testenv.localk8s.tools import tool_path
from testenv.rbacproof import check as rbac_check
from testenv.rbacproof import collect, installs
from testenv.rbacproof.__main__ import main
from testenv.rbacproof.grants import BOUND_AT_RUN_TIME, CLUSTER, Grant, grants_of, service_account
from testenv.rbacproof.requests import Request, parse, scan
from testenv.tests.auditlines import AGENT, SA, line


@pytest.fixture(autouse=True)
def _tier_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """collect.start replaces the part of the tier running these tests: put that one back after each test."""
    monkeypatch.setattr(collect, "_part", collect._part)


def req(verb: str, resource: str, *, group: str = "", sub: str | None = None, ns: str | None = None,
        name: str | None = None, code: int = 200) -> Request:  # fmt: skip
    return Request(verb, group, resource, sub, ns, name, code)


def test_an_audit_line_becomes_the_request_rbac_authorized() -> None:
    seen = parse(line("patch", "liqopeerings", apiGroup="peering.liqo-operator.io", subresource="status",
                      namespace="a", name="p"))  # fmt: skip
    assert seen is not None and seen.username == SA and seen.user_agent == AGENT
    assert seen.request == req(
        "patch", "liqopeerings", group="peering.liqo-operator.io", sub="status", ns="a", name="p"
    )
    assert seen.received == datetime(2026, 3, 1, 10, 0, 0, 1, tzinfo=UTC)
    # A watch is logged as it starts (its end may never be); other requests when complete.
    assert parse(line("watch", "secrets", stage="ResponseStarted")) is not None
    assert parse(line("get", "secrets", stage="ResponseStarted")) is None
    assert parse(line("get", "secrets", stage="RequestReceived")) is None
    # A non-resource URL: its path as the name.
    bare = parse(line("get", None, code=403, uri="/apis/x?watch=true"))
    assert bare is not None and bare.request.resource == "" and bare.request.name == "/apis/x"
    assert bare.request.forbidden and bare.request.describe() == "get /apis/x"


def test_scan_reads_one_users_complete_lines_from_an_offset(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    first = [line("list", "secrets"), line("get", "nodes", user="system:serviceaccount:other:x")]
    log.write_text("\n".join(first) + "\n" + line("get", "pods")[:30])  # the last line still being written
    seen, offset = scan(log, {SA})
    assert [s.request.resource for s in seen] == ["secrets"]
    assert offset == len(("\n".join(first) + "\n").encode())
    log.write_text("\n".join(first) + "\n" + line("get", "pods") + "\n")
    later, _ = scan(log, {SA}, offset)
    assert [s.request.resource for s in later] == ["pods"]
    assert scan(tmp_path / "missing.log", {SA}) == ([], 0)


def test_authorized_as_rbac_sees_names() -> None:
    # A create is authorized before its object has a name; a server-side apply that created (201) is a create
    # of that name too; a refused request was authorized as nothing.
    assert req("create", "secrets", ns="a", name="s").authorized_as() == [("create", None)]
    assert req("patch", "rolebindings", ns="t", name="rb", code=201).authorized_as() == [
        ("patch", "rb"),
        ("create", "rb"),
    ]
    assert req("get", "secrets", ns="a", name="s", code=404).authorized_as() == [("get", "s")]
    assert req("get", "secrets", ns="a", name="s", code=403).authorized_as() == []


def test_a_grant_allows_its_verb_group_resource_name_and_scope() -> None:
    nonce = Grant("ClusterRole {fullname}", "get", "", "secrets", "liqo-nonce", CLUSTER)
    assert nonce.allows(req("get", "secrets", ns="t", name="liqo-nonce"))
    assert not nonce.allows(req("get", "secrets", ns="t", name="other"))
    assert not nonce.allows(req("list", "secrets", ns="t"))  # list without a metadata.name field selector
    create_named = Grant("ClusterRole {fullname}", "create", "rbac.authorization.k8s.io", "rolebindings", "rb", CLUSTER)
    assert not create_named.allows(req("create", "rolebindings", group="rbac.authorization.k8s.io", ns="t", name="rb"))
    assert create_named.allows(
        req("patch", "rolebindings", group="rbac.authorization.k8s.io", ns="t", name="rb", code=201)
    )
    status = Grant("Role {fullname}", "patch", "peering.liqo-operator.io", "liqopeerings/status", None, "watched")
    peering_status = req(
        "patch", "liqopeerings", group="peering.liqo-operator.io", sub="status", ns="watched", name="p"
    )
    assert status.allows(peering_status)
    assert not status.allows(req("patch", "liqopeerings", group="peering.liqo-operator.io", ns="watched", name="p"))
    assert not status.allows(
        req("patch", "liqopeerings", group="peering.liqo-operator.io", sub="status", ns="elsewhere", name="p")
    )
    assert not status.allows(
        req("patch", "liqopeerings", group="peering.liqo-operator.io", sub="status", ns="watched", code=403)
    )
    # A ClusterRole the operator binds in tenant namespaces: namespaced requests only.
    tenant = Grant("ClusterRole {fullname}-tenant-access", "list", "", "secrets", None, BOUND_AT_RUN_TIME)
    assert tenant.allows(req("list", "secrets", ns="liqo-tenant-x"))
    assert not tenant.allows(req("list", "secrets"))
    namespaces = Grant("ClusterRole {fullname}", "get", "", "namespaces", None, CLUSTER)
    assert namespaces.allows(req("get", "namespaces", name="liqo-tenant-x"))
    assert not namespaces.allows(req("get", "nodes", name="n"))


RENDERED: list[dict[str, Any]] = [
    {"kind": "ServiceAccount", "metadata": {"name": "lpo-liqo-peering-operator", "namespace": "lpo-system"}},
    {
        "kind": "ClusterRole",
        "metadata": {"name": "lpo-liqo-peering-operator"},
        "rules": [
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "patch"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a", "b"], "verbs": ["get"]},
        ],
    },
    {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "lpo-liqo-peering-operator"},
        "roleRef": {"kind": "ClusterRole", "name": "lpo-liqo-peering-operator"},
        "subjects": [{"kind": "ServiceAccount", "name": "lpo-liqo-peering-operator", "namespace": "lpo-system"}],
    },
    {
        "kind": "ClusterRole",
        "metadata": {"name": "lpo-liqo-peering-operator-tenant-access"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
    },
    {
        "kind": "Role",
        "metadata": {"name": "lpo-liqo-peering-operator-liqo", "namespace": "liqo"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    },
    {
        "kind": "RoleBinding",
        "metadata": {"name": "lpo-liqo-peering-operator-liqo", "namespace": "liqo"},
        "roleRef": {"kind": "Role", "name": "lpo-liqo-peering-operator-liqo"},
        "subjects": [{"kind": "ServiceAccount", "name": "lpo-liqo-peering-operator", "namespace": "lpo-system"}],
    },
    {
        "kind": "RoleBinding",  # another subject's: not the operator's rights
        "metadata": {"name": "someone", "namespace": "liqo"},
        "roleRef": {"kind": "Role", "name": "lpo-liqo-peering-operator-liqo"},
        "subjects": [{"kind": "ServiceAccount", "name": "someone", "namespace": "liqo"}],
    },
]


def test_grants_of_a_rendering() -> None:
    assert service_account(RENDERED) == SA
    assert grants_of(RENDERED, SA) == {
        Grant("ClusterRole {fullname}", "get", "", "namespaces", None, CLUSTER),
        Grant("ClusterRole {fullname}", "patch", "", "namespaces", None, CLUSTER),
        Grant("ClusterRole {fullname}", "get", "", "secrets", "a", CLUSTER),
        Grant("ClusterRole {fullname}", "get", "", "secrets", "b", CLUSTER),
        Grant("ClusterRole {fullname}-tenant-access", "list", "", "pods", None, BOUND_AT_RUN_TIME),
        Grant("Role {fullname}-liqo", "get", "", "configmaps", None, "liqo"),
    }


def test_helm_arguments_make_installs(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("ha:\n  enabled: true\n")
    kubeconfig = tmp_path / "admin.kubeconfig"
    args = ("install", "lpo", str(installs.CHART), "--namespace", "ops", "--set", "a=1", "-f", str(values), "--wait")
    install = installs.from_helm_args(args, kubeconfig)
    assert install is not None and (install.release, install.namespace) == ("lpo", "ops")
    assert install.values == (("--set", "a=1"), ("--values", "ha:\n  enabled: true\n"))
    assert install.cluster == str(kubeconfig.resolve())
    oci = installs.from_helm_args(("upgrade", "lpo", "oci://r:5000/charts/liqo-peering-operator", "-n=x"), kubeconfig)
    assert oci is not None and oci.namespace == "x" and oci.values == ()
    # Not the chart, not an install, or no cluster.
    assert installs.from_helm_args(("install", "liqo", "/tmp/liqo/deployments/liqo"), kubeconfig) is None
    assert installs.from_helm_args(("template", "lpo", str(installs.CHART)), kubeconfig) is None
    assert installs.from_helm_args(("install", "lpo", str(installs.CHART)), None) is None


def test_an_upgrade_reusing_values_keeps_the_earlier_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(installs, "_noted", [])
    kubeconfig = tmp_path / "admin.kubeconfig"
    installs.note_helm(("install", "lpo", str(installs.CHART), "-n", "ops", "--set", "a=1"), kubeconfig)
    installs.note_helm(
        ("upgrade", "lpo", str(installs.CHART), "-n", "ops", "--reuse-values", "--set", "b=2"), kubeconfig
    )
    installs.note_helm(("upgrade", "lpo", str(installs.CHART), "-n", "ops", "--set", "c=3"), kubeconfig)
    assert [i.values for i in installs.noted_on(tmp_path)] == [
        (("--set", "a=1"),),
        (("--set", "a=1"), ("--set", "b=2")),
        (("--set", "c=3"),),
    ]
    assert installs.noted_on(tmp_path / "elsewhere") == []


def part(path: Path, requests: list[Request], errors: list[str] = ()) -> Path:  # type: ignore[assignment]
    install = {"release": "lpo", "namespace": "lpo-system", "values": [], "cluster": "consumer", "serviceAccount": SA}
    installed = [{**install, "requests": [list(vars(r).values()) for r in requests]}]
    path.write_text(json.dumps({"installs": installed, "errors": list(errors)}))
    return path


def test_the_check_names_unused_grants_and_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(installs, "render", lambda *_: RENDERED)
    used = [
        req("get", "namespaces", name="t"),
        req("patch", "namespaces", name="t"),
        req("get", "secrets", ns="x", name="a"),
        req("get", "secrets", ns="y", name="b"),
        req("list", "pods", ns="liqo-tenant-x"),
        req("get", "configmaps", ns="liqo", name="c"),
    ]
    clean = rbac_check.check([part(tmp_path / "nodes.json", used)])
    assert not clean.failed and not clean.unused and len(clean.ran) == 1
    report = rbac_check.check([part(tmp_path / "nodes.json", [*used[1:], req("get", "nodes", name="n", code=403)])])
    assert set(report.unused) == {("ClusterRole {fullname}", "get", "", "namespaces", "")}
    assert report.forbidden == {f"{SA}: get core/nodes n (403)"}
    assert any("UNUSED: ClusterRole {fullname}: get core/namespaces" in out for out in report.lines())
    # An install whose operator never ran (no kubelet) proves nothing and is left out.
    idle = rbac_check.check([part(tmp_path / "main.json", [])])
    assert not idle.failed and idle.idle and not idle.ran


def test_the_exceptions_are_few_and_say_why() -> None:
    assert len(set(rbac_check.EXCEPTIONS.values())) <= 4  # a few reasons (one for every cached read)
    assert all(len(reason) > 40 for reason in rbac_check.EXCEPTIONS.values())
    assert set(rbac_check.EVIDENCE) <= set(rbac_check.EXCEPTIONS)
    assert all(len(reason) > 40 for reason in rbac_check.NAMED_EXCEPTIONS.values())


BINDING: list[dict[str, Any]] = [
    {
        "kind": "ClusterRole",
        "metadata": {"name": "lpo-liqo-peering-operator"},
        "rules": [
            {
                "apiGroups": ["rbac.authorization.k8s.io"],
                "resources": ["clusterroles"],
                "resourceNames": ["lpo-liqo-peering-operator-tenant-access"],
                "verbs": ["bind"],
            },
            {
                "apiGroups": ["rbac.authorization.k8s.io"],
                "resources": ["rolebindings"],
                "resourceNames": ["liqo-peering-operator-tenant-access"],
                "verbs": ["create"],
            },
        ],
    },
    *RENDERED[2:3],
]


NONCES: list[dict[str, Any]] = [
    {
        "kind": "ClusterRole",
        "metadata": {"name": "lpo-liqo-peering-operator"},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": ["liqo-signed-nonce", "liqo-nonce"],
                "verbs": ["get", "watch"],
            },
        ],
    },
    *RENDERED[2:3],
]


def test_a_named_read_its_informer_serves_is_excepted_only_once_that_name_was_watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(installs, "render", lambda *_: NONCES)
    watched = [req("watch", "secrets", name=n) for n in ("liqo-signed-nonce", "liqo-nonce")]
    report = rbac_check.check(
        [part(tmp_path / "main.json", [*watched, req("get", "secrets", ns="t", name="liqo-signed-nonce")])]
    )
    assert not report.unused and [k[4] for k in report.excepted] == ["liqo-nonce"]
    # The nonce never watched: its cached read proves nothing; the signed nonce's, watched, holds.
    report = rbac_check.check([part(tmp_path / "main.json", watched[:1])])
    assert {(k[1], k[4]) for k in report.unused} == {("get", "liqo-nonce"), ("watch", "liqo-nonce")}
    assert [k[4] for k in report.excepted] == ["liqo-signed-nonce"]


def test_bind_is_excepted_only_once_a_rolebinding_was_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(installs, "render", lambda *_: BINDING)
    group = "rbac.authorization.k8s.io"
    created = req("patch", "rolebindings", group=group, ns="t", name="liqo-peering-operator-tenant-access", code=201)
    report = rbac_check.check([part(tmp_path / "main.json", [created])])
    assert not report.unused and [k[1] for k in report.excepted] == ["bind"]
    # The same RoleBinding patched, never created: nothing made the API server check `bind`.
    patched = req("patch", "rolebindings", group=group, ns="t", name="liqo-peering-operator-tenant-access")
    report = rbac_check.check([part(tmp_path / "main.json", [patched])])
    assert {k[1] for k in report.unused} == {"bind", "create"} and not report.excepted


def test_the_cli_judges_unused_grants_only_over_every_tier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(installs, "render", lambda *_: RENDERED)
    part(tmp_path / "nodes.json", [req("patch", "namespaces", name="t")])
    assert main(["check", "--parts", str(tmp_path)]) == 0  # a partial run: only refusals and errors fail it
    assert "unused grants not judged" in capsys.readouterr().out
    assert main(["check", "--parts", str(tmp_path), "--tiers", "nodes"]) == 1
    part(tmp_path / "nodes.json", [req("get", "nodes", name="n", code=403)])
    assert main(["check", "--parts", str(tmp_path)]) == 1


def test_a_tier_saves_its_part_as_clusters_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(installs, "_noted", [])
    monkeypatch.setattr(installs, "render", lambda *_: RENDERED)
    workdir = tmp_path / "consumer"
    workdir.mkdir()
    installs.note(
        installs.Install(str(workdir / "admin.kubeconfig"), "lpo", "lpo-system", (), datetime(2026, 3, 1, tzinfo=UTC))
    )
    log = workdir / "audit.log"
    lines = [
        line("get", "namespaces", name="t"),
        line("list", "secrets", code=200),  # no name, no namespace: ordered beside those with one
        line("get", "secrets", namespace="n", name="s"),
        line("get", "secrets", namespace="o", name="s", agent="OpenAPI-Generator/31.0.0/python", code=403),  # a test's
        line("get", "nodes", user="system:serviceaccount:other:x"),
    ]
    log.write_text("\n".join(lines) + "\n")
    saved = collect.start("nodes", tmp_path / "parts")
    collect.before_removal(workdir, log)
    found, errors = collect.load(saved.path)
    assert errors == [] and [i["serviceAccount"] for i in found] == [SA]
    assert collect.requests_of(found[0]) == [
        req("get", "namespaces", name="t"),
        req("get", "secrets", ns="n", name="s"),
        req("list", "secrets"),
    ]


def test_the_charts_own_rendering(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chart rendered by helm: the ClusterRole bound cluster-wide, with watchNamespaces a Role per watched
    namespace and the tenant-access ClusterRole left for the operator to bind."""
    tool_path("helm")  # a tool not built is a failure: ToolMissingError says how to build it
    default = installs.render("lpo", "lpo-system", ())
    assert service_account(default) == SA
    scopes = {(g.role, g.scope) for g in grants_of(default, SA)}
    assert scopes == {("ClusterRole {fullname}", CLUSTER), ("Role {fullname}-liqo", "liqo")}
    watching = installs.render("lpo", "lpo-system", (("--set", "watchNamespaces={a,b}"),))
    grants = grants_of(watching, SA)
    assert {(g.role, g.scope) for g in grants} == {
        ("ClusterRole {fullname}", CLUSTER),
        ("ClusterRole {fullname}-tenant-access", BOUND_AT_RUN_TIME),
        ("Role {fullname}", "a"),
        ("Role {fullname}", "b"),
        ("Role {fullname}-liqo", "liqo"),
    }
    bind = {g for g in grants if g.verb == "bind"}
    assert bind == {
        Grant(
            "ClusterRole {fullname}",
            "bind",
            "rbac.authorization.k8s.io",
            "clusterroles",
            "lpo-liqo-peering-operator-tenant-access",
            CLUSTER,
        )
    }
    # The same grant whatever the release is called.
    assert {g.key for g in bind} == {
        ("ClusterRole {fullname}", "bind", "rbac.authorization.k8s.io", "clusterroles", "{fullname}-tenant-access")
    }


def _noting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A consumer's work directory, with nothing noted yet and every install rendered as RENDERED."""
    monkeypatch.setattr(installs, "_noted", [])
    monkeypatch.setattr(installs, "_uninstalled", [])
    monkeypatch.setattr(installs, "render", lambda *_: RENDERED)
    workdir = tmp_path / "consumer"
    workdir.mkdir()
    return workdir


Steps = tuple[Callable[[], None], Callable[[], None]]  # install, uninstall


def _helm(kubeconfig: Path) -> Steps:
    install = ("install", "lpo", str(installs.CHART), "--namespace", "lpo-system")
    return (
        lambda: installs.note_helm(install, kubeconfig),
        lambda: installs.note_helm(("uninstall", "lpo", "--namespace", "lpo-system", "--wait"), kubeconfig),
    )


def _helm_release(kubeconfig: Path) -> Steps:
    """A HelmRelease applied, then deleted: helm-controller installs and uninstalls the release."""
    return (
        lambda: installs.note_values(kubeconfig, "lpo", "lpo-system", {"logLevel": "debug"}),
        lambda: installs.note_uninstall(kubeconfig, "lpo", "lpo-system"),
    )


@pytest.mark.parametrize("how", [_helm, _helm_release], ids=["helm", "helmrelease"])
def test_requests_after_an_uninstall_are_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: Callable[[Path], Steps]
) -> None:
    """An uninstall deletes the RBAC while the Pod still stops: what it asks then is refused, not the chart's."""
    workdir = _noting(tmp_path, monkeypatch)
    install, uninstall = how(workdir / "admin.kubeconfig")
    install()
    before = line("get", "namespaces", name="t", at=datetime.now(UTC).isoformat())
    uninstall()
    after = line("list", "nodes", code=403, at=datetime.now(UTC).isoformat())
    log = workdir / "audit.log"
    log.write_text(f"{before}\n{after}\n")
    saved = collect.start("nodes", tmp_path / "parts")
    collect.before_removal(workdir, log)
    found, _ = collect.load(saved.path)
    assert collect.requests_of(found[0]) == [req("get", "namespaces", name="t")]
    assert found[0]["afterUninstall"] == 1


def test_a_stopping_pods_requests_stay_with_the_install_it_ran_under(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Uninstalled, then installed again at once: the old Pod, still stopping, is refused under the new install's
    name. Its requests are its own install's (left out after that one's uninstall), never the new one's."""
    workdir = _noting(tmp_path, monkeypatch)
    kubeconfig = workdir / "admin.kubeconfig"
    helm_install = ("install", "lpo", str(installs.CHART), "--namespace", "lpo-system")
    installs.note_helm(helm_install, kubeconfig)
    lines = [line("get", "namespaces", name="t", pod="old", at=datetime.now(UTC).isoformat())]
    installs.note_helm(("uninstall", "lpo", "--namespace", "lpo-system", "--wait"), kubeconfig)
    installs.note_helm(helm_install, kubeconfig)
    lines += [
        line("patch", "secrets", name="s", code=403, pod="old", at=datetime.now(UTC).isoformat()),
        line("list", "nodes", pod="new", at=datetime.now(UTC).isoformat()),
    ]
    log = workdir / "audit.log"
    log.write_text("\n".join(lines) + "\n")
    saved = collect.start("nodes", tmp_path / "parts")
    collect.before_removal(workdir, log)
    found, _ = collect.load(saved.path)
    assert [collect.requests_of(i) for i in found] == [[req("get", "namespaces", name="t")], [req("list", "nodes")]]
    assert [i["afterUninstall"] for i in found] == [1, 0]


def test_refusals_not_by_rbac_are_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 403 RBAC allowed (admission refused it: an Event in a namespace being deleted), or one from an API server
    starting again (its authorizer without the bindings yet), says nothing about the chart. A refusal by a
    ValidatingAdmissionPolicy, or by RBAC once the API server is ready, does."""
    workdir = _noting(tmp_path, monkeypatch)
    monkeypatch.setattr(audit, "_restarts", {})
    installs.note_helm(("install", "lpo", str(installs.CHART), "--namespace", "lpo-system"), workdir / "kubeconfig")
    allowed = {"authorization.k8s.io/decision": "allow"}
    by_policy = {**allowed, "validation.policy.admission.k8s.io/validation_failure": "[]"}
    forbid = {"authorization.k8s.io/decision": "forbid"}
    lines = [
        line("create", "events", namespace="gone", code=403, annotations=allowed, at=datetime.now(UTC).isoformat()),
        line("patch", "namespaces", name="n", code=403, annotations=by_policy, at=datetime.now(UTC).isoformat()),
    ]
    started = datetime.now(UTC)
    lines.append(line("list", "nodes", code=403, annotations=forbid, at=datetime.now(UTC).isoformat()))
    audit.note_restart(workdir, started, datetime.now(UTC))
    lines.append(line("list", "pods", code=403, annotations=forbid, at=datetime.now(UTC).isoformat()))
    log = workdir / "audit.log"
    log.write_text("\n".join(lines) + "\n")
    saved = collect.start("main", tmp_path / "parts")
    collect.before_removal(workdir, log)
    found, _ = collect.load(saved.path)
    assert collect.requests_of(found[0]) == [
        req("list", "pods", code=403),
        req("patch", "namespaces", name="n", code=403),
    ]
    assert found[0]["refusedNotByRbac"] == 2
