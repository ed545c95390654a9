"""GitOps controllers as processes against a local cluster, for the GitOps e2e tests.

- `Flux`: Flux's source-controller and kustomize-controller (hack/build-gitops.sh), in namespace
  flux-system, with Flux's CRDs read from their Go modules in the module cache.

Both run as users run them outside a cluster: their usual flags, the cluster's admin kubeconfig, every
listener on a free port of 127.0.0.1. `stop()` deletes what they manage while they still run (so their
finalizers are honoured), then stops the processes and removes their namespace and CRDs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from testenv import kube as k
from testenv.localk8s.ports import free_port, is_listening
from testenv.localk8s.tools import REPO_ROOT, tool_path
from testenv.wait import wait_for

TOOLS_DIR = REPO_ROOT / "hack" / "tools"

GITREPOSITORY = k.Res("source.toolkit.fluxcd.io", "v1", "gitrepositories")
KUSTOMIZATION = k.Res("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")


def module_dir(tool: str, module: str) -> Path:
    """Where the Go module cache holds `module`, at the version the wrapper module hack/tools/<tool> pins."""
    where = TOOLS_DIR / tool
    subprocess.run(["go", "-C", str(where), "mod", "download", module], check=True, capture_output=True, timeout=600)
    out = subprocess.run(
        ["go", "-C", str(where), "list", "-m", "-f", "{{.Dir}}", module],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.strip()
    if not out:
        raise FileNotFoundError(f"{module} is not in the Go module cache (hack/tools/{tool})")
    return Path(out)


def install_crds(kc: k.Kube, files: Sequence[Path]) -> list[str]:
    """Server-side apply the CRDs in `files` and wait until each is Established; returns their names."""
    names = []
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                kc.apply(k.CRD, doc, "e2e-gitops")
                names.append(str(doc["metadata"]["name"]))

    def established(name: str) -> bool:
        crd = kc.get(k.CRD, name) or {}
        return any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (crd.get("status") or {}).get("conditions") or []
        )

    wait_for(f"CRDs {', '.join(names)} Established", lambda: all(established(n) for n in names), timeout=60)
    return names


def ensure_namespace(kc: k.Kube, name: str) -> None:
    if kc.get(k.NAMESPACE, name) is None:
        kc.create(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def delete_all(kc: k.Kube, res: k.Res, timeout: float = 90) -> None:
    """Delete every object of a kind, in every namespace, and wait until they are gone."""
    for obj in kc.list(res):
        kc.delete(res, obj["metadata"]["name"], obj["metadata"].get("namespace"))
    wait_for(f"every {res.plural} gone", lambda: not kc.list(res), timeout=timeout)


def remove(kc: k.Kube, namespace: str, crds: Sequence[str]) -> None:
    """Delete a namespace and CRDs and wait until they are gone."""
    kc.delete(k.NAMESPACE, namespace)
    for name in crds:
        kc.delete(k.CRD, name)
    wait_for(f"namespace {namespace} gone", lambda: kc.get(k.NAMESPACE, namespace) is None, timeout=120)
    wait_for("GitOps CRDs gone", lambda: all(kc.get(k.CRD, n) is None for n in crds), timeout=60)


class Proc:
    """A child process in a session of its own, with its output in a log file."""

    def __init__(self, name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_dir / f"{name}.log"
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if not self.alive() or self.proc is None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def _wait_listening(procs: Sequence[Proc], ports: dict[str, int], timeout: float = 90) -> None:
    def up() -> bool:
        for p in procs:
            p.check()
        return all(is_listening(port) for port in ports.values())

    wait_for(f"{', '.join(p.name for p in procs)} listening on {ports}", up, timeout=timeout)


class Flux:
    """source-controller and kustomize-controller against one cluster, in namespace flux-system."""

    NAMESPACE = "flux-system"

    def __init__(self, kubeconfig: Path, log_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self.kc = k.Kube.from_kubeconfig(str(kubeconfig), user_agent="e2e-gitops")
        self.storage = Path(tempfile.mkdtemp(prefix="flux-storage-"))
        self.crds: list[str] = []
        self.procs: list[Proc] = []

    def crd_files(self) -> list[Path]:
        source = module_dir("source-controller", "github.com/fluxcd/source-controller")
        kustomize = module_dir("kustomize-controller", "github.com/fluxcd/kustomize-controller")
        return sorted((source / "config" / "crd" / "bases").glob("*.yaml")) + sorted(
            (kustomize / "config" / "crd" / "bases").glob("*.yaml")
        )

    def start(self) -> Flux:
        started = time.monotonic()
        ensure_namespace(self.kc, self.NAMESPACE)
        self.crds = install_crds(self.kc, self.crd_files())
        env = {"KUBECONFIG": str(self.kubeconfig), "RUNTIME_NAMESPACE": self.NAMESPACE}
        ports = {name: free_port() for name in ("storage", "sc-metrics", "sc-health", "kc-metrics", "kc-health")}
        storage = f"127.0.0.1:{ports['storage']}"
        common = ["--log-level=debug", "--log-encoding=console", "--enable-leader-election=false"]
        self.procs = [
            Proc(
                "source-controller",
                [
                    str(tool_path("source-controller")),
                    *common,
                    f"--metrics-addr=127.0.0.1:{ports['sc-metrics']}",
                    f"--health-addr=127.0.0.1:{ports['sc-health']}",
                    f"--storage-path={self.storage}",
                    f"--storage-addr={storage}",
                    f"--storage-adv-addr={storage}",
                ],
                self.log_dir,
                env,
            ),
            Proc(
                "kustomize-controller",
                [
                    str(tool_path("kustomize-controller")),
                    *common,
                    f"--metrics-addr=127.0.0.1:{ports['kc-metrics']}",
                    f"--health-addr=127.0.0.1:{ports['kc-health']}",
                ],
                self.log_dir,
                env,
            ),
        ]
        for p in self.procs:
            p.start()
        _wait_listening(self.procs, ports)
        print(f"Flux controllers up in {time.monotonic() - started:.1f}s (logs: {self.log_dir})")
        return self

    def check(self) -> None:
        for p in self.procs:
            p.check()

    def stop(self) -> None:
        try:
            if all(p.alive() for p in self.procs):
                delete_all(self.kc, KUSTOMIZATION)
                delete_all(self.kc, GITREPOSITORY)
        finally:
            for p in self.procs:
                p.stop()
            # Anything left (a controller had died) has its finalizers released by hand.
            for res in (KUSTOMIZATION, GITREPOSITORY):
                for obj in self.kc.list(res) if self.crds else []:
                    meta = obj["metadata"]
                    self.kc.patch(res, meta["name"], {"metadata": {"finalizers": None}}, meta["namespace"])
            remove(self.kc, self.NAMESPACE, self.crds)
            shutil.rmtree(self.storage, ignore_errors=True)

    def git_repository(self, namespace: str, name: str, url: str) -> dict[str, Any]:
        body = {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"url": url, "interval": "1m", "ref": {"branch": "main"}, "timeout": "20s"},
        }
        return self.kc.apply(GITREPOSITORY, body, "e2e-gitops", namespace)


EXAMPLE = REPO_ROOT / "examples" / "gitops"


def example_repo(namespace: str, kubeconfig: str, example: Path = EXAMPLE) -> dict[str, str]:
    """The files of examples/gitops/ as a user would commit them (at the same path in the repository), with
    every object in `namespace` and the Secret holding `kubeconfig`."""
    kustomization = yaml.safe_load((example / "kustomization.yaml").read_text())
    where = example.relative_to(REPO_ROOT)
    files = {f"{where}/kustomization.yaml": (example / "kustomization.yaml").read_text()}
    for name in kustomization["resources"]:
        doc = yaml.safe_load((example / name).read_text())
        doc["metadata"]["namespace"] = namespace
        if doc["kind"] == "Secret":
            doc["stringData"] = {"kubeconfig": kubeconfig}
        files[f"{where}/{name}"] = yaml.safe_dump(doc, sort_keys=False)
    return files


def manifests(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return {}
