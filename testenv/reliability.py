"""docs/reliability.md: each failure the operator must survive, the tests that cause it, and their outcome.

The pytest plugin (testenv.pytest_plugin) records the outcome of each test listed in SCENARIOS. When a
run has covered all of them, it writes docs/reliability.json and renders docs/reliability.md from it
and from docs/soak.json (`make soak`). A partial run (-k, -m, a single file) writes nothing. A run split
into tiers (`pytest --tier`, hack/run-tests.sh) saves each tier's part in .local/reliability/, and
`python -m testenv.reliability merge` writes the report once the parts cover every scenario.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testenv import machine

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
RESULTS = DOCS / "reliability.json"
SOAK = DOCS / "soak.json"
REPORT = DOCS / "reliability.md"
PARTS = REPO / ".local" / "reliability"


@dataclass(frozen=True)
class Scenario:
    name: str  # how docs and tests refer to it: docs/reliability.md, "<name>"
    title: str
    tests: tuple[str, ...]  # pytest node ids (path::name or path::Class::name), without parameters


P = "tests/e2e/test_peering.py::"
R = "tests/e2e/test_real_liqo.py::"
O = "tests/e2e/test_operator_pod.py::"  # noqa: E741 - a prefix, as P and R
U = "tests/unit/"

SCENARIOS = (
    Scenario(
        "operator killed",
        "Operator SIGKILLed at every step (stages, their ends, teardown): completes, nothing duplicated or left",
        (
            f"{R}test_operator_killed_mid_way_resumes_without_duplicates",
            f"{R}test_killed_at_with_real_liqo",
        ),
    ),
    Scenario(
        "provider outage",
        "Provider stopped (establishing, Ready), unreachable or hung: reported, recovers by itself, "
        "no head-of-line blocking",
        (
            f"{R}test_provider_api_server_stopped_is_reported_and_the_real_liqo_peering_recovers",
            f"{R}test_a_hung_provider_holds_up_no_other_peering_and_a_frozen_one_recovers",
            f"{P}test_unreachable_provider_then_force_delete",
        ),
    ),
    Scenario(
        "consumer restart",
        "The consumer's API server and etcd restart",
        (f"{R}TestPeeredWithRealLiqo::test_the_consumers_api_server_and_etcd_restart",),
    ),
    Scenario(
        "secret rotation",
        "Kubeconfig Secret rotated (valid, then broken credentials)",
        (f"{R}TestPeeredWithRealLiqo::test_secret_rotation_takes_effect_and_releases_the_old_client",),
    ),
    Scenario(
        "two replicas",
        "Two replicas: exactly one acts; handover on deletion, SIGKILL (mid-peering against Liqo too) and a frozen "
        "replica; a killed Pod is replaced",
        (
            f"{O}test_with_two_replicas_exactly_one_acts",
            f"{O}test_a_killed_pod_is_replaced_and_nothing_is_duplicated",
            f"{O}test_a_sigkilled_active_replica_is_taken_over_and_restarted",
            f"{O}test_a_frozen_active_replica_is_taken_over_when_its_peering_entry_expires",
            "tests/e2e/test_real_liqo_ha.py::test_two_replicas_hand_over_mid_peering_with_real_liqo",
        ),
    ),
    Scenario(
        "least privilege",
        "Least-privilege provider credential (liqoctl generate peering-user)",
        (f"{R}test_least_privilege_peering_user",),
    ),
    Scenario(
        "no leaks",
        "No credential in any log line, Event or status; unsafe kubeconfigs refused",
        (
            "tests/e2e/test_zz_no_leaks.py::test_no_credential_in_any_log_event_or_status",
            f"{P}test_garbage_and_unsafe_kubeconfigs_are_refused_without_leaking_credentials",
        ),
    ),
    Scenario(
        "properties",
        "Properties: kubeconfig rules, redaction, spec/CRD round trip, ForeignCluster mapping",
        (
            f"{U}test_property_kubeconfig.py::test_unsafe_features_pass_only_with_their_flag",
            f"{U}test_property_redact.py::test_every_credential_is_removed",
            f"{U}test_property_redact.py::test_ordinary_prose_is_unchanged",
            f"{U}test_property_spec_schema.py::test_specs_drawn_from_the_crd_schema_agree",
            f"{U}test_property_foreigncluster.py::test_the_mirror_and_the_module_conditions_are_well_formed",
        ),
    ),
)


def wanted() -> set[str]:
    return {test for s in SCENARIOS for test in s.tests}


def node_key(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


@dataclass
class Recorder:
    """Outcome per listed test: "failed" if any phase failed, else "skipped" if skipped, else "passed"."""

    outcomes: dict[str, str]
    seconds: dict[str, float]

    @classmethod
    def empty(cls) -> Recorder:
        return cls({}, {})

    def record(self, nodeid: str, when: str, outcome: str, duration: float) -> None:
        key = node_key(nodeid)
        if key not in wanted():
            return
        self.seconds[key] = self.seconds.get(key, 0.0) + duration
        before = self.outcomes.get(key)
        if outcome == "failed" or before == "failed":
            self.outcomes[key] = "failed"
        elif outcome == "skipped" or before == "skipped":
            self.outcomes[key] = "skipped"
        elif when == "call":
            self.outcomes[key] = "passed"

    def complete(self) -> bool:
        return wanted() <= set(self.outcomes)

    def missing(self) -> set[str]:
        return wanted() - set(self.outcomes)

    def save_part(self, tier: str, parts: Path = PARTS) -> Path:
        """This tier's outcomes, for `merge` once every tier of the run has finished."""
        parts.mkdir(parents=True, exist_ok=True)
        path = parts / f"{tier}.json"
        path.write_text(json.dumps({"outcomes": self.outcomes, "seconds": self.seconds}, indent=1) + "\n")
        return path

    @classmethod
    def merged(cls, paths: list[Path]) -> Recorder:
        """The tiers' parts as one run: a test a tier failed stays failed whatever another tier says."""
        rec = cls.empty()
        for path in paths:
            part = json.loads(path.read_text())
            for key, outcome in part["outcomes"].items():
                before = rec.outcomes.get(key)
                rank = ("failed", "skipped", "passed")
                rec.outcomes[key] = outcome if before is None else min(before, outcome, key=rank.index)
                rec.seconds[key] = rec.seconds.get(key, 0.0) + part["seconds"].get(key, 0.0)
        return rec

    def write(self) -> None:
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True
        )
        results = {
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": commit.stdout.strip(),
            "machine": machine.record(),
            "tests": {
                k: {"outcome": self.outcomes[k], "seconds": round(self.seconds.get(k, 0.0), 1)}
                for k in sorted(self.outcomes)
            },
        }
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        render()


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _runs(results: dict[str, Any] | None, soak: dict[str, Any] | None) -> list[str]:
    """The one place the page names its runs: machine, commit and date of each part."""
    lines = ["| part | machine | commit | finished |", "|---|---|---|---|"]
    if results is not None:
        lines.append(
            f"| scenarios (a full test run) | {machine.summary(results.get('machine'))} | `{results['commit']}` "
            f"| {results['finished']} |"
        )
    if soak is not None:
        lines.append(
            f"| soak (`make soak`) | {machine.summary(soak['meta'].get('machine'))} | `{soak['operator']}` "
            f"| {soak['meta']['finished']} |"
        )
    return lines


