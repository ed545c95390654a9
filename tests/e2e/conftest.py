"""Fixtures of the operator's own end-to-end tests; the environment's (clusters, Liqo, the operator as a
process, `case`) come from testenv.pytest_plugin."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testenv.gitserver import GitServer
from testenv.localk8s import tool_path

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary built into the tool cache (missing: a failure that says how to build it)."""
    return tool_path("helm")


@pytest.fixture(scope="session")
def kstatus_check() -> Path:
    """The kstatus-check binary, built (once per go.sum/source hash) into the tool cache."""
    if shutil.which("go") is None:
        pytest.fail("go is not installed: kstatus-check is built from Go modules (docs/development/testing.md)")
    out = subprocess.run(
        [str(ROOT / "hack" / "build-kstatus-check.sh")], check=True, capture_output=True, text=True, timeout=1200
    )
    path = Path(out.stdout.strip().splitlines()[-1])
    assert os.access(path, os.X_OK), out.stderr
    return path


@pytest.fixture(scope="session")
def git_server() -> Iterator[GitServer]:
    """A Git server on 127.0.0.1 (smart HTTP, `git http-backend`) for the GitOps tests' repositories."""
    with GitServer() as server:
        yield server
