from pathlib import Path

import pytest

from testenv import failures

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" tests="3">
<testcase classname="tests.e2e.test_a" name="test_ok" time="1.0"/>
<testcase classname="tests.e2e.test_a" name="test_bad" time="2.0">
<failure message="AssertionError: assert 'Degraded' == 'Progressing'&#10;  - Progressing&#10;  + Degraded"
>traceback</failure>
</testcase>
<testcase classname="tests.e2e.test_b" name="test_setup" time="0.1"><error message="">fixture failed</error></testcase>
</testsuite></testsuites>
"""


def test_each_failure_with_its_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "junit-main.xml"
    junit.write_text(JUNIT)
    assert failures.failures(junit) == [
        (
            "tests.e2e.test_a::test_bad (failure)",
            "AssertionError: assert 'Degraded' == 'Progressing'\n  - Progressing\n  + Degraded",
        ),
        ("tests.e2e.test_b::test_setup (error)", "fixture failed"),
    ]
    failures.main([str(junit), str(tmp_path / "junit-missing.xml")])
    out = capsys.readouterr().out
    assert "failed: 2" in out and "junit-main: tests.e2e.test_a::test_bad (failure)\n    AssertionError" in out


def test_silent_when_nothing_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "junit-main.xml"
    junit.write_text(
        JUNIT.replace("<failure", "<skipped")
        .replace("</failure>", "</skipped>")
        .replace('<error message="">fixture failed</error>', "")
    )
    failures.main([str(junit)])
    assert capsys.readouterr().out == ""