def render() -> None:
    results, soak = _load(RESULTS), _load(SOAK)
    lines = [
        "# Reliability",
        "",
        "Generated from docs/reliability.json (by a full test run: `make test`, testenv/reliability.py) and",
        "docs/soak.json (by `make soak`, bench/soak.py). Do not edit by hand.",
        "",
        *_runs(results, soak),
        "",
        "## Scenarios",
        "",
        "Each scenario is a failure the operator must survive, caused by the tests listed with it against real",
        "API servers (the Liqo stand-in, or Liqo itself where the test's name says real Liqo). A scenario's",
        "outcome is its worst test's; the seconds are each test's setup, call and teardown.",
        "To rerun: `make test`, or `hack/run-tests.sh` without arguments, rewrites this table once every",
        "scenario's tests have run; a partial run (`-k`, `-m`, one file) leaves it alone.",
        "",
    ]
    if results is None:
        lines.append("No full test run has written docs/reliability.json yet.")
    else:
        lines += [
            "| Scenario | What happens | Outcome | Tests (seconds) |",
            "|---|---|---|---|",
        ]
        tests = results["tests"]
        for s in SCENARIOS:
            found = [tests.get(t, {"outcome": "not run", "seconds": 0}) for t in s.tests]
            outcomes = {f["outcome"] for f in found}
            outcome = next(o for o in ("failed", "not run", "skipped", "passed") if o in outcomes)
            names = "<br>".join(
                f"`{t.split('::', 1)[1]}` ({f['seconds']})" for t, f in zip(s.tests, found, strict=True)
            )
            lines.append(f"| {s.name} | {s.title} | {outcome} | {names} |")
    lines += [
        "",
        "## Soak",
        "",
        "Create/delete cycles of one LiqoPeering against the Liqo stand-in, the operator's RSS, threads, open",
        'files and TCP connections sampled every few cycles. To rerun: `make soak` (`ARGS="--cycles 50"` for',
        "fewer cycles); it rewrites docs/soak.json and this page.",
        "",
    ]
    if soak is None:
        lines.append("`make soak` has not been run yet.")
    else:
        verdict = soak["verdict"]
        first, last = soak["samples"][0], soak["samples"][-1]
        lines += [
            f"{soak['cycles']} cycles, {soak['meta']['duration_s']} s in all.",
            "",
            "| | after cycle "
            + str(first["cycle"])
            + " | after cycle "
            + str(last["cycle"])
            + " | growth over the second half |",
            "|---|---|---|---|",
        ]
        for key, label in (
            ("rss_mb", "RSS (MB)"),
            ("threads", "threads"),
            ("open_fds", "open files"),
            ("tcp_established", "TCP connections"),
        ):
            lines.append(
                f"| {label} | {round(first[key], 1)} | {round(last[key], 1)} | {verdict['growth_second_half'][key]} |"
            )
        lines += [
            "",
            "Create to Ready: median {median} s, p95 {p95} s;".format(**soak["ready_seconds"])
            + " delete to gone: median {median} s, p95 {p95} s.".format(**soak["unpeer_seconds"]),
            f"Objects (Liqo kinds, Secrets, namespaces) after the first cycle: {soak['baseline_objects']};"
            f" after the last: {soak['objects_after']}.",
            "",
            "Verdict: " + ("nothing left over, nothing growing." if verdict["ok"] else "; ".join(verdict["problems"])),
        ]
    REPORT.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    """`python -m testenv.reliability merge`: the report from the tiers' parts, when they cover every scenario."""
    parser = argparse.ArgumentParser(prog="python -m testenv.reliability")
    parser.add_argument("command", choices=["merge"])
    parser.add_argument("--parts", type=Path, default=PARTS)
    args = parser.parse_args(argv)
    paths = sorted(args.parts.glob("*.json"))
    rec = Recorder.merged(paths)
    if not rec.complete():
        print(
            f"reliability: the parts ({', '.join(p.stem for p in paths) or 'none'}) do not cover: "
            f"{', '.join(sorted(rec.missing()))}; docs/reliability.md left as it was"
        )
        return 0
    rec.write()
    print(f"reliability: {REPORT.relative_to(REPO)} written from {len(paths)} parts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
