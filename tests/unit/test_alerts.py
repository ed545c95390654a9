"""The chart's PrometheusRule: `promtool check rules` and `promtool test rules` (tests/unit/alerts/) on the
rules as helm renders them. helm and promtool come from the tool cache (hack/build-tools.sh); a
missing tool fails these tests, saying how to build it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from testenv.helm import CHART, PLACEHOLDER_IMAGE, run_helm
from testenv.localk8s import tool_path
from unit.chart import promtool

CASES = Path(__file__).parent / "alerts" / "liqo-peering-operator.test.yaml"
ALERTS = {
    "LiqoPeeringNotReady",
    "LiqoPeeringCredentialRenewalBlocked",
    "LiqoPeeringCredentialExpiring",
    "LiqoPeeringUnpeeringBlocked",
    "LiqoPeeringOperatorDown",
    "LiqoPeeringOperatorNoActiveReplica",
    "LiqoPeeringReconcileErrors",
}


def render(*sets: str) -> list[dict[str, Any]]:
    args = ["template", "lpo", str(CHART)]
    for s in (*PLACEHOLDER_IMAGE, "fullnameOverride=lpo", *sets):
        args += ["--set", s]
    return [d for d in yaml.safe_load_all(run_helm(*args, binary=tool_path("helm"))) if d]


def rule_groups(*sets: str) -> list[dict[str, Any]]:
    (rule,) = [d for d in render("prometheusRule.enabled=true", *sets) if d["kind"] == "PrometheusRule"]
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def test_no_prometheus_rule_unless_enabled() -> None:
    assert not [d for d in render() if d["kind"] == "PrometheusRule"]


def test_every_alert_is_there_and_tested() -> None:
    groups = rule_groups()
    assert {r["alert"] for g in groups for r in g["rules"]} == ALERTS
    cases = yaml.safe_load(CASES.read_text())
    tested = {t["alertname"] for case in cases["tests"] for t in case["alert_rule_test"]}
    assert tested == ALERTS


def test_promtool_checks_and_unit_tests_the_rules(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups()}, sort_keys=False))
    shutil.copy(CASES, tmp_path / CASES.name)
    promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    out = promtool("test", "rules", CASES.name, cwd=tmp_path)
    assert "SUCCESS" in out, out


def test_the_thresholds_are_values() -> None:
    groups = rule_groups(
        "prometheusRule.peeringNotReadyFor=30m",
        "prometheusRule.credentialExpiresWithinSeconds=3600",
        'prometheusRule.selector=service="ops"',
        "prometheusRule.additionalRuleLabels.team=platform",
    )
    rules = {r["alert"]: r for g in groups for r in g["rules"]}
    assert rules["LiqoPeeringNotReady"]["for"] == "30m"
    assert "- time() < 3600" in rules["LiqoPeeringCredentialExpiring"]["expr"]
    assert all('{service="ops"}' in r["expr"] and "lpo-metrics" not in r["expr"] for r in rules.values())
    assert all(r["labels"]["team"] == "platform" for r in rules.values())
