"""No credential of the run in any operator log line, Event or LiqoPeering status.

Runs last (testenv.pytest_plugin orders it so): the suites before it fed `leak_scan` with every Secret
their clusters held while each test ran, and with the operator's logs, the Events and the statuses.
"""

from __future__ import annotations

import pytest

from testenv.leakscan import LeakScan


def test_no_credential_in_any_log_event_or_status(leak_scan: LeakScan, capsys: pytest.CaptureFixture[str]) -> None:
    if not leak_scan.needles:
        pytest.skip("no e2e test fed the scan in this run (only this file selected?)")
    haystacks = leak_scan.all_haystacks()
    findings = leak_scan.findings()
    with capsys.disabled():
        print(
            f"\nleak scan: {len(leak_scan.needles)} needles from {len(leak_scan.secrets_seen)} Secrets, searched in"
            f" {len(haystacks)} log lines, Events and statuses: {len(findings)} found"
        )
    assert not findings, "\n".join(f"{f.credential} appears in {f.where}" for f in findings[:20])
