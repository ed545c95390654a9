"""The suite's tiers (testenv.pytest_plugin.tier_of) and the reliability report joined from their parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testenv import reliability
from testenv.localk8s import ports
from testenv.pytest_plugin import TIERS, tier_of
from testenv.reliability import Recorder


def test_a_test_belongs_to_the_tier_of_the_clusters_its_fixtures_start() -> None:
    assert tier_of(["case", "operator_env", "local_clusters"]) == "main"
    assert tier_of(["suite", "node_clusters", "node_images", "leak_scan"]) == "nodes"
    assert tier_of(["rcase", "real_liqo", "leak_scan"]) == "liqo"
    assert tier_of(["real_liqo", "node_images", "leak_scan"]) == "liqo"  # the chart's Pods on Liqo's chart pair
    assert tier_of(["pair", "images"], markers=["liqochart", "e2e"]) == "liqo"  # asks for real_liqo at run time
    assert tier_of(["argocd", "operator_env"], markers=["gitops", "e2e"]) == "gitops"
    assert tier_of(["two_node_clusters"]) == "nodes"  # a module's own pair, a consumer with two nodes
    assert tier_of([], markers=["image"]) == "nodes"  # waits for the image build, as the nodes tier does
    assert tier_of(["liqo_matrix_pair", "matrix_env"]) == "matrix"
    assert tier_of(["case"], markers=["faults", "e2e"]) == "solo"
    assert tier_of(["env", "floor_clusters"], markers=["solo", "e2e"]) == "solo"
    assert tier_of(["case"], markers=["standin", "e2e"]) == "standin"
    assert tier_of([]) == "main"


PAIR_LAST = "test_force_delete_once_the_provider_is_gone_for_good"


class _Collected:
    def __init__(self) -> None:
        self.order: list[str] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.order = [item.nodeid for item in session.items]


def test_the_suite_splits_into_tiers_that_share_no_cluster(pytestconfig: pytest.Config) -> None:
    """Collected as hack/run-tests.sh collects it: each test in exactly one tier (the leak scan in all)."""
    root = str(pytestconfig.rootpath)
    block = ports.block()
    ids, order = {}, {}
    for tier in TIERS:
        collected = _Collected()
        args = ["--rootdir", root, f"{root}/tests", f"{root}/testenv/tests", "--collect-only", "-q", "--tier", tier]
        assert pytest.main([*args, "-p", "no:cacheprovider"], plugins=[collected]) == 0
        ids[tier], order[tier] = set(collected.order), collected.order
    # Collecting the other tiers left this run on its own ports.
    assert ports.block() == block
    leak = "tests/e2e/test_zz_no_leaks.py::test_no_credential_in_any_log_event_or_status"
    assert all(leak in found for found in ids.values())
    # The test that leaves its pair as a destroyed cluster does (marker pairlast) runs after the others.
    assert order["liqo"][-2:] == [f"tests/e2e/test_real_liqo.py::{PAIR_LAST}", leak]
    modules = {tier: {i.split("::")[0] for i in found - {leak}} for tier, found in ids.items()}
    assert modules["liqo"] == {
        "tests/e2e/test_liqo_chart.py",
        "tests/e2e/test_real_liqo.py",
        "tests/e2e/test_real_liqo_ha.py",
    }
    assert modules["gitops"] == {
        "tests/e2e/test_argocd.py",
        "tests/e2e/test_flux.py",
        "tests/unit/test_argocd_health_vm.py",  # Argo CD's Lua VM, built with Argo CD for that tier
    }
    assert modules["matrix"] == {"tests/e2e/test_liqo_matrix.py"}
    assert modules["solo"] == {
        "tests/e2e/test_demo.py",
        "tests/e2e/test_faults.py",
        "tests/e2e/test_kubernetes_floor.py",
        "testenv/tests/e2e/test_liqo_real.py",
    }
    assert modules["standin"] == {
        "tests/e2e/test_aks.py",
        "tests/e2e/test_benchmarks.py",
        "tests/e2e/test_clusterprofile.py",
        "tests/e2e/test_eks.py",
        "tests/e2e/test_gke.py",
        "tests/e2e/test_hostile_provider.py",
        "tests/e2e/test_poison_pass.py",
        "tests/e2e/test_secret_protection.py",
        "tests/e2e/test_tenant.py",
    }
    assert modules["nodes"] == {
        "tests/e2e/test_docs_run.py",
        "tests/e2e/test_operator_pod.py",
        "tests/e2e/test_ha_disruption.py",
        "tests/e2e/test_network_policy.py",
        "tests/e2e/test_flux_helmrelease.py",
        "tests/e2e/test_release.py",
        "testenv/tests/e2e/test_nodes.py",
        "tests/unit/test_image_contents.py",
    }
    assert not modules["main"] & set().union(*(found for tier, found in modules.items() if tier != "main"))
    assert "tests/e2e/test_peering.py" in modules["main"] and "tests/unit/test_liqo_builders.py" in modules["main"]
    assert sum(len(found - {leak}) for found in ids.values()) == len(set().union(*ids.values()) - {leak})


def test_parts_merge_into_one_run_and_a_failure_anywhere_stays(tmp_path: Path) -> None:
    first, second, *rest = sorted(reliability.wanted())
    a, b = Recorder.empty(), Recorder.empty()
    a.record(first, "call", "passed", 2.0)
    b.record(first, "call", "failed", 1.0)
    b.record(second, "call", "passed", 3.0)
    a.save_part("main", tmp_path)
    b.save_part("liqo", tmp_path)
    merged = Recorder.merged(sorted(tmp_path.glob("*.json")))
    assert merged.outcomes == {first: "failed", second: "passed"}
    assert merged.seconds == {first: 3.0, second: 3.0}
    assert not merged.complete() and merged.missing() == set(rest)
    assert json.loads((tmp_path / "main.json").read_text())["outcomes"] == {first: "passed"}


def test_merge_leaves_the_report_alone_until_the_parts_cover_every_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, file in (("RESULTS", "r.json"), ("SOAK", "s.json"), ("REPORT", "r.md")):
        monkeypatch.setattr(reliability, name, tmp_path / file)
    parts = tmp_path / "parts"
    rec = Recorder.empty()
    everything = sorted(reliability.wanted())
    for nodeid in everything[:-1]:
        rec.record(nodeid, "call", "passed", 1.0)
    rec.save_part("main", parts)
    assert reliability.main(["merge", "--parts", str(parts)]) == 0
    assert not (tmp_path / "r.md").exists() and everything[-1] in capsys.readouterr().out
    last = Recorder.empty()
    last.record(everything[-1], "call", "passed", 1.0)
    last.save_part("liqo", parts)
    monkeypatch.setattr(reliability, "REPO", tmp_path)  # the report's path is printed relative to it
    assert reliability.main(["merge", "--parts", str(parts)]) == 0
    assert "| passed |" in (tmp_path / "r.md").read_text()
