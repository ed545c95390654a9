"""Prometheus metrics of the running e2e operator, scraped from its /metrics after a peering became ready."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from testenv.operator_support import SECRET, PeeringCase, wait_for

NAME = "provider"


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_ready_peering_shows_in_the_operators_metrics(case: PeeringCase) -> None:
    ns, port = case.namespace, case.env.operator.metrics_port
    case.peerings.create(ns, NAME, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m"})
    case.peerings.wait_status(ns, NAME, "ready")

    # The status is written first and the metrics updated with it: poll briefly rather than race.
    def ready_counted() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
        samples = scrape(port)
        return samples if samples.get(("liqo_peering_peerings", (("status", "ready"),)), 0) >= 1 else None

    samples = wait_for("liqo_peering_peerings{status=ready} >= 1", ready_counted, timeout=30)
    assert samples[("liqo_peering_peerings", (("status", "ready"),))] >= 1
    assert samples[("liqo_peering_time_to_ready_seconds_count", ())] > 0
    assert samples[("liqo_peering_time_to_ready_seconds_sum", ())] >= 0
