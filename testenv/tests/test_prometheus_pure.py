"""testenv.prometheus's ServiceMonitor translation, its endpoints discovery's labels, and testenv.dashboard's
query rewriting, without a cluster; `promtool check config` on the configuration made from the chart's own
ServiceMonitor and PrometheusRule (skipped until hack/build-tools.sh has built helm and promtool, a failure
in CI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from testenv.dashboard import Series, legend, promql, rate_interval, series, short_names
from testenv.helm import CHART, run_helm
from testenv.prometheus import config, endpoints_targets, rule_file, scrape_configs
from unit.chart import promtool, tool

MONITOR: dict[str, Any] = {
    "kind": "ServiceMonitor",
    "metadata": {"name": "lpo", "namespace": "ops"},
    "spec": {
        "namespaceSelector": {"matchNames": ["ops", "other"]},
        "selector": {"matchLabels": {"app.kubernetes.io/name": "lpo", "app.kubernetes.io/component": "metrics"}},
        "endpoints": [{"port": "metrics", "path": "/metrics", "honorLabels": True, "interval": "1s"}],
    },
}


SD = "http://198.18.0.1:1234/endpoints"


def test_a_service_monitor_becomes_endpoints_discovery_kept_by_its_selector() -> None:
    (scrape,) = scrape_configs(MONITOR, SD)
    assert scrape["job_name"] == "serviceMonitor/ops/lpo/0"
    assert scrape["honor_labels"] is True and scrape["metrics_path"] == "/metrics"
    assert scrape["scrape_interval"] == "1s" and "scrape_timeout" not in scrape
    assert scrape["http_sd_configs"] == [{"url": f"{SD}?namespaces=ops%2Cother", "refresh_interval": "1s"}]
    keep = [r for r in scrape["relabel_configs"] if r.get("action") == "keep"]
    # Every label of matchLabels, present with that value, on the Service; and the endpoint's port by name.
    assert keep == [
        {
            "action": "keep",
            "source_labels": [
                "__meta_kubernetes_service_label_app_kubernetes_io_component",
                "__meta_kubernetes_service_labelpresent_app_kubernetes_io_component",
            ],
            "regex": "(metrics);true",
        },
        {
            "action": "keep",
            "source_labels": [
                "__meta_kubernetes_service_label_app_kubernetes_io_name",
                "__meta_kubernetes_service_labelpresent_app_kubernetes_io_name",
            ],
            "regex": "(lpo);true",
        },
        {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": "metrics"},
    ]
    targets = {r["target_label"]: r for r in scrape["relabel_configs"] if "target_label" in r}
    assert targets["job"]["source_labels"] == ["__meta_kubernetes_service_name"]  # the Prometheus Operator's job
    assert targets["endpoint"]["replacement"] == "metrics"
    assert {"namespace", "service", "pod", "container", "node"} <= set(targets)


def test_the_service_monitors_own_namespace_when_it_names_none() -> None:
    monitor = {**MONITOR, "spec": {k: v for k, v in MONITOR["spec"].items() if k != "namespaceSelector"}}
    (scrape,) = scrape_configs(monitor, SD)
    assert scrape["http_sd_configs"][0]["url"] == f"{SD}?namespaces=ops"


def test_a_selector_it_cannot_translate_is_refused() -> None:
    spec = {**MONITOR["spec"], "selector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
    with pytest.raises(ValueError, match="matchLabels"):
        scrape_configs({**MONITOR, "spec": spec}, SD)


def test_label_values_with_regex_characters_match_literally() -> None:
    spec = {**MONITOR["spec"], "selector": {"matchLabels": {"a": "x.y"}}}
    (scrape,) = scrape_configs({**MONITOR, "spec": spec}, SD)
    assert scrape["relabel_configs"][0]["regex"] == r"(x\.y);true"


def test_endpoints_get_the_labels_kubernetes_sd_gives_them() -> None:
    endpoints = {
        "metadata": {"name": "lpo-metrics", "namespace": "ops", "labels": {"app.kubernetes.io/name": "lpo"}},
        "subsets": [
            {
                "addresses": [{"ip": "10.0.0.5", "nodeName": "n0", "targetRef": {"kind": "Pod", "name": "lpo-1"}}],
                "notReadyAddresses": [{"ip": "10.0.0.6", "targetRef": {"kind": "Pod", "name": "gone"}}],
                "ports": [{"name": "metrics", "port": 8080, "protocol": "TCP"}],
            }
        ],
    }
    service = {"metadata": {"name": "lpo-metrics", "labels": {"app.kubernetes.io/component": "metrics"}}}
    pod = {
        "metadata": {"name": "lpo-1", "labels": {"app": "lpo"}},
        "spec": {
            "nodeName": "n0",
            "containers": [{"name": "operator", "ports": [{"name": "metrics", "containerPort": 8080}]}],
        },
        "status": {"podIP": "10.0.0.5"},
    }
    ready, not_ready = endpoints_targets(endpoints, service, {"lpo-1": pod})
    assert ready["targets"] == ["10.0.0.5:8080"] and not_ready["targets"] == ["10.0.0.6:8080"]
    labels = ready["labels"]
    assert labels["__meta_kubernetes_service_name"] == "lpo-metrics"
    assert labels["__meta_kubernetes_service_label_app_kubernetes_io_component"] == "metrics"
    assert labels["__meta_kubernetes_service_labelpresent_app_kubernetes_io_component"] == "true"
    assert labels["__meta_kubernetes_endpoints_label_app_kubernetes_io_name"] == "lpo"
    assert (
        labels["__meta_kubernetes_endpoint_port_name"] == "metrics"
        and labels["__meta_kubernetes_endpoint_ready"] == "true"
    )
    assert labels["__meta_kubernetes_endpoint_address_target_kind"] == "Pod"
    assert (
        labels["__meta_kubernetes_pod_name"] == "lpo-1" and labels["__meta_kubernetes_pod_container_name"] == "operator"
    )
    assert not_ready["labels"]["__meta_kubernetes_endpoint_ready"] == "false"
    assert "__meta_kubernetes_pod_name" not in not_ready["labels"]  # no such Pod any more


def test_grafana_variables_become_plain_promql() -> None:
    ranges = {"range": 600.2, "interval": 3, "rate_interval": rate_interval(3, 1)}
    expr = 'sum(increase(a{job=~"$job", ns=~"${namespace}"}[$__range])) + rate(b[$__rate_interval]) + c[${__interval}]'
    assert promql(expr, ranges, {"job": ".*", "namespace": ".*"}) == (
        'sum(increase(a{job=~".*", ns=~".*"}[601s])) + rate(b[4s]) + c[3s]'
    )
    assert rate_interval(30, 1) == 31


def test_series_are_named_by_the_legend_format() -> None:
    assert (
        legend("{{namespace}}/{{name}} {{ state }}", {"namespace": "a", "name": "b", "state": "ready"}) == "a/b ready"
    )
    assert legend(None, {"__name__": "x", "b": "2", "a": "1"}) == "a=1, b=2"
    (s,) = series([{"metric": {"reason": "R"}, "values": [[1.5, "2"], [2.5, "NaN"]]}], "{{reason}}")
    assert s.name == "R" and s.times == [1.5, 2.5] and s.values[0] == 2.0 and s.labels is None


def test_a_legend_names_series_by_the_labels_that_tell_them_apart() -> None:
    a = Series("x", [], [], {"name": "p", "reason": "A"})
    b = Series("y", [], [], {"name": "p", "reason": "B"})
    assert short_names([a, b]) == ["reason=A", "reason=B"]
    assert short_names([a]) == ["x"] and short_names([Series("s", [], [])]) == ["s"]


def test_promtool_accepts_the_configuration_made_from_the_chart(tmp_path: Path) -> None:
    rendered = run_helm(
        "template",
        "lpo",
        str(CHART),
        "--namespace",
        "ops",
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "prometheusRule.enabled=true",
        binary=tool("helm"),
    )
    docs = {
        d["kind"]: d for d in yaml.safe_load_all(rendered) if d and d["kind"] in ("ServiceMonitor", "PrometheusRule")
    }
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_file(docs["PrometheusRule"])))
    scrapes = scrape_configs(docs["ServiceMonitor"], SD)
    (tmp_path / "prometheus.yaml").write_text(yaml.safe_dump(config(scrapes, ["rules.yaml"], "1s")))
    out = promtool("check", "config", "prometheus.yaml", cwd=tmp_path)
    assert "SUCCESS: 7 rules found" in out, out
