"""docs/reliability.md's generator (testenv.reliability), without a test run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from testenv import reliability
from testenv.reliability import REPO, SCENARIOS, Recorder


def test_every_listed_test_exists() -> None:
    for scenario in SCENARIOS:
        for nodeid in scenario.tests:
            path, *classes, name = nodeid.split("::")
            text, indent = (REPO / path).read_text(), ""
            for cls in classes:  # the class's body: up to the next line that is not indented
                body = re.search(rf"^class {cls}\b.*?(?=^\S|\Z)", text, re.MULTILINE | re.DOTALL)
                assert body, nodeid
                text, indent = body.group(0), "    "
            assert re.search(rf"^{indent}def {name}\(", text, re.MULTILINE), nodeid


def test_outcome_is_failed_if_any_phase_failed_and_partial_runs_are_incomplete() -> None:
    rec = Recorder.empty()
    first, *rest = sorted(reliability.wanted())
    rec.record(first + "[x]", "setup", "passed", 1.0)
    rec.record(first + "[x]", "call", "passed", 2.0)
    rec.record(first + "[x]", "teardown", "failed", 0.5)
    rec.record("tests/unit/test_other.py::test_unlisted", "call", "passed", 1.0)
    assert rec.outcomes == {first: "failed"} and rec.seconds == {first: 3.5}
    assert not rec.complete()
    for nodeid in rest:
        rec.record(nodeid, "call", "passed", 1.0)
    assert rec.complete()


def test_render_writes_one_row_per_scenario_and_the_soak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, file in (("RESULTS", "r.json"), ("SOAK", "s.json"), ("REPORT", "r.md")):
        monkeypatch.setattr(reliability, name, tmp_path / file)
    tests = {t: {"outcome": "passed", "seconds": 1.0} for t in reliability.wanted()}
    tests[SCENARIOS[1].tests[0]]["outcome"] = "failed"
    (tmp_path / "r.json").write_text(json.dumps({"finished": "now", "commit": "abc", "tests": tests}))
    sample = {"cycle": 10, "rss_mb": 60.0, "threads": 9, "open_fds": 20, "tcp_established": 4}
    soak = {
        "cycles": 10,
        "operator": "abc",
        "meta": {"finished": "now", "duration_s": 100},
        "samples": [sample, sample],
        "verdict": {"ok": True, "problems": [], "growth_second_half": dict.fromkeys(sample, 0.0)},
        "ready_seconds": {"median": 2.0, "p95": 3.0, "max": 4.0},
        "unpeer_seconds": {"median": 1.0, "p95": 2.0, "max": 3.0},
        "baseline_objects": {},
        "objects_after": {},
    }
    (tmp_path / "s.json").write_text(json.dumps(soak))
    reliability.render()
    text = (tmp_path / "r.md").read_text()
    rows = [line for line in text.splitlines() if any(line.startswith(f"| {s.name} |") for s in SCENARIOS)]
    assert len(rows) == len(SCENARIOS)
    assert "| failed |" in rows[1] and all("| passed |" in row for row in rows[2:])
    assert "nothing left over, nothing growing" in text
