"""The operator with exactly the Helm chart's rights.

The chart is installed with `helm install` (testenv.helm.run_helm, which notes the install for the RBAC check
of testenv.rbacproof) and runs no Pod (replicaCount=0); the operator runs as a process with a kubeconfig that
holds a token of the chart's ServiceAccount (TokenRequest API) and the scope flags of the chart's Deployment.
Its requests are then authorized by the chart's RBAC alone, and the audit log attributes them to the install.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from testenv.helm import CHART, PLACEHOLDER_IMAGE, run_helm
from testenv.operator_support import OperatorProcess, api_client

# Apart from the releases tests install to run the chart's Pod (testenv.operator_release: lpo in lpo-system),
# which may share a cluster with this one.
RELEASE = "lpo-process"
NAMESPACE = "lpo-process"
# The token outlives a whole tier, across every restart of the operator.
TOKEN_SECONDS = 24 * 3600
# The operator's rights as the suite exercises them: the chart's defaults (every namespace) and credential
# minting, and reading Cluster API Clusters (LiqoPeeringSets with spec.source Cluster). The suite applies
# the CRDs itself (install_crd), so the release leaves them alone.
SUITE_VALUES = ("replicaCount=0", "crds.enabled=false", "credentialsMinting=true", "clusterAPI.enabled=true")
# The Deployment's flags that scope the operator's rights (the rest are the Pod's own, e.g. its ports).
SCOPE_FLAGS = ("--namespace", "--tenant-access-role", "--service-account", "--restart-liqo-on-renewal")


@dataclass(frozen=True)
class ChartRelease:
    """An install of the chart: the admin kubeconfig helm used, the release and its namespace."""

    kubeconfig: Path
    release: str = RELEASE
    namespace: str = NAMESPACE
    binary: Path | None = None

    def helm(self, *args: str) -> str:
        return run_helm(*args, kubeconfig=self.kubeconfig, binary=self.binary)

    @cached_property
    def manifest(self) -> list[dict[str, Any]]:
        """The release's objects, read once: the release is never upgraded."""
        out = self.helm("get", "manifest", self.release, "--namespace", self.namespace)
        return [d for d in yaml.safe_load_all(out) if d]

    def service_account(self) -> str:
        (account,) = [d["metadata"]["name"] for d in self.manifest if d["kind"] == "ServiceAccount"]
        return str(account)

    def scope_args(self) -> list[str]:
        """The flags of the chart's Deployment that scope the operator's rights, exactly as rendered."""
        (deployment,) = [d for d in self.manifest if d["kind"] == "Deployment"]
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        return [a for a in args if a.split("=", 1)[0] in SCOPE_FLAGS]

    def service_account_kubeconfig(self, path: Path, seconds: int = TOKEN_SECONDS) -> Path:
        """A kubeconfig at `path` that authenticates as the chart's ServiceAccount with a bound token, to the
        server of the admin kubeconfig (and trusting its CA)."""
        admin = yaml.safe_load(self.kubeconfig.read_text())
        contexts = {c["name"]: c["context"] for c in admin["contexts"]}
        clusters = {c["name"]: c["cluster"] for c in admin["clusters"]}
        cluster = dict(clusters[contexts[admin["current-context"]]["cluster"]])
        if "certificate-authority" in cluster:  # embedded, so that the file works wherever it goes
            ca = Path(cluster.pop("certificate-authority")).read_bytes()
            cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
        account = self.service_account()
        request: Any = {"spec": {"audiences": None, "expirationSeconds": seconds}}
        api = api_client(self.kubeconfig)
        try:
            token = k8s.CoreV1Api(api).create_namespaced_service_account_token(account, self.namespace, request)
        finally:
            api.close()
        assert token.status is not None and token.status.token
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "cluster", "cluster": cluster}],
            "users": [{"name": account, "user": {"token": token.status.token}}],
            "contexts": [{"name": "chart", "context": {"cluster": "cluster", "user": account}}],
            "current-context": "chart",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def operator(
        self,
        log_dir: Path,
        extra_args: Sequence[str] = (),
        faults: bool = False,
        env: dict[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> OperatorProcess:
        """The operator (not started) as the chart's ServiceAccount, with the chart's scope flags (and ``env``
        added to its environment, ``prefix`` run before it)."""
        kubeconfig = self.service_account_kubeconfig(log_dir / f"{self.release}-sa.kubeconfig")
        args = [*self.scope_args(), *extra_args]
        return OperatorProcess(kubeconfig, log_dir, args, faults=faults, env=env, prefix=prefix)

    def uninstall(self) -> None:
        self.helm("uninstall", self.release, "--namespace", self.namespace, "--wait")


def install(
    kubeconfig: Path | str,
    liqo_namespace: str,
    sets: Sequence[str] = SUITE_VALUES,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    binary: Path | None = None,
    skip_crds: bool = True,
) -> ChartRelease:
    """`helm install` of the chart with `sets` (--set each) and liqoNamespace=`liqo_namespace`.

    `skip_crds`: without kopf's peering CRDs (the chart's crds/ directory), which only HA uses."""
    chart = ChartRelease(Path(kubeconfig), release, namespace, binary)
    args = ["install", release, str(CHART), "--namespace", namespace, "--create-namespace"]
    if skip_crds:
        args.append("--skip-crds")
    # No Pod runs (replicaCount=0 by default, or clusters without nodes): the placeholder image, which `sets` may
    # override.
    for value in (*PLACEHOLDER_IMAGE, *sets, f"liqoNamespace={liqo_namespace}"):
        args += ["--set", value]
    chart.helm(*args)
    return chart
