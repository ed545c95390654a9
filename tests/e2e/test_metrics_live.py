"""Prometheus metrics of the running e2e operator, scraped from its /metrics after a peering became ready,
and its probe endpoints."""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import datetime

from prometheus_client.parser import text_string_to_metric_families

from testenv.operator_support import SECRET, PeeringCase, wait_for

NAME = "provider"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
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


def peering_series(samples: Samples, namespace: str, name: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The per-LiqoPeering series of one peering, by metric name."""
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for (metric, labels), value in samples.items():
        as_dict = dict(labels)
        if metric.startswith("liqo_peering_") and as_dict.get("namespace") == namespace and as_dict.get("name") == name:
            found.setdefault(metric, {})[labels] = value
    return found


def test_a_peerings_own_series_follow_it_and_go_when_it_is_deleted(case: PeeringCase) -> None:
    ns, port, provider_id = case.namespace, case.env.operator.metrics_port, case.env.provider_id
    case.peerings.create(ns, NAME, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m"})
    case.peerings.wait_status(ns, NAME, "ready")
    ids = (("name", NAME), ("namespace", ns), ("remote_cluster_id", provider_id))

    def ready_series() -> dict[str, dict[tuple[tuple[str, str], ...], float]] | None:
        series = peering_series(scrape(port), ns, NAME)
        return series if series.get("liqo_peering_ready") == {ids: 1.0} else None

    series = wait_for(f"liqo_peering_ready{{name={NAME!r}}} == 1", ready_series, timeout=30)
    (info,) = series["liqo_peering_status_info"]
    assert (dict(info)["status"], dict(info)["stage"]) == ("ready", "ready"), info
    transition = series["liqo_peering_ready_last_transition_timestamp_seconds"][ids]
    ready = next(c for c in case.peerings.status(ns, NAME)["conditions"] if c["type"] == "Ready")
    assert transition == datetime.fromisoformat(ready["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
    assert "liqo_peering_credential_expiration_timestamp_seconds" not in series  # nothing minted

    case.peerings.delete(ns, NAME)
    case.peerings.wait_gone(ns, NAME)
    # Deleted: every series of the peering is gone (the operator forgets it once unpeered).
    wait_for(f"the series of {ns}/{NAME} to go", lambda: not peering_series(scrape(port), ns, NAME) or None, timeout=30)


def probe(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_running_operator_is_live_and_ready(case: PeeringCase) -> None:
    """Against the real API server: kopf started and the operator's informers on it synced (/readyz), the
    event loop and worker pools make progress (/livez, and /healthz as before)."""
    port = case.env.operator.health_port
    case.peerings.create(case.namespace, NAME, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m"})
    case.peerings.wait_status(case.namespace, NAME, "ready")  # its informers exist and have listed
    assert wait_for("/readyz to answer 200", lambda: probe(port, "/readyz") == 200 or None, timeout=30)
    assert probe(port, "/livez") == 200 and probe(port, "/healthz") == 200
