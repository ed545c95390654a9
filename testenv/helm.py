"""helm from the tool cache (hack/build-tools.sh), with its caches and config out of the user's home."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from testenv.localk8s import tool_path
from testenv.rbacproof import installs

HELM_HOME = Path("/tmp/lpo-helm")
# The project's chart, as the tests install it.
CHART = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "liqo-peering-operator"
# The chart names no image of its own (image.repository is required). Renders, and installs whose Pod never
# pulls (clusters without nodes, replicaCount=0), name this one, which no registry serves; the tag is the
# chart's appVersion.
PLACEHOLDER_REPOSITORY = "registry.invalid/liqo-peering-operator"
PLACEHOLDER_IMAGE = (f"image.repository={PLACEHOLDER_REPOSITORY}",)


def run_helm(
    *args: str,
    kubeconfig: Path | str | None = None,
    check: bool = True,
    timeout: float = 300,
    binary: Path | None = None,
) -> str:
    """`helm args...` (`binary`, default the cached helm): its stdout, or (check=False) stdout and stderr
    together whatever the exit code."""
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(HELM_HOME / "cache"),
        "HELM_CONFIG_HOME": str(HELM_HOME / "config"),
        "HELM_DATA_HOME": str(HELM_HOME / "data"),
    }
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    helm = binary or tool_path("helm")
    installs.note_helm(args, kubeconfig)  # before: the operator may act before helm returns
    proc = subprocess.run([str(helm), *args], capture_output=True, text=True, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout if check else proc.stdout + proc.stderr


def push_chart(destination: str, ca_file: Path, workdir: Path, chart: Path = CHART) -> tuple[str, str]:
    """`helm package` `chart` and `helm push` it to `destination` (oci://<registry host>/<path>: the chart
    becomes <path>/<chart name>, tagged with its version), trusting the registry's `ca_file`, as
    hack/release.sh pushes a release's chart (here as it is: its own version and values). Returns the
    chart's version and the pushed manifest's digest."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    run_helm("package", str(chart), "--destination", str(workdir))
    package = workdir / f"{meta['name']}-{meta['version']}.tgz"
    # helm push reports what it pushed: "Pushed: <ref>" and "Digest: sha256:...".
    out = run_helm("push", str(package), destination, "--ca-file", str(ca_file), check=False)
    digests = [line.removeprefix("Digest: ").strip() for line in out.splitlines() if line.startswith("Digest: ")]
    if not digests:
        raise AssertionError(f"helm push {package} {destination} failed:\n{out}")
    return str(meta["version"]), digests[0]
