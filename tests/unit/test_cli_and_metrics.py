"""The console script's flags, the local connection it hands kopf, and the Prometheus metrics."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from prometheus_client import generate_latest

from liqo_peering.cli import (
    build_parser,
    connection_info,
    kopf_settings,
    local_configuration,
    peering_identity,
    start_priority,
)
from liqo_peering.clients.connect import CONNECTION_POOL_SIZE
from liqo_peering.metrics import Metrics


def test_run_flags_and_defaults() -> None:
    args = build_parser().parse_args(["run"])
    assert (args.kubeconfig, args.context, args.namespaces) == (None, None, [])
    assert not args.insecure_kubeconfig_exec and not args.insecure_kubeconfig_tls
    assert (args.log_format, args.metrics_port, args.health_port, args.peering_name) == ("json", 8080, 8081, None)
    args = build_parser().parse_args(
        [
            "run",
            "--kubeconfig",
            "k",
            "--context",
            "c",
            "--namespace",
            "a",
            "--namespace",
            "b",
            "--insecure-kubeconfig-exec",
            "--insecure-kubeconfig-tls",
            "--log-format",
            "console",
            "--resync-interval",
            "7",
        ]
    )
    assert args.namespaces == ["a", "b"] and args.insecure_kubeconfig_exec and args.insecure_kubeconfig_tls
    assert (args.kubeconfig, args.context, args.log_format, args.resync_interval) == ("k", "c", "console", 7.0)


def test_peering_lifetime_defaults_to_kopfs_and_reaches_its_settings() -> None:
    args = build_parser().parse_args(["run", "--peering-name", "lpo"])
    assert args.peering_lifetime is None and kopf_settings(args).peering.lifetime == 60  # kopf's own default
    args = build_parser().parse_args(["run", "--peering-name", "lpo", "--peering-lifetime", "30"])
    assert args.peering_lifetime == 30 and kopf_settings(args).peering.lifetime == 30


@pytest.mark.parametrize(
    ("value", "message"),
    [("10", "10 s is too short"), ("0", "0 s is too short"), ("-30", "too short"), ("15.5", "whole number")],
)
def test_a_peering_lifetime_kopf_cannot_keep_alive_is_refused(
    value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--peering-name", "lpo", "--peering-lifetime", value])
    err = capsys.readouterr().err
    assert "--peering-lifetime" in err and message in err, err


def test_peering_lifetime_needs_a_peering_name() -> None:
    args = build_parser().parse_args(["run", "--peering-lifetime", "30"])
    with pytest.raises(SystemExit, match="--peering-lifetime needs --peering-name"):
        kopf_settings(args)


def _consumer_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig file for the local (consumer) cluster, as --kubeconfig takes it."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://consumer.example:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return kubeconfig


def test_run_hands_kopf_the_peering_lifetime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kopf

    from liqo_peering.cli import run

    kubeconfig = _consumer_kubeconfig(tmp_path)
    seen: dict[str, Any] = {}
    monkeypatch.setattr(kopf, "run", lambda **kwargs: seen.update(kwargs))
    monkeypatch.setattr("liqo_peering.logs.configure", lambda *args, **kwargs: None)  # it rewires root logging
    flags = ["--kubeconfig", str(kubeconfig), "--metrics-port", "0", "--health-port", "0"]
    run(build_parser().parse_args(["run", *flags, "--peering-name", "lpo", "--peering-lifetime", "15"]))
    assert seen["peering_name"] == "lpo" and seen["settings"].peering.lifetime == 15
    assert seen["priority"] < 0  # its start time, below a workstation's `kopf run` (priority 0)
    run(build_parser().parse_args(["run", *flags, "--peering-name", "lpo", "--priority", "7"]))
    assert seen["priority"] == 7


def test_a_replica_started_earlier_outranks_a_later_one() -> None:
    # A replica joining during a rollout or a drain stands by; a microsecond apart still ranks apart (kopf
    # pauses every replica sharing the top priority).
    first, second = start_priority(1_764_230_400.000001), start_priority(1_764_230_400.000002)
    assert first > second
    assert abs(first) < 2**53  # exact in JSON readers that use doubles


def test_bad_log_format_is_refused() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--log-format", "xml"])


def test_connection_info_carries_client_certificates_and_tokens() -> None:
    cfg = k8s_client.Configuration()
    cfg.host, cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file = "https://127.0.0.1:6443", "/ca", "/crt", "/key"
    info = connection_info(cfg)
    assert (info.server, info.ca_path, info.certificate_path, info.private_key_path) == (
        "https://127.0.0.1:6443",
        "/ca",
        "/crt",
        "/key",
    )
    assert info.token is None and not info.insecure
    cfg.api_key = {"authorization": "Bearer abc"}
    info = connection_info(cfg)
    assert (info.scheme, info.token) == ("Bearer", "abc")


def _body(name: str = "p") -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "creationTimestamp": "2026-01-01T00:00:00Z"}}


def _cond(type_: str, status: str, when: str, reason: str = "Established") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "lastTransitionTime": when}


def test_metrics_count_statuses_errors_time_to_ready_and_stage_durations() -> None:
    metrics = Metrics()
    metrics.observe(_body("a"), {}, {"peerStatus": "establishing", "conditions": []})
    metrics.observe(
        _body("b"),
        {},
        {"peerStatus": "error", "conditions": [_cond("Ready", "False", "2026-01-01T00:00:01Z", "SecretNotFound")]},
    )
    ready = {
        "peerStatus": "ready",
        "readyAt": "2026-01-01T00:00:30Z",
        "startedAt": "2026-01-01T00:00:00Z",
        "conditions": [
            _cond("NetworkReady", "True", "2026-01-01T00:00:20Z"),
            _cond("AuthenticationReady", "True", "2026-01-01T00:00:10Z"),
        ],
    }
    metrics.observe(_body("a"), {"peerStatus": "establishing"}, ready)
    text = generate_latest(metrics.registry).decode()
    assert 'liqo_peering_peerings{status="ready"} 1.0' in text
    assert 'liqo_peering_peerings{status="error"} 1.0' in text
    assert 'liqo_peering_peerings{status="establishing"} 0.0' in text
    assert 'liqo_peering_reconcile_errors_total{reason="SecretNotFound"} 1.0' in text
    assert "liqo_peering_time_to_ready_seconds_sum 30.0" in text
    assert 'liqo_peering_stage_duration_seconds_sum{stage="networking"} 20.0' in text
    assert 'liqo_peering_stage_duration_seconds_sum{stage="authentication"} 10.0' in text
    metrics.forget("ns", "a")
    assert 'liqo_peering_peerings{status="ready"} 0.0' in generate_latest(metrics.registry).decode()


def test_tenant_access_binding_binds_the_cluster_role_to_the_operator_only() -> None:
    from liqo_peering.liqo.naming import owner_labels
    from liqo_peering.liqo.tenancy import TENANT_ACCESS_BINDING, tenant_access_binding

    binding = tenant_access_binding("liqo-tenant-p", "lpo-tenant-access", "ops", "lpo", owner_labels("ns", "p"))
    assert binding["metadata"]["name"] == TENANT_ACCESS_BINDING and binding["metadata"]["namespace"] == "liqo-tenant-p"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "lpo-tenant-access",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "lpo", "namespace": "ops"}]
    assert binding["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "liqo-peering-operator"


def test_tenant_access_role_needs_the_service_account() -> None:
    from liqo_peering.cli import run

    args = build_parser().parse_args(["run", "--kubeconfig", "/nonexistent", "--tenant-access-role", "r"])
    with pytest.raises(SystemExit, match="--service-account"):
        run(args)


def test_local_configuration_pools_enough_connections_for_concurrent_watches(tmp_path: Path) -> None:
    kubeconfig = _consumer_kubeconfig(tmp_path)
    cfg = local_configuration(str(kubeconfig), None)
    assert cfg.host == "https://consumer.example:6443"
    assert cfg.connection_pool_maxsize == CONNECTION_POOL_SIZE > 10
    assert cfg.keep_alive  # as to_api_client's: TCP keepalive with client-go's timings


def test_handlers_register_on_their_own_registry_not_kopfs_global_one() -> None:
    import kopf

    from liqo_peering import handlers

    default = kopf.get_default_registry()
    assert not list(default._spawning.get_all_handlers()) and not list(default._changing.get_all_handlers())
    assert [h.id for h in handlers.registry._spawning.get_all_handlers()] == ["peering_loop", "set_loop"]
    changing = {h.id for h in handlers.registry._changing.get_all_handlers()}
    assert {"unpeer", "set_deleted"} <= changing and any(i.startswith("spec_changed") for i in changing)
    assert any(i.startswith("set_spec_changed") for i in changing)


def test_peering_identity_needs_no_password_database_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    # The image runs as uid 65532, which /etc/passwd does not know: kopf's default identity (getpass) fails.
    monkeypatch.setattr("pwd.getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    monkeypatch.setenv("POD_NAME", "lpo-liqo-peering-operator-5d4f-abcde")
    assert peering_identity() == "lpo-liqo-peering-operator-5d4f-abcde"
    monkeypatch.delenv("POD_NAME")
    assert peering_identity().endswith(f"-{os.getpid()}")
