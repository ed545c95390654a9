"""The committed generated pages are what their generators render from the committed results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import page
from testenv import machine, reliability

DOCS = reliability.REPO / "docs"


def test_performance_page_is_rendered_from_its_json() -> None:
    results = json.loads((DOCS / "performance.json").read_text())
    assert (DOCS / "performance.md").read_text() == page.render(results), "run `python -m bench.page`"


def test_reliability_page_is_rendered_from_its_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reliability, "REPORT", tmp_path / "reliability.md")
    reliability.render()
    assert (DOCS / "reliability.md").read_text() == (tmp_path / "reliability.md").read_text(), (
        "run `python -c 'from testenv import reliability; reliability.render()'`"
    )


def test_the_rerun_command_leaves_out_where_files_went() -> None:
    assert page._command("--workdir /w --runs 1") == '`make bench ARGS="--runs 1"`'
    assert page._command("--skip-real --plot=/tmp/p.png --out /tmp/o.json") == '`make bench ARGS="--skip-real"`'
    assert page._command("") == "`make bench`"


def test_the_machine_is_one_line() -> None:
    free = "total used\nMem:  23  0\nSwap: 0 0"
    assert machine.summary({"nproc": "2", "free_g": free, "cpu": "AMD EPYC", "kernel": "6.18.44-x"}) == (
        "2 cores (AMD EPYC), 23 GiB, kernel 6.18.44"
    )
    assert machine.summary(None) == "not recorded"
    assert {"nproc", "free_g", "cpu", "kernel"} <= set(machine.record())


def test_what_a_deletion_left_is_on_the_page() -> None:
    results = json.loads((DOCS / "performance.json").read_text())
    run = results["real_chart_runs"][0]
    run["left_after_delete"] = {"consumer/renews": ["liqo-tenant-x/controlplane-x"]}
    text = page.render(results)
    assert f"- {run['contender']} run {run['run']}: consumer/renews: liqo-tenant-x/controlplane-x" in text
