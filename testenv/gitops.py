"""GitOps controllers as processes against a local cluster, for the GitOps e2e tests.

- `Flux`: Flux's source-controller with kustomize-controller or helm-controller (hack/build-gitops.sh),
  in namespace flux-system, with Flux's CRDs read from their Go modules in the module cache.
- `ArgoCD`: Argo CD's application controller and repo server (its multi-call binary, hack/build-gitops.sh)
  with a redis-server (Debian's) as their cache, in namespace argocd, with Argo CD's CRDs read from its Go
  module; the repo server runs helm (the tool cache's) for Helm charts, as its image does.

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
OCIREPOSITORY = k.Res("source.toolkit.fluxcd.io", "v1", "ocirepositories")
KUSTOMIZATION = k.Res("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
HELMCHART = k.Res("source.toolkit.fluxcd.io", "v1", "helmcharts")
HELMRELEASE = k.Res("helm.toolkit.fluxcd.io", "v2", "helmreleases")
# Flux's controllers -> their Go modules (hack/tools/flux pins the versions), where their CRDs are.
FLUX_MODULES = {
    "source-controller": "github.com/fluxcd/source-controller",
    "kustomize-controller": "github.com/fluxcd/kustomize-controller",
    "helm-controller": "github.com/fluxcd/helm-controller",
}
APPLICATION = k.Res("argoproj.io", "v1alpha1", "applications")
# The repositories' CAs, a key per server name (no port), as Argo CD's install manifests make it (empty).
TLS_CERTS_CM = "argocd-tls-certs-cm"
APPPROJECT = k.Res("argoproj.io", "v1alpha1", "appprojects")


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


class Controllers:
    """GitOps controllers run as processes against one cluster, in a namespace of theirs."""

    NAMESPACE = ""

    def __init__(self, kubeconfig: Path, log_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self.kc = k.Kube.from_kubeconfig(str(kubeconfig), user_agent="e2e-gitops")
        self.crds: list[str] = []
        self.procs: list[Proc] = []

    def _launch(self, ports: dict[str, int], what: str, started: float) -> None:
        """Start self.procs and return once each listens on its ports."""
        for p in self.procs:
            p.start()
        _wait_listening(self.procs, ports)
        print(f"{what} up in {time.monotonic() - started:.1f}s (logs: {self.log_dir})")

    def check(self) -> None:
        for p in self.procs:
            p.check()


class Flux(Controllers):
    """Flux's controllers against one cluster, in namespace flux-system: source-controller and
    kustomize-controller (test_flux.py), or source-controller and helm-controller
    (test_flux_helmrelease.py)."""

    NAMESPACE = "flux-system"

    def __init__(
        self,
        kubeconfig: Path,
        log_dir: Path,
        components: Sequence[str] = ("source-controller", "kustomize-controller"),
    ) -> None:
        super().__init__(kubeconfig, log_dir)
        self.components = tuple(components)
        self.storage = Path(tempfile.mkdtemp(prefix="flux-storage-"))

    def crd_files(self) -> list[Path]:
        files: list[Path] = []
        for component in self.components:
            bases = module_dir("flux", FLUX_MODULES[component]) / "config" / "crd" / "bases"
            files += sorted(bases.glob("*.yaml"))
        return files

    def start(self) -> Flux:
        started = time.monotonic()
        ensure_namespace(self.kc, self.NAMESPACE)
        self.crds = install_crds(self.kc, self.crd_files())
        env = {"KUBECONFIG": str(self.kubeconfig), "RUNTIME_NAMESPACE": self.NAMESPACE}
        ports: dict[str, int] = {}
        common = ["--log-level=debug", "--log-encoding=console", "--enable-leader-election=false"]
        for component in self.components:
            ports[f"{component}-metrics"], ports[f"{component}-health"] = free_port(), free_port()
            argv = [
                str(tool_path(component)),
                *common,
                f"--metrics-addr=127.0.0.1:{ports[f'{component}-metrics']}",
                f"--health-addr=127.0.0.1:{ports[f'{component}-health']}",
            ]
            if component == "source-controller":
                # Where it serves the artifacts (the Git revision, the packaged chart) the others fetch.
                ports["storage"] = free_port()
                storage = f"127.0.0.1:{ports['storage']}"
                argv += [f"--storage-path={self.storage}", f"--storage-addr={storage}", f"--storage-adv-addr={storage}"]
            self.procs.append(Proc(component, argv, self.log_dir, env))
        self._launch(ports, "Flux controllers", started)
        return self

    def stop(self) -> None:
        # The objects that hold what a controller applied first (a HelmRelease's uninstall, a
        # Kustomization's prune), then their sources (HelmChart: the one helm-controller made).
        kinds = [KUSTOMIZATION, HELMRELEASE, HELMCHART, GITREPOSITORY, OCIREPOSITORY]
        kinds = [res for res in kinds if self._serves(res)]
        try:
            if self.procs and all(p.alive() for p in self.procs):
                for res in kinds:
                    delete_all(self.kc, res)
        finally:
            for p in self.procs:
                p.stop()
            # Anything left (a controller had died) has its finalizers released by hand.
            for res in kinds:
                for obj in self.kc.list(res):
                    meta = obj["metadata"]
                    self.kc.patch(res, meta["name"], {"metadata": {"finalizers": None}}, meta["namespace"])
            remove(self.kc, self.NAMESPACE, self.crds)
            shutil.rmtree(self.storage, ignore_errors=True)

    def _serves(self, res: k.Res) -> bool:
        return f"{res.plural}.{res.group}" in self.crds

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


class ArgoCD(Controllers):
    """Argo CD's application controller and repo server, with a redis-server, against one cluster.

    Set up as Argo CD's install manifests set up namespace argocd (argocd-cm, argocd-secret, the default
    AppProject), with the cluster it runs against as its in-cluster destination
    (https://kubernetes.default.svc): ARGOCD_FAKE_IN_CLUSTER, as `argocd admin`/core mode runs outside a Pod,
    points it at KUBECONFIG. The repo server runs `git`, `kustomize` (hack/build-gitops.sh) and `helm` (the
    tool cache's) from PATH, and reads the repositories' CAs of argocd-tls-certs-cm from ARGOCD_TLS_DATA_PATH,
    where its Pod would mount that ConfigMap (`mount_tls_certs`).
    """

    NAMESPACE = "argocd"

    def __init__(self, kubeconfig: Path, log_dir: Path) -> None:
        super().__init__(kubeconfig, log_dir)
        self.work = Path(tempfile.mkdtemp(prefix="argocd-"))
        self.tls_dir = self.work / "tls"
        self.tls_dir.mkdir()
        self.metrics_port = 0

    def crd_files(self) -> list[Path]:
        crds = module_dir("argocd", "github.com/argoproj/argo-cd/v3") / "manifests" / "crds"
        return [crds / "application-crd.yaml", crds / "appproject-crd.yaml"]

    def _bin_dir(self) -> Path:
        """Argo CD's image layout: one binary, each component a link to it (its cmd/main.go dispatches on
        argv[0]); kustomize beside them."""
        bin_dir = self.work / "bin"
        bin_dir.mkdir(exist_ok=True)
        argocd = tool_path("argocd")
        for name in ("argocd-application-controller", "argocd-repo-server"):
            (bin_dir / name).symlink_to(argocd)
        (bin_dir / "kustomize").symlink_to(tool_path("kustomize"))
        (bin_dir / "helm").symlink_to(tool_path("helm"))
        git = shutil.which("git")
        if git is None:
            raise FileNotFoundError("git is not installed (hack/install-node-runtime.sh installs it)")
        return bin_dir

    def _install(self) -> None:
        ensure_namespace(self.kc, self.NAMESPACE)
        self.crds = install_crds(self.kc, self.crd_files())
        labels = {"app.kubernetes.io/part-of": "argocd"}
        for name in ("argocd-cm", "argocd-rbac-cm", "argocd-cmd-params-cm", TLS_CERTS_CM):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}
            self.kc.apply(k.CONFIGMAP, body, "e2e-gitops", self.NAMESPACE)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "argocd-secret", "labels": labels},
            "data": {"server.secretkey": k.b64(os.urandom(32).hex())},
        }
        self.kc.apply(k.SECRET, secret, "e2e-gitops", self.NAMESPACE)
        project = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": "default"},
            "spec": {
                "sourceRepos": ["*"],
                "destinations": [{"server": "*", "namespace": "*"}],
                "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
            },
        }
        self.kc.apply(APPPROJECT, project, "e2e-gitops", self.NAMESPACE)

    def mount_tls_certs(self) -> None:
        """Write argocd-tls-certs-cm's keys (a server name each, its CAs as PEM) as files into the repo
        server's TLS directory, as the kubelet projects that ConfigMap into the repo server's Pod. The repo
        server reads a repository's CA file at each connection, by the repository's host name."""
        data = (self.kc.get(k.CONFIGMAP, TLS_CERTS_CM, self.NAMESPACE) or {}).get("data") or {}
        for server, pem in data.items():
            (self.tls_dir / server).write_text(pem)

    def start(self) -> ArgoCD:
        started = time.monotonic()
        self._install()
        bin_dir = self._bin_dir()
        ports = {name: free_port() for name in ("redis", "repo", "repo-metrics", "controller-metrics")}
        self.metrics_port = ports["controller-metrics"]
        redis = f"127.0.0.1:{ports['redis']}"
        env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "KUBECONFIG": str(self.kubeconfig),
            "ARGOCD_FAKE_IN_CLUSTER": "true",
            "ARGOCD_GPG_ENABLED": "false",
            "ARGOCD_TLS_DATA_PATH": str(self.tls_dir),
            "TMPDIR": str(self.work),
            "HOME": str(self.work),
        }
        (self.work / "redis").mkdir()
        self.procs = [
            Proc(
                "redis-server",
                [
                    "redis-server",
                    "--bind", "127.0.0.1",
                    "--port", str(ports["redis"]),
                    "--save", "",
                    "--appendonly", "no",
                    "--dir", str(self.work / "redis"),
                ],
                self.log_dir,
            ),
            Proc(
                "argocd-repo-server",
                [
                    str(bin_dir / "argocd-repo-server"),
                    "--address", "127.0.0.1",
                    "--port", str(ports["repo"]),
                    "--metrics-address", "127.0.0.1",
                    "--metrics-port", str(ports["repo-metrics"]),
                    "--disable-tls",
                    "--redis", redis,
                    "--loglevel", "debug",
                    "--logformat", "text",
                ],
                self.log_dir,
                env,
            ),
            Proc(
                "argocd-application-controller",
                [
                    str(bin_dir / "argocd-application-controller"),
                    "--kubeconfig", str(self.kubeconfig),
                    "--namespace", self.NAMESPACE,
                    "--redis", redis,
                    "--repo-server", f"127.0.0.1:{ports['repo']}",
                    "--repo-server-plaintext",
                    # Argo CD binds this one on every address (controller/appcontroller.go: 0.0.0.0:<port>).
                    "--metrics-port", str(ports["controller-metrics"]),
                    # Keep each resource's health in the Application's status.resources (Argo CD 3 keeps it
                    # only in its cache unless asked), where the tests read it.
                    "--persist-resource-health",
                    "--status-processors", "4",
                    "--operation-processors", "4",
                    "--loglevel", "debug",
                    "--logformat", "text",
                ],
                self.log_dir,
                env,
            ),
        ]  # fmt: skip
        self._launch(ports, "Argo CD", started)
        return self

    def end_sync(self, name: str, timeout: float = 60) -> None:
        """End the Application's sync operation if one runs, as `argocd app terminate-op` does, and wait until
        it has: Argo CD deletes no Application while its sync runs."""

        def running() -> bool:
            return "operation" in (self.kc.get(APPLICATION, name, self.NAMESPACE) or {})

        if not running():
            return
        terminate = {"status": {"operationState": {"phase": "Terminating"}}}
        self.kc.patch(APPLICATION, name, terminate, self.NAMESPACE)
        wait_for(f"the sync operation of {name} ended", lambda: not running(), timeout=timeout)

    def stop(self) -> None:
        try:
            if all(p.alive() for p in self.procs):
                for app in self.kc.list(APPLICATION):
                    self.end_sync(app["metadata"]["name"])
                delete_all(self.kc, APPLICATION, timeout=180)
        finally:
            for p in reversed(self.procs):
                p.stop()
            if self.crds:
                for obj in self.kc.list(APPLICATION):
                    meta = obj["metadata"]
                    self.kc.patch(APPLICATION, meta["name"], {"metadata": {"finalizers": None}}, meta["namespace"])
            remove(self.kc, self.NAMESPACE, self.crds)
            shutil.rmtree(self.work, ignore_errors=True)
