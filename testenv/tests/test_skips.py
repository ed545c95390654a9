"""A run cannot pass by skipping: only the skips testenv.pytest_plugin.EXPECTED_SKIPS lists are no failure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from testenv.pytest_plugin import EXPECTED_SKIPS, skip_reason, unexpected_skip

ROOT = Path(__file__).resolve().parents[2]


def report(outcome: str, longrepr: object, **extra: object) -> pytest.TestReport:
    made = pytest.TestReport("t.py::test", ("t.py", 1, "test"), {}, outcome, longrepr, "setup")  # type: ignore[arg-type]
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def test_a_skip_reason_is_read_from_the_report() -> None:
    assert skip_reason(report("skipped", ("t.py", 3, "Skipped: helm is not built yet"))) == "helm is not built yet"
    assert skip_reason(report("passed", None)) is None
    assert skip_reason(report("skipped", ("t.py", 3, "reason"), wasxfail="known")) is None


def test_only_the_listed_skips_are_expected() -> None:
    assert unexpected_skip("helm is not built yet")
    assert unexpected_skip("")
    for prefix in EXPECTED_SKIPS:
        assert not unexpected_skip(prefix + " and more")


def test_each_expected_skip_is_one_the_suite_makes() -> None:
    """The list agrees with the code: each entry starts the reason of a pytest.skip call in the tree, and every
    pytest.skip call in the tree is listed."""
    calls = [
        match
        for folder in ("tests", "testenv")
        for path in (ROOT / folder).rglob("*.py")
        for match in re.findall(r'pytest\.skip\(\s*f?"([^"]*)"', path.read_text())
    ]
    assert sorted(calls) and all(not unexpected_skip(call) for call in calls), calls
    for prefix in EXPECTED_SKIPS:
        assert any(call.startswith(prefix) for call in calls), prefix
