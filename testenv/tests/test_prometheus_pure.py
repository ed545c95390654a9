"""testenv.prometheus's ServiceMonitor translation and testenv.dashboard's query rewriting, without a
cluster; and Prometheus itself loading the configuration made from the chart's own ServiceMonitor and
PrometheusRule (skipped until hack/build-tools.sh has built helm and prometheus, a failure in CI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from testenv.dashboard import Series, legend, promql, rate_interval, series, short_names
from testenv.helm import CHART, PLACEHOLDER_IMAGE, run_helm
from testenv.localk8s import tool_path
from testenv.localk8s.ports import free_port
from testenv.prometheus import Prometheus, namespaces, rule_file, scrape_configs

MONITOR: dict[str, Any] = {
    "kind": "ServiceMonitor",
    "metadata": {"name": "lpo", "namespace": "ops"},
    "spec": {
        "namespaceSelector": {"matchNames": ["ops", "other"]},
        "selector": {"matchLabels": {"app.kubernetes.io/name": "lpo", "app.kubernetes.io/component": "metrics"}},
        "endpoints": [{"port": "metrics", "path": "/metrics", "honorLabels": True, "interval": "1s"}],
    },
}


KUBECONFIG = Path("/run/prometheus.kubeconfig")


def test_a_service_monitor_becomes_kubernetes_discovery_kept_by_its_selector() -> None:
    (scrape,) = scrape_configs(MONITOR, KUBECONFIG)
    assert scrape["job_name"] == "serviceMonitor/ops/lpo/0"
    assert scrape["honor_labels"] is True and scrape["metrics_path"] == "/metrics"
    assert scrape["scrape_interval"] == "1s" and "scrape_timeout" not in scrape
    # The Prometheus Operator's default role, in the ServiceMonitor's namespaces only.
    assert scrape["kubernetes_sd_configs"] == [
        {"role": "endpoints", "kubeconfig_file": str(KUBECONFIG), "namespaces": {"names": ["ops", "other"]}}
    ]
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
    (scrape,) = scrape_configs(monitor, KUBECONFIG)
    assert scrape["kubernetes_sd_configs"][0]["namespaces"] == {"names": ["ops"]}
    assert namespaces(monitor) == ["ops"] and namespaces(MONITOR) == ["ops", "other"]


def test_a_selector_it_cannot_translate_is_refused() -> None:
    spec = {**MONITOR["spec"], "selector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
    with pytest.raises(ValueError, match="matchLabels"):
        scrape_configs({**MONITOR, "spec": spec}, KUBECONFIG)


def test_label_values_with_regex_characters_match_literally() -> None:
    spec = {**MONITOR["spec"], "selector": {"matchLabels": {"a": "x.y"}}}
    (scrape,) = scrape_configs({**MONITOR, "spec": spec}, KUBECONFIG)
    assert scrape["relabel_configs"][0]["regex"] == r"(x\.y);true"


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


def test_prometheus_loads_the_configuration_made_from_the_chart(tmp_path: Path) -> None:
    rendered = run_helm(
        "template",
        "lpo",
        str(CHART),
        "--namespace",
        "ops",
        *[a for s in PLACEHOLDER_IMAGE for a in ("--set", s)],
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "prometheusRule.enabled=true",
        binary=tool_path("helm"),
    )
    docs = {
        d["kind"]: d for d in yaml.safe_load_all(rendered) if d and d["kind"] in ("ServiceMonitor", "PrometheusRule")
    }
    tool_path("prometheus")
    # Ready only once it has loaded the configuration and the rules; it exits on an error in either. Its
    # discovery has no kubeconfig here: Prometheus logs that and serves on.
    prometheus = Prometheus(None, "127.0.0.1", tmp_path, free_port())
    try:
        prometheus.start(
            scrape_configs(docs["ServiceMonitor"], tmp_path / "kubeconfig"), [rule_file(docs["PrometheusRule"])], "1s"
        )
        rules = [rule for group in prometheus.api("rules")["groups"] for rule in group["rules"]]
        assert len(rules) == 7, rules
        (scrape,) = yaml.safe_load(prometheus.api("status/config")["yaml"])["scrape_configs"]
        assert scrape["job_name"] == "serviceMonitor/ops/lpo-liqo-peering-operator/0", scrape
        assert scrape["kubernetes_sd_configs"][0]["role"] == "endpoints", scrape
    finally:
        prometheus.stop()
