"""Fixtures for the operator's end-to-end tests: the CRD installed, the operator running as a process,
and a fresh namespace per test with the provider's kubeconfig in a Secret."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess
from testenv.operator_support import (
    ROOT,
    SECRET,
    OperatorEnv,
    OperatorProcess,
    PeeringCase,
    Peerings,
    api_client,
    install_crd,
)


@pytest.fixture(scope="session")
def operator_env(liqo_clusters: LiqoClusters, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorEnv]:
    consumer_api = api_client(liqo_clusters["consumer"].kubeconfig)
    install_crd(consumer_api)
    log_dir = tmp_path_factory.mktemp("operator")
    operator = OperatorProcess(Path(liqo_clusters["consumer"].kubeconfig), log_dir).start()
    env = OperatorEnv(liqo_clusters, operator, Peerings(consumer_api), api_client(liqo_clusters["provider"].kubeconfig))
    try:
        yield env
    finally:
        operator.stop()
        sys.stderr.write(f"\n--- operator log: {operator.log_path}\n")


@pytest.fixture
def case(
    operator_env: OperatorEnv, liqo_standin: StandInProcess, request: pytest.FixtureRequest
) -> Iterator[PeeringCase]:
    """A namespace of its own holding Secret provider-kubeconfig; its peerings are unpeered afterwards."""
    namespace = "e2e-" + re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:50].strip("-")
    peerings = operator_env.peerings
    install_crd(peerings.api)  # idempotent; restores it if a chart test on these clusters removed it
    peerings.make_namespace(namespace)
    peerings.put_kubeconfig_secret(namespace, SECRET, operator_env.provider_kubeconfig())
    if operator_env.operator.proc is None or operator_env.operator.proc.poll() is not None:
        operator_env.operator.start()
    try:
        yield PeeringCase(operator_env, namespace, liqo_standin)
    finally:
        operator_env.lc.ensure_installed()
        peerings.put_kubeconfig_secret(namespace, SECRET, operator_env.provider_kubeconfig())
        for item in peerings.in_namespace(namespace):
            peerings.delete(namespace, item["metadata"]["name"])
        for item in peerings.in_namespace(namespace):
            try:
                peerings.wait_gone(namespace, item["metadata"]["name"], timeout=60)
            except AssertionError:
                # Leave no finalizer behind for the next test: release it by hand.
                peerings.patch(namespace, item["metadata"]["name"], {"metadata": {"finalizers": None}})
                raise
        peerings.core.delete_namespace(namespace)


@pytest.fixture(scope="session")
def kstatus_check() -> Path:
    """The kstatus-check binary, built (once per go.sum/source hash) into the tool cache."""
    if shutil.which("go") is None and not os.environ.get("CI"):
        pytest.skip("go is not installed on this machine (CI always has it)")
    out = subprocess.run(
        [str(ROOT / "hack" / "build-kstatus-check.sh")], check=True, capture_output=True, text=True, timeout=1200
    )
    path = Path(out.stdout.strip().splitlines()[-1])
    assert os.access(path, os.X_OK), out.stderr
    return path
