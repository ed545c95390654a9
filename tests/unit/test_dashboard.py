"""The chart's Grafana dashboard: shipped in a ConfigMap for Grafana's sidecar, every query valid PromQL
(`promtool check rules` on them as recording rules) and on no metric but those the operator exports. And
the metrics page lists exactly those."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import generate_latest

from liqo_peering.metrics import Metrics
from testenv.helm import CHART
from unit.chart import NAMESPACE, find, promtool, render

DASHBOARD = CHART / "dashboards" / "liqo-peering-operator.json"
METRICS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "metrics.md"
# Grafana's own interval variables stand for a range duration; a test value makes the query plain PromQL.
# Other variables ($job, $namespace) sit inside label matchers' strings, which PromQL takes as they are.
GRAFANA_RANGES = re.compile(r"\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}")
PROMQL_WORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
    "inf", "nan", "atan2",
}  # fmt: skip


def exported_families() -> dict[str, str]:
    """The metric families the operator exports, with their types, as its registry describes them."""
    text = generate_latest(Metrics().registry).decode()
    families = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    # prometheus_client's `_created` twins of counters and histograms: a library detail, not a metric of ours.
    return {name: kind for name, kind in families.items() if not name.endswith("_created")}


def exported_series() -> set[str]:
    """Every series name a query may use: a histogram's are its _bucket, _sum and _count."""
    names = set()
    for name, kind in exported_families().items():
        names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name}
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: the identifiers left once strings, label matchers, ranges,
    grouping label lists and function calls are taken out."""
    text = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    found = set()
    for match in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", text):
        if match.group(2) is None and match.group(1) not in PROMQL_WORDS:
            found.add(match.group(1))
    return found


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # those of a collapsed row


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable (label_values' selector)."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", GRAFANA_RANGES.sub("5m", target["expr"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            match = re.fullmatch(r"label_values\((.+), *(\w+)\)", variable["definition"])
            assert match, variable["definition"]
            yield f"variable {variable['name']!r}", match.group(1)


def load() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return dashboard


def test_the_expression_reader_finds_metric_names() -> None:
    assert metric_names('sum by (reason) (rate(a_total{job=~"x|y", b="c"}[5m]))') == {"a_total"}
    assert metric_names("max by (ns, name) (x) - time() and on (ns) (y == 0) or vector(0)") == {"x", "y"}
    assert metric_names('histogram_quantile(0.9, sum by (le) (increase(h_bucket{a="b{c}"}[1h] offset 1d)))') == {
        "h_bucket"
    }
    assert metric_names("up") == {"up"}


def test_no_dashboard_unless_enabled() -> None:
    assert not find(render(), "ConfigMap")


def test_the_dashboard_configmap_is_for_grafanas_sidecar() -> None:
    (configmap,) = find(render("grafanaDashboard.enabled=true"), "ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["namespace"] == NAMESPACE
    assert json.loads(configmap["data"]["liqo-peering-operator.json"]) == load()
    (configmap,) = find(
        render(
            "grafanaDashboard.enabled=true",
            "grafanaDashboard.namespace=monitoring",
            "grafanaDashboard.labels.dashboards=liqo",
            "grafanaDashboard.annotations.grafana_folder=Liqo",
        ),
        "ConfigMap",
    )
    meta = configmap["metadata"]
    assert meta["namespace"] == "monitoring" and meta["annotations"] == {"grafana_folder": "Liqo"}
    assert meta["labels"]["dashboards"] == "liqo" and meta["labels"]["grafana_dashboard"] == "1"


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    rules = [
        {"record": f"dashboard:query_{i}", "expr": expr, "labels": {"query": where}}
        for i, (where, expr) in enumerate(queries(load()))
    ]
    assert len(rules) > 20
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    out = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert f"SUCCESS: {len(rules)} rules found" in out, out


def test_every_query_uses_only_metrics_the_operator_exports() -> None:
    allowed = exported_series()
    for where, expr in queries(load()):
        names = metric_names(expr)
        assert names, f"{where} selects no metric: {expr}"
        assert names <= allowed, f"{where} uses {sorted(names - allowed)}, which the operator does not export"


def test_the_dashboard_shows_state_time_to_ready_errors_and_credentials() -> None:
    used = set().union(*(metric_names(expr) for _, expr in queries(load())))
    assert {
        "liqo_peering_status_info",  # peerings by state
        "liqo_peering_time_to_ready_seconds_bucket",
        "liqo_peering_reconcile_errors_total",  # errors by reason
        "liqo_peering_credential_expiration_timestamp_seconds",  # notAfter
        "liqo_peering_credential_renewal_timestamp_seconds",  # renewAt
    } <= used


def test_every_panel_queries_the_chosen_data_source() -> None:
    dashboard = load()
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    assert dashboard["uid"] == "liqo-peering-operator"
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and panel.get("description"), panel["title"]


def test_the_metrics_page_lists_every_metric_the_operator_exports() -> None:
    page = METRICS_PAGE.read_text()
    listed = dict(re.findall(r"^\| `(liqo_peering_\w+)` \| (\w+) \|", page, re.MULTILINE))
    assert listed == exported_families()
